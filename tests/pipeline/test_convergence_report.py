"""A memo run that stops at its lap cap before its convergence test held says so: summary.json
has ``converged: false`` and ``last_laps`` (each of the last lap ends' ELBO change per item, K
and the births, merges and deletions accepted there), the console's last lines say NOT
converged with those figures, and `bnpmix info` has a ``converged  no`` line. A converged run
keeps ``last_laps`` and says nothing more. The figures survive a checkpoint: a resumed run
records the same."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.storage import ingest_array
from helpers import blobs, cli


@pytest.fixture
def corpus(tmp_path):
    X, _ = blobs(600, seed=0)
    ingest_array(X, tmp_path / "c", partition_rows=200)
    return tmp_path / "c"


def lap_ends(run_dir) -> pd.DataFrame:
    rows = pd.read_csv(run_dir / "trace.csv")
    return rows[rows["batch"] == -1]


def test_a_run_at_its_lap_cap_records_what_was_still_moving(tmp_path, corpus):
    """Four laps of memo from K = 1 cannot converge (births are still being kept): summary.json
    says converged false and its last_laps agree with the trace's lap ends (the ELBO change per
    item between consecutive lap ends, K) and count the births that raised K."""
    summary = fit(corpus, tmp_path / "r", job_config(obs="gauss", laps=4, seed=0))
    assert summary["converged"] is False
    assert summary["stopped"] == "the maximum of 4 laps"
    last = summary["last_laps"]
    assert [lap["lap"] for lap in last] == [1, 2, 3, 4]
    ends = lap_ends(tmp_path / "r")
    assert [lap["K"] for lap in last] == ends["K"].tolist()
    n = summary["n_items"]
    assert last[0]["elbo_change_per_item"] is None
    for lap, change in zip(last[1:], np.diff(ends["elbo"].to_numpy()) / n, strict=True):
        assert lap["elbo_change_per_item"] == pytest.approx(change, rel=1e-9, abs=1e-15)
    assert sum(lap["births"] for lap in last) >= 1 and last[-1]["K"] > 1
    assert all(set(lap) == {"lap", "elbo_change_per_item", "K", "births", "merges", "deletes"}
               for lap in last)


def test_the_console_and_info_say_a_run_did_not_converge(tmp_path, corpus):
    done = cli("fit", corpus, "--out", tmp_path / "r", "--obs", "gauss", "--laps", "4")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    last = summary["last_laps"][-1]
    line = next(s for s in done.stdout.splitlines() if s.startswith("NOT converged"))
    assert "stopped at the maximum of 4 laps" in line
    assert f"lap 4: ELBO change {last['elbo_change_per_item']:+.3g} per item (tol 1e-06)" in line
    Ks = " ".join(str(lap["K"]) for lap in summary["last_laps"])
    births = sum(lap["births"] for lap in summary["last_laps"])
    assert f"laps 1-4: K {Ks}, accepted births {births}, merges 0, deletes 0" in line
    shown = cli("info", tmp_path / "r")
    row = next(s for s in shown.stdout.splitlines() if s.startswith("converged"))
    assert row.split()[1] == "no:" and "lap 4: ELBO change" in row and "(tol 1e-06)" in row
    as_json = json.loads(cli("info", tmp_path / "r", "--json").stdout)
    assert as_json["converged"] is False and as_json["last_laps"] == summary["last_laps"]


def test_a_converged_run_says_nothing_more_and_keeps_its_last_laps(tmp_path, corpus):
    from bnpmix.pipeline.engines.memo import RECENT_LAPS

    done = cli("fit", corpus, "--out", tmp_path / "r", "--obs", "gauss")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["converged"] is True
    assert len(summary["last_laps"]) == min(RECENT_LAPS, summary["laps"])
    assert summary["last_laps"][-1]["lap"] == summary["laps"]
    assert "NOT converged" not in done.stdout
    assert not any(s.startswith("converged") for s in cli("info", tmp_path / "r")
                   .stdout.splitlines())


def test_the_figures_survive_a_checkpoint(tmp_path, corpus):
    """Stopped after its third lap end and resumed, the run records the last laps of the
    uninterrupted one (the engine's checkpoint keeps them)."""
    whole = fit(corpus, tmp_path / "whole", job_config(obs="gauss", laps=7, tol=0, seed=0))

    class Stop(BaseException):
        pass

    ends = []

    def stop(engine, step):
        ends.append(step.lap_end)
        if sum(ends) == 3 and step.lap_end:
            raise Stop

    with pytest.raises(Stop):
        fit(corpus, tmp_path / "r", job_config(obs="gauss", laps=7, tol=0, seed=0), on_step=stop)
    resumed = resume(tmp_path / "r")
    assert len(whole["last_laps"]) == 5
    assert resumed["last_laps"] == whole["last_laps"] and resumed["converged"] is False
