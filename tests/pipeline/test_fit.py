"""fit() and evaluate() end to end: warm starts, the sovb and vb engines, held-out density."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import quad

from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array


def clusters(tmp_path, n=600, D=2, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 6, (3, D))
    y = rng.integers(0, 3, n)
    X = centers[y] + rng.normal(size=(n, D))
    ingest_array(X, tmp_path / "c", partition_rows=n // 6, columns={"label": y})
    return tmp_path / "c"


def test_warm_start_continues_from_the_saved_model(tmp_path):
    corpus = clusters(tmp_path)
    first = fit(corpus, tmp_path / "a", job_config(K=1, laps=6, moves=("birth", "merge")))
    assert first["K"] >= 3
    second = fit(corpus, tmp_path / "b", job_config(laps=2, warm_start=str(tmp_path / "a")))
    trace = pd.read_csv(tmp_path / "b" / "trace.csv")
    visits = trace[trace["lap"] <= 1]  # its first lap: the saved components, not K = 1
    assert (visits["K"] == first["K"]).all()
    # the saved components are already fitted: the warm run starts at the first run's ELBO
    assert second["elbo"] >= first["elbo"] - 1e-6 * abs(first["elbo"])
    saved, warm = load(tmp_path / "a"), load(tmp_path / "b")
    # the saved ids, less any merged away since (the learned prior moves on), and births'
    # new ids after them
    saved_ids, warm_ids = set(saved.component_ids_.tolist()), set(warm.component_ids_.tolist())
    assert warm_ids & saved_ids and all(u > max(saved_ids) for u in warm_ids - saved_ids)


def test_vb_and_sovb_write_one_trace_row_per_lap(tmp_path):
    corpus = clusters(tmp_path)
    for algorithm in ("vb", "sovb"):
        s = fit(corpus, tmp_path / algorithm,
                job_config(algorithm=algorithm, obs="gauss", K=4, laps=5))
        trace = pd.read_csv(tmp_path / algorithm / "trace.csv")
        assert len(trace) == 5 and trace["lap"].tolist() == [1, 2, 3, 4, 5]
        assert np.isfinite(trace["elbo"]).all() and s["K"] == 4
    vb = pd.read_csv(tmp_path / "vb" / "trace.csv")["elbo"].to_numpy()
    assert (np.diff(vb) >= -1e-9 * np.abs(vb[1:])).all()  # coordinate ascent never goes down


def test_heldout_predictive_is_a_density(tmp_path):
    rng = np.random.default_rng(2)
    X = np.concatenate([rng.normal(-3, 1, (300, 1)), rng.normal(4, 0.5, (300, 1))])
    ingest_array(X, tmp_path / "c", partition_rows=100)
    fit(tmp_path / "c", tmp_path / "run",
        job_config(obs="gauss", K=1, laps=5, moves=("birth", "merge")))
    model = load(tmp_path / "run")
    density = lambda x: float(np.exp(model.score_samples(np.array([[x]]))[0]))  # noqa: E731
    cuts = [-np.inf, *np.linspace(-12, 12, 49), np.inf]  # narrow components: short pieces
    total = sum(quad(density, a, b, limit=200)[0] for a, b in itertools.pairwise(cuts))
    assert abs(total - 1.0) < 1e-6


def test_warm_start_keeps_components_absent_from_the_first_batches(tmp_path):
    """One cluster lives only in the last partition: a warm start must not lose it to the
    partial S^0 of its first lap (suppl. Sec. 2.3)."""
    rng = np.random.default_rng(4)
    X = np.concatenate([rng.normal(-5, 1, (300, 2)), rng.normal(5, 1, (300, 2)),
                        rng.normal((0, 9), 1, (200, 2))])
    ingest_array(X, tmp_path / "c", partition_rows=200)  # partition 3 = the third cluster
    first = fit(tmp_path / "c", tmp_path / "vb", job_config(algorithm="vb", K=3, laps=30))
    cfg = job_config(laps=1, warm_start=str(tmp_path / "vb"))
    warm = fit(tmp_path / "c", tmp_path / "warm", cfg)
    np.testing.assert_allclose(sorted(warm["weights"]), sorted(first["weights"]), atol=0.01)
    assert warm["elbo"] >= first["elbo"] - 1e-6 * abs(first["elbo"])


@pytest.mark.usefixtures("lap_checkpoints")
def test_resume_refuses_a_corpus_that_changed(tmp_path):
    from bnpmix.pipeline.fit import resume
    from bnpmix.storage import BnpmixError
    from bnpmix.storage.append import append_corpus

    corpus = clusters(tmp_path)
    with pytest.raises(KeyboardInterrupt):  # stop the run after its first lap's checkpoint
        fit(corpus, tmp_path / "run", job_config(obs="gauss", K=2, laps=4),
            on_step=lambda e, s: (_ for _ in ()).throw(KeyboardInterrupt) if s.lap_end else 0)
    with np.load(tmp_path / "run" / "checkpoint.npz", allow_pickle=False) as z:
        assert "model/uids" in z.files
    ingest_array(np.zeros((50, 2)), tmp_path / "more", partition_rows=50,
                 columns={"label": np.zeros(50, dtype=int)})
    append_corpus(corpus, tmp_path / "more")
    with pytest.raises(BnpmixError, match="changed since"):
        resume(tmp_path / "run")


def test_fit_refuses_an_output_directory_that_is_not_its_own(tmp_path):
    from bnpmix.storage import BnpmixError

    corpus = clusters(tmp_path)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(BnpmixError, match="not empty"):
        fit(corpus, tmp_path / "busy", job_config(obs="gauss", laps=1))
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["notes.txt"]
    fit(corpus, tmp_path / "run", job_config(obs="gauss", laps=1))
    with pytest.raises(BnpmixError, match="bnpmix resume"):
        fit(corpus, tmp_path / "run", job_config(obs="gauss", laps=1))
    (tmp_path / "a-file").write_text("mine")
    with pytest.raises(BnpmixError, match=r"a-file: the output exists and is not a directory"):
        fit(corpus, tmp_path / "a-file", job_config(obs="gauss", laps=1))
    assert (tmp_path / "a-file").read_text() == "mine"


def test_load_scores_like_evaluate_and_the_mixture_density(tmp_path):
    """A memo run's loaded model: evaluate's figure, score, predict_proba and the mixture's own
    density at the saved parameters by hand (every engine's evaluate against its loaded model:
    tests/pipeline/runtime/test_engine_contract.py)."""
    import bnpmix
    from bnpmix.pipeline.evaluate import evaluate
    from bnpmix.storage import Corpus

    corpus = clusters(tmp_path, n=900, D=3)
    fit(corpus, tmp_path / "run",
        job_config(algorithm="memo", obs="gauss", K=2, laps=4, moves="birth,merge"))
    rng = np.random.default_rng(9)
    y = rng.integers(0, 3, 300)
    Xh = rng.normal(0, 6, (3, 3))[y] + rng.normal(size=(300, 3))
    ingest_array(Xh, tmp_path / "heldout", partition_rows=70, columns={"label": y})
    scores = evaluate(tmp_path / "run", tmp_path / "heldout", label_column="label")
    model = bnpmix.load(tmp_path / "run")
    X = Corpus(tmp_path / "heldout").read_all().X
    logp = model.score_samples(X)
    assert scores["heldout_loglik_per_item"] == pytest.approx(logp.mean(), rel=1e-12)
    assert model.score(X) == pytest.approx(logp.mean(), rel=1e-12)
    summary = pd.read_json(tmp_path / "run" / "summary.json", typ="series")
    np.testing.assert_allclose(model.weights_, summary["weights"], rtol=1e-12)
    P = model.predict_proba(X)
    assert P.shape == (300, model.n_components_)
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(model.predict(X), P.argmax(1))
    # the mixture's own density at the saved parameters, by hand (with the new components' mass)
    m = model.model
    by_hand = np.log(sum(w * np.exp(m.obs.predictive_logpdf(X, m.post)[:, k])  # k: model row
                         for k, w in zip(model.order_, model.weights_, strict=True))
                     + model.weight_new_ * np.exp(
                         m.obs.predictive_logpdf(X, m.obs.prior_post(1))[:, 0]))
    np.testing.assert_allclose(logp, by_hand, rtol=1e-10)
    assert model.means_.shape == (model.n_components_, 3)
    with pytest.raises(ValueError, match="does not fit"):
        model.score_samples(X[:, :2])


def blobs(tmp_path, n=3000, rows=300, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    X = np.array([[0, 0], [8, 0], [0, 8], [8, 8]], float)[y] + rng.normal(size=(n, 2))
    ingest_array(X, tmp_path / "blobs", partition_rows=rows, columns={"label": y})
    return tmp_path / "blobs"


def test_plain_defaults_find_four_blobs_and_stop_on_convergence(tmp_path):
    from bnpmix.pipeline.config import JobConfig

    summary = fit(blobs(tmp_path), tmp_path / "run", JobConfig())
    assert summary["K"] == 4
    assert summary["config"]["engine"]["moves"] == ("birth", "merge", "delete")
    assert summary["laps"] < summary["config"]["engine"]["laps"]
    assert summary["stopped"].startswith(f"converged at lap {summary['laps']}")
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    ends = trace[trace["batch"] == -1]
    assert len(ends) == summary["laps"] and ends["K"].iloc[-1] == 4
    fixed = fit(blobs(tmp_path / "b"), tmp_path / "fixed", job_config(laps=5, tol=0))
    assert fixed["laps"] == 5 and fixed["stopped"] == "the maximum of 5 laps"


def test_a_component_too_small_to_split_does_not_block_convergence(tmp_path):
    """Three far-away points form their own cluster; a birth cannot split 3 items, so that
    cluster is no birth target and the run still converges (it ran every lap before)."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 3000)
    X = np.array([[0, 0], [8, 0], [0, 8], [8, 8]], float)[y] + rng.normal(size=(3000, 2))
    X = np.vstack([X, [40, 40] + 0.3 * rng.normal(size=(3, 2))])
    ingest_array(X, tmp_path / "c", partition_rows=300)
    summary = fit(tmp_path / "c", tmp_path / "run", job_config(laps=40))
    assert summary["K"] == 5 and min(summary["weights"]) * len(X) < 4
    assert summary["stopped"].startswith("converged") and summary["laps"] < 40


