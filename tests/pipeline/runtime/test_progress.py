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


def test_a_sampler_says_its_pace_and_the_time_left(tmp_path):
    """tdpm's status: sweeps a second since the process took the run up, and the time left at
    that pace (here 30 sweeps at a few hundred a second: well under a minute)."""
    import re

    from bnpmix.pipeline.runtime.progress import format_seconds

    assert [format_seconds(s) for s in (42.4, 425, 12000)] == ["42 s", "7 min 5 s",
                                                               "3 h 20 min"]
    rng = np.random.default_rng(0)
    ingest_array(rng.normal(size=(60, 2)), tmp_path / "c", columns={"time": np.repeat(
        np.arange(3), 20)})
    pipe = io.StringIO()
    progress = Progress(pipe, plain_interval=0.0)
    fit(tmp_path / "c", tmp_path / "run", job_config(algorithm="tdpm", sweeps=30, burn_in=10,
                                                     thin=2),
        progress=progress, on_step=progress.step)
    lines = pipe.getvalue().splitlines()
    assert len(lines) == 30
    pace = [re.search(r"  ([\d.e+]+) sweeps/s, (\d+) s left$", line) for line in lines]
    assert all(pace) and float(pace[0].group(1)) > 0
    assert [int(p.group(2)) for p in pace][-1] == 0 and int(pace[0].group(2)) < 60
