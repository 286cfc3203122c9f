"""The engine contract, checked on every engine the registry holds (the entry points of group
``bnpmix.engines``: a new engine is covered by being declared). Each engine fits one tiny corpus
(three sequences of 20 items from three well-separated 2-D Gaussians, times 0..3, one sequence
a partition; held out: 6 items a sequence at time 4) with the small options it declares
(``Engine.small_options``), and:

- fit writes a finished run whose summary, trace and assignments say what the engine declares
  (its objective under its key, the declaration, convergence as a boolean), ``bnpmix fit``
  and ``bnpmix info`` print the objective under one name, ``info`` and ``show`` describe it;
- a run interrupted half-way (after the middle one of its steps) and resumed equals the
  uninterrupted run (objective, trace, assignments, model, the engine's extra tables: exactly);
- the synchronous executor and threads give the same run (objective to 1e-9, assignments);
- the engine's state survives its checkpoint: an engine restored from it gives the same state;
- evaluate scores the held-out corpus as the loaded model scores it, on any executor;
- the saved model loads and predicts; the report builds with the engine's own names.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import bnpmix
from bnpmix.pipeline.cli import format_fit
from bnpmix.pipeline.declared import Declared
from bnpmix.pipeline.evaluate import evaluate, plan_for
from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.pipeline.inspect import format_run_info, format_show, run_info, show_clusters
from bnpmix.pipeline.runtime import checkpoint
from bnpmix.pipeline.runtime.engine import engine_class, engine_names
from bnpmix.storage import Corpus, RunDir, ingest_array
from helpers import sequence_items


def ingest(df: pd.DataFrame, path: Path) -> Path:
    ingest_array(df[["x", "y"]].to_numpy(), path, partition_rows=20,
                 columns={c: df[c].to_numpy() for c in ("label", "sequence", "time")})
    return path


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("contract")
    rng = np.random.default_rng(0)
    return SimpleNamespace(train=ingest(sequence_items(rng, 20, np.arange(4)), root / "train"),
                           held=ingest(sequence_items(rng, 6, np.array([4])), root / "held"),
                           root=root)


def options(name: str, **run: object) -> dict[str, object]:
    """The engine's small job: the small options it declares, a checkpoint after every
    visit."""
    return {"algorithm": name, "obs": "gauss", "seed": 3, "checkpoint_every": 1,
            **engine_class(name).small_options, **run}


class Interrupted(KeyboardInterrupt):
    """Stops a fit (a KeyboardInterrupt: the run stays resumable)."""


def round_trip_at(stop: int, run: Path, seen: dict) -> object:
    """An on_step hook: after step ``stop`` (and its checkpoint), restore a fresh engine of the
    same kind from the checkpoint and record both engines' states; then stop the fit."""
    steps = []

    def hook(engine, step):
        steps.append(step)
        if len(steps) < stop:
            return
        meta, arrays = engine.state()
        seen["before"] = (meta, {k: np.array(v) for k, v in arrays})
        with checkpoint.open_checkpoint(RunDir(run), engine.name) as ckpt:
            fresh = type(engine)(engine.ctx, engine.cfg)
            checkpoint.restore(fresh, ckpt)
            meta, arrays = fresh.state()
            seen["after"] = (meta, {k: np.array(v) for k, v in arrays})
            seen["trace"] = (list(engine.trace), list(fresh.trace))
            fresh.close()
        raise Interrupted
    return hook


_runs: dict[str, SimpleNamespace] = {}


