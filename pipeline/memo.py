"""The memoized online VB driver (Hughes & Sudderth 2013, Sec. 3), with births and merges.

Each lap visits every batch once in a fresh random order. A visit is Eq. 11: the batch's old
summary leaves S^0, its new one (from the local step under the current globals) enters, and the
globals are updated from S^0 (Eq. 10). Births collect targeted data during one lap, are created
at its end and adopted during the next, with their summaries S' kept beside S^0 until that
lap's last global update. Merges and reordering happen after a lap's last batch and are
accepted only when the exact full-data ELBO rises. Per-batch summaries stored before a move are
brought up to date by replaying the logged moves on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from bnpmix.algorithms.birth import choose_targets, create
from bnpmix.algorithms.local import BatchResult, Globals, batch_step
from bnpmix.algorithms.merge import merge_round, plan_pairs
from bnpmix.algorithms.mixture import DPMixture, optimal_elbo
from bnpmix.algorithms.summary import Insert, Move, Reorder, Summary

from .context import FitContext

# called after every batch visit with (lap, batch, globals used, result): for tests and progress
VisitHook = Callable[[int, int, Globals, BatchResult], None]


@dataclass
class SummaryStore:
    """Per-batch summaries plus the log of moves; a summary read back is replayed up to date."""

    moves: list[Move] = field(default_factory=list)
    _items: dict[int, tuple[Summary, int]] = field(default_factory=dict)

    def get(self, batch: int) -> Summary | None:
        if batch not in self._items:
            return None
        summary, seen = self._items[batch]
        for move in self.moves[seen:]:
            summary = move.apply(summary)
        self._items[batch] = (summary, len(self.moves))
        return summary

    def put(self, batch: int, summary: Summary) -> None:
        self._items[batch] = (summary, len(self.moves))

    def log(self, move: Move) -> None:
        self.moves.append(move)

    def __len__(self) -> int:
        return len(self._items)

    def total(self) -> Summary | None:
        """Σ_b S^b recomputed from the store (the debug check of S^0)."""
        total = None
        for b in sorted(self._items):
            s = self.get(b).without_pairs()
            total = s if total is None else total + s
        return total


@dataclass
class Birth:
    """A birth in progress: its target, the rows collected for it, and later its S'."""

    target: int
    rows: list = field(default_factory=list)
    n: int = 0
    S_new: Summary | None = None


def _stack(rows: list):
    return sp.vstack(rows, format="csr") if sp.issparse(rows[0]) else np.concatenate(rows)


