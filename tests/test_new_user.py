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
