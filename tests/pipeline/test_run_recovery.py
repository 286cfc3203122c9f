"""Every run directory a user can recover from (issue 33, section 2): real `bnpmix fit`
processes stopped by SIGKILL, SIGINT or SIGTERM at a point the test controls (its claim or
job.json has appeared), then `bnpmix resume` or `bnpmix fit` into the same --out.

Before, job.json was written only once the engine had started, so a fit killed earlier left a
bare ``.claim`` that `resume` could not read and `fit` refused for ever; Ctrl-C did not say how
to continue."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bnpmix.storage import ingest_array
from helpers import ENV, cli

JOB = ("--K", "1", "--laps", "3", "--seed", "2", "--scheduler", "synchronous")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Four clusters, 12,000 items in 12 partitions: a first lap long enough to stop a fit
    inside it."""
    path = tmp_path_factory.mktemp("recovery") / "corpus"
    rng = np.random.default_rng(0)
    X = rng.normal(0, 5, (4, 5))[rng.integers(0, 4, 12000)] + rng.normal(size=(12000, 5))
    ingest_array(X, path, partition_rows=1000)
    return path


def start_fit(corpus: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bnpmix", "fit", str(corpus), "--out",
                             str(out), *JOB, *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)


def stop_when(proc: subprocess.Popen, path: Path, sig: signal.Signals) -> tuple[int, str]:
    """Send ``sig`` to the process as soon as ``path`` exists; its exit code and stderr."""
    deadline = time.time() + 120
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline
        time.sleep(0.002)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def claim_of(run: Path) -> dict:
    return json.loads((run / ".claim").read_text())


def assert_same_model(a: Path, b: Path) -> None:
    sa = json.loads((a / "summary.json").read_text())
    sb = json.loads((b / "summary.json").read_text())
    assert sa["K"] == sb["K"] and sa["laps"] == sb["laps"]
    np.testing.assert_allclose(sa["elbo"], sb["elbo"], rtol=1e-12)


@pytest.mark.slow  # a real process killed and resumed
def test_a_fit_killed_before_its_first_checkpoint_resumes_from_the_beginning(tmp_path, corpus):
    """SIGKILL as soon as job.json exists: job.json was written with the claim, which names
    this host and the dead process; `resume` says it starts from the beginning and gives the
    uninterrupted run's model."""
    run = tmp_path / "run"
    proc = start_fit(corpus, run)
    code, _ = stop_when(proc, run / "job.json", signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert not (run / "checkpoint.npz").exists(), "stopped too late: a checkpoint was written"
    assert claim_of(run) == {"host": socket.gethostname(), "pid": proc.pid}
    res = cli("resume", run)
    assert res.returncode == 0, res.stderr
    assert "no checkpoint" in res.stderr and "starting it from the beginning" in res.stderr
    assert not (run / ".claim").exists()  # a finished run holds no claim
    ref = cli("fit", corpus, "--out", tmp_path / "ref", *JOB)
    assert ref.returncode == 0, ref.stderr
    assert_same_model(tmp_path / "ref", run)


@pytest.mark.slow  # a real process killed and resumed
def test_a_claim_whose_process_is_gone_is_taken_over_by_fit(tmp_path, corpus):
    """SIGKILL as soon as the claim exists: a fit into the same --out takes the directory over
    and says so. A claim of another host (which cannot be checked), or a dead fit's
    directory that holds a checkpoint (a run to resume), is not taken over."""
    run = tmp_path / "run"
    proc = start_fit(corpus, run)
    stop_when(proc, run / ".claim", signal.SIGKILL)
    assert not (run / "checkpoint.npz").exists(), "stopped too late: a checkpoint was written"
    again = cli("fit", corpus, "--out", run, *JOB)
    assert again.returncode == 0, again.stderr
    assert f"taking it over from process {proc.pid}" in again.stderr, again.stderr
    assert (run / "summary.json").exists() and not (run / ".claim").exists()

    bare = tmp_path / "bare"  # killed between its claim and job.json: nothing to resume
    bare.mkdir()
    (bare / ".claim").write_text(json.dumps({"host": socket.gethostname(), "pid": proc.pid}))
    res = cli("resume", bare)
    assert res.returncode == 1 and f"--out {bare}` starts again" in res.stderr, res.stderr
    res = cli("fit", corpus, "--out", bare, *JOB)
    assert res.returncode == 0 and "taking it over" in res.stderr, res.stderr

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / ".claim").write_text(json.dumps({"host": "elsewhere.invalid", "pid": proc.pid}))
    (foreign / "job.json").write_text("{}")
    res = cli("fit", corpus, "--out", foreign, *JOB)
    assert res.returncode == 1 and "elsewhere.invalid" in res.stderr, res.stderr
    assert (foreign / "job.json").read_text() == "{}"  # untouched

    (foreign / ".claim").write_text(json.dumps({"host": socket.gethostname(), "pid": proc.pid}))
    (foreign / "checkpoint.npz").write_bytes(b"")
    res = cli("fit", corpus, "--out", foreign, *JOB)
    assert res.returncode == 1 and f"bnpmix resume {foreign}" in res.stderr, res.stderr


