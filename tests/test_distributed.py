"""The distributed pipeline for real: `dask scheduler` and `dask worker` processes on 127.0.0.1,
the CLI in subprocesses, a worker killed by PID mid-lap, the driver killed with SIGKILL."""

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
import scipy.sparse as sp
from distributed import Client

from bnpmix.pipeline.runtime.executors import DaskExecutor
from bnpmix.storage import BnpmixError, Corpus, RunDir, ingest_array, ingest_docword
from helpers import DASK, ENV, DaskCluster, cli, start_scheduler, stop, write_docword


def start_bnpmix(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bnpmix", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)


@pytest.fixture
def cluster(dask_cluster):
    """The session's cluster (tests/conftest.py)."""
    return dask_cluster


def make_corpus(path: Path, n: int = 4000, partitions: int = 20, D: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 5, (4, D))
    y = rng.integers(0, 4, n)
    X = centers[y] + rng.normal(size=(n, D))
    ingest_array(X, path, partition_rows=n // partitions, columns={"label": y})
    return path


def assert_same_run(a: Path, b: Path, rtol: float = 1e-9) -> None:
    ta, tb = pd.read_csv(a / "trace.csv"), pd.read_csv(b / "trace.csv")
    assert len(ta) == len(tb)
    np.testing.assert_array_equal(ta["batch"], tb["batch"])
    np.testing.assert_array_equal(ta["K"], tb["K"])
    np.testing.assert_allclose(ta["elbo"], tb["elbo"], rtol=rtol, equal_nan=True)
    sa, sb = RunDir(a).load_summary(), RunDir(b).load_summary()
    assert sa["K"] == sb["K"]
    np.testing.assert_allclose(sa["elbo"], sb["elbo"], rtol=rtol)
    xa, xb = RunDir(a).load_assignments(), RunDir(b).load_assignments()
    np.testing.assert_array_equal(xa["cluster"], xb["cluster"])
    np.testing.assert_allclose(xa["prob"], xb["prob"], rtol=1e-7)


FIT = ("--K", "1", "--laps", "5", "--moves", "birth,merge", "--seed", "7")


def make_text_corpus(path: Path, n: int = 2000, V: int = 400, partitions: int = 20,
                     seed: int = 0) -> Path:
    """Documents from 4 topics, each on its own block of words."""
    rng = np.random.default_rng(seed)
    topics = np.full((4, V), 0.01)
    for k, words in enumerate(np.array_split(rng.permutation(V), 4)):
        topics[k, words] = 1.0
    topics /= topics.sum(1, keepdims=True)
    counts = np.stack([rng.multinomial(30, topics[k]) for k in rng.integers(0, 4, n)])
    write_docword(path.parent / "docword.t.txt", sp.csr_matrix(counts))
    ingest_docword(path.parent / "docword.t.txt", path, partition_rows=n // partitions)
    return path


# (W, waves ahead, corpus): the paper's schedule; W = 2 with the next wave computed while the
# driver applies one, on dense data and on text (sparse summaries, E[log θ] shipped on each
# wave's words only)
@pytest.mark.parametrize("wave,ahead,kind", [
    pytest.param("1", "0", "dense", marks=pytest.mark.slow),  # dense: --obs auto's fits too
    pytest.param("2", "1", "dense", marks=pytest.mark.slow),
    ("2", "1", "text"), ("2", "1", "mfa")])  # mfa: iterative global updates, warm starts
def test_dask_run_equals_threaded_run(tmp_path, cluster, wave, ahead, kind):
    make = make_text_corpus if kind == "text" else make_corpus
    corpus = make(tmp_path / "corpus")
    same = (*FIT, "--wave", wave, "--ahead", ahead, *(("--obs", "mfa") if kind == "mfa" else ()))
    local = cli("fit", str(corpus), "--out", str(tmp_path / "threads"), *same)
    assert local.returncode == 0, local.stderr
    dist = cli("fit", str(corpus), "--out", str(tmp_path / "dask"), *same,
               "--scheduler", cluster.address)
    assert dist.returncode == 0, dist.stderr
    assert "dashboard" in dist.stderr  # the Dask dashboard address is printed
    assert_same_run(tmp_path / "threads", tmp_path / "dask")


@pytest.mark.slow  # a real cluster against threads, every move on
def test_dask_run_equals_threaded_run_with_births_and_deletes(tmp_path, cluster):
    """From K = 6 on four clusters with every component a deletion candidate: births (adopted
    with their origins absent) and deletes (each batch's alternative summary computed on the
    worker) give the threaded run's numbers, one wave computed ahead."""
    corpus = make_corpus(tmp_path / "corpus")
    same = ("--K", "6", "--laps", "6", "--moves", "birth,merge,delete", "--seed", "3",
            "--delete-max-share", "10", "--wave", "2", "--ahead", "1")
    local = cli("fit", str(corpus), "--out", str(tmp_path / "threads"), *same)
    assert local.returncode == 0, local.stderr
    dist = cli("fit", str(corpus), "--out", str(tmp_path / "dask"), *same,
               "--scheduler", cluster.address)
    assert dist.returncode == 0, dist.stderr
    assert_same_run(tmp_path / "threads", tmp_path / "dask")
    trace = pd.read_csv(tmp_path / "threads" / "trace.csv")
    lap_ends = trace.loc[trace["batch"] == -1, "K"]
    assert lap_ends.min() < 6  # a component was deleted or merged away at a lap end
    assert trace["K"].max() > lap_ends.max()  # and births were proposed within a lap


def kill_after_first_checkpoint(proc: subprocess.Popen, run: Path) -> None:
    """SIGKILL a `bnpmix fit` process once its run has a checkpoint and no summary."""
    deadline = time.time() + 120
    while not (run / "checkpoint.npz").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert not (run / "summary.json").exists(), "the run finished before it could be killed"


@pytest.mark.slow  # five fits and a cluster of its own: about 3 min on a loaded machine
def test_default_options_give_one_model_on_every_executor(tmp_path, cluster):
    """Issue 33: with the default options (births, merges and deletes on) the same job gives the
    same model on local threads, synchronously, on one real Dask worker, on two, and killed
    after its first checkpoint and resumed: trace, K, ELBO and assignments to 1e-9. Before, W
    and waves ahead followed the executor (1 and 0 locally, the workers' threads and 1 on
    Dask), so adding a worker changed the answer."""
    corpus = make_corpus(tmp_path / "corpus")
    job = ("--K", "1", "--laps", "5", "--seed", "4")
    runs = {"threads": (), "synchronous": ("--scheduler", "synchronous"),
            "two-workers": ("--scheduler", cluster.address)}
    for name, where in runs.items():
        res = cli("fit", str(corpus), "--out", str(tmp_path / name), *job, *where)
        assert res.returncode == 0, res.stderr
    one = DaskCluster(workers=1)
    try:
        res = cli("fit", str(corpus), "--out", str(tmp_path / "one-worker"), *job,
                  "--scheduler", one.address)
    finally:
        one.close()
    assert res.returncode == 0, res.stderr
    killed = tmp_path / "killed"
    kill_after_first_checkpoint(start_bnpmix("fit", str(corpus), "--out", str(killed), *job),
                                killed)
    res = cli("resume", str(killed))
    assert res.returncode == 0, res.stderr
    trace = pd.read_csv(tmp_path / "threads" / "trace.csv")
    assert trace["K"].max() > 1  # births happened
    for name in ("synchronous", "one-worker", "two-workers", "killed"):
        assert_same_run(tmp_path / "threads", tmp_path / name)
    waves = {json.loads((tmp_path / name / "job.json").read_text())["config"]["run"]["wave"]
             for name in ("threads", "one-worker", "two-workers")}
    assert waves == {4}  # memo's default, recorded as resolved


@pytest.mark.slow  # three fits on live workers
def test_reingest_at_the_same_path_between_fits_on_live_workers(tmp_path, cluster):
    """The same live workers fit a corpus, then the corpus is re-ingested at the same path with
    the same partition count: the second fit equals the threaded fit on the new data (workers
    used to serve their cached old partitions, as tasks named only a path and an index)."""
    corpus = make_corpus(tmp_path / "corpus", seed=0)
    first = cli("fit", str(corpus), "--out", str(tmp_path / "old"), *FIT,
                "--scheduler", cluster.address)
    assert first.returncode == 0, first.stderr
    rng = np.random.default_rng(1)  # the same shape, other numbers
    np.save(tmp_path / "new.npy", rng.normal(0, 5, (4, 3))[rng.integers(0, 4, 4000)]
            + rng.normal(size=(4000, 3)))
    again = cli("ingest", str(tmp_path / "new.npy"), str(corpus), "--overwrite",
                "--partition-rows", "200")
    assert again.returncode == 0, again.stderr
    local = cli("fit", str(corpus), "--out", str(tmp_path / "threads"), *FIT)
    assert local.returncode == 0, local.stderr
    dist = cli("fit", str(corpus), "--out", str(tmp_path / "dask"), *FIT,
               "--scheduler", cluster.address)
    assert dist.returncode == 0, dist.stderr
    assert_same_run(tmp_path / "threads", tmp_path / "dask")


def test_a_scheduler_without_workers_is_an_error_not_a_hang(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", n=400)
    scheduler, address = start_scheduler(tmp_path)
    try:
        t = time.time()
        out = cli("fit", str(corpus), "--out", str(tmp_path / "run"), "--scheduler", address,
                  "--worker-wait", "3")
        assert out.returncode == 1 and time.time() - t < 60
        assert f"{address}: no Dask worker joined the scheduler within 3 s" in out.stderr
        assert not (tmp_path / "run").exists()  # nothing claimed or half-written is left
    finally:
        stop(scheduler)


@pytest.mark.slow  # scheduler loss: its own scheduler killed under a running fit
def test_a_dead_scheduler_is_named_as_the_cause(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", n=20000, D=6)
    scheduler, address = start_scheduler(tmp_path)
    worker = subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--host",
                               "127.0.0.1", "--no-dashboard", "--death-timeout", "10"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        fit = start_bnpmix("fit", str(corpus), "--out", str(tmp_path / "run"), "--laps", "200",
                           "--tol", "0", "--obs", "gauss", "--scheduler", address)
        deadline = time.time() + 120
        # the run is under way on the cluster: job.json is written with the claim, before the
        # executor connects; the first checkpoint comes after a lap
        while not (tmp_path / "run" / "checkpoint.npz").exists():
            assert fit.poll() is None and time.time() < deadline, fit.communicate()
            time.sleep(0.2)
        time.sleep(1.0)
        scheduler.kill()
        scheduler.wait()
        _, err = fit.communicate(timeout=180)
        assert fit.returncode == 1, err
        assert f"{address}: lost the Dask scheduler" in err and "bnpmix resume" in err, err
    finally:
        stop(worker, scheduler)


def connect(address: str, timeout: float) -> Client:
    """A client of the scheduler at ``address`` once it listens; ``timeout`` is also how long
    it tries to reconnect after losing it."""
    deadline = time.time() + 60
    while True:
        try:
            return Client(address, timeout=timeout, set_as_default=False)
        except OSError:
            assert time.time() < deadline, f"{address} never listened"
            time.sleep(0.2)


@pytest.mark.slow  # scheduler loss: its own scheduler stopped at each point
@pytest.mark.parametrize("when", ["listing-again", "listed", "pending"])
def test_a_lost_scheduler_is_named_whenever_it_is_lost(tmp_path, when):
    """The scheduler dies and the client, having failed to reconnect, closes: the wave names the
    lost scheduler and the resume, whether it was submitted after (listing the workers again: a
    closed client's scheduler_info() is empty, which was KeyError 'workers'; or to those it had
    listed: ClosedClientError) or before (cancelling a collected wave on a closed client raised
    ClosedClientError over the error that says why)."""
    corpus = make_corpus(tmp_path / "corpus", n=400)
    scheduler, address = start_scheduler(tmp_path)
    try:
        with connect(address, timeout=1) as client:
            ex = DaskExecutor(client, Corpus(corpus), retries=0)
            ex.workers_ttl = 0.0 if when == "listing-again" else 600.0
            assert ex.parallelism == 1  # listed: no workers
            pending = ex.submit(len, [0]) if when == "pending" else None
            scheduler.kill()
            scheduler.wait()
            deadline = time.time() + 60
            while client.status != "closed":
                assert time.time() < deadline, client.status
                time.sleep(0.1)
            with pytest.raises(BnpmixError, match=f"(?s){address}: lost the Dask scheduler .*"
                                                  r"`bnpmix resume RUN_DIR`"):
                (pending or ex.submit(len, [0])).result()
    finally:
        stop(scheduler)


@pytest.mark.slow  # a worker killed mid-lap
def test_worker_killed_mid_lap_costs_time_not_correctness(tmp_path, own_dask_cluster):
    cluster = own_dask_cluster
    corpus = make_corpus(tmp_path / "corpus", n=20000, D=6)
    # the model named: --obs auto's race would run every lap but the last before the first
    # checkpoint, and the kill would land in the last lap, or after the fit
    args = ("--obs", "gauss", "--K", "1", "--laps", "6", "--moves", "birth,merge", "--seed",
            "3", "--checkpoint-every", "5", "--wave", "1", "--ahead", "0")
    ref = cli("fit", str(corpus), "--out", str(tmp_path / "ref"), *args)
    assert ref.returncode == 0, ref.stderr
    proc = start_bnpmix("fit", str(corpus), "--out", str(tmp_path / "faulty"), *args,
                        "--scheduler", cluster.address)
    ckpt = tmp_path / "faulty" / "checkpoint.npz"
    deadline = time.time() + 120
    while not ckpt.exists():  # a mid-lap checkpoint: the run is inside its first laps
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.02)
    victim = cluster.workers[0]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    assert proc.poll() is None, "the fit ended before the worker was killed"
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert_same_run(tmp_path / "ref", tmp_path / "faulty")


@pytest.mark.slow  # kill/resume of a real driver process
def test_driver_sigkill_then_resume_matches_uninterrupted(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", n=20000, D=6)
    # the model named: --obs auto's race would run the laps before the first checkpoint
    args = ("--obs", "gauss", "--K", "1", "--laps", "8", "--moves", "birth,merge", "--seed", "5",
            "--checkpoint-every", "7")
    ref = cli("fit", str(corpus), "--out", str(tmp_path / "ref"), *args)
    assert ref.returncode == 0, ref.stderr
    proc = start_bnpmix("fit", str(corpus), "--out", str(tmp_path / "run"), *args)
    run = tmp_path / "run"
    deadline = time.time() + 120
    while not (run / "checkpoint.npz").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.02)
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (run / "summary.json").exists(), "the run finished before it could be killed"
    res = cli("resume", str(run))
    assert res.returncode == 0, res.stderr
    assert_same_run(tmp_path / "ref", run, rtol=1e-12)
    again = cli("resume", str(run))
    assert again.returncode == 0 and "already finished" in again.stdout


@pytest.mark.slow  # clusters started from profiles
def test_fit_through_cluster_profiles(tmp_path, cluster):
    corpus = make_corpus(tmp_path / "corpus", n=1000, partitions=5)
    profile = tmp_path / "address.yaml"
    profile.write_text(f"kind: address\naddress: {cluster.address}\n"
                       "dask-config:\n  distributed.comm.timeouts.connect: 5s\n")
    res = cli("fit", str(corpus), "--out", str(tmp_path / "a"), "--laps", "2",
              "--cluster", str(profile))
    assert res.returncode == 0, res.stderr
    local = Path(__file__).parents[1] / "cluster-configs" / "local.yaml"
    res = cli("fit", str(corpus), "--out", str(tmp_path / "b"), "--laps", "2",
              "--cluster", str(local))
    assert res.returncode == 0, res.stderr
    assert_same_run(tmp_path / "a", tmp_path / "b")


def make_certificates(folder: Path, name: str) -> tuple[Path, Path, Path]:
    """A self-signed CA and a certificate it signs for 127.0.0.1, made with openssl here."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / f"{name}-ca.pem", folder / f"{name}-ca-key.pem"
    cert, key, csr = folder / f"{name}.pem", folder / f"{name}-key.pem", folder / f"{name}.csr"
    ext = folder / f"{name}.ext"
    ext.write_text("subjectAltName = IP:127.0.0.1\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            f"/CN={name}-ca", "-keyout", str(ca_key), "-out", str(ca))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", str(key), "-out", str(csr))
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
            "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(cert))
    return ca, cert, key


@pytest.mark.slow  # a TLS scheduler and workers of its own
def test_a_tls_cluster_through_a_profile_and_a_client_without_the_certificate(tmp_path):
    """Scheduler and workers on 127.0.0.1 speak TLS with certificates made in the test; a fit
    through a profile naming them equals the threaded fit; a client without a certificate, or
    with one from another CA, is refused."""
    ca, cert, key = make_certificates(tmp_path / "certs", "bnpmix")
    tls = ["--tls-ca-file", str(ca), "--tls-cert", str(cert), "--tls-key", str(key)]
    scheduler, address = start_scheduler(tmp_path, "--protocol", "tls", *tls)
    workers = [subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--host",
                                 "127.0.0.1", "--no-dashboard", "--death-timeout", "30", *tls],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
               for _ in range(2)]
    try:
        corpus = make_corpus(tmp_path / "corpus", n=1000, partitions=5)
        profile = tmp_path / "tls.yaml"
        profile.write_text(f"kind: address\naddress: {address}\n"
                           "dask-config:\n  distributed.comm.timeouts.connect: 5s\n"
                           "security:\n  ca_file: certs/bnpmix-ca.pem\n"
                           "  cert: certs/bnpmix.pem\n  key: certs/bnpmix-key.pem\n")
        local = cli("fit", str(corpus), "--out", str(tmp_path / "threads"), *FIT)
        assert local.returncode == 0, local.stderr
        deadline = time.time() + 60
        while True:  # the scheduler may still be starting
            dist = cli("fit", str(corpus), "--out", str(tmp_path / "tls"), *FIT,
                       "--cluster", str(profile))
            if dist.returncode == 0 or time.time() > deadline:
                break
            time.sleep(1)
        assert dist.returncode == 0, dist.stderr
        assert f"dask at {address}" in dist.stderr
        assert_same_run(tmp_path / "threads", tmp_path / "tls")
        plain = cli("fit", str(corpus), "--out", str(tmp_path / "plain"), *FIT,
                    "--scheduler", address.replace("tls://", "tcp://"), "--worker-wait", "5")
        assert plain.returncode == 1 and "Dask scheduler" in plain.stderr, plain.stderr
        make_certificates(tmp_path / "other", "stranger")
        stranger = tmp_path / "stranger.yaml"
        stranger.write_text(profile.read_text().replace("certs/bnpmix", "other/stranger"))
        refused = cli("fit", str(corpus), "--out", str(tmp_path / "stranger"), *FIT,
                      "--cluster", str(stranger), "--worker-wait", "5")
        assert refused.returncode == 1 and "Dask scheduler" in refused.stderr, refused.stderr
        for out in ("plain", "stranger"):
            assert not (tmp_path / out).exists()
    finally:
        stop(*workers, scheduler)


def test_job_file_with_flag_override(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", n=600, partitions=3)
    job = tmp_path / "job.toml"
    job.write_text(f'corpus = "{corpus}"\nout = "run"\nlaps = 2\nK = 3\nmoves = ["merge"]\n'
                   'seed = 11\nobs = "gauss"\n')
    res = cli("fit", "--config", str(job), "--laps", "3")
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    engine, run = summary["config"]["engine"], summary["config"]["run"]
    assert engine["laps"] == 3  # the flag wins
    assert engine["K"] == 3 and run["seed"] == 11
    assert engine["moves"] == ["merge"]
    bad = tmp_path / "bad.toml"
    bad.write_text("lapz = 3\n")
    res = cli("fit", str(corpus), "--out", str(tmp_path / "x"), "--config", str(bad))
    assert res.returncode == 1 and "lapz" in res.stderr


@pytest.mark.usefixtures("lap_checkpoints")
@pytest.mark.parametrize("where", ["threads", "dask"])
def test_a_partition_that_keeps_failing_stops_the_run_and_keeps_the_checkpoint(
        tmp_path, cluster, where):
    from bnpmix.pipeline.fit import fit, job_config
    from bnpmix.pipeline.runtime import checkpoint
    from bnpmix.storage import BnpmixError

    corpus = make_corpus(tmp_path / "corpus", n=1000, partitions=5)
    victim = corpus / "part-00003.parquet"
    saved = {}

    def corrupt_after_first_lap(engine, step):
        ckpt = tmp_path / "run" / "checkpoint.npz"
        if step.lap_end and not saved:  # lap 0 ended with a checkpoint; now damage a partition
            saved["bytes"] = ckpt.read_bytes()
            victim.write_bytes(victim.read_bytes()[:-10])

    cfg = job_config(obs="gauss", K=2, laps=3, cache_bytes=0, seed=1,
                     scheduler=cluster.address if where == "dask" else "threads")
    with pytest.raises(BnpmixError, match="part-00003") as err:
        fit(corpus, tmp_path / "run", cfg, on_step=corrupt_after_first_lap)
    assert "partition 3" in str(err.value)
    assert (tmp_path / "run" / "checkpoint.npz").read_bytes() == saved["bytes"]
    assert not (tmp_path / "run" / "summary.json").exists()
    with checkpoint.open_checkpoint(RunDir(tmp_path / "run"), "memo") as ckpt:
        assert ckpt.meta["state"]["next_lap"] == 1