@pytest.mark.slow  # hundreds of one-row partitions to convergence
def test_many_one_row_partitions_still_get_births(tmp_path):
    """Births collect across partitions up to the cap, so tiny partitions do not starve them:
    the four blobs are found (the ELBO also keeps two outlying items as a fifth component: its
    deletion is refused on the exact ELBO)."""
    summary = fit(blobs(tmp_path, n=240, rows=1), tmp_path / "run", job_config(laps=12))
    sizes = sorted(summary["sizes"], reverse=True)
    assert summary["n_items"] == 240 and min(sizes[:4]) >= 45 and sum(sizes[4:]) <= 3


def test_the_best_lap_end_state_is_returned_when_a_later_one_is_lower(tmp_path):
    from helpers import engine_for, run_to_end

    engine = run_to_end(engine_for(blobs(tmp_path), laps=4, tol=0))
    final = engine.result()
    assert "returned" not in final.info
    from dataclasses import replace

    from bnpmix.algorithms.memo.state import Best

    elbo, lap, model = engine.s.best.elbo, engine.s.best.lap, engine.s.best.fitted()
    assert lap == 4
    assert elbo == final.objective["elbo"]  # the last lap end was the best
    # pretend an earlier lap ended higher
    engine.s = replace(engine.s, best=Best(elbo + 1.0, 2, model, model.past))
    chosen = engine.result()
    assert chosen.model is model and chosen.objective["elbo"] == elbo + 1.0
    assert chosen.info["returned"] == "the best lap-end state (lap 2), not the last"


