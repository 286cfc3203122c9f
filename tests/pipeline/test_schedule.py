"""Scheduled runs, appended partitions and cluster profiles."""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bnpmix.pipeline.clusters import cluster_class, load_profile
from bnpmix.storage import BnpmixError, Corpus
from helpers import cli

PROFILES = Path(__file__).parents[2] / "cluster-configs"


def write_npy(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [7.0, 0.0], [0.0, 7.0]])
    np.save(path, centers[rng.integers(0, 3, n)] + rng.normal(size=(n, 2)))
    return path


def tree_digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture
def job(tmp_path):
    res = cli("ingest", str(write_npy(tmp_path / "a.npy", 1000, 0)), str(tmp_path / "corpus"),
              "--partition-rows", "100")
    assert res.returncode == 0, res.stderr
    job = tmp_path / "job.toml"
    job.write_text('corpus = "corpus"\nlaps = 3\nmoves = "birth,merge"\nthreads = 1\n'
                   '[schedule]\nruns = "models"\n')
    return job


def test_schedule_publishes_versions_and_is_idempotent(tmp_path, job):
    models = tmp_path / "models"
    first = cli("schedule", "run", str(job))
    assert first.returncode == 0, first.stderr
    assert "published v0001" in first.stdout and "10 new" in first.stdout
    assert (models / "latest").read_text().strip() == "v0001"
    again = cli("schedule", "run", str(job))
    assert again.returncode == 0 and "no new partitions" in again.stdout
    before = tree_digest(models / "v0001")

    res = cli("ingest", str(write_npy(tmp_path / "b.npy", 500, 1)), str(tmp_path / "corpus"),
              "--partition-rows", "100", "--append")
    assert res.returncode == 0, res.stderr
    assert Corpus(tmp_path / "corpus").n_partitions == 15
    second = cli("schedule", "run", str(job))
    assert second.returncode == 0, second.stderr
    assert "published v0002" in second.stdout and "5 new since v0001" in second.stdout
    assert (models / "latest").read_text().strip() == "v0002"
    assert tree_digest(models / "v0001") == before  # the old version is intact
    summary = (models / "v0002" / "summary.json").read_text()
    assert '"n_items": 1500' in summary and "v0001" in summary  # warm-started from v0001


