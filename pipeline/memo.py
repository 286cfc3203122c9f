"""The memoized online VB driver (Hughes & Sudderth 2013, Sec. 3), with births and merges.

Each lap visits every batch once in a fresh random order. A visit is Eq. 11: the batch's old
summary leaves S^0, its new one (from the local step under the current globals) enters, and the
globals are updated from S^0 (Eq. 10). To keep several workers busy, a wave of W batches is
computed in parallel against the same globals and then applied one by one in visiting order;
W = 1 is exactly the paper's algorithm. Births collect targeted data during one lap, are
created at its end and adopted during the next, with their summaries S' kept beside S^0 until
that lap's last global update. Merges and reordering happen after a lap's last batch and are
accepted only when the exact full-data ELBO rises. Per-batch summaries stored before a move are
brought up to date by replaying the logged moves on them.

The whole state lives in plain attributes so that a checkpoint can save it and ``resume``
continue to the same result (see pipeline/checkpoint.py).
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bnpmix.algorithms.birth import choose_targets, create
from bnpmix.algorithms.local import BatchResult, Globals, batch_step
from bnpmix.algorithms.merge import merge_round, plan_pairs
from bnpmix.algorithms.mixture import DPMixture, optimal_elbo
from bnpmix.algorithms.obs.base import ObsModel
from bnpmix.algorithms.summary import Insert, Move, Reorder, Summary
from bnpmix.storage import Batch

from .batches import stack_rows
from .context import FitContext

# called after every batch visit with (lap, batch, globals used, result): for tests and progress
VisitHook = Callable[[int, int, Globals, BatchResult], None]


def visit(batch: Batch, obs: ObsModel, g: Globals, pairs: np.ndarray | None,
          targets: tuple[int, ...], tau: float) -> BatchResult:
    """One partition visit, as run by an executor (in a thread or on a Dask worker)."""
    return batch_step(batch.X, obs, g, pairs, targets, tau)


@dataclass
class SummaryStore:
    """Per-batch summaries plus the log of moves; a summary read back is replayed up to date.

    Beyond ``max_bytes`` held in memory, summaries are spilled to files in a temporary
    directory, so the driver's memory stays bounded whatever the number of batches.
    """

    max_bytes: int = 1 << 30
    moves: list[Move] = field(default_factory=list)
    _items: dict[int, tuple[Summary | None, int]] = field(default_factory=dict)
    _held: int = 0
    _spill: str | None = None

    @staticmethod
    def _size(s: Summary) -> int:
        return int(s.N.nbytes + s.H.nbytes + s.Hpair.nbytes + s.pairs.nbytes
                   + sum(v.nbytes for v in s.stats.values()))

    def _spill_path(self, batch: int) -> Path:
        if self._spill is None:
            self._spill = tempfile.mkdtemp(prefix="bnpmix-summaries-")
        return Path(self._spill) / f"{batch}.pkl"

    def _load(self, batch: int) -> Summary:
        """The stored summary with the moves logged since it was stored replayed on it."""
        summary, seen = self._items[batch]
        if summary is None:
            summary = pickle.loads(self._spill_path(batch).read_bytes())
        for move in self.moves[seen:]:
            summary = move.apply(summary)
        return summary

    def get(self, batch: int) -> Summary | None:
        """The batch's summary, up to date (None if the batch was never stored). A summary held
        in memory is kept in its replayed form; a spilled one is not written back."""
        if batch not in self._items:
            return None
        summary = self._load(batch)
        held, seen = self._items[batch]
        if held is not None and seen < len(self.moves):
            self._held += self._size(summary) - self._size(held)
            self._items[batch] = (summary, len(self.moves))
        return summary

    def put(self, batch: int, summary: Summary) -> None:
        """Store a batch's new summary: in memory within the budget, else in a spill file."""
        old = self._items.get(batch)
        if old is not None and old[0] is not None:
            self._held -= self._size(old[0])
        size = self._size(summary)
        if self._held + size > self.max_bytes:
            self._spill_path(batch).write_bytes(pickle.dumps(summary, protocol=5))
            self._items[batch] = (None, len(self.moves))
        else:
            self._items[batch] = (summary, len(self.moves))
            self._held += size

    def log(self, move: Move) -> None:
        self.moves.append(move)

    def __len__(self) -> int:
        return len(self._items)

    def total(self) -> Summary | None:
        """Σ_b S^b recomputed from the store (the debug check of S^0)."""
        total = None
        for b in sorted(self._items):
            s = self._load(b).without_pairs()
            total = s if total is None else total + s
        return total

    def __getstate__(self) -> dict:
        """For checkpoints: every summary up to date (spilled ones read back while pickling)."""
        return {"max_bytes": self.max_bytes,
                "items": {b: self._load(b) for b in sorted(self._items)}}

    def __setstate__(self, state: dict) -> None:
        self.__init__(max_bytes=state["max_bytes"])
        for b, summary in state["items"].items():
            self.put(b, summary)

    def close(self) -> None:
        if self._spill is not None:
            shutil.rmtree(self._spill, ignore_errors=True)


