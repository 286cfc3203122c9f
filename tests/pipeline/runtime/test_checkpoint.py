"""Checkpoints are arrays + JSON and are never executed: a pickle planted in a run directory (or
in a scheduled run's work directory) is refused with an error naming the file, and runs nothing.
Killed vb and sovb runs resume to the result of an uninterrupted run, as memo does."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from bnpmix.datasets import toy_patches
from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.pipeline.runtime import checkpoint
from bnpmix.storage import BnpmixError, RunDir, ingest_array, ingest_docword
from helpers import cli, write_docword


class Payload:
    """Unpickling this creates ``marker``: proof that the file's code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


def corpus(tmp_path: Path, n: int = 600) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2)) + rng.integers(0, 3, (n, 1)) * 6.0
    ingest_array(X, tmp_path / "corpus", partition_rows=n // 6)
    return tmp_path / "corpus"


def interrupted_run(tmp_path: Path, **options) -> Path:
    """A run directory stopped by KeyboardInterrupt after its first lap's checkpoint (the model
    named: --obs auto's race would run the laps before the runtime's loop checkpoints any)."""
    def stop(engine, step):
        if step.lap_end:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(corpus(tmp_path), tmp_path / "run", job_config(laps=3, obs="gauss", **options),
            on_step=stop)
    assert (tmp_path / "run" / "checkpoint.npz").exists()
    return tmp_path / "run"


PLANTS = {
    # an .npz whose member is a pickled object array (what np.save does for object arrays)
    "object-array npz": lambda path, marker: np.savez(path, x=np.array([Payload(marker)],
                                                                       dtype=object)),
    # a bare pickle under the checkpoint's name
    "raw pickle": lambda path, marker: path.write_bytes(pickle.dumps(Payload(marker))),
}


@pytest.mark.usefixtures("lap_checkpoints")
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_resume_refuses_a_pickle_checkpoint_and_runs_nothing(tmp_path, plant):
    run = interrupted_run(tmp_path)
    marker = tmp_path / "pwned"
    target = run / "checkpoint.npz"
    PLANTS[plant](target, marker)
    if not target.exists():  # np.savez appends .npz to names without it
        Path(str(target) + ".npz").rename(target)
    before = snapshot(run)
    res = cli("resume", str(run))
    assert res.returncode == 1
    assert "checkpoint.npz" in res.stderr and "not a bnpmix" in res.stderr, res.stderr
    assert not marker.exists()
    assert snapshot(run) == before  # nothing created, nothing changed


@pytest.mark.usefixtures("lap_checkpoints")
def test_a_legacy_pickle_checkpoint_is_refused_by_name(tmp_path):
    run = interrupted_run(tmp_path)
    marker = tmp_path / "pwned"
    (run / "checkpoint.npz").unlink()
    (run / "checkpoint.pkl").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(BnpmixError, match=r"checkpoint\.pkl.*never loaded"):
        resume(run)
    assert not marker.exists()


def test_a_payload_proves_it_would_run(tmp_path):
    """The payload is not a dud: loading it with pickle does create the marker."""
    marker = tmp_path / "pwned"
    pickle.loads(pickle.dumps(Payload(marker)))
    assert marker.exists()


def test_schedule_run_refuses_a_planted_work_checkpoint(tmp_path):
    data = tmp_path / "a.npy"
    np.save(data, np.random.default_rng(1).normal(size=(600, 2)))
    assert cli("ingest", str(data), str(tmp_path / "corpus"),
               "--partition-rows", "100").returncode == 0
    job = tmp_path / "job.toml"
    job.write_text('corpus = "corpus"\nlaps = 2\nthreads = 1\n[schedule]\nruns = "models"\n')
    # a call killed mid-fit leaves .work-v0001 with job.json and a checkpoint: plant one there
    work = tmp_path / "models" / ".work-v0001"

    def stop(engine, step):
        if step.lap_end:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path / "corpus", work, job_config(laps=2, threads=1, obs="gauss"), on_step=stop)
    marker = tmp_path / "pwned"
    PLANTS["raw pickle"](work / "checkpoint.npz", marker)
    res = cli("schedule", "run", str(job))
    assert res.returncode == 1 and "checkpoint.npz" in res.stderr, res.stderr
    assert not marker.exists()
    assert not (tmp_path / "models" / "v0001").exists()
    assert not (tmp_path / "models" / "latest").exists()