def test_a_held_lock_means_the_call_does_nothing(tmp_path, job):
    (tmp_path / "models").mkdir()
    with open(tmp_path / "models" / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        res = cli("schedule", "run", str(job))
    assert res.returncode == 0 and "in progress" in res.stdout
    assert not (tmp_path / "models" / "latest").exists()


@pytest.mark.slow  # a killed lock holder (real process)
def test_a_lock_whose_holder_was_killed_is_taken_over(tmp_path, job):
    """The lock is a flock: when its holder dies (kill -9 included) the kernel releases it, so
    the next call runs instead of reporting "in progress" for ever."""
    (tmp_path / "models").mkdir()
    holder = subprocess.Popen([sys.executable, "-c",
                               "import fcntl, sys, time\n"
                               f"fh = open({str(tmp_path / 'models' / '.lock')!r}, 'w')\n"
                               "fcntl.flock(fh, fcntl.LOCK_EX)\n"
                               "print('held', flush=True)\n"
                               "time.sleep(600)\n"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    busy = cli("schedule", "run", str(job))
    assert busy.returncode == 0 and "in progress" in busy.stdout
    holder.kill()  # only the process started here, by its handle
    holder.wait()
    holder.stdout.close()
    res = cli("schedule", "run", str(job))
    assert res.returncode == 0 and "published v0001" in res.stdout, res.stderr


@pytest.mark.slow  # racing real processes
def test_two_concurrent_calls_never_both_run(tmp_path, job):
    procs = [subprocess.Popen([sys.executable, "-m", "bnpmix", "schedule", "run", str(job)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    published = [o for o, _ in outs if "published" in o]
    assert len(published) == 1, outs  # the other found the lock held (or nothing new after it)
    assert sorted(p.name for p in (tmp_path / "models").glob("v*")) == ["v0001"]


def test_append_refuses_incompatible_data(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((10, 2)))
    np.save(tmp_path / "b.npy", np.ones((10, 3)))
    assert cli("ingest", str(tmp_path / "a.npy"), str(tmp_path / "c")).returncode == 0
    before = tree_digest(tmp_path / "c")
    res = cli("ingest", str(tmp_path / "b.npy"), str(tmp_path / "c"), "--append")
    assert res.returncode == 1 and "dim differs" in res.stderr
    assert tree_digest(tmp_path / "c") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "b.npy", "c"]


@pytest.mark.parametrize("name", ["local", "address", "ssh", "slurm", "kubernetes"])
def test_every_profile_loads_and_sets_a_short_connect_timeout(name):
    profile = load_profile(PROFILES / f"{name}.yaml")
    assert profile.kind == name
    assert profile.dask_config["distributed.comm.timeouts.connect"] in ("5s", "10s")
    text = (PROFILES / f"{name}.yaml").read_text()
    assert "known_hosts: null" not in text.split("never set known_hosts: null")[-1]
    for options in (profile.cluster, profile.cluster.get("scheduler_options", {})):
        dashboard = str(options.get("dashboard_address", "127.0.0.1:"))
        assert dashboard.startswith("127.0.0.1:"), f"{name}: dashboard on {dashboard}"


def test_the_ssh_profile_speaks_tls_and_needs_its_certificates(tmp_path):
    """ssh.yaml ships secure: TLS for scheduler and workers, and opening it without the
    certificate files is an error naming the profile and the field."""
    from bnpmix.pipeline.clusters import security_of

    profile = load_profile(PROFILES / "ssh.yaml")
    assert profile.cluster["scheduler_options"]["protocol"] == "tls"
    assert profile.cluster["worker_options"]["protocol"] == "tls"
    assert set(profile.security) == {"ca_file", "cert", "key"}
    with pytest.raises(BnpmixError, match=r"ssh\.yaml: field 'security\.ca_file': no file"):
        security_of(profile)


@pytest.mark.parametrize("name,package", [("slurm", "dask-jobqueue"),
                                          ("kubernetes", "dask-kubernetes")])
def test_optional_libraries_are_imported_lazily(name, package):
    profile = load_profile(PROFILES / f"{name}.yaml")
    try:
        cls = cluster_class(profile)
    except BnpmixError as exc:  # not installed: a clear message naming the package
        assert f"pip install {package}" in str(exc)
    else:
        assert cls.__name__ in ("SLURMCluster", "KubeCluster")


def test_profile_errors_name_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: local\ncluster: {n_workerz: 2}\n"
                   "dask-config: {distributed.comm.timeouts.connect: 5s}\n")
    with pytest.raises(BnpmixError, match="n_workerz"):
        load_profile(bad)
    bad.write_text("kind: local\ncluster: {n_workers: 2}\n")
    with pytest.raises(BnpmixError, match=r"timeouts\.connect"):
        load_profile(bad)


def test_a_call_killed_before_moving_the_pointer_is_finished_by_the_next(tmp_path, job):
    import shutil

    models = tmp_path / "models"
    assert cli("schedule", "run", str(job)).returncode == 0
    shutil.copytree(models / "v0001", models / "v0002")  # published, pointer not yet moved
    res = cli("schedule", "run", str(job))
    assert res.returncode == 0 and "no new partitions since v0002" in res.stdout
    assert (models / "latest").read_text().strip() == "v0002"


@pytest.mark.parametrize("pointer", [b"\x00\xff\xfe binary", b"v0007\n", b"../elsewhere\n"])
def test_a_broken_latest_pointer_is_an_error_naming_it_and_nothing_changes(tmp_path, job,
                                                                           pointer):
    models = tmp_path / "models"
    assert cli("schedule", "run", str(job)).returncode == 0
    (models / "latest").write_bytes(pointer)
    before = tree_digest(models)
    res = cli("schedule", "run", str(job))
    assert res.returncode == 1
    assert f"{models / 'latest'}: " in res.stderr and "Traceback" not in res.stderr
    assert tree_digest(models) == before


def test_append_replaces_debris_of_a_killed_append(tmp_path):
    assert cli("ingest", str(write_npy(tmp_path / "a.npy", 200, 0)), str(tmp_path / "c"),
               "--partition-rows", "100").returncode == 0
    (tmp_path / "c" / "part-00002.parquet").write_bytes(b"half a partition")  # not in manifest
    res = cli("ingest", str(write_npy(tmp_path / "b.npy", 100, 1)), str(tmp_path / "c"),
              "--partition-rows", "100", "--append")
    assert res.returncode == 0, res.stderr
    corpus = Corpus(tmp_path / "c")
    assert corpus.n_partitions == 3 and len(corpus.read(2)) == 100


def test_models_latest_is_usable_as_the_newest_versions_path(tmp_path, job):
    """`bnpmix info models/latest`, `show` and `bnpmix.load("models/latest")` read the version
    the pointer names (and follow it when it moves)."""
    import json

    from bnpmix import load

    models = tmp_path / "models"
    assert cli("schedule", "run", str(job)).returncode == 0
    res = cli("ingest", str(write_npy(tmp_path / "b.npy", 300, 1)), str(tmp_path / "corpus"),
              "--append")
    assert res.returncode == 0, res.stderr
    assert cli("schedule", "run", str(job)).returncode == 0
    info = cli("info", str(models / "latest"), "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["run_dir"] == str(models / "v0002")
    assert json.loads(info.stdout)["n_items"] == 1300
    shown = cli("show", str(models / "latest"))
    assert shown.returncode == 0, shown.stderr
    latest, v2 = load(models / "latest"), load(models / "v0002")
    np.testing.assert_array_equal(latest.weights_, v2.weights_)
    np.testing.assert_array_equal(latest.means_, v2.means_)