@dataclass
class Birth:
    """A birth in progress: its target, the rows collected for it, and later its S'."""

    target: int
    rows: list = field(default_factory=list)
    n: int = 0
    S_new: Summary | None = None


@dataclass
class LapState:
    """Where a lap stands: its order, planned pairs, birth targets, S' and next position."""

    lap: int
    order: np.ndarray
    pairs: np.ndarray | None
    Hpair: np.ndarray
    S_prime: Summary | None
    targets: tuple[int, ...]
    pos: int = 0


class MemoRun:
    """State and steps of one memoized run."""

    def __init__(self, ctx: FitContext, model: DPMixture, on_visit: VisitHook | None = None,
                 hold_globals: bool = False):
        self.ctx = ctx
        self.on_visit = on_visit
        self.model = model
        self.S0 = Summary.zeros(model.uids, ctx.obs.stat_shapes())
        self.store = SummaryStore(max_bytes=ctx.cfg.summary_bytes)
        self.trace: list[dict] = []
        self.births: list[Birth] = []
        self.laps_since = {int(u): 1 for u in model.uids}
        self.lap_state: LapState | None = None
        self.next_lap = 0
        self.visits = 0
        # a warm start's components would fall back to the prior after a first partial S^0
        # (suppl. Sec. 2.3): its globals are kept until every batch has been visited once
        self.hold_globals = hold_globals

    STATE = ("model", "S0", "store", "trace", "births", "laps_since", "lap_state", "next_lap",
             "visits", "hold_globals")

    @property
    def births_on(self) -> bool:
        return "birth" in self.ctx.cfg.moves

    @property
    def merges_on(self) -> bool:
        return "merge" in self.ctx.cfg.moves

    @property
    def finished(self) -> bool:
        return self.next_lap >= self.ctx.cfg.laps and self.lap_state is None

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

    def _choose_birth_targets(self, lap: int) -> tuple[int, ...]:
        cfg = self.ctx.cfg
        if not self.births_on or lap > cfg.laps - 3:
            return ()  # a birth collected now could not be adopted and then judged by merges
        laps = np.array([self.laps_since[int(u)] for u in self.model.uids])
        N = self.S0.N if self._complete() else np.ones(self.model.K)
        targets = choose_targets(self.model.uids, N, laps, cfg.birth.per_lap, self.ctx.rng.birth)
        self.births = [Birth(t) for t in targets]
        for t in targets:
            self.laps_since[t] = 0
        return tuple(targets)

    def _complete(self) -> bool:
        return len(self.store) == self.ctx.corpus.n_partitions

    def begin_lap(self) -> None:
        """Adopt last lap's births, plan merge pairs, choose birth targets, draw the order."""
        ctx = self.ctx
        lap = self.next_lap
        S_prime = self._adopt()
        if S_prime is not None:
            self.model = DPMixture.from_summary(ctx.obs, ctx.alloc, self.S0 + S_prime)
        pairs = plan_pairs(ctx.obs, self.S0, ctx.cfg.merge) if self.merges_on else None
        targets = self._choose_birth_targets(lap)
        order = ctx.rng.order.permutation(ctx.corpus.n_partitions)
        self.lap_state = LapState(lap, order, pairs, np.zeros(0 if pairs is None else len(pairs)),
                                  S_prime, targets)

    def wave(self) -> None:
        """Visit the next W batches against the same globals; apply them in visiting order."""
        ctx, st = self.ctx, self.lap_state
        batches = [int(b) for b in st.order[st.pos:st.pos + ctx.cfg.wave]]
        g = self.model.globals()
        results = ctx.executor.map(visit, batches, ctx.obs, g, st.pairs, st.targets,
                                   ctx.cfg.birth.tau)
        for b, res in zip(batches, results, strict=True):
            if self.on_visit is not None:
                self.on_visit(st.lap, b, g, res)
            self._apply(b, res)

    def _apply(self, b: int, res: BatchResult) -> None:
        """Eq. 11 for one batch, then the global update (without S' after the lap's last)."""
        ctx, st = self.ctx, self.lap_state
        old = self.store.get(b)
        new = res.summary.without_pairs()
        self.S0 = self.S0 + new if old is None else (self.S0 - old.without_pairs()) + new
        self.store.put(b, res.summary)
        st.Hpair = st.Hpair + res.summary.Hpair
        self._collect(res)
        st.pos += 1
        self.visits += 1
        last = st.pos == len(st.order)
        complete = self._complete()
        if self.hold_globals and not complete:
            pass  # a warm start's globals stand until every batch has a summary
        else:
            self.hold_globals = False
            use_prime = st.S_prime is not None and not last  # S' leaves before the last update
            self.model = DPMixture.from_summary(
                ctx.obs, ctx.alloc, self.S0 + st.S_prime if use_prime else self.S0)
        elbo = self.model.elbo(self.S0) if complete else float("nan")
        self.trace.append(ctx.trace_row(st.lap + st.pos / len(st.order), b, elbo, self.model.K))

    def _collect(self, res: BatchResult) -> None:
        cap = self.ctx.cfg.birth.max_collect
        for birth in self.births:
            rows = res.collected.get(birth.target)
            if rows is None or birth.n >= cap:
                continue
            rows = rows[: cap - birth.n]
            birth.rows.append(rows)
            birth.n += rows.shape[0]

    def end_lap(self) -> None:
        """Merges, reordering and the creation of next lap's births, after the last batch."""
        ctx, st = self.ctx, self.lap_state
        if self.merges_on and st.pairs is not None and len(st.pairs):
            S, accepted, _ = merge_round(ctx.obs, ctx.alloc, self.S0.with_pairs(st.pairs, st.Hpair),
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
                X = stack_rows(birth.rows)
                birth.S_new = create(X, ctx.obs, ctx.alloc, ctx.new_uids(ctx.cfg.birth.fresh_K),
                                     ctx.cfg.birth, ctx.rng.birth)
            birth.rows = []
        for u in self.laps_since:
            self.laps_since[u] += 1
        if self.births_on or self.merges_on:  # the state after the lap's moves
            self.trace.append(ctx.trace_row(st.lap + 1, -1, self.model.elbo(self.S0),
                                            self.model.K))
        self.lap_state = None
        self.next_lap += 1

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

    def lap(self, after_wave: Callable[[MemoRun], None] | None = None) -> None:
        """Run the current lap to its end (starting it if needed)."""
        if self.lap_state is None:
            self.begin_lap()
        while self.lap_state.pos < len(self.lap_state.order):
            self.wave()
            if after_wave is not None:
                after_wave(self)
        self.end_lap()


def run_memo(ctx: FitContext, run: MemoRun, checkpoint: Callable[[MemoRun], None] | None = None,
             progress: Callable[[MemoRun], None] | None = None) -> MemoRun:
    """Run (or continue) the laps; ``checkpoint`` is called after every lap and, when
    cfg.checkpoint_every = M > 0, after every M batch visits; ``progress`` after every wave."""
    every = ctx.cfg.checkpoint_every
    saved_at = run.visits

    def after_wave(r: MemoRun) -> None:
        nonlocal saved_at
        if progress is not None:
            progress(r)
        if checkpoint is not None and every and r.visits - saved_at >= every:
            checkpoint(r)
            saved_at = r.visits

    while not run.finished:
        run.lap(after_wave)
        if checkpoint is not None:
            checkpoint(run)
            saved_at = run.visits
    return run