def test_restarts_keep_the_best_and_resume_inside_a_later_restart(tmp_path):
    from bnpmix.pipeline.fit import resume

    corpus = clusters(tmp_path, n=900)
    cfg = job_config(obs="gauss", K=1, laps=4, tol=0, restarts=3, seed=2)
    whole = fit(corpus, tmp_path / "whole", cfg)
    objectives = whole["restart_objectives"]
    assert len(objectives) == 3 and whole["elbo"] == max(objectives)
    assert whole["restart"] == f"{int(np.argmax(objectives))} of 3"
    single = fit(corpus, tmp_path / "single", job_config(obs="gauss", K=1, laps=4, tol=0, seed=2))
    assert single["elbo"] == objectives[0]  # restart 0 is the plain run with that seed
    ends = []

    def stop_in_the_second_restart(engine, step):
        ends.append(step.lap_end)
        if sum(ends) == 6:  # lap 2 of restart 1
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(corpus, tmp_path / "run", cfg, on_step=stop_in_the_second_restart)
    resumed = resume(tmp_path / "run")
    assert resumed["restart_objectives"] == objectives and resumed["elbo"] == whole["elbo"]
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "run" / "trace.csv").drop(columns="seconds"),
        pd.read_csv(tmp_path / "whole" / "trace.csv").drop(columns="seconds"))


