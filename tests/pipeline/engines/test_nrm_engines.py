"""The adf and ep engines (Tank, Foti & Fox 2015) through the pipeline: EP's global sums against
the stored sites and the raw data after every pass, Dask against threads, SIGKILL then resume,
ADF continuing a stream through scheduled runs, the `--prior` name, and `evaluate`'s scale."""

from __future__ import annotations

import importlib.util
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
import scipy.sparse as sp
from scipy.special import gammaln, logsumexp

from bnpmix.algorithms.summary import Delete, Pool, Summary
from bnpmix.pipeline.evaluate import load
from bnpmix.storage import Corpus, RunDir, ingest_array
from helpers import ENV, cli, engine_for, run_to_end, write_docword

_PATH = Path(__file__).resolve().parents[3] / "benchmarks" / "nrm_data.py"
_spec = importlib.util.spec_from_file_location("nrm_data", _PATH)
nrm_data = importlib.util.module_from_spec(_spec)
sys.modules["nrm_data"] = nrm_data  # dataclasses look the module up by name
_spec.loader.exec_module(nrm_data)

TOL = 1e-9


# helpers -------------------------------------------------------------------------------------


def start_bnpmix(log: Path, *args: str) -> subprocess.Popen:
    """The CLI in the background, its stderr to ``log`` (a file: no pipe to fill)."""
    with open(log, "w") as err:
        return subprocess.Popen([sys.executable, "-m", "bnpmix", *map(str, args)],
                                stdout=subprocess.DEVNULL, stderr=err, env=ENV)