@pytest.mark.usefixtures("lap_checkpoints")
def test_checkpoint_of_another_engine_or_version_is_refused(tmp_path):
    run = interrupted_run(tmp_path)
    with checkpoint.open_checkpoint(RunDir(run), "memo") as ckpt:
        meta = dict(ckpt.meta)
        arrays = {name: ckpt[name] for name in ckpt}
    with pytest.raises(BnpmixError, match="engine 'memo'"):
        checkpoint.open_checkpoint(RunDir(run), "vb")
    from bnpmix.storage.arrays import write_arrays_atomic

    write_arrays_atomic(run / "checkpoint.npz", {**meta, "version": 99}, arrays.items())
    with pytest.raises(BnpmixError, match="version 99"):
        resume(run)


@pytest.mark.parametrize("obs", ["gauss", "zm-gauss", "diag-gauss"])
def test_a_run_learning_its_prior_resumes_exactly(tmp_path, obs):
    """Stopped after lap ends that learned the prior (the checkpoint's prior is no longer the
    initial one) and in the middle of a lap, the resumed run equals the uninterrupted one: the
    learned prior is checkpointed and the initial one, which bounds it, is rebuilt alike.
    zm-gauss gets zero-mean patches, its own kind of data: on the blobs its prior stays at its
    bounds (ν0 = D + 2, the scale's floor), so the run would learn nothing."""
    if obs == "zm-gauss":
        ingest_array(toy_patches(n=1200, seed=0)[0], tmp_path / "corpus", partition_rows=200)
        data = tmp_path / "corpus"
    else:
        data = corpus(tmp_path, n=1200)
    options = {"obs": obs, "K": 5, "moves": "birth,merge", "seed": 1, "laps": 5,
               "checkpoint_every": 2, "scheduler": "synchronous"}
    priors = []

    def stop(engine, step):
        priors.append(engine.ctx.obs.prior())
        if engine.s.next_lap == 2 and not step.lap_end and engine.s.lap.pos == 4:
            raise KeyboardInterrupt  # after this step's checkpoint (every 2 visits)

    with pytest.raises(KeyboardInterrupt):
        fit(data, tmp_path / "run", job_config(**options), on_step=stop)
    with checkpoint.open_checkpoint(RunDir(tmp_path / "run"), "memo") as ckpt:
        saved = ckpt.meta["obs"]["prior"]
    assert saved == json.loads(json.dumps(priors[-1])) and saved != priors[0]
    resumed = resume(tmp_path / "run")
    whole = fit(data, tmp_path / "whole", job_config(**options))
    assert resumed["elbo"] == whole["elbo"] and resumed["K"] == whole["K"]
    assert resumed["prior"] == whole["prior"] and whole["prior"]["learn"]
    assert whole["prior"]["final"] != whole["prior"]["initial"]
    a = pd.read_csv(tmp_path / "run" / "trace.csv")
    b = pd.read_csv(tmp_path / "whole" / "trace.csv")
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"),
                                  check_exact=True)
    model = json.loads((tmp_path / "run" / "model.json").read_text())
    assert model["prior"] == json.loads((tmp_path / "whole" / "model.json").read_text())["prior"]