@pytest.mark.slow  # stress: racing real processes
def test_two_fits_racing_for_one_output_directory_one_wins_cleanly(tmp_path):
    """The output directory is claimed atomically before any work: of two real `bnpmix fit`
    processes started together into one --out, one finishes and the other exits non-zero
    without writing into it (before, both could pass the emptiness check and mix files)."""
    import subprocess
    import sys

    from bnpmix.storage import RunDir

    corpus = clusters(tmp_path, n=600)
    for round_ in range(3):
        out = tmp_path / f"run{round_}"
        procs = [subprocess.Popen([sys.executable, "-m", "bnpmix", "fit", str(corpus), "--out",
                                   str(out), "--laps", "3", "--seed", str(seed)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for seed in (1, 2)]
        results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        codes = sorted(code for code, _ in results)
        assert codes[0] == 0 and codes[1] != 0, results
        loser = next(err for code, err in results if code)
        assert str(out) in loser and "choose another --out" in loser, loser
        winner = 1 + [code for code, _ in results].index(0)
        summary = RunDir(out).load_summary()
        assert summary["config"]["run"]["seed"] == winner
        assert sorted(p.name for p in out.iterdir()) == [
            "assignments", "job.json", "model.json", "model.npz", "summary.json", "trace.csv"]


@pytest.mark.parametrize("obs", ["gauss", "auto"])
def test_the_drivers_sample_partitions_are_not_kept_once_the_engines_start(tmp_path, obs,
                                                                           monkeypatch):
    """The driver reads partitions only for its samples (the prior's scale, k-means++ seeds):
    once each engine has started its BatchSource keeps none of them. They stayed cached for the
    whole run beside the executor's own cache, a partition or more per context (three contexts
    with --obs auto), in the same process on local threads."""
    from bnpmix.pipeline import auto

    X = np.random.default_rng(0).normal(size=(600, 3))
    ingest_array(X, tmp_path / "c", partition_rows=100)
    held: list[int] = []
    contexts: list = []
    start = auto.Runner.__init__

    def register(self, *args, **kwargs):
        start(self, *args, **kwargs)
        contexts.append(self.engine.ctx)

    def check(engine, step):
        held.extend(ctx.source.cache.held_bytes + len(ctx.source.cache)
                    for ctx in [engine.ctx, *contexts])

    lap = auto.Runner.lap

    def race_lap(self, n_items):
        lap(self, n_items)
        check(self.engine, None)

    monkeypatch.setattr(auto.Runner, "__init__", register)
    monkeypatch.setattr(auto.Runner, "lap", race_lap)
    fit(tmp_path / "c", tmp_path / "run", job_config(obs=obs, K=3, laps=2, seed=0),
        on_step=check)
    assert held and max(held) == 0
    assert len(contexts) == (3 if obs == "auto" else 0)


def test_a_full_pass_holds_a_wave_of_batch_results_not_one_per_partition(tmp_path, monkeypatch):
    """vb's and sovb's full passes visit the partitions PASS_WAVE x parallelism at a time and
    sum each wave before the next starts (the driver held every partition's result before,
    growing with the corpus); the sum, in partition order, is bit for bit the one-map sum."""
    from bnpmix.algorithms.mixture import Mixture
    from bnpmix.algorithms.summary import Summary
    from bnpmix.pipeline.engines import common
    from bnpmix.pipeline.runtime.context import make_context
    from bnpmix.pipeline.runtime.executors import LocalExecutor
    from bnpmix.storage import Corpus

    X = np.random.default_rng(3).normal(size=(420, 2))
    ingest_array(X, tmp_path / "c", partition_rows=10)  # 42 partitions
    corpus = Corpus(tmp_path / "c")
    executor = LocalExecutor(corpus, "threads", workers=2)
    maps: list[list[int]] = []
    plain_map = executor.map

    def recorded(fn, indices, *shared, **kwargs):
        maps.append(list(indices))
        return plain_map(fn, indices, *shared, **kwargs)

    try:
        job = job_config(algorithm="vb", obs="gauss", K=3, seed=0)
        ctx = make_context(corpus, job.run, job.model, executor)
        model = common.initial_model(ctx, 3)
        monkeypatch.setattr(executor, "map", recorded)
        total = common.full_pass(ctx, model)
        assert [i for m in maps for i in m] == list(range(42))
        assert max(len(m) for m in maps) == common.PASS_WAVE * executor.parallelism == 8
        once = Summary.zeros(model.uids, ctx.obs.stat_shapes(), ctx.obs.shared_shapes())
        for res in plain_map(common.visit, range(42), ctx.obs, model.globals()):
            once = once + res.summary
        assert Mixture.from_summary(ctx.obs, ctx.alloc, total).elbo(total) == \
            Mixture.from_summary(ctx.obs, ctx.alloc, once).elbo(once)
        for key in total.stats:
            np.testing.assert_array_equal(total.stats[key], once.stats[key])
    finally:
        executor.close()
