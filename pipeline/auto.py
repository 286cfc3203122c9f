"""``--obs auto``: the covariance structure the whole corpus supports, chosen by a race of memo
fits on the corpus itself, or, on a corpus of more than AUTO_ITEMS items, on its evenly spaced
whole partitions holding at least that many (race_partitions).

Every candidate (``AUTO_CANDIDATES`` that take the job's ``[prior]`` keys, in that order) is a
memo engine on the race's partitions, built as an explicit ``--obs NAME`` run of the same job would
be (its context from make_context: prior, seed streams; the job's memo options, default moves
births, merges and deletes). The race goes in rounds: each candidate still in it runs one lap,
in the fixed candidate order, and after the round every candidate's bound is its lap-end ELBO
per item, the exact bound on ln p(X) of the race's items under that structure (at its learned
prior),
comparable across structures. A candidate leaves the race when the leader's bound is more
ahead of it than its *reach*: its pace (its largest lap-end ELBO gain per item over its last
AUTO_WINDOW laps; none is measured before its second lap end, so nobody leaves before then)
times the laps it has left (the race's budget, AUTO_LAPS or the run's lap cap if lower, minus
its laps; 0 once its engine has converged). The race ends when one candidate is left, or when
every candidate still in it has run the budget or converged: then the highest bound wins (ties:
the first in candidate order).

The pace is a heuristic, not a bound: no upper bound on a later memo ELBO is computable (a
birth may raise it by any amount). Assuming a candidate gains no more per lap than it did
recently while the leader gains nothing is generous to the one behind; a structure that has
stopped rising (converged, or gaining less than gap / laps left) is what leaves.

When the job's engine is memo and the race ran on the whole corpus, the winner's engine is the
run's: it continues from its state (its race laps count among the run's laps and are bit for
bit those of an explicit ``--obs WINNER`` run with the same seed, since its context is built the
same way). A memo job raced on a sample starts on the whole corpus from the winner's model
(its components, their q and its learned prior; memo holds those globals through the first lap,
as for a warm start, so every item is first assigned under them); another engine starts from
the prior the winner learned.

Cost: one memo lap of each candidate still in the race per round, so at most AUTO_LAPS laps of
each candidate (O(N K D²) a lap for a full covariance, O(N K D) for the diagonal and tied ones,
with N at most about AUTO_ITEMS plus a partition); the losers' laps are the price of the
choice, the winner's are the run's own when it continues. The sample bounds the race on a
large corpus: on 26.3M x 32 items a round of three whole-corpus laps took 12-15 minutes on 2
cores, and the race was in its third round after 45. Memory: every
candidate's per-batch summaries are kept at once, in memory within one summary_bytes between
them (a StateStore Budget their stores share; the rest spilled), as one run's. Deterministic:
the candidates step in a fixed order, each engine reduces in partition order, so the choice is
a function of the corpus, options and seed, the same on threads and on Dask. An interrupted
race is not checkpointed: resume runs it again, to the same choice; once it is over the run's
checkpoints record the choice (``auto`` in checkpoint.npz), and resume continues the winner
without racing again. The runtime's hooks (progress, on_step,
checkpoints) see the winner's steps only after the race; stderr has a line per round instead.
Measured (benchmarks/acceptance/auto_obs.py --bgm, 25,000 x 25, 16 classes, 2 cores shared
with another job): an 18 s race, of which the winner's own laps 5.6 s; 18.8 s and a peak of
442 MiB for the whole run (K = 16, ARI 0.998), against BayesianGaussianMixture's 60.5 s.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.obs import AUTO_CANDIDATES, ObsModel, obs_from_prior
from bnpmix.storage import BnpmixError, Corpus

from . import stops
from .config import JobConfig
from .engines import DEFAULT_ENGINE
from .runtime.context import AUTO, check_obs, make_context, prior_keys
from .runtime.engine import Engine, engine_class
from .runtime.executors import Executor, SubsetExecutor
from .runtime.memlimit import resolve
from .runtime.store import Budget
from .settings import setting

log = logging.getLogger(__name__)  # the race's progress: the CLI shows it (console.py)

AUTO_LAPS = 30  # the race's lap budget (less when the run's lap cap is lower)
# a corpus of more items races on evenly spaced whole partitions holding at least this many
AUTO_ITEMS = 1_000_000
AUTO_WINDOW = 3  # a candidate's pace: its largest lap-end gain per item over this many laps
# summary.json and checkpoint.npz: each candidate's bound per item ({name: float}), and the
# race's record (rule, budget, seconds, and each candidate's bound, laps, K, seconds, result)
CANDIDATES_KEY = "obs_candidates"
RACE_KEY = "obs_auto"
RULE = ("memo laps on the whole corpus, all candidates in turn; a candidate leaves when the "
        f"leader's ELBO per item is ahead of it by more than its pace (largest lap gain over its "
        f"last {AUTO_WINDOW} laps) times its laps left of the budget; the highest bound at the "
        "end wins")


@dataclass
class Runner:
    """A candidate in the race: its engine, its lap-end bounds per item, the laps and seconds
    it has run, and why it left ("" while it is in)."""

    name: str
    engine: Engine
    bounds: list[float] = field(default_factory=list)
    Ks: list[int] = field(default_factory=list)
    laps: int = 0
    seconds: float = 0.0
    out: str = ""

    @property
    def bound(self) -> float:
        return self.bounds[-1] if self.bounds else -math.inf

    def lap(self, n_items: int) -> None:
        """Step the engine to its next lap end (or its end) and record its bound there."""
        started = time.perf_counter()
        while not self.engine.done:
            lap_end = self.engine.step().lap_end
            stops.raise_pending()  # (fit.drive's)
            if lap_end:
                self.laps += 1
                break
        self.seconds += time.perf_counter() - started
        row = self.engine.trace[-1]
        key = self.engine.declared.objective
        self.bounds.append(float(row[key]) / n_items)
        self.Ks.append(int(row["K"]))

    def pace(self) -> float:
        """Largest lap-end gain per item over the last AUTO_WINDOW laps (inf before two lap
        ends; never below 0)."""
        if len(self.bounds) < 2:
            return math.inf
        recent = self.bounds[-(AUTO_WINDOW + 1):]
        return max(0.0, *(b - a for a, b in itertools.pairwise(recent)))

    def left(self, budget: int) -> int:
        """Laps it may still run in the race (0 once its engine is done: converged)."""
        return 0 if self.engine.done else max(0, budget - self.laps)

    def reach(self, budget: int) -> float:
        left = self.left(budget)
        return 0.0 if left == 0 else self.pace() * left

    def record(self) -> dict[str, Any]:
        limit = self.engine.lap_limit(self.engine.cfg)
        return {"elbo_per_item": self.bound, "laps": self.laps, "K": self.Ks[-1] if self.Ks
                else None, "seconds": round(self.seconds, 3), "converged": self.engine.done
                and (limit is None or self.laps < limit), "result": self.out}


@dataclass
class Choice:
    """The race's outcome: the winner's name, every candidate's bound per item
    (CANDIDATES_KEY), the race's record (RACE_KEY), and either the winner's engine to continue
    (the job's engine is memo and the race ran on the whole corpus; ``laps`` it has run) or
    the prior its fit ended with (and, for a memo job raced on a sample, its model)."""

    name: str
    scores: dict[str, float]
    record: dict[str, Any]
    engine: Engine | None = None
    laps: int = 0
    prior: ObsModel | None = None
    model: Mixture | None = None  # the winner's, for a memo job raced on a sample

    def notes(self) -> dict[str, Any]:
        """What summary.json keeps of the choice."""
        return {CANDIDATES_KEY: self.scores, RACE_KEY: self.record}

    def saved(self) -> dict[str, Any]:
        """What the run's checkpoints keep (``auto``): the notes, and the prior another engine
        started from, which its later restarts start from too."""
        start = (None if self.prior is None
                 else {"name": self.prior.name, "prior": self.prior.prior()})
        return {**self.notes(), "start_prior": start}


def racer(job: JobConfig) -> type[Engine]:
    """The engine that fits the candidates: the job's own if it races (Engine.races), else
    DEFAULT_ENGINE's."""
    own = engine_class(job.algorithm)
    return own if own.races else engine_class(DEFAULT_ENGINE)


def candidates(job: JobConfig) -> list[str]:
    """The models of AUTO_CANDIDATES that take every key of the job's [prior] table."""
    names = [n for n in AUTO_CANDIDATES if set(job.model.prior) <= set(prior_keys(n))]
    if not names:
        raise BnpmixError(f"--obs auto: no candidate model takes the prior parameters "
                          f"{sorted(job.model.prior)}; name the model with --obs")
    return names


def race_partitions(corpus: Corpus, items: int) -> list[int] | None:
    """The partitions the race runs on: None (all) for a corpus of at most ``items`` items,
    else the fewest evenly spaced ones (``round(linspace(0, P - 1, m))``) holding at least
    ``items``: a sample of the whole corpus, spread over it as it was ingested."""
    rows = np.array([p.rows for p in corpus.manifest.partitions])
    if rows.sum() <= items:
        return None
    m = max(1, math.ceil(items / rows.mean()))
    while True:
        chosen = np.unique(np.round(np.linspace(0, len(rows) - 1, m)).astype(int))
        if rows[chosen].sum() >= items:
            return [int(i) for i in chosen]
        m += 1


def judge(runners: list[Runner], budget: int, round_: int) -> list[Runner]:
    """The rule, after round ``round_``: each candidate in the race but the leader (highest
    bound; ties: the first) leaves when the leader is ahead of it by more than its reach.
    Returns those that left, their ``out`` saying why (a converged candidate may leave rounds
    after its last lap, once another has overtaken it)."""
    alive = [r for r in runners if not r.out]
    leader = max(alive, key=lambda r: r.bound)
    gone = []
    for r in alive:
        gap = leader.bound - r.bound
        if r is leader or not gap > r.reach(budget):
            continue
        why = ("converged" if r.engine.done else
               f"pace {r.pace():.3g} per lap x {r.left(budget)} laps left")
        r.out = (f"out at lap {round_}: {gap:.4f} per item behind {leader.name}, more than it "
                 f"can make up ({why})")
        gone.append(r)
    return gone


def choose_obs(corpus: Corpus, job: JobConfig, executor: Executor) -> Choice:
    """``--obs auto``: the race described in this module's docstring. Every candidate is a
    memo run of the job on the corpus or its sample (race_partitions), with the job's memo
    options if its engine is memo, else memo's defaults, and the run's seed, prior options,
    init sample and executor, stepped a lap at a time in AUTO_CANDIDATES order; after each
    round a candidate leaves when the leader's lap-end ELBO per item is ahead of it by more
    than its largest gain per lap over its last AUTO_WINDOW laps times the laps it has left of
    the budget (min(AUTO_LAPS, laps)); the last one left, or the highest bound when the budget
    is spent, wins. The bound is the race's items' ELBO per item, a lower bound on
    ln p(X) / N comparable across structures. Costs at most AUTO_LAPS laps of each candidate;
    the winner's laps are the run's first when a memo job continues its engine (a race on the
    whole corpus). Stderr reports each round and each candidate that leaves."""
    check_obs(corpus, AUTO)
    names = candidates(job)
    cls = racer(job)
    own = cls is engine_class(job.algorithm)  # the job's engine races: it runs the winner
    sample = race_partitions(corpus, AUTO_ITEMS)
    if sample is not None:  # the race runs on these partitions, on the run's executor
        corpus, executor = corpus.subset(sample), SubsetExecutor(executor, sample)
    continues = own and sample is None
    cfg = job.engine if continues else cls.Config()
    budget = min(AUTO_LAPS, cls.lap_limit(cfg) or AUTO_LAPS)
    started = time.perf_counter()
    runners: list[Runner] = []
    # the candidates' batch summaries share one summary_bytes (else each held a budget of them,
    # a summary per partition: three times the memory, growing with the corpus)
    shared = Budget(resolve(setting("summary-bytes", job.run.summary_bytes)))
    try:
        for name in names:
            ctx = make_context(corpus, job.run, job.replace(model_obs=name).model, executor)
            ctx.state_budget = shared
            engine = cls(ctx, cfg)
            runners.append(Runner(name, engine))
            engine.start()
            ctx.source.release()  # its samples are drawn
        winner = race(runners, corpus.n_items, budget, started)
        winner.out = "chosen" + (", continues" if continues else "")
    except BaseException:
        for r in runners:
            r.engine.close()
        raise
    seconds = time.perf_counter() - started
    record = {"rule": RULE, "budget": budget, "window": AUTO_WINDOW,
              "items": corpus.n_items, "partitions": sample or "all",
              "seconds": round(seconds, 3),
              "candidates": {r.name: r.record() for r in runners}}
    scores = {r.name: r.bound for r in runners}
    on = "" if sample is None else (f" on {corpus.n_items:,} items ({len(sample)} evenly "
                                    "spaced partitions)")
    log.info("--obs auto chose %s after %d laps%s (%.1f s)", winner.name, winner.laps, on,
             seconds)
    if continues:
        return Choice(winner.name, scores, record, winner.engine, winner.laps)
    prior = winner.engine.ctx.obs
    model = winner.engine.race_model() if own else None
    winner.engine.close()
    return Choice(winner.name, scores, record, prior=prior, model=model)


def race(runners: list[Runner], n_items: int, budget: int, started: float) -> Runner:
    """The race's rounds: a lap of every candidate still moving, then ``judge``; the winner is
    the highest bound among those left when one is left, none moves or the budget is spent
    (the others closed, each told by how much it was behind)."""
    for round_ in range(1, budget + 1):
        alive = [r for r in runners if not r.out]
        moving = [r for r in alive if not r.engine.done]
        if len(alive) == 1 or not moving:
            break
        for r in moving:
            r.lap(n_items)
        log.info("--obs auto: lap %d: %s per item (%.1f s)", round_, ", ".join(
            f"{r.name} {r.bound:.4f} (K = {r.Ks[-1]})" for r in alive),
            time.perf_counter() - started)
        for r in judge(runners, budget, round_):
            log.info("--obs auto: %s %s", r.name, r.out)
            r.engine.close()
    alive = [r for r in runners if not r.out]
    winner = max(alive, key=lambda r: r.bound)
    for r in alive:
        if r is not winner:
            r.out = (f"behind {winner.name} by {winner.bound - r.bound:.4f} per item when "
                     f"the race ended (its lap {r.laps})")
            r.engine.close()
    return winner


def from_checkpoint(meta: dict[str, Any]) -> Choice:
    """The choice a run's checkpoint recorded (Choice.saved; the model is its engine's)."""
    notes = meta.get("auto") or {}
    start = notes.get("start_prior")
    return Choice(meta["obs"]["name"], notes.get(CANDIDATES_KEY) or {}, notes.get(RACE_KEY) or {},
                  prior=None if start is None else obs_from_prior(start["name"], start["prior"]))
