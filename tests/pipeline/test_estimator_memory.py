"""The estimator fits X held in memory without writing a corpus (storage.memory): the run is the
one ``write_corpus`` + ``fit`` of that corpus gives, bit for bit (model arrays, labels, ELBO,
trace), for dense rows, sparse counts and a Dask array, on local threads and on a Dask cluster;
nothing is written, and a Dask array is never computed whole on the driver."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from bnpmix import BayesianMixture
from bnpmix.pipeline.estimator import write_corpus
from bnpmix.pipeline.fit import fit
from bnpmix.storage import RunDir
from helpers import blobs

da = pytest.importorskip("dask.array")

ROWS = 120  # rows per partition here, so that X has several partitions (the default: one)


@pytest.fixture(autouse=True)
def small_partitions(monkeypatch):
    """X cut into partitions of ROWS rows, by the in-memory corpus and by write_corpus alike."""
    monkeypatch.setattr("bnpmix.storage.memory.partition_rows", lambda given, dim: ROWS)
    monkeypatch.setattr("bnpmix.storage.matrix.partition_rows", lambda given, dim: ROWS)


def counts(n: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(30, 0.1), size=3)
    return sp.csr_matrix(np.vstack([rng.multinomial(40, topics[t])
                                    for t in rng.integers(3, size=n)]))


def estimator(algorithm: str, obs: str, **options) -> BayesianMixture:
    return BayesianMixture(algorithm=algorithm, obs=obs, random_state=4, **options)


def assert_same_as_written(est: BayesianMixture, X, tmp_path) -> None:
    """est (fitted to X) holds the run of write_corpus(X) + fit with the estimator's job."""
    run = tmp_path / "written-run"
    summary = fit(write_corpus(X, tmp_path / "corpus"), run, est._job(4))
    files = est._run_files[1]
    ours = json.loads(files["summary.json"])
    for key in ("objective", "K", "weights", "weight_new", "component_ids", "sizes", "laps",
                summary["objective"]):
        assert ours[key] == summary[key], key
    with np.load(io.BytesIO(files["model.npz"]), allow_pickle=False) as a, \
            np.load(run / "model.npz", allow_pickle=False) as b:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name, strict=True)
    theirs = RunDir(run).load_assignments().sort_values("item")
    np.testing.assert_array_equal(est.labels_, theirs["cluster"].to_numpy())
    trace = pd.read_csv(io.BytesIO(files["trace.csv"])).drop(columns="seconds")
    pd.testing.assert_frame_equal(trace, pd.read_csv(run / "trace.csv").drop(columns="seconds"))
    assert est.lower_bound_ == summary[summary["objective"]]


CASES = [("memo", "gauss", {"K": 1, "laps": 4}), ("adf", "gauss", {})]
TEXT = [("memo", "mult", {"K": 1, "laps": 4}), ("adf", "mult", {})]


@pytest.mark.parametrize(("algorithm", "obs", "options"), CASES)
def test_dense_x_fits_as_its_written_corpus(algorithm, obs, options, tmp_path):
    X = np.round(blobs(400, 3)[0] * 2) / 2  # a column of halves: not integer, as a check
    X[:, 1] = np.round(X[:, 1])  # and one of integers: dequantised by both
    est = estimator(algorithm, obs, **options).fit(X)
    assert_same_as_written(est, X, tmp_path)


@pytest.mark.parametrize(("algorithm", "obs", "options"), TEXT)
def test_sparse_counts_fit_as_their_written_corpus(algorithm, obs, options, tmp_path):
    X = counts(300, 1)
    est = estimator(algorithm, obs, **options).fit(X)
    assert_same_as_written(est, X, tmp_path)


@pytest.mark.parametrize(("algorithm", "obs", "options"), CASES)
def test_a_dask_array_fits_as_its_written_corpus(algorithm, obs, options, tmp_path):
    """Its partitions are its row blocks (uneven here), as write_corpus writes them."""
    X = da.from_array(blobs(400, 5)[0], chunks=((150, 100, 150), (1, 1)))
    est = estimator(algorithm, obs, **options).fit(X)
    assert est.model_ is not None and len(est.labels_) == 400
    assert_same_as_written(est, X, tmp_path)


