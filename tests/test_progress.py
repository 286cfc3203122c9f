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
        fit(tmp_path / "c", tmp_path / name, job_config(K=2, laps=2), progress=progress)
        progress.close()
    assert pipe.getvalue() == ""
    shown = tty.getvalue()
    assert "lap 2/2" in shown and "batch 4/4" in shown and "K=2" in shown and "ELBO=" in shown