def ok(res: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def bars_corpus(path: Path, n: int, partition_size: int, seed: int = 0,
                length: int = 30) -> Path:
    nrm_data.write_corpus(nrm_data.bars(seed, n=n, length=length), path, partition_size)
    return path


def dense_corpus(path: Path, n: int = 240, partition_rows: int = 40, seed: int = 0) -> Path:
    """Eight well-separated 2-d blobs (with the narrow prior used below, ep creates and removes
    clusters on them)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 6, (8, 2))
    y = rng.integers(0, 8, n)
    ingest_array(centers[y] + rng.normal(size=(n, 2)), path, partition_rows=partition_rows,
                 columns={"label": y})
    return path


def model_arrays(run: Path) -> dict[str, np.ndarray]:
    with np.load(run / "model.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def assert_same_nrm_run(a: Path, b: Path, rtol: float = TOL) -> None:
    """Two finished adf/ep runs agree: trace (all but seconds), model, summary, assignments."""
    ta, tb = pd.read_csv(a / "trace.csv"), pd.read_csv(b / "trace.csv")
    assert list(ta.columns) == list(tb.columns)
    assert len(ta) == len(tb) > 0
    for col in ("lap", "batch", "K"):
        np.testing.assert_array_equal(ta[col], tb[col], err_msg=col)
    for col in ("loglik", "U"):
        np.testing.assert_allclose(ta[col], tb[col], rtol=rtol, atol=0, equal_nan=True,
                                   err_msg=col)
    ma, mb = model_arrays(a), model_arrays(b)
    assert ma.keys() == mb.keys()
    np.testing.assert_array_equal(ma["sum/uids"], mb["sum/uids"])
    for key in ma:
        np.testing.assert_allclose(ma[key], mb[key], rtol=rtol, atol=1e-12, err_msg=key)
    ja, jb = (json.loads((r / "model.json").read_text()) for r in (a, b))
    assert ja["m"] == jb["m"] and ja["info"] == jb["info"]
    np.testing.assert_allclose(ja["v"], jb["v"], rtol=rtol)
    sa, sb = RunDir(a).load_summary(), RunDir(b).load_summary()
    assert (sa["K"], sa["laps"], sa["stopped"]) == (sb["K"], sb["laps"], sb["stopped"])
    np.testing.assert_allclose(sa["loglik"], sb["loglik"], rtol=rtol)
    xa, xb = RunDir(a).load_assignments(), RunDir(b).load_assignments()
    np.testing.assert_array_equal(xa["item"], xb["item"])
    np.testing.assert_array_equal(xa["cluster"], xb["cluster"])
    np.testing.assert_allclose(xa["prob"], xb["prob"], rtol=1e-7)


# 1. EP's sums are the stored sites' sums, and the data's ------------------------------------

def sites_of(engine) -> dict[int, object]:
    return dict(engine.store.items())


def check_pass_invariants(engine) -> None:
    """(a) total = Σ over partitions of the stored site sums; (b) = the sums recomputed from
    the raw data and the dense site matrices; (c) no cluster below ε; (d) every stored id is a
    live cluster and no item holds more than a unit of responsibility (an item's entries on a
    removed cluster leave with it, ep.py, so a row may sum to less than 1; check_step_rows
    pins down exactly when)."""
    ctx, total = engine.ctx, engine.total
    assert len(np.unique(total.uids)) == total.K
    stored = sites_of(engine)
    assert sorted(stored) == list(range(ctx.corpus.n_partitions))
    N_sites = np.zeros(total.K)
    stats_sites = {k: np.zeros_like(v) for k, v in total.obs_stats.items()}
    N_data = np.zeros(total.K)
    stats_data = {k: np.zeros_like(v) for k, v in total.obs_stats.items()}
    for p, sites in stored.items():
        assert np.isin(sites.uids, total.uids).all(), (p, sites.uids, total.uids)
        assert np.isin(sites.summary.uids, total.uids).all(), (p, sites.summary.uids)
        on_total = sites.summary.over(total.uids)
        N_sites += on_total.N
        for k in stats_sites:
            stats_sites[k] += on_total.obs_stats[k]
        batch = ctx.corpus.read(p)
        R = sites.matrix(total.uids)
        assert R.shape == (len(batch), total.K) == (sites.n, total.K)
        assert (R >= 0).all()
        rows = R.sum(axis=1)
        assert (rows <= 1 + TOL).all(), (p, rows.max())
        N_data += R.sum(axis=0)
        for k, v in ctx.obs.stats(batch.X, R).items():
            stats_data[k] += v
    close(total.N, N_sites, "N vs stored site sums")
    close(total.N, N_data, "N vs Σ_i r_ik")
    for k, v in total.obs_stats.items():  # shared ones too (tied-gauss's pooled scatter)
        close(v, stats_sites[k], f"stats[{k}] vs stored site sums")
        close(v, stats_data[k], f"stats[{k}] vs the data")
    assert (engine.eps <= total.N).all(), (total.uids, total.N)


def close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL * scale, err_msg=what)


def item_of_entry(sites) -> np.ndarray:
    return np.repeat(np.arange(sites.n), np.diff(sites.indptr))


def row_sums(sites) -> np.ndarray:
    return np.bincount(item_of_entry(sites), weights=sites.r, minlength=sites.n)


def check_step_rows(before: dict, after: dict, deleted: set[int], visited: list[int]) -> None:
    """Rows of partitions the step did not visit lose exactly their entries on the clusters it
    deleted; a visited partition's items each hold one unit of responsibility unless the step
    deleted a cluster (whose entries leave with it)."""
    for p, old in before.items():
        new = after[p]
        if p in visited:
            sums = row_sums(new)
            if deleted:
                assert (sums <= 1 + TOL).all()
            else:
                np.testing.assert_allclose(sums, 1.0, rtol=0, atol=TOL, err_msg=f"partition {p}")
            continue
        keep = ~np.isin(old.uids, list(deleted))
        counts = np.bincount(item_of_entry(old)[keep], minlength=old.n)
        np.testing.assert_array_equal(np.diff(new.indptr), counts, err_msg=f"partition {p}")
        np.testing.assert_array_equal(new.uids, old.uids[keep])
        np.testing.assert_array_equal(new.r, old.r[keep])


OBS_CASES = {
    "mult": ({}, "bars"),
    "gauss": ({}, "dense"),
    "diag-gauss": ({"prior": {"scale": 0.01}}, "dense"),
    "tied-gauss": ({"prior": {"scale": 0.01}}, "dense"),
}


@pytest.fixture(scope="module")
def small_corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("nrm-small")
    return {"bars": bars_corpus(root / "bars", n=240, partition_size=40),
            "dense": dense_corpus(root / "dense")}


@pytest.mark.parametrize("wave", [1, 2])
@pytest.mark.parametrize("obs", sorted(OBS_CASES))
def test_ep_sums_equal_the_stored_sites_and_the_data_after_every_pass(small_corpora, obs, wave):
    extra, data = OBS_CASES[obs]
    engine = engine_for(small_corpora[data], algorithm="ep", obs=obs, nrm_prior="ig",
                        epsilon=0.5, passes=4, wave=wave, merges="none", **extra)
    assert engine.ctx.corpus.n_partitions == 6
    passes, removed, born_in_ep, ids_by_pass = 0, set(), set(), []
    try:
        while not engine.done:
            before = sites_of(engine)
            moves, rows, first_new = len(engine.store.moves), len(engine.trace), \
                engine.ctx.next_uid
            step = engine.step()
            deleted = {m.move.uid for m in engine.store.moves[moves:]}
            assert all(isinstance(m.move, Delete) for m in engine.store.moves[moves:])
            visited = [int(r["batch"]) for r in engine.trace[rows:]]
            assert len(visited) == step.visits and len(visited) <= wave
            if engine.pass_ > 1 or (engine.pass_ == 1 and not step.lap_end):
                born_in_ep.update(range(first_new, engine.ctx.next_uid))
            removed |= deleted
            if before:
                check_step_rows(before, sites_of(engine), deleted, visited)
            if step.lap_end:
                passes += 1
                check_pass_invariants(engine)
                ids_by_pass.append(set(engine.total.uids.tolist()))
                if passes == 1:  # the ADF pass: nothing removed yet, each item a distribution
                    assert not engine.store.moves
                    for p, sites in sites_of(engine).items():
                        np.testing.assert_allclose(row_sums(sites), 1.0, rtol=0, atol=TOL,
                                                   err_msg=f"partition {p}")
    finally:
        engine.close()
    assert passes == 5 and engine.pass_ == 5
    # the removal path ran: clusters alive after the ADF pass were deleted later
    assert removed, "no cluster was removed: the test does not exercise the removal path"
    assert removed & ids_by_pass[0]
    assert set().union(*ids_by_pass) - ids_by_pass[-1]
    if obs == "mult":  # on the bars, EP passes also create clusters (and remove some of them)
        assert born_in_ep and born_in_ep & removed


def test_ep_sums_equal_the_stored_sites_and_the_data_after_evidence_merges(small_corpora):
    """The default post-pass pools clusters (Pool moves replayed on the stored sites): after
    every pass the total is still Σ of the stored sites and of r_ik t(x_i) over the data."""
    engine = engine_for(small_corpora["dense"], algorithm="ep", obs="gauss", epsilon=0.2,
                        passes=3, prior={"scale": 0.01})
    pools = 0
    try:
        while not engine.done:
            moves = len(engine.store.moves)
            if engine.step().lap_end:
                check_pass_invariants(engine)
            pools += sum(isinstance(m.move, Pool) for m in engine.store.moves[moves:])
    finally:
        engine.close()
    assert pools > 0 and engine.merged >= pools


@pytest.mark.parametrize("expected_k", ["count", "exact"])
def test_adf_with_evidence_merges_is_the_same_on_one_and_six_partitions(tmp_path, expected_k):
    """ADF absorbs the rows in corpus order whatever the partitioning, and the post-pass reads
    only the sums: one and six partitions of the same rows give the same clusters, those of
    one adf_pass over all rows followed by evidence_merges at the run's w_new."""
    from bnpmix.algorithms.adf import adf_pass
    from bnpmix.algorithms.nrm_merge import evidence_merges

    options = {"algorithm": "adf", "obs": "gauss", "nrm_prior": "ig",
               "expected_k": expected_k, "prior": {"scale": 0.01}}
    runs = []
    for rows in (240, 40):
        engine = run_to_end(engine_for(dense_corpus(tmp_path / f"c{rows}", partition_rows=rows),
                                       **options))
        assert engine.ctx.corpus.n_partitions == 240 // rows
        runs.append(engine)
    one, six = runs
    assert one.merged > 0 and one.merged == six.merged
    np.testing.assert_array_equal(one.total.uids, six.total.uids)
    close(six.total.N, one.total.N, "N")
    for k, v in one.total.obs_stats.items():
        close(six.total.obs_stats[k], v, k)
    X = np.vstack([six.ctx.corpus.read(p).X for p in range(6)])
    ref, qs = adf_pass(six.ctx.obs, six.prior, X, six.eps, exact_k=expected_k == "exact")
    Q = np.zeros((len(X), ref.K))
    for i, q in enumerate(qs):
        Q[i, :len(q)] = q
    stats, shared = six.ctx.obs.split_stats(six.ctx.obs.stats(X, Q))
    total = Summary(ref.uids, Q.sum(0), stats, np.zeros(ref.K), n_items=len(X), shared=shared)
    w_new = six.prior.predictive(total.N, len(X), ref.expected_k, v0=ref.v)[1]
    for move in evidence_merges(six.ctx.obs, six.prior.sigma, float(np.log(w_new)), total):
        total = move.apply(total)
    np.testing.assert_array_equal(total.uids, six.total.uids)
    close(six.total.N, total.N, "N vs adf_pass then merges")


# 2. Dask equals threads ----------------------------------------------------------------------

@pytest.fixture
def dask_address(dask_cluster):
    """The session's `dask scheduler` and two single-threaded `dask worker` processes on
    127.0.0.1 (tests/conftest.py)."""
    return dask_cluster.address


def test_dask_ep_equals_threaded_ep(tmp_path, dask_address):
    corpus = bars_corpus(tmp_path / "corpus", n=240, partition_size=40)
    args = ("--algorithm", "ep", "--prior", "ig", "--epsilon", "0.5", "--passes", "3",
            "--wave", "2")
    ok(cli("fit", corpus, "--out", tmp_path / "threads", *args))
    dist = ok(cli("fit", corpus, "--out", tmp_path / "dask", *args,
                  "--scheduler", dask_address))
    assert f"dask at {dask_address}" in dist.stderr
    assert RunDir(tmp_path / "dask").load_summary()["executor"].startswith("dask at")
    trace = pd.read_csv(tmp_path / "dask" / "trace.csv")
    assert sorted(set(trace["lap"])) == [0, 1, 2, 3] and len(trace) == 4 * 6
    assert_same_nrm_run(tmp_path / "threads", tmp_path / "dask")


# 3. SIGKILL mid-pass, then resume ------------------------------------------------------------

def checkpoint_state(run: Path) -> dict | None:
    """The engine state in the run's checkpoint (None while there is none)."""
    from bnpmix.pipeline.runtime.checkpoint import FORMAT, VERSION
    from bnpmix.storage import BnpmixError
    from bnpmix.storage.arrays import read_arrays

    try:
        with read_arrays(run / "checkpoint.npz", FORMAT, VERSION) as ckpt:
            return ckpt.meta["state"]
    except BnpmixError:
        return None


def mid_pass(state: dict | None, first_pass: int) -> bool:
    return (state is not None and state["pass"] >= first_pass
            and 0 < state["pos"] < len(state["todo"]))


KILLS = {  # corpus size, partition size, options, the first pass to kill in
    "ep": (1000, 50, ("--passes", "3"), 1),
    "adf": (3000, 100, (), 0),
}


@pytest.mark.slow  # kill/resume of a real process
@pytest.mark.parametrize("algorithm", sorted(KILLS))
def test_sigkill_mid_pass_then_resume_equals_the_uninterrupted_run(tmp_path, algorithm):
    n, size, extra, first_pass = KILLS[algorithm]
    corpus = bars_corpus(tmp_path / "corpus", n=n, partition_size=size, seed=1)
    args = ("--algorithm", algorithm, "--prior", "ig", "--epsilon", "0.5",
            "--checkpoint-every", "1", *extra)
    ok(cli("fit", corpus, "--out", tmp_path / "ref", *args))
    run = tmp_path / "run"
    log = tmp_path / "killed.log"
    proc = start_bnpmix(log, "fit", corpus, "--out", run, *args)
    try:
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, f"ended before it could be killed: {log.read_text()}"
            assert time.time() < deadline, "no mid-pass checkpoint within 120 s"
            if mid_pass(checkpoint_state(run), first_pass):
                os.kill(proc.pid, signal.SIGSTOP)  # frozen: the checkpoint cannot move on
                state = checkpoint_state(run)
                if mid_pass(state, first_pass):
                    os.kill(proc.pid, signal.SIGKILL)
                    break
                os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.01)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (run / "summary.json").exists()
    assert (run / "checkpoint.npz").exists()
    if algorithm == "ep":
        assert state["pass"] >= 1 and len(state["stored"]) == 20  # every partition's sites
    res = ok(cli("resume", run))
    assert "run directory" in res.stdout
    assert not (run / "checkpoint.npz").exists()
    assert_same_nrm_run(tmp_path / "ref", run)
    again = ok(cli("resume", run))
    assert "already finished" in again.stdout


