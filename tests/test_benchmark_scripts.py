"""Every script in benchmarks/ still imports what it uses and parses its arguments: each answers
``--help`` with exit code 0 in a fresh interpreter (the benchmarks themselves take minutes to
hours and run by hand; a stale import once broke gauss_full.py unnoticed). Helper modules
without a command line are imported."""

from __future__ import annotations

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
