"""`--obs auto`, the default observation model of dense corpora for the mixture engines: a race
of memo runs on the whole corpus, one per candidate structure (AUTO_CANDIDATES), a lap each in
turn, a candidate leaving once the leader is further ahead than its recent pace times its laps
left (pipeline/auto.py); the winner's memo run continues. On data drawn from each covariance
structure the evidence picks that structure, also where a sample could not tell (sixteen
overlapping full covariances in 25-D) and where the corpus has few items per dimension
(axis-aligned classes: not the full covariance); the run records every candidate's bound,
laps, K and seconds; the winner's run is the explicit run of its structure; threads and
synchronous give the same race; an interrupted race or run resumes to the same result; the
engines without the choice keep the full Gaussian; bag-of-words corpora refuse it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.datasets import overlapping_covariances
from bnpmix.pipeline import auto
from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import AUTO_CANDIDATES, fit, job_config, resume
from bnpmix.storage import BnpmixError, Corpus, ingest_array, ingest_docword
from helpers import cli, random_counts, write_docword

K_TRUE = 3


def clusters(structure: str, n: int = 600, D: int = 3, seed: int = 0):
    """Three well-separated clusters whose covariances are ``structure``: "full" (each its own
    strongly correlated Σ_k), "tied" (one correlated Σ for all) or "diag" (axis-aligned, each
    dimension's variance drawn per cluster over a 30x range)."""
    rng = np.random.default_rng(seed)
    means = np.array([[0.0, 0, 0], [12, 0, 0], [0, 12, 0]])[:, :D]

    def correlated():
        A = rng.normal(size=(D, D))
        return A @ A.T + 0.05 * np.eye(D)

    shared = correlated()
    covs = {"full": [correlated() for _ in range(K_TRUE)],
            "tied": [shared] * K_TRUE,
            "diag": [np.diag(rng.uniform(0.1, 3.0, D)) for _ in range(K_TRUE)]}[structure]
    y = rng.integers(0, K_TRUE, n)
    X = np.stack([rng.multivariate_normal(means[k], covs[k]) for k in y])
    return X, y


@pytest.mark.parametrize(("structure", "expected"),
                         [("full", "gauss"), ("tied", "tied-gauss"), ("diag", "diag-gauss")])
def test_auto_chooses_the_structure_the_data_were_drawn_from(tmp_path, structure, expected):
    """Plain memo (no --obs): summary.json lists each candidate's ELBO per item and the race's
    record of it, the run's model is their argmax, and it is the structure that generated the
    data; the fit finds the clusters."""
    X, y = clusters(structure)
    ingest_array(X, tmp_path / "c", partition_rows=200)
    summary = fit(tmp_path / "c", tmp_path / "r", job_config(algorithm="memo", seed=0))
    scores = summary["obs_candidates"]
    assert sorted(scores) == sorted(AUTO_CANDIDATES)
    assert summary["obs"] == max(scores, key=scores.get) == expected, scores
    assert summary["config"]["model"]["obs"] == "auto"
    assert adjusted_rand_index(y, load(tmp_path / "r").predict(X)) > 0.95
    race = summary["obs_auto"]
    assert race["budget"] == auto.AUTO_LAPS and race["rule"] == auto.RULE
    for name, run in race["candidates"].items():
        assert run["elbo_per_item"] == scores[name]
        assert run["laps"] >= 1 and run["K"] >= 1 and run["seconds"] >= 0
        assert run["result"].startswith("chosen" if name == expected else ("out at lap",
                                                                            "behind"))


def test_an_auto_run_of_another_engine_starts_from_the_prior_the_winner_learned(tmp_path):
    """The race's memo runs choose for any engine; another engine's run (adf here) begins at
    the prior the winning memo run ended with, so its model's prior differs from the default,
    and an explicit --obs run begins at the default."""
    X, _ = clusters("diag")
    ingest_array(X, tmp_path / "c", partition_rows=200)
    auto = fit(tmp_path / "c", tmp_path / "a", job_config(algorithm="adf"))
    plain = fit(tmp_path / "c", tmp_path / "p", job_config(algorithm="adf", obs=auto["obs"]))
    assert auto["obs"] == plain["obs"] == "diag-gauss"
    assert "obs_candidates" not in plain
    model_auto, model_plain = load(tmp_path / "a"), load(tmp_path / "p")
    assert model_auto.model.obs.prior() != model_plain.model.obs.prior()
    assert model_plain.model.obs.prior_figures()["kappa0"] == pytest.approx(0.01)


def test_info_lists_the_candidates(tmp_path):
    X, _ = clusters("tied", n=300)
    ingest_array(X, tmp_path / "c")
    done = cli("fit", tmp_path / "c", "--out", tmp_path / "r", "--algorithm", "vb", "--K", "3")
    assert done.returncode == 0, done.stderr
    assert "--obs auto chose tied-gauss" in done.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    shown = cli("info", tmp_path / "r")
    line = next(s for s in shown.stdout.splitlines() if s.startswith("obs auto"))
    best = max(summary["obs_candidates"], key=summary["obs_candidates"].get)
    assert line.split()[2] == best == summary["obs"]  # ranked, the chosen first


def test_engines_without_the_choice_keep_the_full_gaussian_and_text_refuses_it(tmp_path):
    X, _ = clusters("tied", n=120)
    ingest_array(X, tmp_path / "c", partition_rows=40,
                 columns={"sequence": np.repeat(np.arange(3), 40)})
    with pytest.raises(BnpmixError, match="--obs auto: the ddcrp engine"):
        fit(tmp_path / "c", tmp_path / "r", job_config(algorithm="ddcrp", obs="auto"))
    assert not (tmp_path / "r").exists()
    summary = fit(tmp_path / "c", tmp_path / "d", job_config(algorithm="ddcrp", restarts=1))
    assert summary["obs"] == "gauss" and "obs_candidates" not in summary
    X = random_counts(np.random.default_rng(0), 50, 30, 0.2)
    write_docword(tmp_path / "docword.t.txt", X)
    ingest_docword(tmp_path / "docword.t.txt", tmp_path / "t")
    with pytest.raises(BnpmixError, match="bag-of-words corpus takes mult"):
        fit(tmp_path / "t", tmp_path / "m", job_config(algorithm="memo", obs="auto"))



def axis_aligned(n: int, D: int = 30, K: int = 6, seed: int = 0):
    """K classes with diagonal covariances (standard deviations log-uniform over [0.2, 1.5]
    per class and dimension), means N(0, 1.5² I): n / D items per dimension."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, 1.5, (K, D))
    sd = np.exp(rng.uniform(np.log(0.2), np.log(1.5), (K, D)))
    y = rng.integers(0, K, n)
    return means[y] + sd[y] * rng.normal(size=(n, D)), y


def test_sixteen_overlapping_full_covariances_in_25_d_choose_the_full_gaussian(tmp_path):
    """The case the sample-then-one-step rule got wrong (it chose diag-gauss on 25,000 such
    items, and on these 4,000): on the corpus the full covariances' bound rises past the
    others within a few laps, the other candidates leave the race, and the chosen run finds
    the sixteen classes."""
    X, y = overlapping_covariances(4000, seed=1)
    ingest_array(X, tmp_path / "c")
    summary = fit(tmp_path / "c", tmp_path / "r", job_config(seed=0))
    race = summary["obs_auto"]["candidates"]
    assert summary["obs"] == "gauss", race
    for name in AUTO_CANDIDATES:
        if name != "gauss":
            assert race[name]["result"].startswith("out at lap"), race
            assert race[name]["laps"] < auto.AUTO_LAPS
    assert adjusted_rand_index(y, load(tmp_path / "r").predict(X)) > 0.95


def test_axis_aligned_classes_with_few_items_per_dimension_do_not_choose_the_full_gaussian(
        tmp_path):
    """Twenty items per dimension of six axis-aligned classes in 30-D: a full covariance per
    component costs more evidence than the corpus repays; the diagonal (or tied) structure
    wins and finds the classes."""
    X, y = axis_aligned(600)
    ingest_array(X, tmp_path / "c", partition_rows=200)
    summary = fit(tmp_path / "c", tmp_path / "r", job_config(seed=0))
    assert summary["obs"] in ("diag-gauss", "tied-gauss"), summary["obs_auto"]
    assert summary["obs_candidates"]["gauss"] < summary["obs_candidates"][summary["obs"]]
    assert adjusted_rand_index(y, load(tmp_path / "r").predict(X)) > 0.95


def trace_rows(run_dir) -> list[dict]:
    return trace(run_dir).to_dict("records")


def trace(run_dir):
    import pandas as pd

    return pd.read_csv(run_dir / "trace.csv")


def test_the_bounds_are_memo_runs_on_the_corpus_and_the_winner_is_its_explicit_run(tmp_path):
    """Each candidate's recorded bound is the lap-end ELBO per item of an explicit memo run of
    that structure (same job and seed) at the lap it left the race: the full-corpus bound, not
    a sample's. The winner's run continues its race laps, so it is that explicit run, bit for
    bit: model, trace, laps, assignments."""
    X, _ = clusters("full")
    ingest_array(X, tmp_path / "c", partition_rows=200)
    chosen = fit(tmp_path / "c", tmp_path / "auto", job_config(seed=0))
    race = chosen["obs_auto"]["candidates"]
    n = len(X)
    for name in AUTO_CANDIDATES:
        explicit = fit(tmp_path / "c", tmp_path / name, job_config(seed=0, obs=name))
        ends = {int(r["lap"]): r["elbo"] for r in trace_rows(tmp_path / name) if r["batch"] == -1}
        assert race[name]["elbo_per_item"] == pytest.approx(ends[race[name]["laps"]] / n,
                                                            rel=1e-12, abs=0)
        if name != chosen["obs"]:
            continue
        for key in ("elbo", "K", "laps", "weights", "sizes", "component_ids", "converged",
                    "stopped", "last_laps", "prior"):
            assert chosen[key] == explicit[key], key
        ours, theirs = trace(tmp_path / "auto"), trace(tmp_path / name)
        assert ours.drop(columns="seconds").equals(theirs.drop(columns="seconds"))
        assert np.array_equal(load(tmp_path / "auto").predict(X), load(tmp_path / name).predict(X))


def without_seconds(record: dict) -> dict:
    return {**record, "seconds": None,
            "candidates": {n: {**c, "seconds": None} for n, c in record["candidates"].items()}}


def test_the_race_is_the_same_on_threads_synchronously_and_on_dask(tmp_path, dask_client):
    """The candidates step in a fixed order and each reduces in partition order: every
    scheduler gives the same race (bounds, laps, K, results) and the same run."""
    X, _ = clusters("tied", n=450)
    ingest_array(X, tmp_path / "c", partition_rows=150)
    runs = {scheduler: fit(tmp_path / "c", tmp_path / scheduler,
                           job_config(seed=2, scheduler=scheduler))
            for scheduler in ("threads", "synchronous")}
    runs["dask"] = fit(tmp_path / "c", tmp_path / "dask", job_config(seed=2), client=dask_client)
    first = runs["threads"]
    for summary in runs.values():
        assert without_seconds(summary["obs_auto"]) == without_seconds(first["obs_auto"])
        assert summary["obs_candidates"] == first["obs_candidates"]
        assert (summary["obs"], summary["elbo"], summary["K"]) == (first["obs"], first["elbo"],
                                                                 first["K"])


class Stop(BaseException):  # an interruption (Ctrl-C, a kill), not a refused option
    pass


def test_an_interrupted_race_or_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    """Killed during the race (no checkpoint yet), resume races again to the same choice;
    killed after it, resume continues the winner from its checkpoint, which records the
    choice, without racing again. Both end as the uninterrupted run (tol 0: the winner runs
    on after the race, to its lap cap)."""
    X, _ = clusters("diag")
    ingest_array(X, tmp_path / "c", partition_rows=200)
    whole = fit(tmp_path / "c", tmp_path / "whole", job_config(seed=0, tol=0, laps=8))

    real_lap, laps = auto.Runner.lap, []

    def lap_then_stop(self, n_items):
        laps.append(self.name)
        if len(laps) == 4:  # in the race's second round
            raise Stop
        real_lap(self, n_items)

    monkeypatch.setattr(auto.Runner, "lap", lap_then_stop)
    with pytest.raises(Stop):
        fit(tmp_path / "c", tmp_path / "race", job_config(seed=0, tol=0, laps=8))
    monkeypatch.setattr(auto.Runner, "lap", real_lap)
    assert not (tmp_path / "race" / "checkpoint.npz").exists()
    again = resume(tmp_path / "race")

    def stop_at_lap_end(engine, step):
        if step.lap_end:
            raise Stop

    with pytest.raises(Stop):  # the first lap end after the race
        fit(tmp_path / "c", tmp_path / "run", job_config(seed=0, tol=0, laps=8),
            on_step=stop_at_lap_end)
    assert (tmp_path / "run" / "checkpoint.npz").exists()

    def no_race(*args):
        raise AssertionError("resume raced again")

    monkeypatch.setattr(auto, "choose_obs", no_race)
    monkeypatch.setattr("bnpmix.pipeline.fit.choose_obs", no_race)
    continued = resume(tmp_path / "run")
    assert whole["laps"] > whole["obs_auto"]["candidates"][whole["obs"]]["laps"]
    for summary in (again, continued):
        for key in ("obs", "elbo", "K", "laps", "weights", "obs_candidates", "last_laps"):
            assert summary[key] == whole[key], key
        assert without_seconds(summary["obs_auto"]) == without_seconds(whole["obs_auto"])


class FakeEngine:
    def __init__(self, done: bool = False) -> None:
        self.done = done


def runner(name: str, bounds: list[float], laps: int | None = None,
           done: bool = False) -> auto.Runner:
    return auto.Runner(name, FakeEngine(done), bounds=bounds,
                       laps=len(bounds) if laps is None else laps)


def test_the_rule_drops_a_candidate_the_leader_is_further_ahead_of_than_its_reach():
    """Reach = pace (largest lap-end gain per item over the last AUTO_WINDOW laps) x laps left
    of the budget; 0 once converged; unmeasured (nobody leaves) before two lap ends. The leader
    (ties: the first) never leaves."""
    assert auto.AUTO_WINDOW == 3
    budget = 10
    # before two lap ends nobody has a pace
    early = [runner("a", [-1.0]), runner("b", [-50.0])]
    assert auto.judge(early, budget, 5) == [] and early[1].pace() == np.inf
    # pace over the last 3 gains: b gained 0.5, 0.1, 0.2, 0.1 -> 0.2 (the 0.5 is too old)
    b = runner("b", [-12.0, -11.5, -11.4, -11.2, -11.1])
    assert b.pace() == pytest.approx(0.2) and b.left(budget) == 5
    assert auto.judge([runner("a", [-2, -2, -2, -2, -10.2]), b], budget, 5) == []  # 0.9 <= 1.0
    c = runner("c", [-12.0, -11.5, -11.4, -11.2, -11.1])
    lead = runner("a", [-2, -2, -2, -2, -10.0])
    assert auto.judge([lead, c], budget, 5) == [c]  # 1.1 > 0.2 x 5
    assert c.out.startswith("out at lap 5: 1.1000 per item behind a") and not lead.out
    # a converged candidate (engine done) has no laps left: any gap drops it, whatever its pace
    d = runner("d", [-20.0, -10.0, -5.01], done=True)
    assert d.reach(budget) == 0
    assert auto.judge([runner("a", [-9.0, -7.0, -5.0]), d], budget, 5) == [d]
    assert "(converged)" in d.out
    # a falling bound has pace 0: behind at all, it leaves
    e = runner("e", [-5.0, -5.5, -5.6])
    assert e.pace() == 0.0 and auto.judge([runner("a", [-5.0, -5.0, -5.5]), e], budget, 3) == [e]
    # ties: the first in candidate order leads; the other, level with it, stays
    f, g = runner("f", [-3.0, -3.0]), runner("g", [-3.0, -3.0])
    assert auto.judge([f, g], budget, 5) == [] and max([f, g], key=lambda r: r.bound) is f


def test_the_rule_holds_for_any_number_of_candidates(tmp_path, monkeypatch):
    """choose_obs takes AUTO_CANDIDATES as they are (another structure may join them): with
    two, and with the three in another order, it races those and records those."""
    X, _ = clusters("tied", n=300)
    ingest_array(X, tmp_path / "c")
    for names in (("diag-gauss", "tied-gauss"), ("tied-gauss", "diag-gauss", "gauss")):
        monkeypatch.setattr(auto, "AUTO_CANDIDATES", names)
        summary = fit(tmp_path / "c", tmp_path / "-".join(names), job_config(seed=0))
        assert list(summary["obs_candidates"]) == list(names)
        assert list(summary["obs_auto"]["candidates"]) == list(names)
        assert summary["obs"] == "tied-gauss"


def test_another_engine_resumed_in_a_later_restart_starts_it_from_the_winners_prior(tmp_path):
    """vb with three restarts: each starts from the prior the winning memo run learned. Stopped
    in the second restart and resumed (the checkpoint keeps that prior with the choice, so the
    third restart starts from it too), the run ends as the uninterrupted one."""
    X, _ = clusters("diag", n=300)
    ingest_array(X, tmp_path / "c", partition_rows=50)
    job = job_config(algorithm="vb", K=4, laps=6, restarts=3, seed=0)
    steps = []
    whole = fit(tmp_path / "c", tmp_path / "whole", job, on_step=lambda e, s: steps.append(s))

    def stop(engine, step, seen=[]):  # noqa: B006 (the calls so far)
        seen.append(step)
        if len(seen) == len(steps) // 2:
            raise Stop

    with pytest.raises(Stop):
        fit(tmp_path / "c", tmp_path / "r", job, on_step=stop)
    resumed = resume(tmp_path / "r")
    key = whole["objective"]
    assert len(set(whole["restart_objectives"])) == 3
    for name in (key, "K", "obs", "prior", "restart_objectives", "obs_candidates"):
        assert resumed[name] == whole[name], name


def test_the_candidates_summaries_share_one_summary_bytes(tmp_path, monkeypatch):
    """The race keeps every candidate's batch summaries (a summary per partition each): in
    memory they hold at most summary_bytes between them, the rest spilled, not a budget each
    (three times it, a summary per partition below it, growing with the corpus). The race and
    the run are the ones with an ample budget: spilling changes no number."""
    X, _ = clusters("full")
    ingest_array(X, tmp_path / "c", partition_rows=100)
    ample = fit(tmp_path / "c", tmp_path / "ample", job_config(seed=0, laps=4))
    held: list[int] = []
    lap = auto.Runner.lap

    def measured(self, n_items):
        lap(self, n_items)
        engines = [r.engine for r in runners]
        held.append(sum(s._held for e in engines for s in [e.store, *e.delete_changes.values()]))

    runners: list = []
    start = auto.Runner.__init__

    def register(self, *args, **kwargs):
        start(self, *args, **kwargs)
        runners.append(self)

    monkeypatch.setattr(auto.Runner, "lap", measured)
    monkeypatch.setattr(auto.Runner, "__init__", register)
    budget = 4000  # a few of the six partitions' summaries
    tight = fit(tmp_path / "c", tmp_path / "tight",
                job_config(seed=0, laps=4, summary_bytes=budget))
    assert len(runners) == len(AUTO_CANDIDATES) and held
    assert max(held) <= budget, held
    assert without_seconds(tight["obs_auto"]) == without_seconds(ample["obs_auto"])
    for key in ("elbo", "K", "obs", "laps", "weights", "sizes", "component_ids"):
        assert tight[key] == ample[key], key
    assert trace(tmp_path / "tight").drop(columns="seconds").equals(
        trace(tmp_path / "ample").drop(columns="seconds"))


def test_a_large_corpus_races_on_evenly_spaced_whole_partitions(tmp_path):
    """Above ``items`` the race takes the fewest evenly spaced partitions (first and last among
    them) that hold at least that many; at or below it, the whole corpus (None)."""
    X, _ = clusters("diag", n=1000)
    ingest_array(X, tmp_path / "c", partition_rows=100)
    corpus = Corpus(tmp_path / "c")
    assert auto.race_partitions(corpus, 1000) is None
    assert auto.race_partitions(corpus, 999) == list(range(10))
    assert auto.race_partitions(corpus, 250) == [0, 4, 9]  # round(linspace(0, 9, 3))
    assert auto.race_partitions(corpus, 100) == [0]
    view = corpus.subset([0, 4, 9])
    assert (view.n_partitions, view.n_items, view.origin) == (3, 300, [0, 4, 9])
    batch = view.read(1)
    assert batch.start == 400 and np.array_equal(batch.X, X[400:500])


def test_a_race_on_a_sample_is_the_explicit_runs_on_those_partitions(tmp_path, monkeypatch,
                                                                      dask_client):
    """A corpus of more than AUTO_ITEMS items: every candidate's recorded bound is the lap-end
    ELBO per item of an explicit memo run of its structure, same seed, on a corpus of just the
    race's partitions (ingested on their own); the run is then fitted on the whole corpus from
    the prior the winner learned, the same on threads, synchronously and on Dask."""
    X, y = clusters("diag", n=1200)
    ingest_array(X, tmp_path / "c", partition_rows=200)
    monkeypatch.setattr(auto, "AUTO_ITEMS", 500)
    runs = {scheduler: fit(tmp_path / "c", tmp_path / scheduler,
                           job_config(seed=0, scheduler=scheduler))
            for scheduler in ("threads", "synchronous")}
    runs["dask"] = fit(tmp_path / "c", tmp_path / "dask", job_config(seed=0), client=dask_client)
    summary = runs["threads"]
    record = summary["obs_auto"]
    assert (record["items"], record["partitions"]) == (600, [0, 2, 5])  # round(2.5) = 2
    for other in runs.values():
        assert without_seconds(other["obs_auto"]) == without_seconds(record)
        assert (other["obs"], other["elbo"], other["K"]) == (summary["obs"], summary["elbo"],
                                                             summary["K"])
    assert summary["obs"] == "diag-gauss" and sum(summary["sizes"]) == 1200
    # the run starts from the winner's model, its globals held through the first lap
    visits = trace(tmp_path / "threads")
    assert (visits["K"][visits["lap"] < 1] == record["candidates"]["diag-gauss"]["K"]).all()
    assert adjusted_rand_index(y, load(tmp_path / "threads").predict(X)) > 0.95
    rows = np.concatenate([np.arange(200 * i, 200 * (i + 1)) for i in (0, 2, 5)])
    ingest_array(X[rows], tmp_path / "s", partition_rows=200)
    for name, run in record["candidates"].items():
        fit(tmp_path / "s", tmp_path / name, job_config(seed=0, obs=name))
        ends = {int(r["lap"]): r["elbo"] for r in trace_rows(tmp_path / name) if r["batch"] == -1}
        assert run["elbo_per_item"] == pytest.approx(ends[run["laps"]] / 600, rel=1e-12, abs=0)
    # the whole corpus's run starts from the winner's learned prior, not the default
    plain = fit(tmp_path / "c", tmp_path / "p", job_config(seed=0, obs=summary["obs"]))
    assert (load(tmp_path / "threads").model.obs.prior()
            != load(tmp_path / "p").model.obs.prior())
    assert plain["obs"] == summary["obs"]


@pytest.mark.usefixtures("lap_checkpoints")
def test_a_run_raced_on_a_sample_resumes_to_the_same_result(tmp_path, monkeypatch):
    """Stopped at its first lap end after the race (on a sample), resume continues from the
    checkpoint, which records the choice and its prior, without racing again, to the
    uninterrupted run's result (tol 0: to the lap cap)."""
    X, _ = clusters("diag", n=1200)
    ingest_array(X, tmp_path / "c", partition_rows=200)
    monkeypatch.setattr(auto, "AUTO_ITEMS", 500)
    job = job_config(seed=0, tol=0, laps=6)
    whole = fit(tmp_path / "c", tmp_path / "whole", job)
    assert whole["obs_auto"]["partitions"] == [0, 2, 5]

    def stop_at_lap_end(engine, step):
        if step.lap_end:
            raise Stop

    with pytest.raises(Stop):
        fit(tmp_path / "c", tmp_path / "run", job, on_step=stop_at_lap_end)

    def no_race(*args):
        raise AssertionError("resume raced again")

    monkeypatch.setattr("bnpmix.pipeline.fit.choose_obs", no_race)
    continued = resume(tmp_path / "run")
    for key in ("obs", "elbo", "K", "laps", "weights", "obs_candidates", "last_laps"):
        assert continued[key] == whole[key], key
    assert np.array_equal(load(tmp_path / "run").predict(X), load(tmp_path / "whole").predict(X))


def test_an_engine_that_races_fits_the_candidates_and_continues_the_winner(tmp_path):
    """Which engine fits --obs auto's candidates is what engines declare (Engine.races): a
    job of an engine that races is raced by its own runs, and on the whole corpus the winner's
    run is the job's, continued (a job of one that does not is raced by the default engine's,
    and starts from the winner's prior)."""
    from bnpmix.pipeline.engines.memo import MemoEngine
    from bnpmix.pipeline.runtime import ENGINES, register

    class Racer(MemoEngine):
        name = "test-racer"

    X, _ = clusters("full", n=300)
    ingest_array(X, tmp_path / "c", partition_rows=100)
    register(Racer)
    try:
        summary = fit(tmp_path / "c", tmp_path / "run", job_config(algorithm="test-racer",
                                                                   laps=3))
    finally:
        ENGINES.pop(Racer.name)
    race = summary["obs_auto"]["candidates"]
    assert race[summary["obs"]]["result"] == "chosen, continues"
    assert summary["algorithm"] == "test-racer" and summary["laps"] <= 3