@pytest.mark.parametrize("kind", ["dense", "text"])
def test_a_checkpoint_with_waves_in_flight_resumes_exactly(tmp_path, kind):
    """W = 2 with one wave computed ahead, stopped after a mid-lap checkpoint taken while the
    next wave was in flight: resuming submits that wave again on the globals it was given and
    ends where the uninterrupted run ends."""
    if kind == "dense":
        data = corpus(tmp_path, n=1200)
    else:
        rng = np.random.default_rng(5)
        topics = rng.dirichlet(np.full(300, 0.05), 3)
        counts = np.stack([rng.multinomial(30, topics[k]) for k in rng.integers(0, 3, 600)])
        write_docword(tmp_path / "docword.t.txt", sp.csr_matrix(counts))
        data = tmp_path / "corpus"
        ingest_docword(tmp_path / "docword.t.txt", data, partition_rows=50)
    options = {"K": 1, "moves": "birth,merge", "seed": 2, "laps": 4, "wave": 2, "ahead": 1,
               "checkpoint_every": 3, "threads": 2}
    if kind == "dense":  # named: --obs auto's race would run these laps outside the hooks
        options["obs"] = "gauss"
    seen = []

    def stop(engine, step):
        if engine.s.next_lap == 2 and engine.inflight and not step.lap_end:
            seen.append([w.batches for w in engine.inflight])
            if len(seen) == 2:  # after this step's checkpoint (every 3 visits)
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(data, tmp_path / "run", job_config(**options), on_step=stop)
    assert seen and seen[-1]
    resumed = resume(tmp_path / "run")
    whole = fit(data, tmp_path / "whole", job_config(**options))
    assert resumed["elbo"] == whole["elbo"] and resumed["K"] == whole["K"]
    a = pd.read_csv(tmp_path / "run" / "trace.csv")
    b = pd.read_csv(tmp_path / "whole" / "trace.csv")
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))


def test_a_birth_collecting_past_its_cap_resumes_exactly(tmp_path):
    """A collection capped at 40 rows that keeps counting the rows that qualify (its statistics
    are amplified by qualified/collected): stopped after a mid-lap checkpoint while the count is
    past the cap, the resumed run amplifies by the same figure and ends as the whole run."""
    data = corpus(tmp_path, n=1200)
    options = {"obs": "gauss", "K": 1, "moves": "birth,merge", "seed": 3, "laps": 4,
               "checkpoint_every": 1, "birth_max_collect": 40, "scheduler": "synchronous"}
    counts = []

    def stop(engine, step):
        capped = [(b.n, b.seen) for b in engine.s.births if b.n == 40 and b.seen > 80]
        if capped and not step.lap_end:
            counts.append(capped)
            raise KeyboardInterrupt  # after this visit's checkpoint (one after every visit)

    with pytest.raises(KeyboardInterrupt):
        fit(data, tmp_path / "run", job_config(**options), on_step=stop)
    assert counts
    resumed = resume(tmp_path / "run")
    whole = fit(data, tmp_path / "whole", job_config(**options))
    assert resumed["elbo"] == whole["elbo"] and resumed["K"] == whole["K"] and whole["K"] > 1
    a = pd.read_csv(tmp_path / "run" / "trace.csv")
    b = pd.read_csv(tmp_path / "whole" / "trace.csv")
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))


def birth_bookkeeping(engine) -> tuple:
    """What decides which components a birth may target: the failed origins (mass, lap), the
    masses of the births created and of the origins being adopted."""
    st = engine.s.lap
    return (sorted(engine.s.failed.items()), [(b.target, b.mass) for b in engine.s.births],
            None if st is None else st.origin_N.tolist())


@pytest.mark.slow  # stop and resume around a birth: long runs
@pytest.mark.parametrize("where", ["created", "adopting"])
def test_a_run_stopped_around_a_birth_resumes_its_bookkeeping_exactly(tmp_path, where):
    """Stopped at the lap end that created a birth, or in the middle of its adoption lap, the
    resumed run keeps the origin's mass from before the adoption (what an undone birth's
    origin is closed at) and the laps of its failures, step for step as the whole run."""
    X, _ = toy_patches(6000, seed=0)
    ingest_array(X, tmp_path / "c", partition_rows=600)
    options = {"obs": "gauss", "K": 25, "laps": 6, "seed": 0, "checkpoint_every": 1,
               "scheduler": "synchronous", "learn_prior": False}  # births fail in this scenario
    whole: list = []
    fit(tmp_path / "c", tmp_path / "whole", job_config(**options),
        on_step=lambda engine, step: whole.append(birth_bookkeeping(engine)))

    def stop(engine, step):
        st = engine.s.lap
        created = step.lap_end and any(b.S_new is not None for b in engine.s.births)
        adopting = st is not None and len(st.groups) and 0 < st.pos < len(st.order)
        if engine.s.failed and (created if where == "created" else adopting):
            raise KeyboardInterrupt  # after this step's checkpoint

    steps: list = []
    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path / "c", tmp_path / "run", job_config(**options),
            on_step=lambda engine, step: (steps.append(birth_bookkeeping(engine)),
                                          stop(engine, step)))
    resume(tmp_path / "run", on_step=lambda engine, step: steps.append(birth_bookkeeping(engine)))
    assert any(failed for failed, _, _ in whole) and any(o for _, _, o in whole if o)
    assert steps == whole