class MemoRun:
    """State and steps of one memoized run."""

    def __init__(self, ctx: FitContext, model: DPMixture, on_visit: VisitHook | None = None):
        self.ctx = ctx
        self.model = model
        self.S0 = Summary.zeros(model.uids, ctx.obs.stat_shapes())
        self.store = SummaryStore()
        self.trace: list[dict] = []
        self.births: list[Birth] = []
        self.laps_since = {int(u): 1 for u in model.uids}
        self.on_visit = on_visit
        self.births_on = "birth" in ctx.cfg.moves
        self.merges_on = "merge" in ctx.cfg.moves

    def _log(self, move: Move) -> None:
        self.store.log(move)
        self.S0 = move.apply(self.S0)

    def _adopt(self) -> Summary | None:
        """Insert created components into S^0 (zero mass) and return S' to keep beside it."""
        created = [b.S_new for b in self.births if b.S_new is not None]
        self.births = []
        if not created:
            return None
        uids = tuple(int(u) for s in created for u in s.uids)
        self._log(Insert(uids))
        S_prime = Summary.zeros(self.S0.uids, self.ctx.obs.stat_shapes())
        for s in created:
            idx = np.array([S_prime.index(u) for u in s.uids])
            S_prime.N[idx] = s.N
            for k in S_prime.stats:
                S_prime.stats[k][idx] = s.stats[k]
        for u in uids:
            self.laps_since[u] = 1
        return S_prime

    def _choose_birth_targets(self, lap: int) -> None:
        cfg = self.ctx.cfg
        if not self.births_on or lap > cfg.laps - 3:
            return  # a birth collected now could not be adopted and then judged by merges
        laps = np.array([self.laps_since[int(u)] for u in self.model.uids])
        N = self.S0.N if len(self.store) == len(self.ctx.source) else np.ones(self.model.K)
        targets = choose_targets(self.model.uids, N, laps, cfg.birth.per_lap, self.ctx.rng.birth)
        self.births = [Birth(t) for t in targets]
        for t in targets:
            self.laps_since[t] = 0

    def lap(self, lap: int) -> None:
        ctx, cfg = self.ctx, self.ctx.cfg
        S_prime = self._adopt()
        if S_prime is not None:
            self.model = DPMixture.from_summary(ctx.obs, ctx.alloc, self.S0 + S_prime)
        pairs = plan_pairs(ctx.obs, self.S0, cfg.merge) if self.merges_on else None
        self._choose_birth_targets(lap)
        targets = tuple(b.target for b in self.births)
        order = ctx.rng.order.permutation(len(ctx.source))
        Hpair = np.zeros(0 if pairs is None else len(pairs))
        for j, b in enumerate(order):
            b = int(b)
            g = self.model.globals()
            res = batch_step(ctx.source.get(b), ctx.obs, g, pairs, targets, cfg.birth.tau)
            if self.on_visit is not None:
                self.on_visit(lap, b, g, res)
            old = self.store.get(b)
            new = res.summary.without_pairs()
            self.S0 = self.S0 + new if old is None else (self.S0 - old.without_pairs()) + new
            self.store.put(b, res.summary)
            Hpair = Hpair + res.summary.Hpair
            self._collect(res)
            last = j == len(order) - 1
            use_prime = S_prime is not None and not last  # S' leaves before the last update
            self.model = DPMixture.from_summary(
                ctx.obs, ctx.alloc, self.S0 + S_prime if use_prime else self.S0)
            complete = len(self.store) == len(ctx.source)
            elbo = self.model.elbo(self.S0) if complete else float("nan")
            self.trace.append(ctx.trace_row(lap + (j + 1) / len(order), b, elbo, self.model.K))
        self._end_of_lap(lap, pairs, Hpair)

    def _collect(self, res: BatchResult) -> None:
        cap = self.ctx.cfg.birth.max_collect
        for birth in self.births:
            rows = res.collected.get(birth.target)
            if rows is None or birth.n >= cap:
                continue
            rows = rows[: cap - birth.n]
            birth.rows.append(rows)
            birth.n += rows.shape[0]

    def _end_of_lap(self, lap: int, pairs: np.ndarray | None, Hpair: np.ndarray) -> None:
        ctx = self.ctx
        if self.merges_on and pairs is not None and len(pairs):
            S, accepted, _ = merge_round(ctx.obs, ctx.alloc, self.S0.with_pairs(pairs, Hpair),
                                         ctx.rng.merge, ctx.cfg.merge)
            for move in accepted:  # S^0 has no pair entropies: replayed on stored summaries only
                self.store.log(move)
                self.laps_since.pop(move.b, None)
            self.S0 = S.without_pairs()
        if self.births_on or self.merges_on:
            self._reorder()
        self.model = DPMixture.from_summary(ctx.obs, ctx.alloc, self.S0)
        for birth in self.births:
            if birth.n:
                X = _stack(birth.rows)
                birth.S_new = create(X, ctx.obs, ctx.alloc, ctx.new_uids(ctx.cfg.birth.fresh_K),
                                     ctx.cfg.birth, ctx.rng.birth)
            birth.rows = []
        for u in self.laps_since:
            self.laps_since[u] += 1
        if self.births_on or self.merges_on:  # the state after the lap's moves
            self.trace.append(ctx.trace_row(lap + 1, -1, self.model.elbo(self.S0), self.model.K))

    def _reorder(self) -> None:
        """Sort components by decreasing mass when that raises the ELBO (stick-breaking order)."""
        order = np.argsort(-self.S0.N, kind="stable")
        if np.array_equal(order, np.arange(self.S0.K)):
            return
        move = Reorder(tuple(int(u) for u in self.S0.uids[order]))
        candidate = move.apply(self.S0)
        if optimal_elbo(self.ctx.obs, self.ctx.alloc, candidate) > optimal_elbo(
                self.ctx.obs, self.ctx.alloc, self.S0):
            self._log(move)


def run_memo(ctx: FitContext, model: DPMixture, on_visit: VisitHook | None = None) -> MemoRun:
    run = MemoRun(ctx, model, on_visit)
    for lap in range(ctx.cfg.laps):
        run.lap(lap)
    return run
