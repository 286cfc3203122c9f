"""What a new user meets first (issue 33, section 3): usage errors exit 2 naming the flag typed,
each engine's own defaults in `fit --help`, quiet ends of piped output, the messages that say
what to do next."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import cli

# Refused before Dask is imported: then the names of Dask's modules are not in sys.modules.
NO_DASK = """
import sys
from bnpmix.pipeline.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(code, sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed")))
"""


@pytest.mark.parametrize(("flags", "message"), [
    (("--laps", "0"), "--laps: 0 is not in [1, inf)"),
    (("--wave", "0"), "--wave: 0 is not in [1, inf)"),
    (("--threads", "0"), "--threads: 0 is not in [1, inf)"),
    (("--K", "-1"), "--K: -1 is not in [1, inf)"),
    (("--algorithm", "vb", "--passes", "3"), "--passes: does not apply to --algorithm vb"),
    (("--prior", "ig"), "--prior ig: does not apply to --algorithm memo"),
])
def test_a_bad_option_is_a_usage_error_naming_the_flag_before_dask_is_imported(tmp_path, flags,
                                                                              message):
    argv = ["fit", str(tmp_path / "corpus"), "--out", str(tmp_path / "run"), *flags]
    done = cli(*argv)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


def test_an_option_of_another_engine_is_refused_before_dask_is_imported(tmp_path):
    argv = ["fit", str(tmp_path / "corpus"), "--out", str(tmp_path / "run"), "--algorithm",
            "vb", "--passes", "3"]
    out = subprocess.run([sys.executable, "-c", NO_DASK, *argv], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split(None, 1) == ["2", "[]\n"], out.stdout + out.stderr
    assert "--passes: does not apply to --algorithm vb" in out.stderr


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A memo run of three blobs."""
    from bnpmix.storage import ingest_array
    from helpers import blobs

    root = tmp_path_factory.mktemp("run")
    X, _ = blobs(450, 0)
    ingest_array(X, root / "corpus", partition_rows=150)
    done = cli("fit", root / "corpus", "--out", root / "run", "--laps", "6", "--seed", "0")
    assert done.returncode == 0, done.stderr
    return root / "run"


@pytest.mark.parametrize("command", [("info",), ("show", "--json"), ("info", "--json")])
def test_a_reader_that_leaves_early_ends_the_command_quietly(run_dir, command):
    """`bnpmix info RUN | head -1`: stdout's reader gone before anything is written (its end of
    the pipe closed at once), the command ends as `ls | head` does: exit 0, nothing on stderr."""
    p = subprocess.Popen([sys.executable, "-m", "bnpmix", command[0], str(run_dir), *command[1:]],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    p.stderr.close()
    assert p.wait(timeout=120) == 0 and err == "", err


def test_ingest_counts_partitions_in_good_english(tmp_path):
    import numpy as np

    np.save(tmp_path / "a.npy", np.ones((5, 2)))
    done = cli("ingest", tmp_path / "a.npy", tmp_path / "c")
    assert done.returncode == 0 and "into 1 partition at" in done.stdout, done.stdout
    done = cli("ingest", tmp_path / "a.npy", tmp_path / "c", "--append")
    assert done.returncode == 0, done.stderr
    assert f"appended 1 partition to {tmp_path / 'c'} (now 2 partitions)" in done.stdout


def test_the_demo_keeps_its_run_with_out_and_says_what_to_try_next(tmp_path):
    """`bnpmix demo --out DIR`: the corpus and run stay, and every command it suggests runs on
    them (report left out: it needs matplotlib, a test extra tested in tests/test_report.py)."""
    out = tmp_path / "demo"
    done = cli("demo", "--n", "800", "--laps", "4", "--out", out)
    assert done.returncode == 0, done.stderr
    suggested = [line.split("#")[0].split() for line in done.stdout.splitlines()
                 if line.startswith("  bnpmix ")]
    assert [words[1] for words in suggested] == ["info", "show", "report", "evaluate", "fit"]
    for words in suggested:
        if words[1] != "report":
            ran = cli(*words[1:])
            assert ran.returncode == 0, (words, ran.stderr)
    assert f"run directory: {out / 'run'}" in done.stdout
    again = cli("demo", "--n", "800", "--out", out)  # never into a directory with files
    assert again.returncode == 2 and "not empty" in again.stderr


def test_fit_help_gives_each_engines_own_default():
    """Every option several engines share shows, in `fit --help`, each engine's own default as
    its Config has it (sovb runs 20 laps, memo and vb 100)."""
    import dataclasses
    import re

    from bnpmix.pipeline.config import ENGINES, options

    done = cli("fit", "--help")
    text = " ".join(done.stdout.split())  # argparse's line breaks undone
    checked = 0
    for row in options():
        if len(row.engines) < 2 or row.variants or None in (row.within, row.default):
            continue
        own = {e: next(f.default for f in dataclasses.fields(ENGINES[e].Config)
                       if f.name == row.name) for e in row.engines}
        entry = re.search(re.escape(row.flag) + r" [A-Z_]+ (.*?) --[a-z]", text).group(1)
        shown = re.search(r"\(default (.*), in ", entry).group(1)
        for engine, default in own.items():
            assert (shown == str(default) if len(set(own.values())) == 1
                    else f"{default} (" in shown and engine in shown), (row.name, shown, own)
        checked += 1
    assert checked >= 2
    assert "(default 100 (memo, vb), 20 (sovb)" in text
