"""Run directories: atomic files and a validated summary."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from bnpmix.storage import BnpmixError, RunDir
from bnpmix.storage.atomic import write_json_atomic

SUMMARY = {"algorithm": "memo", "K": 3, "elbo": -10.5, "elbo_per_item": -0.1, "laps": 2,
           "n_items": 105, "wall_seconds": 0.5, "config": {"seed": 0}}


def test_summary_round_trip_and_validation(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.write_summary(SUMMARY)
    assert run.load_summary() == SUMMARY
    for key in SUMMARY:
        bad = {k: v for k, v in SUMMARY.items() if k != key}
        with pytest.raises(BnpmixError, match=key):
            run.write_summary(bad)
    with pytest.raises(BnpmixError, match="'K' has the wrong type"):
        run.write_summary({**SUMMARY, "K": "three"})
    assert run.load_summary() == SUMMARY  # failed writes left the old file intact


COMPONENTS = {"weights": [0.5, 0.3, 0.1], "component_ids": [4, 0, 9], "sizes": [50, 30, 0],
              "weight_new": 0.1}


@pytest.mark.parametrize(("key", "bad", "message"), [
    ("weights", [0.5, 0.3], "'weights' must be a list of K = 3"),
    ("component_ids", [4, 0, 9.5], "'component_ids' has an invalid entry 2"),
    ("sizes", [50, -1, 0], "'sizes' has an invalid entry 1"),
    ("sizes", None, "'sizes' must be a list"),
    ("weight_new", "some", "'weight_new' is missing or not a number")])
def test_the_recorded_components_are_validated(tmp_path, key, bad, message):
    """summary.json's weights, component_ids, sizes and weight_new (what `bnpmix info` reads
    in place of the model) must agree with K; a bad file is refused by field, not by a crash."""
    run = RunDir(tmp_path / "run").create()
    run.write_summary({**SUMMARY, **COMPONENTS})
    assert run.load_summary()["sizes"] == [50, 30, 0]
    with pytest.raises(BnpmixError, match=message):
        run.write_summary({**SUMMARY, **COMPONENTS, key: bad})
    write_json_atomic(run.summary_path, {**SUMMARY, **COMPONENTS, key: bad})
    with pytest.raises(BnpmixError, match=message):
        run.load_summary()


PRIOR = {"learn": True, "initial": {"kappa0": 0.01, "nu0": 4.0},
         "final": {"kappa0": 0.3, "nu0": 5.5}}


@pytest.mark.parametrize(("bad", "message"), [
    ({**PRIOR, "learn": "yes"}, "boolean 'learn'"),
    ({**PRIOR, "final": {"kappa0": "x"}}, "'final', an object of numbers"),
    ({"learn": False, "final": {}}, "'initial', an object of numbers"),
    ([1, 2], "boolean 'learn'")])
def test_the_recorded_prior_is_validated(tmp_path, bad, message):
    run = RunDir(tmp_path / "run").create()
    run.write_summary({**SUMMARY, "prior": PRIOR})
    assert run.load_summary()["prior"] == PRIOR
    with pytest.raises(BnpmixError, match=message):
        run.write_summary({**SUMMARY, "prior": bad})


def test_load_summary_rejects_bad_files(tmp_path):
    run = RunDir(tmp_path)
    with pytest.raises(BnpmixError, match="not a run directory"):
        run.load_summary()
    run.summary_path.write_text("{ not json")
    with pytest.raises(BnpmixError, match="unreadable"):
        run.load_summary()


def test_trace_model_assignments(tmp_path):
    run = RunDir(tmp_path).create()
    rows = [{"lap": 1, "batch": b, "elbo": -1.0 / 3 - b, "K": 2, "seconds": 0.1} for b in range(3)]
    run.write_trace(rows)
    trace = run.load_trace()
    assert list(trace.columns) == ["lap", "batch", "elbo", "K", "seconds"]
    assert trace["elbo"].tolist() == [r["elbo"] for r in rows]  # full precision
    run.write_model({"mean": np.eye(2)}, {"obs": "gauss"})
    arrays, meta = run.load_model()
    np.testing.assert_array_equal(arrays["mean"], np.eye(2))
    assert meta == {"obs": "gauss"}
    run.write_assignments(0, np.arange(2), np.array([0, 1]), np.array([0.9, 0.6]))
    run.write_assignments(1, np.arange(2, 3), np.array([1]), np.array([1.0]))
    frame = run.load_assignments()
    assert frame["item"].tolist() == [0, 1, 2]
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob("assignments/.*"))


def test_atomic_write_failure_keeps_old_file(tmp_path, monkeypatch):
    target = tmp_path / "x.json"
    write_json_atomic(target, {"v": 1})

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("bnpmix.storage.atomic.os.replace", boom)
    with pytest.raises(BnpmixError, match=r"x\.json: cannot write \(disk full\)"):
        write_json_atomic(target, {"v": 2})
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_a_claim_is_never_seen_without_its_holder(tmp_path, monkeypatch):
    """A fit that dies while writing its claim leaves no ``.claim`` (an empty one could never be
    judged stale, and the directory would be refused for good), and the temporary file a
    killed fit leaves does not stop the next fit from claiming the directory."""
    run = RunDir(tmp_path / "run")
    run.path.mkdir()

    def die(*args, **kwargs):
        raise KeyboardInterrupt  # the process stopped while the claim was being written

    monkeypatch.setattr("bnpmix.storage.claim.json.dumps", die)
    with pytest.raises(KeyboardInterrupt):
        run.claim()
    assert not run.claim_path.exists()
    monkeypatch.undo()
    dead = 2**22 + 12345  # above Linux's largest PID: no such process
    (run.path / f".claim.{dead}.tmp").write_text("{")
    claimed = run.claim()
    assert json.loads(run.claim_path.read_text())["pid"] == os.getpid()
    assert sorted(p.name for p in run.path.iterdir()) == [".claim"]
    run.release(claimed.created)
