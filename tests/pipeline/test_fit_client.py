"""fit and resume on a distributed.Client the caller owns: a real LocalCluster of two worker
processes on the loopback interface runs the partition tasks, the model is the synchronous
run's, the client and its cluster stay usable, and the run records the scheduler's address
(never the client object). The job's scheduler "distributed" takes the process's current
Client, which is how the estimator runs on it."""

from __future__ import annotations

import json
import operator
import subprocess
import sys

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster, get_task_stream

import helpers
from bnpmix import BayesianMixture, ingest_array, load
from bnpmix.pipeline.clusters import wait_for_a_worker
from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.pipeline.runtime.executors import DaskExecutor
from bnpmix.storage import BnpmixError, Corpus
from helpers import local_client

OPTIONS = {"K": 3, "laps": 3, "seed": 4, "wave": 1, "ahead": 0}  # the same W on every executor


@pytest.fixture(scope="module")
def client():
    """Its own LocalCluster, not the session's cluster: the tests check that the caller's
    cluster object stays running."""
    with local_client() as c:
        yield c


def blobs(n: int, seed: int) -> np.ndarray:
    return helpers.blobs(n, seed)[0]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "c"
    ingest_array(blobs(900, 0), path, partition_rows=150)  # six partitions
    return path


@pytest.fixture(scope="module")
def synchronous(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("sync") / "run"
    fit(corpus, out, job_config(scheduler="synchronous", **OPTIONS))
    return load(str(out))


def assert_same_model(run, expected) -> None:
    model = load(str(run))
    assert model.n_components_ == expected.n_components_
    np.testing.assert_allclose(model.weights_, expected.weights_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.means_, expected.means_, rtol=1e-12, atol=1e-12)


def assert_records_the_address(run, address: str) -> None:
    for name in ("job.json", "summary.json"):
        text = (run / name).read_text()
        assert "object at 0x" not in text and "Client" not in text, name
        assert json.loads(text)["config"]["run"]["scheduler"] == address
        assert json.loads(text)["config"]["run"]["cluster"] is None
    assert json.loads((run / "summary.json").read_text())["executor"].startswith(
        f"dask at {address} (2 workers")


def assert_still_usable(client) -> None:
    assert client.status == "running" and client.cluster.status.name == "running"
    assert client.submit(operator.add, 1, 2).result() == 3
    assert len(client.scheduler_info()["workers"]) == 2


def test_fit_on_a_given_client_gives_the_synchronous_model_and_leaves_it_open(
        client, corpus, synchronous, tmp_path):
    address = client.scheduler.address
    with get_task_stream(client) as tasks:
        summary = fit(corpus, tmp_path / "run", job_config(**OPTIONS), client=client)
    # the partition tasks ran on the client's workers; not necessarily on both, since each
    # partition's home is hashed from the workers' addresses (random ports): all six partitions
    # land on one of two workers in 1 of 32 clusters, and one CI run drew that
    ran = {t["worker"] for t in tasks.data if t["key"].startswith("bnpmix-partition-")}
    assert ran and ran <= set(client.scheduler_info()["workers"])
    assert summary["config"]["run"]["scheduler"] == address
    assert_same_model(tmp_path / "run", synchronous)
    assert_still_usable(client)
    assert_records_the_address(tmp_path / "run", address)


def test_resume_on_a_given_client_finishes_the_run(client, corpus, synchronous, tmp_path):
    def stop_after_a_lap(engine, step):
        if step.lap_end:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(corpus, tmp_path / "run", job_config(scheduler="synchronous", **OPTIONS),
            on_step=stop_after_a_lap)
    assert (tmp_path / "run" / "checkpoint.npz").exists()
    summary = resume(tmp_path / "run", client=client)
    assert summary["executor"].startswith(f"dask at {client.scheduler.address}")
    assert_same_model(tmp_path / "run", synchronous)
    assert_still_usable(client)


def test_scheduler_distributed_takes_the_current_client(client, corpus, synchronous,
                                                        tmp_path):
    fit(corpus, tmp_path / "run", job_config(scheduler="distributed", **OPTIONS))
    assert_same_model(tmp_path / "run", synchronous)
    assert_records_the_address(tmp_path / "run", client.scheduler.address)
    assert_still_usable(client)


def test_the_estimator_runs_on_the_current_client(client):
    X = blobs(800, 1)
    local = BayesianMixture(random_state=0, K=3, scheduler="synchronous").fit(X)
    with get_task_stream(client) as tasks:
        on_cluster = BayesianMixture(random_state=0, K=3, scheduler="distributed").fit(X)
    assert any(t["key"].startswith("bnpmix-partition-") for t in tasks.data)
    assert on_cluster.n_components_ == local.n_components_
    np.testing.assert_allclose(on_cluster.weights_, local.weights_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(on_cluster.means_, local.means_, rtol=1e-12, atol=1e-12)
    assert_still_usable(client)


def test_the_executor_reads_dask_config_on_the_driver(client, corpus):
    with dask.config.set({"bnpmix.task-retries": 5, "bnpmix.cache-bytes": 7000}):
        ex = DaskExecutor(client, Corpus(corpus))
    assert (ex.retries, ex.worker_options.cache_bytes) == (5, 7000)
    assert DaskExecutor(client, Corpus(corpus), cache_bytes=9000, retries=1).retries == 1


def test_the_worker_wait_comes_from_dask_config():
    """A scheduler without workers: the wait ends after bnpmix.worker-wait, naming it."""
    with LocalCluster(n_workers=0, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as empty, \
            Client(empty, set_as_default=False) as c, \
            dask.config.set({"bnpmix.worker-wait": "300ms"}), \
            pytest.raises(BnpmixError, match=r"no Dask worker joined .* within 0\.3 s"):
        wait_for_a_worker(c, "here")


def test_scheduler_distributed_without_a_client_is_an_error(corpus, tmp_path):
    done = subprocess.run([sys.executable, "-m", "bnpmix", "fit", str(corpus), "--out",
                           str(tmp_path / "run"), "--scheduler", "distributed"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "current distributed.Client, and there is none" in done.stderr
    assert not (tmp_path / "run").exists()


def test_the_driver_runs_blas_on_one_thread_during_a_dask_fit_only(client, corpus, tmp_path):
    """A Dask fit's driver work (births, merges, global steps: small products) runs with BLAS
    on one thread, and the caller's process gets its own BLAS threads back afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> set[int]:
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    with threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        seen: list[set[int]] = []
        fit(corpus, tmp_path / "run", job_config(**OPTIONS), client=client,
            on_step=lambda engine, step: seen.append(blas_threads()))
        assert before == {2} and seen and all(s == {1} for s in seen)
        assert blas_threads() == before