def test_no_corpus_is_written(monkeypatch):
    """(The run directory's assignments are Parquet files: they are written.)"""
    def refuse(*args, **kwargs):
        raise AssertionError("a corpus was written")

    for where in ("bnpmix.storage.writer.new_corpus", "bnpmix.storage.memory.new_corpus",
                  "bnpmix.storage.writer.CorpusWriter.__init__",
                  "bnpmix.storage.tables.write_partition"):
        monkeypatch.setattr(where, refuse)
    X = blobs(300, 0)[0]
    for data in (X, counts(200, 0), da.from_array(X, chunks=(100, 2))):
        assert BayesianMixture(random_state=0, K=1, laps=3).fit(data).n_components_ >= 1


def test_a_dask_array_is_computed_block_by_block(monkeypatch):
    """No whole compute of X (Array.compute and __array__ refuse), and each computation of a
    block holds that block's rows only; the fit is that of X in memory (the same partitions)."""
    seen: list[int] = []

    def block(x):
        seen.append(len(x))
        return x

    X = da.from_array(blobs(400, 2)[0], chunks=(ROWS, 2)).map_blocks(block, dtype=float)
    whole = BayesianMixture(algorithm="memo", obs="gauss", K=1, laps=3, random_state=1)
    wanted = whole.fit(X.compute()).lower_bound_
    seen.clear()

    def refuse(*args, **kwargs):
        raise AssertionError("X computed whole")

    monkeypatch.setattr(da.Array, "compute", refuse)
    monkeypatch.setattr(da.Array, "__array__", refuse)
    est = BayesianMixture(algorithm="memo", obs="gauss", K=1, laps=3, random_state=1).fit(X)
    assert est.lower_bound_ == wanted
    assert seen and max(seen) <= ROWS


def test_errors_of_x_are_as_before():
    X = blobs(300, 0)[0]
    X[130, 1] = np.nan
    with pytest.raises(ValueError, match=r"X, row 130: non-finite value nan in column 1"):
        BayesianMixture(random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"X, row 30: non-finite value nan in column 1"):
        BayesianMixture(random_state=0).fit(da.from_array(X, chunks=(100, 2)))
    with pytest.raises(ValueError, match="non-negative integer counts"):
        BayesianMixture(random_state=0).fit(sp.csr_matrix(np.abs(blobs(50, 0)[0])))


def test_on_a_dask_cluster_the_fit_is_the_local_one(dask_client):
    """scheduler="distributed": the partitions reach the workers (numpy: scattered; Dask:
    computed there), the run the same as on local threads."""
    X = blobs(400, 6)[0]
    for data in (X, da.from_array(X, chunks=(150, 2))):
        local = estimator("memo", "gauss", K=1, laps=3).fit(data)
        remote = estimator("memo", "gauss", K=1, laps=3, scheduler="distributed").fit(data)
        assert remote.lower_bound_ == local.lower_bound_
        np.testing.assert_array_equal(remote.labels_, local.labels_)
        assert json.loads(remote._run_files[1]["summary.json"])["executor"].startswith("dask")


@pytest.mark.slow  # a worker killed mid-fit
def test_a_worker_killed_mid_fit_takes_none_of_x_with_it(own_dask_cluster):
    """The partitions of X scattered to a worker that dies are scattered again (Dask cannot
    recompute scattered data, and cancels it): the fit goes on and is the local one."""
    import os
    import signal
    import threading
    import time

    from distributed import Client

    X = blobs(2400, 6)[0]  # 20 partitions, scattered over both workers
    options = {"K": 1, "laps": 8, "wave": 1, "ahead": 0}
    local = estimator("memo", "gauss", **options).fit(X)
    with Client(own_dask_cluster.address, timeout="10s") as client:
        remote = estimator("memo", "gauss", scheduler="distributed", **options)
        fitting = threading.Thread(target=remote.fit, args=(X,))
        fitting.start()
        pids = client.run(os.getpid)  # the workers' own processes (their nannies restart them)
        victim = min(pids)

        def keys(dask_scheduler):
            return [(str(k), [w.address for w in t.who_has or ()])
                    for k, t in dask_scheduler.tasks.items()]

        deadline = time.time() + 120
        while not any(k.startswith("bnpmix-partition-") for k, _ in client.run_on_scheduler(keys)):
            assert fitting.is_alive() and time.time() < deadline
            time.sleep(0.01)
        held = [k for k, on in client.run_on_scheduler(keys) if victim in on
                and k.startswith("MemoryPartition")]
        assert held, "the victim holds no partition of X"
        os.kill(pids[victim], signal.SIGKILL)
        assert fitting.is_alive(), "the fit ended before the worker was killed"
        fitting.join(timeout=300)
    assert remote.lower_bound_ == local.lower_bound_
    np.testing.assert_array_equal(remote.labels_, local.labels_)
