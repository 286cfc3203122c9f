"""The progress line: shown on a terminal, silent otherwise."""

from __future__ import annotations

import io

import numpy as np

from bnpmix.pipeline.fit import fit, job_config
from bnpmix.pipeline.runtime.progress import Progress
from bnpmix.storage import ingest_array


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_on_a_terminal_and_silence_elsewhere(tmp_path):
    X = np.random.default_rng(0).normal(size=(400, 2))
    ingest_array(X, tmp_path / "c", partition_rows=100)
    tty, pipe = Terminal(), io.StringIO()
    for name, stream in (("tty", tty), ("pipe", pipe)):
        progress = Progress(stream, interval=0.0)
        fit(tmp_path / "c", tmp_path / name, job_config(obs="gauss", K=2, laps=2),
            progress=progress)
        progress.close()
    assert pipe.getvalue() == ""
    shown = tty.getvalue()
    assert "lap 2/2" in shown and "batch 4/4" in shown and "K=2" in shown and "ELBO=" in shown


def test_a_plain_line_per_lap_where_stderr_is_not_a_terminal(tmp_path):
    """`bnpmix fit ... 2> log`: one plain line per lap (no carriage returns or escape codes),
    the last lap's as the run ends."""
    import subprocess
    import sys

    X = np.random.default_rng(0).normal(size=(400, 2))
    ingest_array(X, tmp_path / "c", partition_rows=100)
    done = subprocess.run([sys.executable, "-m", "bnpmix", "fit", str(tmp_path / "c"), "--out",
                           str(tmp_path / "run"), "--algorithm", "vb", "--K", "2", "--laps", "3",
                           "--tol", "0"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "\r" not in done.stderr and "\x1b" not in done.stderr
    assert [line.split()[:2] for line in lines if line.startswith("lap ")][-1] == ["lap", "3/3"]
    pipe = io.StringIO()  # every lap when they come faster than the interval allows
    progress = Progress(pipe, plain_interval=0.0)
    fit(tmp_path / "c", tmp_path / "memo", job_config(obs="gauss", K=2, laps=3, tol=0,
                                                      moves=""),
        progress=progress, on_step=progress.step)  # (--obs auto's race has its own lines)
    assert [line.split()[:2] for line in pipe.getvalue().splitlines()] == [
        ["lap", "1/3"], ["lap", "2/3"], ["lap", "3/3"]]