@pytest.mark.slow  # a real process killed and resumed
def test_ctrl_c_says_how_to_continue_and_resume_finishes_the_run(tmp_path, corpus):
    """SIGINT (Ctrl-C) once job.json exists: exit 130, stderr names `bnpmix resume RUN`, which
    then gives the uninterrupted run's model."""
    run = tmp_path / "run"
    code, err = stop_when(start_fit(corpus, run), run / "job.json", signal.SIGINT)
    assert code == 130, err
    assert f"bnpmix resume {run}" in err and "Traceback" not in err, err
    res = cli("resume", run)
    assert res.returncode == 0, res.stderr
    ref = cli("fit", corpus, "--out", tmp_path / "ref", *JOB)
    assert ref.returncode == 0, ref.stderr
    assert_same_model(tmp_path / "ref", run)


@pytest.mark.slow  # a real process killed and resumed
def test_sigterm_says_how_to_continue_and_fit_takes_the_directory_over(tmp_path, corpus):
    """SIGTERM once job.json exists: exit 143 naming `bnpmix resume RUN`; the process is gone,
    so `bnpmix fit` into the same --out (before any checkpoint) takes it over."""
    run = tmp_path / "run"
    proc = start_fit(corpus, run)
    code, err = stop_when(proc, run / "job.json", signal.SIGTERM)
    assert code == 143, err
    assert f"bnpmix resume {run}" in err, err
    assert not (run / "checkpoint.npz").exists(), "stopped too late: a checkpoint was written"
    again = cli("fit", corpus, "--out", run, *JOB)
    assert again.returncode == 0, again.stderr
    assert f"taking it over from process {proc.pid}" in again.stderr, again.stderr


def test_a_live_fit_keeps_its_directory_from_fit_and_resume(tmp_path, corpus):
    """While a fit runs, another fit into its --out and a resume of it are both refused, naming
    the process (before, `resume` ran a second driver in the same directory)."""
    run = tmp_path / "run"
    proc = start_fit(corpus, run, "--laps", "200", "--tol", "0")
    try:
        deadline = time.time() + 120
        while not (run / "job.json").exists():
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(0.01)
        other = cli("fit", corpus, "--out", run, *JOB)
        assert other.returncode == 1 and f"process {proc.pid}" in other.stderr, other.stderr
        resumed = cli("resume", run)
        assert resumed.returncode == 1, resumed.stderr
        assert f"process {proc.pid}" in resumed.stderr, resumed.stderr
        assert proc.poll() is None  # still running, its directory untouched by either
    finally:
        proc.kill()
        proc.communicate()
    assert claim_of(run)["pid"] == proc.pid
