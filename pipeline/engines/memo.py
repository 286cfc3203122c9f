"""Memoized online VB for DP mixtures (Hughes & Sudderth 2013, Sec. 3), with births and merges.

Each lap visits every batch once in a fresh random order. A visit is Eq. 11: the batch's old
summary leaves S^0, its new one (from the local step under the current globals) enters, and the
globals are updated from S^0 (Eq. 10). To keep several workers busy, a wave of W batches is
computed in parallel against the same globals and then applied one by one in visiting order;
W = 1 is exactly the paper's algorithm. Births collect targeted data during one lap, are
created at its end and adopted during the next, with their summaries S' kept beside S^0 until
that lap's last global update. Merges and reordering happen after a lap's last batch and are
accepted only when the exact full-data ELBO rises. Per-batch summaries stored before a move are
brought up to date by replaying the logged moves on them.

One step is a wave, or the end of a lap (merges, reordering, creation of births).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bnpmix.algorithms.mixture import Mixture, optimal_elbo
from bnpmix.algorithms.summary import Insert, Move, Reorder, Summary
from bnpmix.algorithms.vb.birth import BirthConfig, choose_targets, create
from bnpmix.algorithms.vb.local import BatchResult, Globals, Plan
from bnpmix.algorithms.vb.merge import MergeConfig, merge_round, plan_pairs
from bnpmix.storage.arrays import ArrayFile

from ..config import names, opt
from ..runtime.data import data_from_arrays, data_to_arrays, stack_rows
from ..runtime.engine import Engine, Fitted, State, Step, register
from ..runtime.store import Codec, StateStore
from .common import (
    Items,
    LapsConfig,
    initial_model,
    model_from,
    model_items,
    summary_from,
    summary_items,
    visit,
)

MOVES = ("birth", "merge")
SUMMARIES: Codec[Summary] = Codec(Summary.to_arrays, Summary.from_arrays)

# called after every batch visit with (lap, batch, globals used, result): for tests
VisitHook = Callable[[int, int, Globals, BatchResult], None]


@dataclass(frozen=True)
class MemoConfig(LapsConfig):
    moves: tuple[str, ...] = opt((), "comma-separated moves: birth,merge", parse=names)
    birth: BirthConfig = field(default_factory=BirthConfig)
    merge: MergeConfig = field(default_factory=MergeConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "moves", tuple(self.moves))
        bad = set(self.moves) - set(MOVES)
        if bad:
            raise ValueError(f"unknown moves {sorted(bad)}; choose from {MOVES}")


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


@register
class MemoEngine(Engine):
    name = "memo"
    Config = MemoConfig
    summary = "memoized online VB: births, merges, exact ELBO"

    on_visit: VisitHook | None = None

    def start(self) -> None:
        self._setup(initial_model(self.ctx, self.cfg.K))
        # a warm start's components would fall back to the prior after a first partial S^0
        # (suppl. Sec. 2.3): its globals are kept until every batch has been visited once
        self.hold_globals = bool(self.ctx.warm_start)

    def _setup(self, model: Mixture) -> None:
        self.model = model
        self.S0 = Summary.zeros(model.uids, self.ctx.obs.stat_shapes())
        self.store: StateStore[Summary] = StateStore(SUMMARIES, self.ctx.summary_bytes)
        self.births: list[Birth] = []
        self.laps_since = {int(u): 1 for u in model.uids}
        self.lap_state: LapState | None = None
        self.next_lap = 0
        self.hold_globals = False

    @property
    def births_on(self) -> bool:
        return "birth" in self.cfg.moves

    @property
    def merges_on(self) -> bool:
        return "merge" in self.cfg.moves

    @property
    def done(self) -> bool:
        return self.next_lap >= self.cfg.laps and self.lap_state is None

    def step(self) -> Step:
        """A wave of visits, starting the lap first if needed; or, after its last wave, the
        lap's end."""
        if self.lap_state is None:
            self.begin_lap()
        st = self.lap_state
        if st.pos < len(st.order):
            return Step(visits=self.wave())
        self.end_lap()
        return Step(lap_end=True)

    def status(self) -> str:
        row, st = self.trace[-1], self.lap_state
        where = f"batch {st.pos}/{len(st.order)}" if st is not None else "lap end"
        return (f"lap {int(row['lap'] - 1e-9) + 1}/{self.cfg.laps} {where}  K={row['K']}  "
                f"ELBO={row['elbo']:.6g}")

    def result(self) -> Fitted:
        return Fitted(self.model, {"elbo": self.model.elbo(self.S0)})

    def close(self) -> None:
        if hasattr(self, "store"):
            self.store.close()

    # the lap ---------------------------------------------------------------------------------

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
        if not self.births_on or lap > self.cfg.laps - 3:
            return ()  # a birth collected now could not be adopted and then judged by merges
        laps = np.array([self.laps_since[int(u)] for u in self.model.uids])
        N = self.S0.N if self._complete() else np.ones(self.model.K)
        targets = choose_targets(self.model.uids, N, laps, self.cfg.birth.per_lap,
                                 self.ctx.rng.birth)
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
            self.model = Mixture.from_summary(ctx.obs, ctx.alloc, self.S0 + S_prime)
        pairs = plan_pairs(ctx.obs, self.S0, self.cfg.merge) if self.merges_on else None
        targets = self._choose_birth_targets(lap)
        order = ctx.rng.order.permutation(ctx.corpus.n_partitions)
        self.lap_state = LapState(lap, order, pairs, np.zeros(0 if pairs is None else len(pairs)),
                                  S_prime, targets)

    def wave(self) -> int:
        """Visit the next W batches against the same globals; apply them in visiting order."""
        ctx, st = self.ctx, self.lap_state
        batches = [int(b) for b in st.order[st.pos:st.pos + ctx.wave]]
        g = self.model.globals()
        plan = Plan(st.pairs, None, st.targets, self.cfg.birth.tau)
        results = ctx.executor.map(visit, batches, ctx.obs, g, plan)
        for b, res in zip(batches, results, strict=True):
            if self.on_visit is not None:
                self.on_visit(st.lap, b, g, res)
            self._apply(b, res)
        return len(batches)

    def _apply(self, b: int, res: BatchResult) -> None:
        """Eq. 11 for one batch, then the global update. S' (births being adopted) counts in
        every update of the lap but the last: the lap's final q, which its merges judge and the
        next lap starts from, rests on the batches' own summaries alone (suppl. Sec. 2.3)."""
        ctx, st = self.ctx, self.lap_state
        old = self.store.get(b)
        new = res.summary.without_pairs()
        self.S0 = self.S0 + new if old is None else (self.S0 - old.without_pairs()) + new
        self.store.put(b, res.summary)
        st.Hpair = st.Hpair + res.summary.Hpair
        self._collect(res)
        st.pos += 1
        last = st.pos == len(st.order)
        complete = self._complete()
        if not (self.hold_globals and not complete):  # a warm start's globals stand until then
            self.hold_globals = False
            use_prime = st.S_prime is not None and not last
            self.model = Mixture.from_summary(
                ctx.obs, ctx.alloc, self.S0 + st.S_prime if use_prime else self.S0)
        elbo = self.model.elbo(self.S0) if complete else float("nan")
        self.trace.append(ctx.trace_row(st.lap + st.pos / len(st.order), b, elbo, self.model.K))

    def _collect(self, res: BatchResult) -> None:
        cap = self.cfg.birth.max_collect
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
                                         ctx.rng.merge, self.cfg.merge)
            for move in accepted:  # S^0 has no pair entropies: replayed on stored summaries only
                self.store.log(move)
                self.laps_since.pop(move.b, None)
            self.S0 = S.without_pairs()
        if self.births_on or self.merges_on:
            self._reorder()
        self.model = Mixture.from_summary(ctx.obs, ctx.alloc, self.S0)
        for birth in self.births:
            if birth.n:
                X = stack_rows(birth.rows)
                birth.S_new = create(X, ctx.obs, ctx.alloc, ctx.new_uids(self.cfg.birth.fresh_K),
                                     self.cfg.birth, ctx.rng.birth)
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

    # checkpoints -----------------------------------------------------------------------------

    def state(self) -> State:
        st = self.lap_state
        meta: dict[str, Any] = {
            "next_lap": self.next_lap,
            "hold_globals": self.hold_globals,
            "laps_since": [[u, n] for u, n in self.laps_since.items()],
            "stored": self.store.keys(),
            "births": [{"target": b.target, "n": b.n, "rows": bool(b.rows)}
                       for b in self.births],
            "lap": None if st is None else {"lap": st.lap, "pos": st.pos,
                                             "targets": list(st.targets),
                                             "pairs": st.pairs is not None},
        }
        return meta, self._state_arrays()

    def _state_arrays(self) -> Items:
        yield from model_items("model", self.model)
        yield from summary_items("S0", self.S0)
        for i, b in enumerate(self.births):
            if b.rows:
                for k, v in data_to_arrays(stack_rows(b.rows)).items():
                    yield f"births/{i}/rows/{k}", v
            yield from summary_items(f"births/{i}/S_new", b.S_new)
        st = self.lap_state
        if st is not None:
            yield "lap/order", st.order
            yield "lap/Hpair", st.Hpair
            if st.pairs is not None:
                yield "lap/pairs", st.pairs
            yield from summary_items("lap/S_prime", st.S_prime)
        for key, S in self.store.items():  # streamed: one stored summary in memory at a time
            yield from summary_items(f"store/{key}", S)

    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        self._setup(model_from(arrays, "model", self.ctx))
        self.S0 = summary_from(arrays, "S0")
        self.next_lap = meta["next_lap"]
        self.hold_globals = meta["hold_globals"]
        self.laps_since = {int(u): int(n) for u, n in meta["laps_since"]}
        for key in meta["stored"]:
            self.store.put(int(key), summary_from(arrays, f"store/{key}"))
        for i, b in enumerate(meta["births"]):
            rows = [data_from_arrays(arrays.group(f"births/{i}/rows"))] if b["rows"] else []
            self.births.append(Birth(int(b["target"]), rows, int(b["n"]),
                                     summary_from(arrays, f"births/{i}/S_new")))
        lap = meta["lap"]
        if lap is not None:
            self.lap_state = LapState(
                lap["lap"], arrays["lap/order"], arrays["lap/pairs"] if lap["pairs"] else None,
                arrays["lap/Hpair"], summary_from(arrays, "lap/S_prime"),
                tuple(int(t) for t in lap["targets"]), lap["pos"])
