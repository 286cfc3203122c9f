"""Every script in benchmarks/ still imports what it uses and parses its arguments: each answers
``--help`` with exit code 0 in a fresh interpreter (the benchmarks themselves take minutes to
hours and run by hand; a stale import once broke gauss_full.py unnoticed). Helper modules
without a command line are imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if "ArgumentParser" in p.read_text())
HELPERS = sorted(p for p in BENCHMARKS.glob("*.py") if p not in SCRIPTS)


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 20 and {p.name for p in HELPERS} == {"_common.py", "nrm_data.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_a_benchmark_answers_help(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                          cwd=BENCHMARKS, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout


@pytest.mark.parametrize("helper", HELPERS, ids=[p.stem for p in HELPERS])
def test_a_benchmark_helper_imports(helper):
    code = f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); import {helper.stem}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_benchmark_leaves_no_work_directory(tmp_path):
    """The scripts' corpora and runs go to a directory of their own, removed when they end."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "gauss_full.py"), "--n", "2000",
                           "--partitions", "2", "--laps", "2"], capture_output=True, text=True,
                          cwd=BENCHMARKS, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "ARI" in done.stdout and list(tmp_path.iterdir()) == []


CLUSTER_CPU = """
import json, sys, time
sys.path.insert(0, {benchmarks!r})
from distributed import Client
from _common import LocalDaskCluster

def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return seconds

cluster = LocalDaskCluster(1, 2)
try:
    with Client(cluster.address) as client:
        threads = sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())
        before = cluster.cpu_seconds()
        client.submit(spin, 0.5, pure=False).result()
        after = cluster.cpu_seconds()
finally:
    cluster.close()
print(json.dumps({{"threads": threads, "names": sorted(after),
                  "used": {{k: after[k] - before[k] for k in after}}}}))
"""


def test_the_benchmark_cluster_counts_each_process_cpu():
    """scaling.py's CPU per visit comes from LocalDaskCluster.cpu_seconds: a worker that spins
    for 0.5 s of CPU shows at least that much more, in the worker process its nanny started."""
    done = subprocess.run([sys.executable, "-c", CLUSTER_CPU.format(benchmarks=str(BENCHMARKS))],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["threads"] == 2 and out["names"] == ["scheduler", "worker 0"]
    assert 0.5 <= out["used"]["worker 0"] < 5.0 and out["used"]["scheduler"] >= 0.0
