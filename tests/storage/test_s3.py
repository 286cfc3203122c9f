"""Corpora read from a real S3-compatible server (moto's server mode on 127.0.0.1, started
here): a corpus in a bucket is fitted on real Dask worker processes that read their partitions
from the bucket themselves, with a worker killed mid-lap, and evaluated from the bucket; the
results equal the local-path run's. A partition corrupted in the bucket is caught by its
checksum; the credentials appear in no file bnpmix writes and in none of its output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from test_distributed import assert_same_run

from bnpmix import load
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import BnpmixError, ingest_array
from helpers import DaskCluster, cli, cli_process, free_port, full_disk_at_checkpoints

boto3 = pytest.importorskip("boto3", reason="boto3 and moto[server] are in the test extra")
pytest.importorskip("moto", reason="moto[server] is in the test extra")


SECRET = "bnpmix-test-secret-Zq81x"  # grepped for in everything bnpmix writes
KEY_ID = "bnpmix-test-key-id-Pw27"
BUCKET = "bnpmix-corpora"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on loopback and the environment that reaches it (also set in this
    process for the duration, so in-process reads find it). The processes given it keep their
    temporary files under pytest's own directory: a driver the tests kill with SIGKILL cannot
    remove its run's local mirror (remote_run.workspace), which would pile up in /tmp."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_DEFAULT_REGION": "us-east-1",
           "TMPDIR": str(tmp_path_factory.mktemp("process-tmp"))}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(env["AWS_ENDPOINT_URL"], timeout=1)
                break
            except OSError:
                assert server.poll() is None and time.time() < deadline, "moto did not start"
                time.sleep(0.2)
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.terminate()
        server.wait(timeout=10)


def upload(local: Path, prefix: str) -> str:
    """A local corpus directory copied into the bucket; its URL."""
    client = boto3.client("s3")
    for path in local.iterdir():
        client.upload_file(str(path), BUCKET, f"{prefix}/{path.name}")
    return f"s3://{BUCKET}/{prefix}"


def corpus(path: Path, n: int, seed: int, partitions: int = 10) -> Path:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) + rng.integers(0, 4, (n, 1)) * 5.0
    ingest_array(X, path, partition_rows=n // partitions, columns={"label": X[:, 0] > 7})
    return path


def download_run(prefix: str, dest: Path) -> Path:
    """The objects under s3://BUCKET/prefix/ as a local directory (directory markers skipped)."""
    client = boto3.client("s3")
    for o in client.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/")["Contents"]:
        if not o["Key"].endswith("/"):  # pyarrow's directory markers
            target = dest / o["Key"].removeprefix(f"{prefix}/")
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(BUCKET, o["Key"], str(target))
    return dest


def wait_for_object(key: str, proc: subprocess.Popen) -> None:
    client = boto3.client("s3")
    deadline = time.time() + 120
    while client.list_objects_v2(Bucket=BUCKET, Prefix=key).get("KeyCount", 0) == 0:
        assert proc.poll() is None, f"the run ended before {key} reached the bucket"
        assert time.time() < deadline
        time.sleep(0.05)


