"""fit's notes (a takeover, the executor, memory) go to its logger: a program calling ``fit``
sees them only as it configures logging, and the command line prints them as it always did,
``bnpmix: TEXT`` and ``bnpmix: warning: TEXT`` on stderr (pipeline/console.py)."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from bnpmix.pipeline import fit as fitting
from bnpmix.storage import ingest_array
from helpers import cli

# a summary budget no machine has: fit says what it may need and warns that it is too much
SHORT = {"obs": "gauss", "laps": 1, "K": 2, "summary_bytes": 10 ** 15}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("console") / "c"
    ingest_array(np.random.default_rng(0).normal(size=(600, 3)), path, partition_rows=300)
    return path


def test_fit_logs_its_notes_and_prints_nothing(corpus, tmp_path, caplog, capsys):
    caplog.set_level(logging.INFO, logger="bnpmix.pipeline.fit")
    fitting.fit(corpus, tmp_path / "run", fitting.job_config(**SHORT))
    said = [(r.name, r.levelno, r.getMessage().split(";")[0]) for r in caplog.records]
    assert ("bnpmix.pipeline.fit", logging.WARNING,
            "that is more than this process may use") in said
    assert any(name == "bnpmix.pipeline.fit" and level == logging.INFO
               and text.startswith("memory: up to") for name, level, text in said), said
    assert "memory" not in capsys.readouterr().err


def test_the_command_line_prints_fits_notes_as_before(corpus, tmp_path):
    args = [f"--{k.replace('_', '-')}={v}" for k, v in SHORT.items()]
    done = cli("fit", corpus, "--out", tmp_path / "run", *args)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith("bnpmix: memory: up to") for line in lines), lines
    assert ("bnpmix: warning: that is more than this process may use; lower the options named, "
            "or ingest smaller partitions (ingest --partition-rows)") in lines
    log = logging.getLogger("bnpmix.pipeline.fit")
    assert (log.handlers, log.level, log.propagate) == ([], logging.NOTSET, True)  # as before


def test_the_obs_auto_race_logs_its_rounds_and_the_command_line_prints_them(
        corpus, tmp_path, caplog, capsys):
    """--obs auto's progress (each round's bounds, who drops out, the choice) goes to its
    logger: an estimator fit prints nothing of it; ``bnpmix fit`` shows it as ``bnpmix: ``
    lines."""
    caplog.set_level(logging.INFO, logger="bnpmix.pipeline.auto")
    fitting.fit(corpus, tmp_path / "quiet", fitting.job_config(obs="auto", laps=3))
    said = [r.getMessage() for r in caplog.records if r.name == "bnpmix.pipeline.auto"]
    assert said[0].startswith("--obs auto: lap 1: gauss ") and "--obs auto chose" in said[-1]
    assert "--obs auto" not in capsys.readouterr().err
    done = cli("fit", corpus, "--out", tmp_path / "shown", "--obs", "auto", "--laps", "3")
    assert done.returncode == 0, done.stderr
    shown = [line for line in done.stderr.splitlines() if "--obs auto" in line]

    def untimed(text: str) -> str:  # the same race, but not in the same seconds
        return re.sub(r"\(\d+\.\d s\)", "(s)", text)

    assert [untimed(line) for line in shown] == [f"bnpmix: {untimed(text)}" for text in said]
