"""Memoized online VB for DP mixtures (Hughes & Sudderth 2013, Sec. 3), with births, merges
and deletes.

Each lap visits every batch once in a fresh random order. A visit is Eq. 11: the batch's old
summary leaves S^0, its new one (from the local step under the current globals) enters, and the
globals are updated from S^0 (Eq. 10). To keep several workers busy, a wave of W batches is
computed in parallel against the same globals and then applied one by one in visiting order
(W = 4 by default, whatever the executor); W = 1 is exactly the paper's algorithm. Births
collect targeted data during one lap, are created at its end and adopted during the next,
with their summaries S' kept beside S^0 until that lap's last global update; their origins
take no item during that lap. A lap may also
try deleting small components: each visit records how its batch's summary changes without
each (only the component's own items move), and at the lap's end the deletion whose
alternative (S^0 without it, plus the batches' changes) has the highest exact ELBO is kept, if
that is higher than S^0's. Merges and reordering happen after a lap's last batch and are accepted
only when the exact full-data ELBO rises; then, when the run learns it, the observation prior
is learned from the components (ObsModel.learn_prior), fixed until the next lap end. Per-batch
summaries stored before a move are brought up to date by replaying the logged moves on them. A
warm start from a model with a
``past`` (earlier streaming blocks under a one-hot q(z): the estimator's partial_fit) keeps it
in S^0 for good; every move applies to it too, with zero pair and group entropies (no
deletes then: the past has no items to reassign).

One step is a wave, or the end of a lap (verification, a deletion, merges, reordering, creation
of births). The engine is an adapter: the run's state is one frozen value (MemoState), each
step a composition of the kernels in algorithms/memo/ (lap.py, lapend.py) with what the runtime
holds (the per-batch summaries in StateStores, the executor's pending waves, the context's
streams and learned prior); memo_checkpoint.py writes and reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from bnpmix.algorithms.memo import lap, lapend
from bnpmix.algorithms.memo.lap import Env
from bnpmix.algorithms.memo.state import RECENT_LAPS, Birth, MemoState
from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.obs.base import stack_rows
from bnpmix.algorithms.summary import Delete, Move, Replay, Summary
from bnpmix.algorithms.vb.birth import BirthConfig, create
from bnpmix.algorithms.vb.delete import DeleteConfig
from bnpmix.algorithms.vb.local import BatchResult, Globals
from bnpmix.algorithms.vb.merge import MergeConfig

from ..options import names, opt
from ..runtime.engine import Engine, Fitted, Step, TuneFlag, register
from ..runtime.store import StateStore
from .common import LapsConfig, initial_model, learn_prior, mass_order, visit
from .memo_checkpoint import COLUMNS, ROWS, SUMMARIES, Checkpointed, Wave

__all__ = ["MOVES", "RECENT_LAPS", "SUMMARIES", "MemoConfig", "MemoEngine"]

MOVES = ("birth", "merge", "delete")
# called after every batch visit with (lap, batch, globals used, result): for tests
VisitHook = Callable[[int, int, Globals, BatchResult], None]


@dataclass(frozen=True)
class MemoConfig(LapsConfig):
    K: int = opt(0, "initial number of components (0: a one-pass start for bag-of-words "
                 "models, one component otherwise; more than 1: k-means++ seeds from a sample)",
                 within="[0, inf)")
    laps: int = opt(100, "most passes through the data (a run stops earlier on convergence)",
                    within="[1, inf)")
    moves: tuple[str, ...] = opt(MOVES, "comma-separated moves: birth,merge,delete ('' for "
                                 "none)", parse=names)
    tol: float = opt(1e-6, "converged when a lap accepts no move, keeps K and changes the ELBO "
                     "by less than this per item (0: run every lap)", within="[0, inf)")
    ahead: int = opt(0, "waves computed ahead: the next waves start on the globals the driver "
                     "has while it applies the previous one, so wave j is computed on the "
                     "globals after wave j - 1 - ahead (with --wave 1, 0 is the paper's schedule)",
                     within="[0, inf)")
    birth: BirthConfig = field(default_factory=BirthConfig)
    merge: MergeConfig = field(default_factory=MergeConfig)
    delete: DeleteConfig = field(default_factory=DeleteConfig)

    def __post_init__(self) -> None:
        object.__setattr__(self, "moves", tuple(self.moves))
        bad = set(self.moves) - set(MOVES)
        if bad:
            raise ValueError(f"unknown moves {sorted(bad)}; choose from {MOVES}")


@register
class MemoEngine(Checkpointed, Engine):
    name = "memo"
    mixes_obs = True
    Config = MemoConfig
    summary = "memoized online VB: births, merges, deletes, exact ELBO"
    # four batches a wave, none ahead: up to four workers busy, each visit missing at most
    # three updates, and the result independent of how many workers there are
    # (benchmarks/speed/scaling.py and wave_cost.py measure the trade)
    default_wave = 4
    streams = True
    tuner = "bnpmix.pipeline.engines.memo_tune:tune_memo"
    races = True  # --obs auto's candidates are memo runs: the lap-end ELBO is the exact bound
    tune_flags = (TuneFlag("alpha_grid", "--alpha-grid", "values of alpha0 (default "
                           "0.1,1,10,100)", metavar="A,A,..."),
                  TuneFlag("lam0_grid", "--lam0-grid", "bag-of-words: values of the Dirichlet's "
                           "lam0 (default 0.01,0.1,1; not searched when --prior sets lam0)",
                           metavar="L,L,..."))
    small_options: ClassVar[dict[str, Any]] = {"laps": 3, "K": 3}

    on_visit: VisitHook | None = None

    @classmethod
    def lap_limit(cls, cfg: MemoConfig) -> int:
        return cfg.laps

    @classmethod
    def birth_rows(cls, cfg: MemoConfig) -> int:
        return cfg.birth.max_collect if "birth" in cfg.moves else 0

    def race_model(self) -> Mixture:
        """The winner's components, their q and its learned prior, held through the first lap
        of the whole-corpus run."""
        return self.s.model.copy()

    def start(self) -> None:
        """The initial model; a warm start's past blocks in S^0 for good, and its globals kept
        until every batch has been visited once (after a first partial S^0 its components
        would fall back to the prior, suppl. Sec. 2.3)."""
        ctx = self.ctx
        model = initial_model(ctx, self.cfg.K)
        past = model.past
        S0 = (past.copy() if past is not None else
              Summary.zeros(model.uids, ctx.obs.stat_shapes(), ctx.obs.shared_shapes()))
        self._setup(MemoState(model, S0, past, laps_since={int(u): 1 for u in model.uids},
                              hold_globals=bool(ctx.warm_start) or ctx.start_model is not None,
                              W=ctx.wave or self.default_wave, ahead=self.cfg.ahead))

    def _setup(self, state: MemoState) -> None:
        self.s = state
        self.store: StateStore[Summary] = StateStore(SUMMARIES, self.ctx.summary_bytes,
                                                     replay=Replay(),
                                                     budget=self.ctx.state_budget)
        # during a lap that tries deletions: for each, how every visited batch's summary changes
        # without it (local.delete_change)
        self.delete_changes: dict[int, StateStore[Summary]] = {}
        self.inflight: list[Wave] = []
        # each visited batch's words (Mult; else none), within the summaries' budget
        self.columns: StateStore[np.ndarray] = StateStore(COLUMNS, budget=self.store.budget)
        self.collected: StateStore[Any] = StateStore(ROWS, budget=self.store.budget)

    @property
    def done(self) -> bool:
        s = self.s
        return s.lap is None and (s.next_lap >= self.cfg.laps or bool(s.stopped))

    def env(self) -> Env:
        """What the kernels read besides the state (the observation model is the context's:
        the prior learned last)."""
        ctx = self.ctx
        n = ctx.corpus.n_partitions
        return Env(ctx.obs, ctx.alloc, self.cfg, ctx.rng, ctx.corpus.n_items, n,
                   len(self.store) == n)

    def step(self) -> Step:
        """A wave of visits, starting the lap first if needed; or, after its last wave, the
        lap's end."""
        if self.s.lap is None:
            self.begin_lap()
        if not self.s.lap.last:
            return Step(visits=self.wave())
        self.end_lap()
        return Step(lap_end=True)

    def status(self) -> str:
        row, st = self.trace[-1], self.s.lap
        where = f"batch {st.pos}/{len(st.order)}" if st is not None else "lap end"
        return (f"lap {int(row['lap'] - 1e-9) + 1}/{self.cfg.laps} {where}  K={row['K']}  "
                f"ELBO={row['elbo']:.6g}")

    def result(self) -> Fitted:
        """The final state, or the best lap-end state if a later lap ended lower."""
        s = self.s
        elbo = s.model.elbo(s.S0)
        info = {"stopped": s.stopped or f"the maximum of {self.cfg.laps} laps",
                "last_laps": list(s.recent)}
        if s.best is not None and s.best.elbo > elbo:
            info["returned"] = f"the best lap-end state (lap {s.best.lap}), not the last"
            return Fitted(s.best.fitted(), {"elbo": s.best.elbo}, info,
                          converged=bool(s.stopped))
        return Fitted(replace(s.model, past=s.past), {"elbo": elbo}, info,
                      converged=bool(s.stopped))

    @classmethod
    def stream_join(cls, model: Mixture, blocks: Iterable[Any]) -> None:
        """The block joins the past as its one-hot summary (``Mixture.one_hot_summary``): the
        next block's run has it in S^0, never revisited (Hughes & Sudderth Eq. 11)."""
        for X in blocks:
            block = model.one_hot_summary(X)
            model.past = block if model.past is None else model.past + block

    def close(self) -> None:
        if hasattr(self, "store"):
            self.store.close()
            self.columns.close()
            self.collected.close()
            self._clear_delete_changes()

    # the lap ---------------------------------------------------------------------------------

    def _log(self, moves: list[Move]) -> None:
        """Moves the stored batch summaries take when they are next read (Replay)."""
        for move in moves:
            self.store.log(move)

    def begin_lap(self) -> None:
        """Adopt last lap's births, plan merge pairs, choose birth targets and deletions, draw
        the order (lap.begin)."""
        self.s, moves = lap.begin(self.s, self.env())
        self._log(moves)
        self.delete_changes = {uid: self._new_store() for uid in self.s.lap.deletes}

    def _new_store(self) -> StateStore[Summary]:
        """A deletion's changes, within the budget of the batch summaries (shared: a change is
        as big as a batch summary and every batch has one, so up to delete.per_lap stores with
        a budget each held that many times summary_bytes, growing with the partitions)."""
        return StateStore(SUMMARIES, budget=self.store.budget)

    def _clear_delete_changes(self) -> None:
        for store in self.delete_changes.values():
            store.close()
        self.delete_changes = {}

    def wave(self) -> int:
        """Apply the next wave of W batches in visiting order, once it is computed; before
        waiting, submit waves up to ``ahead`` beyond it on the current globals."""
        st, W = self.s.lap, self.s.W
        submitted = st.pos + sum(len(w.batches) for w in self.inflight)
        while len(self.inflight) <= self.s.ahead and submitted < len(st.order):
            batches = [int(b) for b in st.order[submitted:submitted + W]]
            self.inflight.append(self._submit(Wave(batches, self._wave_globals(batches))))
            submitted += len(batches)
        wave = self.inflight.pop(0)
        for b, res in zip(wave.batches, wave.pending.result(), strict=True):
            if self.on_visit is not None:
                self.on_visit(st.lap, b, wave.g, res)
            self._apply(b, res)
        return len(wave.batches)

    def _submit(self, wave: Wave) -> Wave:
        plan = lap.plan(self.s, self.env())
        wave.pending = self.ctx.executor.submit(visit, wave.batches, self.ctx.obs, wave.g, plan)
        return wave

    def _wave_globals(self, batches: list[int]) -> Globals:
        """The globals a wave's tasks need: q(φ) only on the columns of its batches' words once
        all of them are known (Mult; shipped once for the wave), else whole."""
        cols = [self.columns.get(b) for b in batches]
        known = cols and all(c is not None for c in cols)
        return self.s.model.globals(np.unique(np.concatenate(cols)) if known else None)

    def _apply(self, b: int, res: BatchResult) -> None:
        """One visit (lap.absorb: Eq. 11; lap.global_update: Eq. 10), the batch's summary,
        deletion changes, words and collected rows stored, and the trace row."""
        old = self.store.get(b)
        self.s = lap.absorb(self.s, old, res)
        self.store.put(b, res.summary)
        for uid, change in res.delete_changes.items():
            self.delete_changes[uid].put(b, change)
        changed = lap.changed_where(old, res.summary.without_pairs())
        if changed is not None:
            self.columns.put(b, np.unique(changed.indices).astype(np.int64))
        self.s, rows = lap.collect(self.s, res, self.cfg.birth.max_collect, len(self.collected))
        for key, X in rows:  # keys 0, 1, ... until the lap's end
            self.collected.put(key, X)
        env = self.env()
        self.s = lap.global_update(self.s, env, changed)
        s, st = self.s, self.s.lap
        self.trace.append(self.ctx.trace_row(st.lap + st.pos / len(st.order), b,
                                             lap.visit_elbo(s, env), s.model.K))

    def _rows(self, birth: Birth) -> Any:
        """The rows collected for a birth, as one matrix."""
        return stack_rows([self.collected.get(k) for k in birth.chunks])

    def end_lap(self) -> None:
        """After the last batch: the births adopted this lap verified, a deletion, merges,
        reordering, the prior learned from the components (at the prior the moves were judged
        at; the next lap's births are created, adopted and judged at the new one), the next
        lap's births created; then the convergence test (lapend)."""
        ctx, env = self.ctx, self.env()
        end = lapend.opened(self.s)
        self.s, end, moves = lapend.verify_births(self.s, end, env)
        self._log(moves)
        if self.s.lap.deletes:
            end = self._delete(end, env)
        self.s, end, moves = lapend.merges(self.s, end, env)
        self._log(moves)
        self.s = lapend.settle(self.s, end)
        if self.cfg.moves:
            self.s, moves = lapend.reorder(self.s, mass_order(ctx.obs, ctx.alloc, self.s.S0))
            self._log(moves)
        after_moves = Mixture.from_summary(ctx.obs, ctx.alloc, self.s.S0)
        self.s = lapend.learned(self.s, learn_prior(ctx, after_moves, self.s.S0))
        self._create_births(end)
        s = self.s
        elbo = s.model.elbo(s.S0)
        if self.cfg.moves or s.model is not after_moves:  # moved, learned
            self.trace.append(ctx.trace_row(s.lap.lap + 1, -1, elbo, s.model.K))
        self.s = lapend.close(s, end, self.env(), elbo)

    def _delete(self, end: lapend.End, env: Env) -> lapend.End:
        """The lap's deletions judged (lapend.judge_deletes), each alternative built as it is
        read: S^0 without it plus the batches' changes (in partition order); if one is
        accepted every stored summary takes its change."""
        S0 = self.s.S0

        def alternatives() -> Iterator[tuple[int, Summary]]:
            for uid, changes in self.delete_changes.items():
                total = Delete(uid).apply(S0)
                for _, change in changes.items():
                    total.add_in_place(change)
                yield uid, total

        self.s, end, accepted = lapend.judge_deletes(self.s, end, env, alternatives())
        if accepted is not None:
            gone = Delete(accepted)
            for key, change in self.delete_changes[accepted].items():
                self.store.put(key, gone.apply(self.store.get(key).without_pairs()) + change)
        self._clear_delete_changes()
        return end

    def _create_births(self, end: lapend.End) -> None:
        """The next lap's births created from their rows, which are then released. Births
        targeted after a settled lap make their retries now, with new seeds, when this lap's
        end moved nothing either: a lap later their targets would hold the same rows (a merge
        or a delete gives a target rows its collection lacks)."""
        ctx, cfg = self.ctx, self.cfg.birth
        tries = 1 + cfg.retries if self.s.settled and not end.moved else 1
        created = [create(self._rows(b), ctx.obs, ctx.alloc, ctx.new_uids(cfg.fresh_K), cfg,
                          ctx.rng.birth, b.seen / b.n, cfg.attempts_at(self.s.S0.K) * tries)
                   if b.n else b.S_new for b in self.s.births]
        self.s = lapend.births_created(self.s, created, tries)
        self.collected.close()  # every birth's rows, created or dropped