@pytest.mark.slow  # a real cluster, a worker killed
def test_ingest_fit_evaluate_entirely_in_the_bucket_with_a_worker_killed(tmp_path, s3):
    """ingest into s3://, fit s3:// --out s3:// on dask worker processes that read the bucket
    themselves, one killed mid-lap, evaluate s3:// --heldout s3://: the local-path run's
    results to 1e-9."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 3)) + rng.integers(0, 4, (20000, 1)) * 5.0
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "y.txt").write_text("".join(f"{int(v > 7)}\n" for v in X[:, 0]))
    np.save(tmp_path / "held.npy", X[:2000] + 0.1)
    (tmp_path / "held.txt").write_text("".join(f"{int(v > 7)}\n" for v in X[:2000, 0]))
    url, held_url = f"s3://{BUCKET}/train", f"s3://{BUCKET}/held"
    for where, name, labels in ((url, "x", "y"), (held_url, "held", "held"),
                                (str(tmp_path / "train"), "x", "y"),
                                (str(tmp_path / "held-local"), "held", "held")):
        done = cli_process("ingest", str(tmp_path / f"{name}.npy"), where, "--labels",
                           str(tmp_path / f"{labels}.txt"), "--partition-rows", "2000", env=s3)
        assert done.returncode == 0, done.stderr
    # the model named: --obs auto's race would run the laps before the first checkpoint
    args = ("--obs", "gauss", "--K", "1", "--laps", "6", "--moves", "birth,merge", "--seed", "3",
            "--checkpoint-every", "5", "--wave", "1", "--ahead", "0")
    ref = cli_process("fit", str(tmp_path / "train"), "--out", str(tmp_path / "ref"), *args)
    assert ref.returncode == 0, ref.stderr
    run_url = f"s3://{BUCKET}/runs/workers-killed"
    cluster = DaskCluster(env=s3)  # workers read from the bucket with these credentials
    try:
        proc = subprocess.Popen([sys.executable, "-m", "bnpmix", "fit", url, "--out", run_url,
                                 *args, "--scheduler", cluster.address],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **s3})
        wait_for_object("runs/workers-killed/checkpoint.npz", proc)  # inside its first laps
        os.kill(cluster.workers[0].pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    finally:
        cluster.close()
    assert_same_run(tmp_path / "ref", download_run("runs/workers-killed", tmp_path / "copy"))
    on_s3 = cli_process("evaluate", run_url, "--heldout", held_url, "--label-column", "label",
                        env=s3)
    here = cli_process("evaluate", str(tmp_path / "ref"), "--heldout",
                       str(tmp_path / "held-local"), "--label-column", "label")
    assert on_s3.returncode == 0 and here.returncode == 0, on_s3.stderr + here.stderr
    a, b = json.loads(on_s3.stdout), json.loads(here.stdout)
    np.testing.assert_allclose(a["heldout_loglik_per_item"], b["heldout_loglik_per_item"],
                               rtol=1e-9)
    assert a["ari"] == pytest.approx(b["ari"], abs=1e-12)
    written = [p for p in (tmp_path / "copy").rglob("*") if p.is_file()]
    assert written
    for text in [out, err, on_s3.stdout, on_s3.stderr,
                 *(p.read_bytes().decode("latin-1") for p in written)]:
        assert SECRET not in text and KEY_ID not in text
    assert url in (tmp_path / "copy" / "job.json").read_text()


def test_a_partition_corrupted_in_the_bucket_is_caught_by_its_checksum(tmp_path, s3):
    url = upload(corpus(tmp_path / "corpus", 1000, 2, partitions=4), "corrupt")
    name = "part-00002.parquet"
    client = boto3.client("s3")
    body = bytearray(client.get_object(Bucket=BUCKET, Key=f"corrupt/{name}")["Body"].read())
    body[len(body) // 2] ^= 0xFF
    client.put_object(Bucket=BUCKET, Key=f"corrupt/{name}", Body=bytes(body))
    done = cli_process("fit", url, "--out", str(tmp_path / "run"), "--scheduler", "synchronous",
                       env=s3)
    assert done.returncode == 1
    assert f"{url}/{name}" in done.stderr and "checksum" in done.stderr
    assert not (tmp_path / "run" / "summary.json").exists()


def test_evaluate_without_heldout_scores_a_bucket_run_on_its_corpus_in_the_bucket(tmp_path, s3):
    """A run at a URL fitted to a corpus at a URL: evaluate RUN_URL, without --heldout, scores
    that corpus (job.json's URL) and says so."""
    url = upload(corpus(tmp_path / "corpus", 200, 5, partitions=2), "training")
    run_url = f"s3://{BUCKET}/runs/training"
    assert cli("fit", url, "--out", run_url, "--algorithm", "vb", "--obs", "gauss", "--K", "2",
               "--laps", "1", "--scheduler", "synchronous").returncode == 0
    done = cli("evaluate", run_url)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["scored"], out["corpus"], out["n_items"]) == ("training", url, 200)
    assert f"scored the run's training corpus {url}" in done.stderr
    held = json.loads(cli("evaluate", run_url, "--heldout", url).stdout)
    assert held["heldout_loglik_per_item"] == out["heldout_loglik_per_item"]


