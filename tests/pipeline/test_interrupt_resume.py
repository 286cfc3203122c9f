"""A run stopped at any instant resumes to the uninterrupted run's result, bit for bit: each
engine fitted by the ``bnpmix fit`` command as its own process, stopped by SIGINT, SIGTERM or
SIGKILL at times drawn at random over the run (mid-step as a rule: a step is most of the time),
and by SIGKILL while a checkpoint is being written, then ``bnpmix resume``-d once. The model's
arrays, the objective, the assignments, the trace and the engine's tables must equal the
uninterrupted run's exactly (timings aside)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bnpmix.storage import RunDir, ingest_array
from helpers import sequence_items

pytestmark = pytest.mark.slow

# each engine's job, at most a few seconds of work beyond start-up on its corpus, a checkpoint
# after every partition visit (the most checkpoints a run writes, so the most to land in)
JOBS = {
    "memo": ("big", ["--tol", "0", "--laps", "20"]),
    "vb": ("big", ["--K", "20", "--tol", "0", "--laps", "60"]),
    "sovb": ("big", ["--K", "20", "--laps", "30"]),
    "adf": ("big", []),
    "ep": ("big", []),
    "tdpm": ("big", ["--sweeps", "10", "--burn-in", "4", "--thin", "2"]),
    "ddcrp": ("many", ["--sequence-column", "sequence", "--restarts", "3"]),
}
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -signal.SIGKILL}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path]:
    """Items from three 2-D Gaussians at times 0..7: three sequences of 600 (18 partitions), and
    for ddcrp (whose cost grows with the square of a sequence, and which steps 32 sequences at
    a time) 120 sequences of 15."""
    root = tmp_path_factory.mktemp("interrupt")
    rng = np.random.default_rng(5)
    short = [sequence_items(rng, 5, np.arange(8)) for _ in range(40)]
    for j, df in enumerate(short):
        df["sequence"] += 100 * j  # SEQUENCES are 10, 20, 30
    frames = {"big": sequence_items(rng, 600, np.arange(8)), "many": pd.concat(short)}
    for name, df in frames.items():
        ingest_array(df[["x", "y"]].to_numpy(), root / name, partition_rows=100,
                     columns={c: df[c].to_numpy() for c in ("label", "sequence", "time")})
    return {name: root / name for name in frames}


def command(engine: str, corpus: Path, run: Path) -> list[str]:
    _, extra = JOBS[engine]
    return [sys.executable, "-m", "bnpmix", "fit", str(corpus), "--algorithm", engine,
            "--obs", "gauss", "--out", str(run), "--checkpoint-every", "1", *extra]


def start(cmd: list[str]) -> subprocess.Popen:
    # SIGINT at its default (a shell's background job would ignore it)
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def staged(run: Path) -> bool:
    """Whether a checkpoint is being written (its temporary file exists)."""
    return any(n.startswith(".checkpoint.npz.") for n in os.listdir(run))


def begun(proc: subprocess.Popen, run: Path) -> float:
    """Wait until the run has claimed its directory (job.json written); the time then."""
    while not (run / "job.json").exists():
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.005)
    return time.monotonic()


def stop_at(proc: subprocess.Popen, run: Path, delay: float, sig: signal.Signals) -> None:
    """Send ``sig`` ``delay`` seconds after the run began; it must not have finished."""
    time.sleep(max(0.0, begun(proc, run) + delay - time.monotonic()))
    assert proc.poll() is None, f"the run finished before its stop at {delay:.2f} s"
    os.kill(proc.pid, sig)


def kill_mid_checkpoint(proc: subprocess.Popen, run: Path, skip: int) -> None:
    """SIGKILL while a checkpoint is being written, the ``skip``-th write caught onwards."""
    begun(proc, run)
    seen, before = 0, False
    while proc.poll() is None:
        now = staged(run)
        seen += now and not before
        before = now
        if now and seen > skip:
            os.kill(proc.pid, signal.SIGKILL)
            return
    pytest.fail(f"the run finished before write {skip + 1} of its checkpoint was caught")


def result(run: Path) -> dict:
    """What a run's result is: model arrays and metadata, objective, assignments, trace and
    the engine's tables, timings left out."""
    rd = RunDir(run)
    arrays, meta = rd.load_model()
    summary = json.loads((run / "summary.json").read_text())
    key = summary["objective"]
    tables = {p.name: pd.read_parquet(p).drop(columns="seconds", errors="ignore")
              for p in sorted(run.glob("*.parquet"))}
    return {"arrays": {k: np.array(v) for k, v in arrays.items()}, "meta": meta,
            "objective": summary[key], "K": summary["K"],
            "assignments": rd.load_assignments().sort_values("item", ignore_index=True),
            "trace": rd.load_trace().drop(columns="seconds"), "tables": tables}


def assert_same(a: dict, b: dict) -> None:
    assert a["objective"] == b["objective"] and a["K"] == b["K"]
    assert a["meta"] == b["meta"]
    assert a["arrays"].keys() == b["arrays"].keys()
    for k in a["arrays"]:
        np.testing.assert_array_equal(a["arrays"][k], b["arrays"][k], err_msg=k)
    pd.testing.assert_frame_equal(a["assignments"], b["assignments"], check_exact=True)
    pd.testing.assert_frame_equal(a["trace"], b["trace"], check_exact=True)
    assert a["tables"].keys() == b["tables"].keys()
    for name in a["tables"]:
        pd.testing.assert_frame_equal(a["tables"][name], b["tables"][name], check_exact=True)


@pytest.mark.parametrize("engine", list(JOBS))
def test_a_run_stopped_at_any_instant_resumes_to_the_same_result(engine, corpora, tmp_path):
    corpus = corpora[JOBS[engine][0]]
    proc = start(command(engine, corpus, tmp_path / "whole"))
    t0 = begun(proc, tmp_path / "whole")
    assert proc.wait(timeout=600) == 0, proc.stderr.read()
    duration = time.monotonic() - t0
    want = result(tmp_path / "whole")
    steps = len(want["trace"])  # a checkpoint after each (the run's every visit)
    assert steps >= 2, f"{steps} steps: the test needs a longer run"
    rng = np.random.default_rng(list(JOBS).index(engine) + 1)
    stops = [(sig, float(rng.uniform(0.05, 0.6)) * duration) for sig in STOPS]
    stops.append((STOPS[int(rng.integers(len(STOPS)))], float(rng.uniform(0.05, 0.6)) * duration))
    stops.append(("mid-checkpoint", int(rng.integers(0, min(3, steps // 2)))))
    for i, (sig, at) in enumerate(stops):
        run = tmp_path / f"stopped-{i}"
        proc = start(command(engine, corpus, run))
        if sig == "mid-checkpoint":
            kill_mid_checkpoint(proc, run, at)
            code = -signal.SIGKILL
        else:
            stop_at(proc, run, at, sig)
            code = EXIT[sig]
        assert proc.wait(timeout=600) == code, (sig, at, proc.stderr.read())
        done = subprocess.run([sys.executable, "-m", "bnpmix", "resume", str(run)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (sig, at, done.stderr)
        assert_same(result(run), want)