# 4. ADF continues a stream; warm starts it cannot do are refused -----------------------------

def docword_of(path: Path, n: int, seed: int) -> Path:
    docs = nrm_data.bars(seed, n=n, length=30)
    write_docword(path, docs.X, [f"w{j}" for j in range(docs.X.shape[1])])
    return path


def test_scheduled_adf_absorbs_only_new_partitions_and_equals_one_pass(tmp_path):
    corpus = tmp_path / "corpus"
    ok(cli("ingest", docword_of(tmp_path / "docword.a.txt", 240, 2), corpus,
           "--partition-rows", "40"))
    job = tmp_path / "job.toml"
    job.write_text('corpus = "corpus"\nalgorithm = "adf"\nnrm_prior = "ig"\nepsilon = 0.5\n'
                   'threads = 1\n[schedule]\nruns = "models"\n')
    models = tmp_path / "models"
    first = ok(cli("schedule", "run", job))
    assert "published v0001" in first.stdout and "6 new" in first.stdout
    t1 = pd.read_csv(models / "v0001" / "trace.csv")
    assert t1["batch"].tolist() == list(range(6)) and set(t1["lap"]) == {0}

    ok(cli("ingest", docword_of(tmp_path / "docword.b.txt", 120, 3), corpus,
           "--partition-rows", "40", "--append"))
    assert Corpus(corpus).n_partitions == 9 and Corpus(corpus).n_items == 360
    second = ok(cli("schedule", "run", job))
    assert "published v0002" in second.stdout and "3 new since v0001" in second.stdout
    v2 = models / "v0002"
    t2 = pd.read_csv(v2 / "trace.csv")
    assert t2["batch"].tolist() == [6, 7, 8]  # only the new partitions were absorbed
    meta = json.loads((v2 / "model.json").read_text())
    assert meta["m"] == 360
    assert [p[0] for p in meta["info"]["partitions"]] == [
        p.file for p in Corpus(corpus).manifest.partitions]
    assert str((models / "v0001").resolve()) in (v2 / "job.json").read_text()  # warm-started

    whole = tmp_path / "whole"
    ok(cli("fit", corpus, "--out", whole, "--algorithm", "adf", "--prior", "ig",
           "--epsilon", "0.5"))
    tw = pd.read_csv(whole / "trace.csv")
    assert tw["batch"].tolist() == list(range(9))
    new = tw[tw["batch"] >= 6].reset_index(drop=True)
    np.testing.assert_array_equal(t2["K"], new["K"])
    for col in ("loglik", "U"):
        np.testing.assert_allclose(t2[col], new[col], rtol=TOL, atol=0, err_msg=col)
    for col in ("loglik", "U"):  # the first call saw exactly the first six partitions
        np.testing.assert_allclose(t1[col], tw[col][:6], rtol=TOL, atol=0, err_msg=col)
    ma, mb = model_arrays(v2), model_arrays(whole)
    np.testing.assert_array_equal(ma["sum/uids"], mb["sum/uids"])
    for key in ma:
        np.testing.assert_allclose(ma[key], mb[key], rtol=TOL, atol=1e-12, err_msg=key)
    mw = json.loads((whole / "model.json").read_text())
    assert (mw["m"], mw["info"]) == (meta["m"], meta["info"])
    np.testing.assert_allclose(meta["v"], mw["v"], rtol=TOL)
    xa, xb = RunDir(v2).load_assignments(), RunDir(whole).load_assignments()
    np.testing.assert_array_equal(xa["cluster"], xb["cluster"])