def test_errors_name_the_url(tmp_path, s3):
    missing = cli_process("info", f"s3://{BUCKET}/nothing-here", env=s3)
    assert missing.returncode == 1 and f"s3://{BUCKET}/nothing-here: not a corpus" in \
        missing.stderr
    denied = cli_process("info", f"s3://{BUCKET}/train", timeout=180,
                         env={**s3, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"})
    assert denied.returncode == 1 and f"s3://{BUCKET}/train" in denied.stderr
    assert SECRET not in denied.stderr
    labels = cli_process("ingest", str(tmp_path / "x.npy"), str(tmp_path / "c"), "--labels",
                         f"s3://{BUCKET}/labels.txt", env=s3)
    assert labels.returncode == 2 and "URLs are not supported here" in labels.stderr


def test_a_full_disk_in_a_bucket_runs_workspace_names_the_run_url(tmp_path, s3, monkeypatch):
    """fit --out s3://...: a checkpoint that cannot be written in the local workspace (ENOSPC)
    is reported against the run's URL (the workspace in the temporary directory), and the run
    is continued with `bnpmix resume URL`, not with the removed workspace's path."""
    full_disk_at_checkpoints(monkeypatch)
    run_url = f"s3://{BUCKET}/runs/full-disk"
    with pytest.raises(BnpmixError) as caught:
        fit(corpus(tmp_path / "corpus", 200, 3, partitions=2), run_url,
            job_config(obs="gauss", laps=3, scheduler="synchronous"))
    assert str(caught.value).endswith(f"<the local workspace of {run_url}>/checkpoint.npz: "
                                      "cannot write (No space left on device)")
    assert caught.value.__notes__ == [f"continue the run with `bnpmix resume {run_url}`"]
    assert "bnpmix-run-" not in str(caught.value)


def test_ingest_into_a_bucket_publishes_the_manifest_last(tmp_path, s3, monkeypatch):
    X = np.random.default_rng(7).normal(size=(900, 2))
    np.save(tmp_path / "x.npy", X)
    url = f"s3://{BUCKET}/ingested"
    done = cli_process("ingest", str(tmp_path / "x.npy"), url, "--partition-rows", "300", env=s3)
    assert done.returncode == 0, done.stderr
    here = cli_process("ingest", str(tmp_path / "x.npy"), str(tmp_path / "local"),
                       "--partition-rows", "300")
    assert here.returncode == 0, here.stderr
    from bnpmix.storage import Corpus

    remote, local = Corpus(url), Corpus(tmp_path / "local")
    assert remote.manifest.partitions == local.manifest.partitions  # same bytes, same checksums
    np.testing.assert_array_equal(remote.read(2).X, X[600:])
    again = cli_process("ingest", str(tmp_path / "x.npy"), url, env=s3)
    assert again.returncode == 1 and "a corpus exists there" in again.stderr
    assert Corpus(url).manifest.partitions == local.manifest.partitions  # untouched
    # an upload that fails half-way leaves no manifest: no corpus appears
    from bnpmix.storage import objectstore

    real, calls = objectstore.write_object, []

    def failing(target, name, data):
        calls.append(name)
        if len(calls) == 2:
            raise objectstore.BnpmixError(f"{target}/{name}: cannot write (injected)")
        real(target, name, data)

    monkeypatch.setattr(objectstore, "write_object", failing)
    with pytest.raises(objectstore.BnpmixError, match="injected"):
        objectstore.publish_corpus(tmp_path / "local", f"s3://{BUCKET}/half")
    assert calls[0] != "manifest.json" and not objectstore.exists(f"s3://{BUCKET}/half",
                                                                  "manifest.json")


@pytest.mark.slow  # kill/resume of a real driver process
def test_a_run_directory_in_the_bucket_survives_a_killed_driver(tmp_path, s3):
    """fit --out s3://...: the checkpoint reaches the bucket, the driver is killed with SIGKILL,
    `bnpmix resume URL` continues from the bucket on another local workspace, and the run equals
    the uninterrupted local run; evaluate, info and show read it from the bucket."""
    url = upload(corpus(tmp_path / "corpus", 12000, 8), "train-for-runs")
    run_url = f"s3://{BUCKET}/runs/killed"
    # the model named: --obs auto's race would run the laps before the first checkpoint
    args = ("--obs", "gauss", "--K", "1", "--laps", "6", "--moves", "birth,merge", "--seed", "5",
            "--checkpoint-every", "3", "--scheduler", "synchronous")
    ref = cli_process("fit", url, "--out", str(tmp_path / "ref"), *args, env=s3)
    assert ref.returncode == 0, ref.stderr
    proc = subprocess.Popen([sys.executable, "-m", "bnpmix", "fit", url, "--out", run_url,
                             *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **s3})
    wait_for_object("runs/killed/checkpoint.npz", proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    client = boto3.client("s3")
    names = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="runs/killed/")
             .get("Contents", [])]
    assert "runs/killed/summary.json" not in names and "runs/killed/job.json" in names
    again = cli_process("fit", url, "--out", run_url, *args, env=s3)
    assert again.returncode == 1 and "bnpmix resume" in again.stderr  # never two runs in one
    done = cli_process("resume", run_url, env=s3)
    assert done.returncode == 0, done.stderr
    copy = download_run("runs/killed", tmp_path / "copy")
    assert not (copy / "checkpoint.npz").exists()  # the finished run left no checkpoint
    assert json.loads((copy / "job.json").read_text())["config"]["run"]["out"] == run_url
    assert_same_run(tmp_path / "ref", copy)
    for command in (("info", run_url), ("show", run_url),
                    ("evaluate", run_url, "--heldout", url)):
        shown = cli_process(*command, env=s3)
        assert shown.returncode == 0, shown.stderr
        assert SECRET not in shown.stdout + shown.stderr
    loaded = load(run_url)  # the Python API reads it from the bucket too
    np.testing.assert_array_equal(loaded.means_, load(copy).means_)
    for path in copy.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("latin-1")
            assert SECRET not in text and KEY_ID not in text


@pytest.mark.slow  # racing real processes
def test_scheduled_runs_in_a_bucket_publish_versions_and_never_run_twice(tmp_path, s3):
    """[schedule] runs = "s3://...": versions, partitions.json and `latest` in the bucket; a
    lease held elsewhere makes a call do nothing; two calls started together never both fit;
    an expired lease is taken over."""
    from bnpmix.storage import leases

    rng = np.random.default_rng(9)
    np.save(tmp_path / "a.npy", rng.normal(size=(600, 2)) + rng.integers(0, 2, (600, 1)) * 8)
    np.save(tmp_path / "b.npy", rng.normal(size=(300, 2)) + rng.integers(0, 2, (300, 1)) * 8)
    assert cli_process("ingest", str(tmp_path / "a.npy"), str(tmp_path / "corpus"),
                       "--partition-rows", "100").returncode == 0
    runs = f"s3://{BUCKET}/scheduled"
    job = tmp_path / "job.toml"
    job.write_text(f'corpus = "corpus"\nlaps = 3\nthreads = 1\n[schedule]\nruns = "{runs}"\n')
    held = leases.acquire(runs, ".lock", 60)  # another holder
    busy = cli_process("schedule", "run", str(job), env=s3)
    assert busy.returncode == 0 and "another scheduled run is in progress" in busy.stdout
    leases.release(held)
    both = [subprocess.Popen([sys.executable, "-m", "bnpmix", "schedule", "run", str(job)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **s3}) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in both]
    assert all(p.returncode == 0 for p in both), outs
    said = " ".join(out for out, _ in outs)
    assert said.count("published v0001") == 1, said  # one fitted; the other did nothing
    assert ("in progress" in said) or ("no new partitions" in said), said
    client = boto3.client("s3")
    latest = client.get_object(Bucket=BUCKET, Key="scheduled/latest")["Body"].read()
    assert latest == b"v0001\n"
    assert cli_process("ingest", str(tmp_path / "b.npy"), str(tmp_path / "corpus"),
                       "--partition-rows", "100", "--append").returncode == 0
    stale = leases.acquire(runs, ".lock", 0.5)  # a holder killed with its lease running out
    assert stale is not None
    time.sleep(1.0)
    second = cli_process("schedule", "run", str(job), env=s3)
    assert second.returncode == 0 and "published v0002" in second.stdout, second.stderr
    assert "3 new since v0001" in second.stdout
    summary = json.loads(client.get_object(Bucket=BUCKET, Key="scheduled/v0002/summary.json")
                         ["Body"].read())
    assert summary["n_items"] == 900 and summary["config"]["run"]["warm_start"] == \
        f"{runs}/v0001"  # warm-started from the previous version, named by its URL
    assert client.get_object(Bucket=BUCKET, Key="scheduled/latest")["Body"].read() == b"v0002\n"
    assert leases.acquire(runs, ".lock", 60) is not None  # the call released its lease


@pytest.mark.slow  # a cluster of its own (the bucket's credentials)
def test_storage_options_of_a_job_file_reach_the_workers_and_are_never_written(tmp_path, s3):
    """A job file's [storage] table (endpoint and credentials as S3FileSystem arguments) with
    no AWS_* variable anywhere: the driver and the worker processes (a worker plugin) read the
    bucket with it, and no file of the run, nor the output, holds the secret."""
    import helpers

    url = upload(corpus(tmp_path / "corpus", 3000, 11, partitions=6), "by-options")
    assert not any(k.startswith("AWS_") and k != "AWS_CA_BUNDLE" for k in helpers.ENV)
    endpoint = s3["AWS_ENDPOINT_URL"].removeprefix("http://")
    job = tmp_path / "job.toml"
    job.write_text(f'corpus = "{url}"\nlaps = 3\nseed = 2\n[storage]\n'
                   f'endpoint_override = "{endpoint}"\nscheme = "http"\n'
                   f'access_key = "{KEY_ID}"\nsecret_key = "{SECRET}"\nregion = "us-east-1"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    cluster = DaskCluster()
    try:
        done = subprocess.run([sys.executable, "-m", "bnpmix", "fit", "--config", str(job),
                               "--out", str(tmp_path / "run"), "--scheduler", cluster.address],
                              capture_output=True, text=True, timeout=300, env=env)
    finally:
        cluster.close()
    assert done.returncode == 0, done.stderr
    without = subprocess.run([sys.executable, "-m", "bnpmix", "info", url], capture_output=True,
                             text=True, timeout=300, env=env)
    assert without.returncode == 1  # the options were the only way in
    for text in [done.stdout, done.stderr, *(p.read_bytes().decode("latin-1")
                                             for p in (tmp_path / "run").rglob("*")
                                             if p.is_file())]:
        assert SECRET not in text and KEY_ID not in text


@pytest.mark.slow  # racing real processes, a cluster from a profile
def test_two_fits_into_one_run_url_never_both_run_and_evaluate_takes_a_profile(tmp_path, s3):
    """Two `fit --out s3://same` started together: the conditional .claim lets one run, the
    other is refused naming the URL. evaluate --cluster (a LocalCluster from a profile, workers
    reading the bucket) gives the threaded figure."""
    url = upload(corpus(tmp_path / "corpus", 4000, 12, partitions=8), "claimed-corpus")
    run_url = f"s3://{BUCKET}/runs/claimed"
    both = [subprocess.Popen([sys.executable, "-m", "bnpmix", "fit", url, "--out", run_url,
                              "--laps", "3", "--scheduler", "synchronous"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **s3}) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in both]
    codes = sorted(p.returncode for p in both)
    assert codes == [0, 1], outs
    loser = next(err for p, (_, err) in zip(both, outs, strict=True) if p.returncode == 1)
    assert f"{run_url}: a run directory exists there" in loser
    profile = Path(__file__).parents[2] / "cluster-configs" / "local.yaml"
    scored = [cli_process("evaluate", run_url, "--heldout", url, *extra, env=s3)
              for extra in ((), ("--cluster", str(profile)))]
    assert all(done.returncode == 0 for done in scored), [d.stderr for d in scored]
    a, b = (json.loads(done.stdout) for done in scored)
    assert a["heldout_loglik_per_item"] == pytest.approx(b["heldout_loglik_per_item"],
                                                         rel=1e-12)


@pytest.mark.slow  # real CLI processes against the S3 server
def test_a_report_is_written_to_the_bucket_and_replaces_only_a_report(tmp_path, s3):
    pytest.importorskip("matplotlib", reason="matplotlib is in the test extra")
    url = upload(corpus(tmp_path / "corpus", 1200, 13, partitions=3), "report-corpus")
    run_url = f"s3://{BUCKET}/runs/reported"
    assert cli_process("fit", url, "--out", run_url, "--laps", "2", "--scheduler",
                       "synchronous", env=s3).returncode == 0
    out = f"s3://{BUCKET}/reports/r1"
    for _ in range(2):  # the second replaces the first
        done = cli_process("report", run_url, "--out", out, env=s3)
        assert done.returncode == 0 and f"report: {out}/index.html" in done.stdout, done.stderr
    client = boto3.client("s3")
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="reports/r1/")
            ["Contents"]}
    assert "reports/r1/index.html" in keys and "reports/r1/trace.png" in keys
    page = client.get_object(Bucket=BUCKET, Key="reports/r1/index.html")["Body"].read()
    assert b'<meta name="generator"' in page and b"data:image/png;base64," in page
    client.put_object(Bucket=BUCKET, Key="reports/other/notes.txt", Body=b"keep me")
    refused = cli_process("report", run_url, "--out", f"s3://{BUCKET}/reports/other", env=s3)
    assert refused.returncode == 1 and "is not a bnpmix report" in refused.stderr
    assert client.get_object(Bucket=BUCKET, Key="reports/other/notes.txt")["Body"].read() == \
        b"keep me"