@pytest.fixture
def runs(corpora, request) -> SimpleNamespace:
    """The engine's runs, made once a test process: ``threads`` (uninterrupted, three
    threads), ``sync`` (the synchronous executor) and ``resumed`` (interrupted after the middle
    one of the uninterrupted run's steps, then resumed), with the states ``seen`` around the
    interruption's checkpoint."""
    name = request.param
    if name not in _runs:
        root = corpora.root / name
        steps: list = []
        threads = fit(corpora.train, root / "threads", job_config(**options(name, threads=3)),
                      on_step=lambda engine, step: steps.append(step))
        sync = fit(corpora.train, root / "sync",
                   job_config(**options(name, scheduler="synchronous")))
        seen: dict = {"steps": len(steps)}
        with pytest.raises(Interrupted):
            fit(corpora.train, root / "resumed", job_config(**options(name, threads=3)),
                on_step=round_trip_at(max(1, len(steps) // 2), root / "resumed", seen))
        resumed = resume(root / "resumed")
        _runs[name] = SimpleNamespace(root=root, summaries={
            "threads": threads, "sync": sync, "resumed": resumed}, seen=seen)
    return _runs[name]


ENGINES = engine_names()  # every declared engine, at collection
each = pytest.mark.parametrize("runs", ENGINES, indirect=True)


def trace(run: Path) -> pd.DataFrame:
    return RunDir(run).load_trace().drop(columns="seconds")


def assignments(run: Path) -> pd.DataFrame:
    return RunDir(run).load_assignments().sort_values("item", ignore_index=True)


def assert_same_tables(a: Path, b: Path, rtol: float = 0.0) -> None:
    """The engine's extra tables (NAME.parquet) of two runs agree, timings aside."""
    tables = sorted(p.name for p in a.glob("*.parquet"))
    assert tables == sorted(p.name for p in b.glob("*.parquet"))
    for table in tables:
        x, y = (pd.read_parquet(r / table).drop(columns="seconds", errors="ignore")
                for r in (a, b))
        pd.testing.assert_frame_equal(x, y, check_exact=rtol == 0, rtol=rtol or 1e-5)


def model_arrays(run: Path) -> tuple[dict[str, np.ndarray], dict]:
    arrays, meta = RunDir(run).load_model()
    return {k: np.array(v) for k, v in arrays.items()}, meta


def test_the_registry_holds_the_built_in_engines():
    assert {"memo", "vb", "sovb", "adf", "ep", "tdpm", "ddcrp"} <= set(ENGINES)


@pytest.mark.parametrize("name", ENGINES)
def test_an_engines_small_options_are_options_its_job_takes(name):
    """Each small option the engine declares is one a job of it takes (job_config refuses any
    other by name), and the job holds the value given."""
    small = engine_class(name).small_options
    job = job_config(**options(name))
    given = {**dataclasses.asdict(job.run), **dataclasses.asdict(job.engine)}
    assert {k: given[k] for k in small} == small


def test_the_built_in_engines_with_iterations_declare_a_small_budget():
    """The engines whose defaults run for long (laps, passes, sweeps, iterations, restarts)
    say how few make a small job; adf's one pass is small already."""
    declared = {name: engine_class(name).small_options for name in
                ("memo", "vb", "sovb", "ep", "tdpm", "ddcrp")}
    assert {k for k, v in declared.items() if not v} == set()
    assert engine_class("ddcrp").small_options["restarts"] < engine_class("ddcrp").default_restarts


@each
def test_fit_writes_a_run_that_says_what_the_engine_declares(runs, corpora):
    s = runs.summaries["threads"]
    run = runs.root / "threads"
    cls = engine_class(s["algorithm"])
    declared = cls.declared
    assert json.loads(json.dumps(s)) == RunDir(run).load_summary()
    assert s["objective"] == declared.objective and math.isfinite(s[declared.objective])
    assert s[f"{declared.objective}_per_item"] == pytest.approx(s[declared.objective] / 60,
                                                                rel=1e-12)
    assert Declared.of(s) == declared and isinstance(s["converged"], bool)
    assert s["n_items"] == 60 and len(s["weights"]) == s["K"] == len(s["sizes"])
    assert sum(s["sizes"]) == 60
    t = RunDir(run).load_trace()
    assert {"lap", "batch", "K", declared.objective} <= set(t.columns) and len(t)
    a = assignments(run)
    assert a["item"].tolist() == list(range(60))
    assert a["cluster"].between(0, s["K"] - 1).all()
    assert not (run / "checkpoint.npz").exists()
    # fit's and info's lines name the objective alike; info and show say what the weights are
    label = declared.objective_label
    assert f"{label} per item" in format_fit(s, run)
    info = run_info(run)
    assert f"({label}; per item" in format_run_info(info)
    shown = show_clusters(run)
    assert info["weights_are"] == shown["weights_are"] == declared.weights_are
    assert len(shown["clusters"]) == shown["shown"] and format_show(shown)


@each
def test_a_resumed_run_equals_the_uninterrupted_one(runs):
    a, b = runs.root / "threads", runs.root / "resumed"
    key = runs.summaries["threads"]["objective"]
    assert runs.summaries["resumed"][key] == runs.summaries["threads"][key]
    pd.testing.assert_frame_equal(trace(a), trace(b))
    pd.testing.assert_frame_equal(assignments(a), assignments(b))
    (x, meta_a), (y, meta_b) = model_arrays(a), model_arrays(b)
    assert meta_a == meta_b and x.keys() == y.keys()
    for k in x:
        np.testing.assert_array_equal(x[k], y[k], err_msg=k)
    assert_same_tables(a, b)


@each
def test_the_executor_does_not_change_the_run(runs):
    a, b = runs.summaries["threads"], runs.summaries["sync"]
    key = a["objective"]
    assert b[key] == pytest.approx(a[key], rel=1e-9, abs=1e-9)
    assert a["K"] == b["K"] and a["executor"] != b["executor"]
    np.testing.assert_allclose(b["weights"], a["weights"], rtol=1e-9, atol=1e-12)
    pd.testing.assert_frame_equal(assignments(runs.root / "threads"),
                                  assignments(runs.root / "sync"))
    assert_same_tables(runs.root / "threads", runs.root / "sync", rtol=1e-9)


@each
def test_a_state_restored_from_its_checkpoint_is_the_same_state(runs):
    (meta, arrays), (meta2, arrays2) = runs.seen["before"], runs.seen["after"]
    assert meta2 == meta
    assert arrays2.keys() == arrays.keys()
    for k in arrays:
        np.testing.assert_array_equal(arrays2[k], arrays[k], err_msg=k)
    pd.testing.assert_frame_equal(*map(pd.DataFrame, runs.seen["trace"]))


@each
def test_evaluate_scores_held_out_items_as_the_loaded_model_does(runs, corpora):
    run = runs.root / "threads"
    out = evaluate(run, corpora.held, label_column="label")
    same = evaluate(run, corpora.held, label_column="label", scheduler="synchronous")
    assert same == out
    model = bnpmix.load(run)
    assert out["n_items"] == 18 and out["K"] == model.n_components_
    batch = Corpus(corpora.held).read_all()
    plan = plan_for(model.model, RunDir(run).load_summary()["config"], Corpus(corpora.held))
    by = {}
    if plan.by_sequence:
        by["sequence"] = (batch.columns[plan.sequence_column] if plan.sequence_column
                          else plan.sequence)
        if plan.position_column:
            by["positions"] = batch.columns[plan.position_column]
    logp = model.score_samples(batch.X, **by)
    assert np.isfinite(logp).all()
    assert out["heldout_loglik_per_item"] == pytest.approx(logp.mean(), rel=1e-12)
    assert -1 <= out["ari"] <= 1 and 0 <= out["accuracy"] <= 1


@each
def test_the_saved_model_loads_and_predicts(runs, corpora):
    run = runs.root / "threads"
    s = runs.summaries["threads"]
    model = bnpmix.load(run)
    assert model.n_components_ == s["K"]
    np.testing.assert_allclose(model.weights_, s["weights"], rtol=1e-12)
    assert model.weight_new_ == pytest.approx(s["weight_new"], rel=1e-12)
    X = Corpus(corpora.held).read_all().X
    P = model.predict_proba(X)
    assert P.shape == (18, s["K"]) and np.all(P >= 0)
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-9)
    assert model.predict(X).shape == (18,)


@each
def test_the_report_builds_with_the_engines_names(runs):
    pytest.importorskip("matplotlib", reason="the report needs matplotlib (the plot extra)")
    from bnpmix.pipeline.report import report

    run = runs.root / "threads"
    declared = engine_class(runs.summaries["threads"]["algorithm"]).declared
    index = Path(report(run, runs.root / "report"))
    html = index.read_text()
    assert f"{declared.objective_label} per item" in html
    assert declared.weight_label in html
    assert html.count("data:image/png;base64,") >= 2  # the trace and the weights at least
    assert all(f'id="{panel}"' in html for panel in declared.panels)  # its panels: their anchors