@pytest.fixture(scope="module")
def adf_run(small_corpora, tmp_path_factory):
    """A finished adf run (mult, on the small bars corpus), fitted in this process."""
    from bnpmix.pipeline.fit import fit, job_config

    run = tmp_path_factory.mktemp("adf-run") / "run"
    fit(small_corpora["bars"], run, job_config(algorithm="adf", nrm_prior="ig", epsilon=0.5,
                                               scheduler="synchronous"))
    return run


REFUSED = {  # algorithm, corpus, words the message must hold besides the run directory
    "ep from an adf model": ("ep", "bars", ("ep", "adf")),
    "memo from an adf model": ("memo", "bars", ("warm-start",)),
    "adf from a mult model on dense data": ("adf", "dense", ("mult", "gauss")),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_warm_start_the_engine_cannot_use_is_refused_naming_the_run(
        tmp_path, small_corpora, adf_run, case):
    algorithm, data, words = REFUSED[case]
    src = str(adf_run.resolve())
    res = cli("fit", small_corpora[data], "--out", tmp_path / "run", "--algorithm", algorithm,
              "--warm-start", src)
    assert res.returncode == 1, res.stderr
    assert res.stderr.startswith(f"bnpmix: error: {src}: "), res.stderr
    for word in words:
        assert word in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "AttributeError" not in res.stderr
    assert not (tmp_path / "run").exists()  # nothing claimed or half-written is left


# 5. --prior names the NRM prior --------------------------------------------------------------

def test_prior_ig_is_nrm_prior_ig_and_keeps_a_job_files_prior_table(tmp_path, small_corpora):
    corpus = small_corpora["bars"]
    common = ("--algorithm", "adf", "--epsilon", "0.5", "--threads", "1")
    ok(cli("fit", corpus, "--out", tmp_path / "named", "--prior", "ig", *common))
    ok(cli("fit", corpus, "--out", tmp_path / "flag", "--nrm-prior", "ig", *common))
    jobs = [json.loads((tmp_path / r / "job.json").read_text())["config"]
            for r in ("named", "flag")]
    assert jobs[0]["engine"]["nrm_prior"] == "ig" and jobs[0]["model"]["prior"] == {}
    for job in jobs:
        job["run"].pop("out")
    assert jobs[0] == jobs[1]
    ma, mb = model_arrays(tmp_path / "named"), model_arrays(tmp_path / "flag")
    assert ma.keys() == mb.keys()
    for key in ma:
        np.testing.assert_array_equal(ma[key], mb[key], err_msg=key)
    meta = json.loads((tmp_path / "named" / "model.json").read_text())
    assert meta["alloc"]["params"]["sigma"] == 0.5 and meta["prior"]["lam0"] == 0.1

    job = tmp_path / "job.toml"
    job.write_text(f'corpus = "{corpus}"\nalgorithm = "adf"\nepsilon = 0.5\n'
                   "[prior]\nlam0 = 0.5\n")
    ok(cli("fit", "--config", job, "--out", tmp_path / "table", "--prior", "ig"))
    config = json.loads((tmp_path / "table" / "job.json").read_text())["config"]
    assert config["model"]["prior"] == {"lam0": 0.5}
    assert config["engine"]["nrm_prior"] == "ig"
    meta = json.loads((tmp_path / "table" / "model.json").read_text())
    assert meta["prior"]["lam0"] == 0.5 and meta["alloc"]["params"]["sigma"] == 0.5


@pytest.mark.parametrize("args, words", [
    (("--algorithm", "memo", "--prior", "ig"), ("prior", "memo")),
    (("--algorithm", "adf", "--prior", "ig", "--nrm-prior", "dp"), ("prior", "ig", "dp")),
], ids=["memo-with-an-nrm-prior", "two-nrm-priors"])
def test_prior_names_that_cannot_apply_are_errors(tmp_path, small_corpora, args, words):
    res = cli("fit", small_corpora["bars"], "--out", tmp_path / "run", *args)
    assert res.returncode in (1, 2), res.stderr
    assert "Traceback" not in res.stderr
    for word in words:
        assert word in res.stderr, res.stderr
    assert not (tmp_path / "run").exists()


# 6. evaluate on an adf/ep run ----------------------------------------------------------------

def log_u(m: int, K: int, a: float, tau: float, sigma: float) -> float:
    """log Û from the root of u g'(u) (bisection in u, independent of the library's Newton)."""
    def dg(u):
        return m - (m - sigma * K) * u / (u + tau) - a * u * (u + tau) ** (sigma - 1)
    lo, hi = 1e-300, 1.0
    while dg(hi) > 0:
        hi *= 2
    for _ in range(400):
        mid = np.sqrt(lo * hi) if hi / lo > 4 else 0.5 * (lo + hi)
        lo, hi = (mid, hi) if dg(mid) > 0 else (lo, mid)
    return float(np.log(0.5 * (lo + hi)))


def dirichlet_multinomial(X: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """(n, K) log p(x_i | λ_k) without the multinomial coefficient."""
    n_i = X.sum(1)[:, None]
    A = lam.sum(1)[None, :]
    out = gammaln(A) - gammaln(A + n_i)
    for k in range(lam.shape[0]):
        out[:, k] += (gammaln(lam[k] + X) - gammaln(lam[k])).sum(1)
    return out


@pytest.mark.parametrize("algorithm", ["adf", "ep"])
def test_evaluate_reports_the_bag_of_words_scale(tmp_path, small_corpora, algorithm):
    from bnpmix.pipeline.fit import fit, job_config

    run = tmp_path / "run"
    fit(small_corpora["bars"], run, job_config(algorithm=algorithm, nrm_prior="ig",
                                               epsilon=0.5, scheduler="synchronous",
                                               **({"passes": 2} if algorithm == "ep" else {})))
    held = nrm_data.bars(5, n=90, length=30)
    nrm_data.write_corpus(held, tmp_path / "heldout", partition_size=40)
    res = ok(cli("evaluate", run, "--heldout", tmp_path / "heldout",
                 "--label-column", "label"))
    out = json.loads(res.stdout)
    assert out["multinomial_coefficient_included"] is False
    assert out["n_items"] == 90
    X = held.X.toarray()
    coefficient = gammaln(X.sum(1) + 1) - gammaln(X + 1).sum(1)
    assert (coefficient > 0).all()
    np.testing.assert_allclose(out["heldout_loglik_per_item_with_coefficient"]
                               - out["heldout_loglik_per_item"], coefficient.mean(),
                               rtol=1e-9)
    # the figure itself: Σ_k π_k DM(x | λ_k) with π from the NRM rule at Û, plus the prior's
    meta, arrays = json.loads((run / "model.json").read_text()), model_arrays(run)
    S, lam0 = arrays["sum/N"], meta["prior"]["lam0"]
    a, tau, sigma = (meta["alloc"]["params"][k] for k in ("a", "tau", "sigma"))
    assert out["K"] == len(S) == RunDir(run).load_summary()["K"]
    w_new = a * (np.exp(log_u(meta["m"], len(S), a, tau, sigma)) + tau) ** sigma
    w = np.append(np.maximum(S - sigma, 0.0), w_new)
    lam = np.vstack([lam0 + arrays["sum/stat_wc"], np.full(X.shape[1], lam0)])
    with np.errstate(divide="ignore"):
        logp = np.log(w / w.sum()) + dirichlet_multinomial(X, lam)
    np.testing.assert_allclose(out["heldout_loglik_per_item"], logsumexp(logp, axis=1).mean(),
                               rtol=1e-9)
    assert -1 <= out["ari"] <= 1 and 0 <= out["nmi"] <= 1


def test_merges_pool_the_clusters_whose_word_distributions_agree(tmp_path):
    """Six one-word documents A, A, B, C, B, D, each its own cluster (a = 1e6): merging at
    Hellinger 0.2 pools the two As and the two Bs, never C with D (a merge once looked its pairs
    up in the already shrunken list of clusters)."""
    words = [0, 0, 1, 2, 1, 3]
    X = np.zeros((6, 4))
    X[np.arange(6), words] = 10
    write_docword(tmp_path / "docword.w.txt", X)
    assert ok(cli("ingest", tmp_path / "docword.w.txt", tmp_path / "c"))
    engine = engine_for(tmp_path / "c", algorithm="adf", nrm_prior="dp", nrm_a=1e6,
                        epsilon=0.1, merge_threshold=0.2, prior={"lam0": 0.01})
    while not engine.done:
        engine.step()
    assert engine.merged == 2
    means = engine.ctx.obs.means(engine.ctx.obs.post(engine.total.N, engine.total.stats))
    top = means.argmax(axis=1)
    assert sorted(zip(top.tolist(), engine.total.N.round(9).tolist(), strict=True)) == [
        (0, 2.0), (1, 2.0), (2, 1.0), (3, 1.0)]


def test_adf_with_the_exact_expected_k_across_partitions_equals_one_pass(small_corpora,
                                                                        tmp_path):
    """expected_k = exact: log P_k travels from partition to partition (and through a
    checkpoint), so six partitions give what one adf_pass over all rows gives; the saved model
    scores with the same E[K']."""
    from bnpmix.algorithms.adf import adf_pass
    from bnpmix.pipeline.fit import fit, job_config, resume

    corpus = small_corpora["bars"]
    options = {"algorithm": "adf", "nrm_prior": "ig", "nrm_a": 5.0, "expected_k": "exact",
               "scheduler": "synchronous"}
    engine = engine_for(corpus, **options)
    while not engine.done:
        engine.step()
    X = sp.vstack([engine.ctx.corpus.read(p).X for p in range(6)]).tocsr()
    ref, _ = adf_pass(engine.ctx.obs, engine.prior, X, engine.eps, exact_k=True)
    np.testing.assert_allclose(engine.total.N, ref.S, rtol=1e-10)
    np.testing.assert_allclose(np.exp(engine.logP), np.exp(ref.logP), rtol=1e-9, atol=1e-300)
    counted, _ = adf_pass(engine.ctx.obs, engine.prior, X, engine.eps)
    assert ref.expected_k < ref.K and not np.allclose(counted.S, ref.S[:counted.K])

    def stop_after_two(engine, step):
        if len(engine.trace) == 2:
            raise KeyboardInterrupt

    job = job_config(**options, checkpoint_every=1)
    with pytest.raises(KeyboardInterrupt):
        fit(corpus, tmp_path / "killed", job, on_step=stop_after_two)
    resume(tmp_path / "killed")
    fit(corpus, tmp_path / "whole", job)
    killed, whole = model_arrays(tmp_path / "killed"), model_arrays(tmp_path / "whole")
    assert sorted(killed) == sorted(whole) and "logP" in whole
    for key in whole:
        np.testing.assert_allclose(killed[key], whole[key], rtol=1e-12)
    model = load(tmp_path / "whole").model
    EK = model.K - np.exp(model.logP).sum()
    w, w_new, _ = model.prior.predictive(model.sums.N, model.m, EK)
    np.testing.assert_allclose(model.weights()[0], w / (w.sum() + w_new), rtol=1e-12)


def test_merges_keep_log_p_aligned_with_the_clusters(small_corpora):
    """A Pool of a and b leaves log P_a + log P_b on a (both must be empty), aligned by id."""
    options = {"algorithm": "adf", "nrm_prior": "ig", "nrm_a": 1000.0, "nrm_tau": 1000.0,
               "expected_k": "exact", "scheduler": "synchronous"}
    plain = engine_for(small_corpora["bars"], **options)
    while not plain.done:
        plain.step()
    merged = engine_for(small_corpora["bars"], merge_threshold=0.45, **options)
    while not merged.done:
        merged.step()
    assert merged.merged > 0 and len(merged.logP) == merged.total.K
    before = dict(zip(plain.total.uids.tolist(), plain.logP.tolist(), strict=True))
    after = dict(zip(merged.total.uids.tolist(), merged.logP.tolist(), strict=True))
    gone = set(before) - set(after)
    assert len(gone) == merged.merged
    assert sum(before.values()) == pytest.approx(sum(after.values()), rel=1e-12)
    for u in after:
        assert after[u] <= before[u]  # a merged cluster only gains log-factors (<= 0)


def test_damped_parallel_ep_keeps_the_sums_exact(small_corpora):
    """--damping 0.5 with W = 2: after every pass the total is still the sum of the stored
    (blended) sites and of the raw data under them; the damped run differs from the undamped."""
    runs = {}
    for damping in (0.5, 1.0):
        engine = engine_for(small_corpora["bars"], algorithm="ep", nrm_prior="ig",
                            epsilon=0.5, passes=3, wave=2, damping=damping)
        try:
            while not engine.done:
                if engine.step().lap_end:
                    check_pass_invariants(engine)
            runs[damping] = engine.total
        finally:
            engine.close()
    assert not (runs[0.5].K == runs[1.0].K and np.allclose(runs[0.5].N, runs[1.0].N))


# 8. the observation prior's one source, and the trace on the held-out scale ------------------

@pytest.mark.parametrize("algorithm", ["adf", "ep"])
def test_the_engines_absorb_with_the_prior_observation_model_gives(tmp_path, monkeypatch,
                                                                   small_corpora, algorithm):
    """A prior returned by nrm.observation_model is what every item is absorbed with: the
    saved model carries it and the trace's figures, the predictive log density per item, equal
    a direct sweep under it."""
    from bnpmix.algorithms.alloc import NRM
    from bnpmix.algorithms.ep import sweep
    from bnpmix.algorithms.obs import obs_class
    from bnpmix.algorithms.summary import Summary
    from bnpmix.pipeline.engines import nrm
    from bnpmix.pipeline.fit import fit, job_config

    corpus = Corpus(small_corpora["dense"])
    X = np.vstack([corpus.read(p).X for p in range(corpus.n_partitions)])
    chosen = obs_class("gauss").default(X, scale=0.37, nu0=9.0)
    monkeypatch.setattr(nrm, "observation_model", lambda ctx: chosen)
    run = tmp_path / "run"
    fit(corpus.path, run, job_config(algorithm=algorithm, scheduler="synchronous", obs="gauss",
                                     **({"passes": 1} if algorithm == "ep" else {})))
    assert json.loads((run / "model.json").read_text())["prior"] == json.loads(
        json.dumps(chosen.prior()))
    trace = pd.read_csv(run / "trace.csv")
    first = trace[trace["lap"] == 0]
    rows = [corpus.read(p).X.shape[0] for p in first["batch"]]
    empty = Summary.zeros(np.zeros(0, np.int64), chosen.stat_shapes())
    direct = sweep(X, chosen, NRM(), 0.1, empty, None, 0, 0.0).loglik
    np.testing.assert_allclose((first["loglik"] * rows).sum(), direct, rtol=1e-9)
    summary = RunDir(run).load_summary()
    assert summary["loglik_per_item"] < 0
    if algorithm == "adf":
        assert summary["loglik_per_item"] == pytest.approx(direct / len(X), rel=1e-9)