@pytest.mark.slow  # kill/resume of a real process
@pytest.mark.parametrize("algorithm", ["vb", "sovb"])
def test_vb_and_sovb_killed_with_sigkill_resume_to_the_same_result(tmp_path, algorithm):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40_000, 6)) + rng.integers(0, 4, (40_000, 1)) * 4.0
    ingest_array(X, tmp_path / "corpus", partition_rows=2_000)
    args = ("--algorithm", algorithm, "--K", "6", "--laps", "30", "--seed", "2",
            "--checkpoint-every", "3")
    ref = cli("fit", str(tmp_path / "corpus"), "--out", str(tmp_path / "ref"), *args)
    assert ref.returncode == 0, ref.stderr
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "bnpmix", "fit", str(tmp_path / "corpus"),
                             "--out", str(run), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (run / "checkpoint.npz").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)  # at once: a few laps in, well before the 30th
    proc.wait()
    assert not (run / "summary.json").exists(), "the run finished before it could be killed"
    with checkpoint.open_checkpoint(RunDir(run), algorithm) as ckpt:  # resume has work to keep
        progress = ckpt.meta["laps_done"], ckpt.meta["state"].get("t", 0)
    assert progress[0] < 30 and (progress[0] > 0 or progress[1] > 0), progress
    res = cli("resume", str(run))
    assert res.returncode == 0, res.stderr
    want = json.loads((tmp_path / "ref" / "summary.json").read_text())
    got = json.loads((run / "summary.json").read_text())
    assert got["elbo"] == pytest.approx(want["elbo"], rel=1e-12) and got["K"] == want["K"]
    ta = RunDir(tmp_path / "ref").load_trace().drop(columns="seconds")
    tb = RunDir(run).load_trace().drop(columns="seconds")
    np.testing.assert_allclose(tb.to_numpy(), ta.to_numpy(), rtol=1e-12)
    aa, ab = RunDir(tmp_path / "ref").load_assignments(), RunDir(run).load_assignments()
    np.testing.assert_array_equal(aa["cluster"], ab["cluster"])


def test_lap_end_checkpoints_wait_for_the_interval(tmp_path, monkeypatch):
    """A checkpoint after a lap end only once bnpmix.checkpoint-interval has passed since the
    last (quick laps: none at the shipped 10 s), after every one at 0, and after every lap end
    and every M visits with checkpoint_every = M whatever the interval; the result is the
    same."""
    import dask

    from bnpmix.pipeline import fit as fitting

    ingest_array(np.random.default_rng(0).normal(size=(600, 2)), tmp_path / "c",
                 partition_rows=100)
    saves: list[int] = []
    real = checkpoint.save
    monkeypatch.setattr(fitting.checkpoint, "save",
                        lambda run, engine, laps, **kw: (saves.append(laps),
                                                         real(run, engine, laps, **kw)))
    job = {"obs": "gauss", "K": 2, "laps": 4, "tol": 0, "moves": ""}
    results = []
    for name, interval, every in (("shipped", "10s", 0), ("zero", 0, 0), ("every", "10s", 3)):
        saves.clear()
        with dask.config.set({"bnpmix.checkpoint-interval": interval}):
            results.append(fit(tmp_path / "c", tmp_path / name,
                               job_config(**job, checkpoint_every=every))["elbo"])
        # every 3: after the first wave (4 of the 6 partitions) of each lap, and its end
        assert saves == {"shipped": [], "zero": [1, 2, 3, 4],
                         "every": [0, 1, 1, 2, 2, 3, 3, 4]}[name], name
    assert results[0] == results[1] == results[2]
