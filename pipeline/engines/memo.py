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
of births).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from bnpmix.algorithms import sparse_stats
from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.obs.base import stack_rows
from bnpmix.algorithms.summary import (
    Delete,
    Insert,
    Merge,
    MergeGroup,
    Move,
    Replay,
    Summary,
)
from bnpmix.algorithms.vb.birth import BirthConfig, choose_targets, create, verify
from bnpmix.algorithms.vb.delete import DeleteConfig, delete_candidates, judge
from bnpmix.algorithms.vb.local import BatchResult, Globals, Plan
from bnpmix.algorithms.vb.merge import MergeConfig, merge_round, plan_pairs
from bnpmix.storage.arrays import ArrayFile

from ..options import names, opt
from ..runtime.data import data_from_arrays, data_to_arrays
from ..runtime.engine import Engine, Fitted, State, Step, TuneFlag, register
from ..runtime.store import Codec, StateStore
from .common import (
    Items,
    LapsConfig,
    initial_model,
    learn_prior,
    mass_order,
    model_from,
    model_items,
    summary_from,
    summary_items,
    visit,
)

MOVES = ("birth", "merge", "delete")
# a lap without moves that changes the ELBO by less than this per item has settled: the next lap
# tries births on birth.settled_per_lap targets, so that a run with many components (each must
# fail a birth before the run converges) does not spend a lap per component
SETTLED = 1e-3
SUMMARIES: Codec[Summary] = Codec(Summary.to_arrays, Summary.from_arrays)
# a Mult batch's words (sorted column indices): held within the summaries' budget, since their
# number grows with the partitions
COLUMNS: Codec[np.ndarray] = Codec(lambda cols: {"cols": cols}, lambda arrays: arrays["cols"])
# the rows a lap collects for its births (birth targets x max_collect rows: of 200-word
# documents, 1.5 KB each, up to 750 MB for 50 targets), held within the summaries' budget too,
# the rest spilled until its birth is created at the lap's end
ROWS: Codec[Any] = Codec(data_to_arrays, data_from_arrays)
# lap ends whose figures summary.json keeps (``last_laps``: ELBO change per item, K, moves
# accepted), so that a run stopped at its lap cap says what was still moving
RECENT_LAPS = 5

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


@dataclass
class Birth:
    """A birth in progress: its target, the rows collected for it (``chunks``: their keys in
    the engine's store of collected rows; n of the ``seen`` that qualified, fewer once the cap
    N' is reached), and later its S' with the target's mass when S' was created."""

    target: int
    chunks: list[int] = field(default_factory=list)
    n: int = 0
    S_new: Summary | None = None
    seen: int = 0
    mass: float = 0.0


@dataclass
class LapState:
    """Where a lap stands: its order, planned pairs, birth targets, S' with the families being
    adopted (origin, newborns), their planned groups and each origin's mass before the
    adoption, the next position and the components whose deletion the lap tries."""

    lap: int
    order: np.ndarray
    pairs: np.ndarray | None
    Hpair: np.ndarray
    S_prime: Summary | None
    targets: tuple[int, ...]
    pos: int = 0
    groups: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    Hgroup: np.ndarray = field(default_factory=lambda: np.zeros(0))
    origin_N: np.ndarray = field(default_factory=lambda: np.zeros(0))
    deletes: tuple[int, ...] = ()

    @property
    def families(self) -> list[tuple[int, tuple[int, ...]]]:
        return [(int(row[0]), tuple(int(u) for u in row[1:] if u >= 0)) for row in self.groups]


def _changed(old: Summary | None, new: Summary) -> Any:
    """Where S^0 changed when ``old`` left and ``new`` entered (None: anywhere)."""
    pattern = new.changed_pattern()
    if pattern is None or old is None:
        return pattern
    before = old.changed_pattern()
    return None if before is None else sparse_stats.canonical((pattern + before).sign())


def family_groups(families: list[tuple[int, tuple[int, ...]]]) -> np.ndarray:
    """Rows (origin, newborn, ...) padded with -1."""
    width = 1 + max((len(n) for _, n in families), default=0)
    rows = np.full((len(families), width), -1, dtype=np.int64)
    for i, (origin, newborns) in enumerate(families):
        rows[i, : 1 + len(newborns)] = (origin, *newborns)
    return rows


@dataclass
class Wave:
    """Batches submitted together, the globals they were given and their pending results
    (None after a restore, until the wave is submitted again with the same globals)."""

    batches: list[int]
    g: Globals
    pending: Any = None


@register
class MemoEngine(Engine):
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
        return self.model.copy()

    def start(self) -> None:
        model = initial_model(self.ctx, self.cfg.K)
        self._setup(model)
        if model.past is not None:  # earlier streaming blocks: in S^0 for good
            self.past, self.S0 = model.past, model.past.copy()
        # a warm start's components would fall back to the prior after a first partial S^0
        # (suppl. Sec. 2.3): its globals are kept until every batch has been visited once
        self.hold_globals = bool(self.ctx.warm_start) or self.ctx.start_model is not None

    def _setup(self, model: Mixture) -> None:
        self.model = model
        self.S0 = Summary.zeros(model.uids, self.ctx.obs.stat_shapes(),
                                self.ctx.obs.shared_shapes())
        self.past: Summary | None = None  # the warm start's past blocks (Mixture.past)
        self.store: StateStore[Summary] = StateStore(SUMMARIES, self.ctx.summary_bytes,
                                                     replay=Replay(),
                                                     budget=self.ctx.state_budget)
        # during a lap that tries deletions: for each, how every visited batch's summary changes
        # without it (local.delete_change)
        self.delete_changes: dict[int, StateStore[Summary]] = {}
        # component id -> its N when its deletion was refused
        self.kept: dict[int, float] = {}
        self.births: list[Birth] = []
        self.laps_since = {int(u): 1 for u in model.uids}
        self.lap_state: LapState | None = None
        self.next_lap = 0
        self.hold_globals = False
        # origin id -> (its N when its birth failed, the lap at whose end it failed, failures in
        # a row at about that N)
        self.failed: dict[int, tuple[float, int, int]] = {}
        self.best: tuple[float, int, Mixture] | None = None  # (ELBO, lap, model) at lap ends
        self.last_elbo: float | None = None  # the previous lap end's
        self.settled = False  # the last lap moved nothing and changed the ELBO < SETTLED
        self.births_kept = 0  # birth families the last verification kept
        self.recent: list[dict[str, Any]] = []  # the last RECENT_LAPS lap ends (lap_record)
        self.stopped = ""
        self.W = self.ctx.wave or self.default_wave
        self.ahead = self.cfg.ahead
        self.inflight: list[Wave] = []
        # each visited batch's words (Mult; else none), within the summaries' budget
        self.columns: StateStore[np.ndarray] = StateStore(COLUMNS, budget=self.store.budget)
        self.collected: StateStore[Any] = StateStore(ROWS, budget=self.store.budget)
        self.model_is_S0 = False  # q(φ) is the global update of S^0 itself (no S', no hold)
        self.model_is_prime = False  # q(φ) is the global update of S^0 + S' (adoption laps)

    @property
    def births_on(self) -> bool:
        return "birth" in self.cfg.moves

    @property
    def merges_on(self) -> bool:
        return "merge" in self.cfg.moves

    @property
    def deletes_on(self) -> bool:
        return "delete" in self.cfg.moves and self.past is None  # past blocks have no items

    @property
    def done(self) -> bool:
        return self.lap_state is None and (self.next_lap >= self.cfg.laps or bool(self.stopped))

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
        """The final state, or the best lap-end state if a later lap ended lower."""
        elbo = self.model.elbo(self.S0)
        self.model.past = self.past
        info = {"stopped": self.stopped or f"the maximum of {self.cfg.laps} laps",
                "last_laps": list(self.recent)}
        if self.best is not None and self.best[0] > elbo:
            best_elbo, lap, model = self.best
            info["returned"] = f"the best lap-end state (lap {lap}), not the last"
            return Fitted(model, {"elbo": best_elbo}, info, converged=bool(self.stopped))
        return Fitted(self.model, {"elbo": elbo}, info, converged=bool(self.stopped))

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

    def _log(self, move: Move) -> None:
        self.store.log(move)
        self.S0 = move.apply(self.S0)
        if self.past is not None:
            self.past = move.apply(self.past)

    def _move_past(self, moves: list[Move], S: Summary) -> None:
        """The lap end's verified births and merges applied to the past blocks too: their
        one-hot q(z) gives every pair and group merge entropy 0, which S's planned pairs and
        groups (``S``: S^0 with them) carry for the past as zeros."""
        if self.past is None or not moves:
            return
        zeros = np.zeros(len(S.pairs)), np.zeros(len(S.groups))
        past = self.past.with_pairs(S.pairs, zeros[0], S.groups, zeros[1])
        for move in moves:
            past = move.apply(past)
        self.past = past.without_pairs()

    def _adopt(self) -> tuple[Summary | None, list[tuple[int, tuple[int, ...]]], np.ndarray]:
        """Insert created components into S^0 (zero mass); return S' to keep beside it, the
        families (origin, newborns) to verify at the lap's end and each origin's mass when
        its newborns were created."""
        # one family per origin: two births whose targets were merged into one component in
        # the creating lap share it, and verifying the first family (undone or kept, its
        # origin deleted) voids the second's group entropy
        done: list[Birth] = []
        for b in self.births:
            if b.S_new is not None and all(b.target != d.target for d in done):
                done.append(b)
        created = [b.S_new for b in done]
        families = [(b.target, tuple(int(u) for u in b.S_new.uids)) for b in done]
        masses = np.array([b.mass for b in done], dtype=float)
        self.births = []
        if not created:
            return None, [], masses
        uids = tuple(int(u) for s in created for u in s.uids)
        self._log(Insert(uids))
        S_prime = Summary.zeros(self.S0.uids, self.ctx.obs.stat_shapes(),
                                self.ctx.obs.shared_shapes())
        for s in created:
            idx = np.array([S_prime.index(u) for u in s.uids])
            S_prime.N[idx] = s.N
            for k in S_prime.stats:
                sparse_stats.place(S_prime.stats[k], idx, s.stats[k])
            for k in S_prime.shared:  # the collected items' (tied-gauss: their scatter)
                S_prime.shared[k] += s.shared[k]
        for u in uids:
            self.laps_since[u] = 1
        return S_prime, families, masses

    def _open(self, N: np.ndarray, adopting: set[int], lap: int) -> np.ndarray:
        """Components a birth may target in ``lap``: not an origin whose newborns take over
        its data in this lap, not one too small to give a fresh run 2 K' items (once masses
        are known), and not one whose births failed (retries spent; _still_failed), until a
        lap has passed since (masses right after an undone birth are not yet back) and its
        mass has changed by 10 %."""
        floor = 2 * self.cfg.birth.fresh_K if self._complete() else 0
        return np.array([int(u) not in adopting and n >= floor
                         and not self._still_failed(int(u), n, lap)
                         for u, n in zip(self.S0.uids, N, strict=True)], dtype=bool)

    def _still_failed(self, uid: int, n: float, lap: int) -> bool:
        """Closed: its birth failed 1 + birth.retries times in a row at about its mass (within
        10 %; until then it is retried from the next lap, with new seeds, or at once after a
        settled lap), and either the last failure was at the end of the previous lap or its mass
        has not changed by 10 % since."""
        if uid not in self.failed:
            return False
        mass, failed_at, count = self.failed[uid]
        if count <= self.cfg.birth.retries:
            return False
        return lap <= failed_at + 1 or abs(n - mass) <= 0.1 * mass

    def _record_failure(self, uid: int, mass: float, lap: int, tries: int = 1) -> None:
        """A failed birth on ``uid`` at ``mass`` that stood for ``tries`` failures (its
        retries made at once): that many more in a row if the previous one was at about the
        same mass, else the first ones."""
        prev = self.failed.get(uid)
        same = prev is not None and abs(mass - prev[0]) <= 0.1 * prev[0]
        self.failed[uid] = mass, lap, (prev[2] if same else 0) + tries

    def _choose_birth_targets(self, lap: int, adopting: set[int],
                              S_prime: Summary | None) -> tuple[int, ...]:
        """Targets ∝ N_k L_k² (suppl. Eq. 22) among the open components. In a lap adopting
        births the newborns may be targets too, at the mass S' gives them (in S^0 they start
        empty): when every component is an origin, the lap still collects for the next
        births, so K can grow every lap instead of every other one."""
        if not self.births_on or lap > self.cfg.laps - 3:
            return ()  # a birth collected now could not be adopted and then judged by merges
        laps = np.array([self.laps_since[int(u)] for u in self.S0.uids])
        N = self.S0.N if self._complete() else np.ones(self.S0.K)
        if S_prime is not None:
            N = N + S_prime.N
        open_ = self._open(N, adopting, lap)
        if not open_.any():
            return ()
        n = max(self.cfg.birth.per_lap, self.cfg.birth.settled_per_lap if self.settled else 0,
                min(self.cfg.birth.settled_per_lap, 2 * self.births_kept))
        targets = choose_targets(self.S0.uids[open_], N[open_], laps[open_], n,
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
        S_prime, families, masses = self._adopt()
        if S_prime is not None:
            self.model = Mixture.from_summary(ctx.obs, ctx.alloc, self.S0 + S_prime)
            self.model_is_S0, self.model_is_prime = False, True
        pairs = plan_pairs(ctx.obs, self.S0, self.cfg.merge) if self.merges_on else None
        targets = self._choose_birth_targets(lap, {origin for origin, _ in families}, S_prime)
        order = ctx.rng.order.permutation(ctx.corpus.n_partitions)
        groups = family_groups(families)
        deletes = () if families else self._choose_deletes()
        self.delete_changes = {uid: self._new_store() for uid in deletes}
        self.lap_state = LapState(lap, order, pairs, np.zeros(0 if pairs is None else len(pairs)),
                                  S_prime, targets, 0, groups, np.zeros(len(groups)), masses,
                                  deletes)

    def _delete_open(self) -> np.ndarray:
        """Components a deletion may try, smallest first: small (DeleteConfig) and not refused
        at about their current mass (within 10 %), once every batch has a summary."""
        if not (self.deletes_on and self._complete()):
            return np.zeros(0, dtype=np.int64)
        small = delete_candidates(self.S0.uids, self.S0.N, self.cfg.delete)
        return np.array([u for u in small.tolist() if u not in self.kept
                         or abs(self._mass(u) - self.kept[u]) > 0.1 * self.kept[u]],
                        dtype=np.int64)

    def _choose_deletes(self) -> tuple[int, ...]:
        """The delete.per_lap smallest open candidates (not in a lap adopting births: its visits
        record the group entropies of their verification, which the changes would
        lack)."""
        return tuple(int(u) for u in self._delete_open()[: self.cfg.delete.per_lap])

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
        st = self.lap_state
        submitted = st.pos + sum(len(w.batches) for w in self.inflight)
        while len(self.inflight) <= self.ahead and submitted < len(st.order):
            batches = [int(b) for b in st.order[submitted:submitted + self.W]]
            self.inflight.append(self._submit(Wave(batches, self._wave_globals(batches))))
            submitted += len(batches)
        wave = self.inflight.pop(0)
        for b, res in zip(wave.batches, wave.pending.result(), strict=True):
            if self.on_visit is not None:
                self.on_visit(st.lap, b, wave.g, res)
            self._apply(b, res)
        return len(wave.batches)

    def _submit(self, wave: Wave) -> Wave:
        st = self.lap_state
        plan = Plan(st.pairs, st.groups, st.targets, self.cfg.birth.tau, st.deletes,
                    tuple(origin for origin, _ in st.families), wanted=self._wanted(st.targets))
        wave.pending = self.ctx.executor.submit(visit, wave.batches, self.ctx.obs, wave.g, plan)
        return wave

    def _wave_globals(self, batches: list[int]) -> Globals:
        """The globals a wave's tasks need: q(φ) only on the columns of its batches' words once
        all of them are known (Mult; shipped once for the wave), else whole."""
        cols = [self.columns.get(b) for b in batches]
        known = cols and all(c is not None for c in cols)
        return self.model.globals(np.unique(np.concatenate(cols)) if known else None)

    def _apply(self, b: int, res: BatchResult) -> None:
        """Eq. 11 for one batch, then the global update. S' (births being adopted) counts in
        every update of the lap but the last: the lap's final q, which its merges judge and the
        next lap starts from, rests on the batches' own summaries alone (suppl. Sec. 2.3).
        S^0 changes in place, and q(φ) only where the batch's statistics can change it (a
        Mult batch's (component, word) entries) while it is the update of S^0 itself (in an
        adoption lap: of S^0 + S', which the visit changes on the same entries)."""
        ctx, st = self.ctx, self.lap_state
        old = self.store.get(b)
        new = res.summary.without_pairs()
        if old is not None:
            self.S0.add_in_place(old.without_pairs(), -1.0)
        self.S0.add_in_place(new)
        self.store.put(b, res.summary)
        for uid, change in res.delete_changes.items():
            self.delete_changes[uid].put(b, change)
        changed = _changed(old, new)
        if changed is not None:
            self.columns.put(b, np.unique(changed.indices).astype(np.int64))
        st.Hpair = st.Hpair + res.summary.Hpair
        st.Hgroup = st.Hgroup + res.summary.Hgroup
        self._collect(res)
        st.pos += 1
        last = st.pos == len(st.order)
        complete = self._complete()
        if not (self.hold_globals and not complete):  # a warm start's globals stand until then
            self.hold_globals = False
            use_prime = st.S_prime is not None and not last
            S = self.S0 + st.S_prime if use_prime else self.S0
            if changed is not None and (self.model_is_prime if use_prime else self.model_is_S0):
                self.model = self.model.updated(S, changed)  # S^0 (+ S') moved only there
            else:
                self.model = Mixture.from_summary(ctx.obs, ctx.alloc, S)
            self.model_is_S0, self.model_is_prime = not use_prime, use_prime
        elbo = (self.model.elbo(self.S0, at_optimum=self.model_is_S0) if complete
                else float("nan"))
        self.trace.append(ctx.trace_row(st.lap + st.pos / len(st.order), b, elbo, self.model.K))

    def _wanted(self, targets: tuple[int, ...]) -> tuple[int, ...]:
        """The rows each target's birth still lacks of its cap now; by the time a visit's
        result is collected it lacks no more, so the visit's first rows past tau are the ones
        _collect would keep of them all."""
        cap = self.cfg.birth.max_collect
        return tuple(max([cap - b.n for b in self.births if b.target == t], default=0)
                     for t in targets)

    def _collect(self, res: BatchResult) -> None:
        cap = self.cfg.birth.max_collect
        for birth in self.births:
            rows = res.collected.get(birth.target)
            if rows is None:
                continue
            birth.seen += res.qualified[birth.target]
            if birth.n >= cap:
                continue
            rows = rows[: cap - birth.n]
            birth.chunks.append(len(self.collected))  # keys 0, 1, ... until the lap's end
            self.collected.put(birth.chunks[-1], rows)
            birth.n += rows.shape[0]

    def _rows(self, birth: Birth) -> Any:
        """The rows collected for a birth, as one matrix."""
        return stack_rows([self.collected.get(k) for k in birth.chunks])

    def end_lap(self) -> None:
        """Verification of the births adopted this lap, merges, reordering, the prior learned
        from the components (at the prior the moves were judged at; the next lap's births are
        created, adopted and judged at the new one) and the creation of next lap's births,
        after the last batch; then the convergence test."""
        ctx, st = self.ctx, self.lap_state
        pairs = st.pairs if st.pairs is not None else np.zeros((0, 2), np.int64)
        S = self.S0.with_pairs(pairs, st.Hpair, st.groups, st.Hgroup)
        planned = S
        moved = False
        verified: list = []
        accepted: list = []
        if len(st.groups):
            # judged against the state the adoption replaced too: the previous lap end's
            S, verified = verify(ctx.obs, ctx.alloc, S, st.families,
                                 drop_origins=self.past is None, replaced=self.last_elbo)
            undone = [m for m in verified if isinstance(m, MergeGroup)]
            origin_N = dict(zip((origin for origin, _ in st.families), st.origin_N, strict=True))
            for move in verified:  # S^0 has no group entropies: replayed on stored summaries only
                self.store.log(move)
            for move in undone:
                # failed at the mass it had before the adoption lap, to which it returns: the
                # lap's S' lets the newborns draw in neighbours' items, merged back into it now
                self._record_failure(move.keep, float(origin_N[move.keep]), st.lap)
                for u in move.gone:  # with any birth this lap collected for them
                    self._drop(u)
            for origin, _ in st.families:
                if not any(m.keep == origin for m in undone):
                    self.failed.pop(origin, None)
            for move in verified:
                if isinstance(move, Merge):  # newborns merged inside their family
                    self._forget(move)
                elif isinstance(move, Delete):  # a kept family's empty origin
                    self._drop(move.uid)
            moved = len(undone) < len(st.groups)  # a birth kept
        # while births are kept, twice as many targets next lap (up to settled_per_lap): K far
        # below what the data support grows geometrically, not by one component a lap
        self.births_kept = len(st.groups) - len(undone) if len(st.groups) else 0
        deleted = bool(st.deletes) and self._delete()
        if deleted:
            S, moved = self.S0, True  # no merge this lap: the pair entropies were S^0's
        if self.merges_on and len(S.pairs):
            S, accepted, _ = merge_round(ctx.obs, ctx.alloc, S, ctx.rng.merge, self.cfg.merge)
            for move in accepted:
                self.store.log(move)
                self._forget(move)
            moved = moved or bool(accepted)
        self.S0 = S.without_pairs()
        self._move_past([*verified, *accepted], planned)
        if self.cfg.moves:
            self._reorder()
        after_moves = Mixture.from_summary(ctx.obs, ctx.alloc, self.S0)
        self.model = learn_prior(ctx, after_moves, self.S0)
        self.model_is_S0, self.model_is_prime = True, False
        # births targeted after a settled lap make their retries now, with new seeds, when this
        # lap's end moved nothing either: a lap later their targets would hold the same rows
        # (a merge or a delete gives a target rows its collection lacks)
        cfg = self.cfg.birth
        tries = 1 + cfg.retries if self.settled and not moved else 1
        for birth in self.births:
            if birth.n:
                X = self._rows(birth)
                birth.S_new = create(X, ctx.obs, ctx.alloc, ctx.new_uids(cfg.fresh_K), cfg,
                                     ctx.rng.birth, birth.seen / birth.n,
                                     cfg.attempts_at(self.S0.K) * tries)
                birth.mass = self._mass(birth.target)
            if birth.S_new is None and birth.target in self.laps_since:
                self._record_failure(birth.target, self._mass(birth.target), st.lap, tries)
            birth.chunks = []
        self.collected.close()  # every birth's rows, created or dropped
        for u in self.laps_since:
            self.laps_since[u] += 1
        elbo = self.model.elbo(self.S0)
        if self.cfg.moves or self.model is not after_moves:  # moved, learned
            self.trace.append(ctx.trace_row(st.lap + 1, -1, elbo, self.model.K))
        self._record_lap(st.lap + 1, elbo, self.births_kept, len(accepted), int(deleted))
        self._check_convergence(st, elbo, moved)
        if self.best is None or elbo > self.best[0]:
            self.best = (elbo, st.lap + 1, replace(self.model.copy(), past=self.past))
        self.lap_state = None
        self.next_lap += 1

    def _delete(self) -> bool:
        """Judge the lap's deletions on the exact ELBO (delete.judge), each from its alternative
        S^0: S^0 without it plus the batches' changes (in partition order); if one is accepted,
        every stored summary takes its change and S^0 becomes the alternative. Refused ones
        wait for a change of their mass."""
        def alternative(uid: int, changes: StateStore[Summary]) -> Summary:
            total = Delete(uid).apply(self.S0)
            for _, change in changes.items():
                total.add_in_place(change)
            return total

        accepted, S, refused = judge(self.ctx.obs, self.ctx.alloc, self.S0,
                                     ((uid, alternative(uid, changes))
                                      for uid, changes in self.delete_changes.items()))
        for uid in refused:
            self.kept[uid] = self._mass(uid)
        if accepted is not None:
            gone = Delete(accepted)
            for key, change in self.delete_changes[accepted].items():
                self.store.put(key, gone.apply(self.store.get(key).without_pairs()) + change)
            self.S0 = S
            self._drop(accepted)
        self._clear_delete_changes()
        return accepted is not None

    def _drop(self, uid: int) -> None:
        """Bookkeeping of a deleted component (births targeting it are dropped)."""
        self.laps_since.pop(uid, None)
        self.failed.pop(uid, None)
        self.kept.pop(uid, None)
        self.births = [b for b in self.births if b.target != uid]

    def _forget(self, move: Merge) -> None:
        """Bookkeeping of a merge: component b is gone into a."""
        self.laps_since.pop(move.b, None)
        self.failed.pop(move.b, None)
        self.kept.pop(move.b, None)
        for birth in self.births:  # a target merged away: its data is now move.a's
            if birth.target == move.b:
                birth.target = move.a

    def _mass(self, uid: int) -> float:
        """A component's N in S^0 (0 if it is not there)."""
        return float(self.S0.N[self.S0.index(uid)]) if uid in self.S0.uids else 0.0

    def _record_lap(self, lap: int, elbo: float, births: int, merges: int, deletes: int) -> None:
        """Keep the lap end's figures among the last RECENT_LAPS (summary.json's
        ``last_laps``): its ELBO change per item since the previous lap end (None for the
        first, or while some batch has no summary yet), K, and the births kept, merges and
        deletions accepted at it."""
        previous = self.last_elbo
        change = (None if previous is None or not self._complete()
                  else (elbo - previous) / self.ctx.corpus.n_items)
        self.recent = [*self.recent, {"lap": lap, "elbo_change_per_item": change,
                                      "K": int(self.model.K), "births": int(births),
                                      "merges": int(merges), "deletes": int(deletes)}
                       ][-RECENT_LAPS:]

    def _check_convergence(self, st: LapState, elbo: float, moved: bool) -> None:
        """Converged: a complete lap that adopted, kept, merged and deleted nothing, has no
        birth waiting and none left to try (every component's birth failed, retries included),
        no deletion left to try, and changed the ELBO by less than tol per item. Settled (the
        next lap tries births on more targets): such a lap that changed the ELBO by less than
        SETTLED per item, whatever the births left."""
        still = (st.S_prime is None and not moved
                 and not any(b.S_new is not None for b in self.births))
        quiet = (still and not (self.births_on and self._open(self.S0.N, set(), st.lap + 1).any())
                 and not len(self._delete_open()))
        previous, self.last_elbo = self.last_elbo, elbo
        complete = previous is not None and self._complete()
        change = abs(elbo - previous) / self.ctx.corpus.n_items if complete else np.inf
        self.settled = still and change < SETTLED
        if self.cfg.tol > 0 and quiet and change < self.cfg.tol:
            self.stopped = (f"converged at lap {st.lap + 1}: ELBO change {change:.3g} per item "
                            f"< tol {self.cfg.tol:g}, no move accepted, K = {self.model.K}")

    def _reorder(self) -> None:
        """Sort components by decreasing mass when that raises the ELBO (stick-breaking order)."""
        move = mass_order(self.ctx.obs, self.ctx.alloc, self.S0)
        if move is not None:
            self._log(move)

    # checkpoints -----------------------------------------------------------------------------

    def state(self) -> State:
        st = self.lap_state
        meta: dict[str, Any] = {
            "next_lap": self.next_lap,
            "hold_globals": self.hold_globals,
            "failed": [[u, n, lap, count] for u, (n, lap, count) in self.failed.items()],
            "best": None if self.best is None else list(self.best[:2]),
            "best_is_model": self._best_is_model(),
            "last_elbo": self.last_elbo,
            "settled": self.settled,
            "births_kept": self.births_kept,
            "recent": self.recent,
            "stopped": self.stopped,
            "W": self.W,
            "ahead": self.ahead,
            "model_is_S0": self.model_is_S0,
            "model_is_prime": self.model_is_prime,
            "inflight": [w.batches for w in self.inflight],
            "laps_since": [[u, n] for u, n in self.laps_since.items()],
            "stored": self.store.keys(),
            "delete_changes": {str(u): store.keys() for u, store in self.delete_changes.items()},
            "kept": [[u, n] for u, n in self.kept.items()],
            "births": [{"target": b.target, "n": b.n, "seen": b.seen, "mass": b.mass,
                        "rows": bool(b.chunks)} for b in self.births],
            "lap": None if st is None else {"lap": st.lap, "pos": st.pos,
                                             "targets": list(st.targets),
                                             "pairs": st.pairs is not None,
                                             "deletes": list(st.deletes)},
        }
        return meta, self._state_arrays()

    def _best_is_model(self) -> bool:
        """Whether the best lap-end state is the current model, kept at the last lap end and
        unchanged since (a checkpoint then holds its arrays once)."""
        return (self.best is not None and self.lap_state is None and not self.inflight
                and self.best[1] == self.next_lap)

    def _state_arrays(self) -> Items:
        yield from model_items("model", self.model)
        if self.best is not None and not self._best_is_model():
            yield from model_items("best", self.best[2])
        yield from summary_items("S0", self.S0)
        yield from summary_items("past", self.past)
        for i, b in enumerate(self.births):
            if b.chunks:
                for k, v in data_to_arrays(self._rows(b)).items():
                    yield f"births/{i}/rows/{k}", v
            yield from summary_items(f"births/{i}/S_new", b.S_new)
        st = self.lap_state
        if st is not None:
            yield "lap/order", st.order
            yield "lap/Hpair", st.Hpair
            yield "lap/groups", st.groups
            yield "lap/Hgroup", st.Hgroup
            yield "lap/origin_N", st.origin_N
            if st.pairs is not None:
                yield "lap/pairs", st.pairs
            yield from summary_items("lap/S_prime", st.S_prime)
        for i, w in enumerate(self.inflight):  # what a submitted wave was given
            yield f"inflight/{i}/uids", w.g.uids
            yield f"inflight/{i}/Elogw", w.g.Elogw
            for k, v in w.g.post.items():
                yield f"inflight/{i}/post/{k}", v
        for key, S in self.store.items():  # streamed: one stored summary in memory at a time
            yield from summary_items(f"store/{key}", S)
        for uid, store in self.delete_changes.items():
            for key, S in store.items():
                yield from summary_items(f"delete_changes/{uid}/{key}", S)

    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        self._setup(model_from(arrays, "model", self.ctx))
        self.S0 = summary_from(arrays, "S0")
        self.past = summary_from(arrays, "past")
        self.next_lap = meta["next_lap"]
        self.hold_globals = meta["hold_globals"]
        # a checkpoint written before failures kept their lap (or their count): long enough ago
        # (-2) that only the mass rule applies (retries spent)
        retried = self.cfg.birth.retries + 1
        self.failed = {int(f[0]): (float(f[1]), int(f[2]) if len(f) > 2 else -2,
                                   int(f[3]) if len(f) > 3 else retried)
                       for f in meta["failed"]}
        if meta["best"] is not None:
            best = (replace(self.model.copy(), past=self.past) if meta.get("best_is_model")
                    else model_from(arrays, "best", self.ctx))
            self.best = (float(meta["best"][0]), int(meta["best"][1]), best)
        self.last_elbo = meta["last_elbo"]
        self.settled = bool(meta.get("settled", False))
        self.births_kept = int(meta.get("births_kept", 0))
        self.recent = list(meta.get("recent", []))
        self.stopped = meta["stopped"]
        self.W, self.ahead = int(meta["W"]), int(meta["ahead"])
        self.model_is_S0 = bool(meta["model_is_S0"])
        self.model_is_prime = bool(meta.get("model_is_prime", False))
        self.laps_since = {int(u): int(n) for u, n in meta["laps_since"]}
        for key in meta["stored"]:
            S = summary_from(arrays, f"store/{key}")
            self.store.put(int(key), S)
            changed = S.changed_pattern()
            if changed is not None:
                self.columns.put(int(key), np.unique(changed.indices).astype(np.int64))
        for uid, keys in meta.get("delete_changes", {}).items():
            self.delete_changes[int(uid)] = self._new_store()
            for key in keys:
                self.delete_changes[int(uid)].put(
                    int(key), summary_from(arrays, f"delete_changes/{uid}/{key}"))
        # a checkpoint written before the changes were kept has each batch's whole alternative
        for uid, keys in meta.get("alternatives", {}).items():
            self.delete_changes[int(uid)] = self._new_store()
            gone = Delete(int(uid))
            for key in keys:
                alt = summary_from(arrays, f"alternatives/{uid}/{key}")
                self.delete_changes[int(uid)].put(
                    int(key), alt - gone.apply(self.store.get(int(key)).without_pairs()))
        self.kept = {int(u): float(n) for u, n in meta.get("kept", [])}
        for i, b in enumerate(meta["births"]):
            chunks = []
            if b["rows"]:
                chunks.append(len(self.collected))
                self.collected.put(chunks[-1], data_from_arrays(arrays.group(f"births/{i}/rows")))
            self.births.append(Birth(int(b["target"]), chunks, int(b["n"]),
                                     summary_from(arrays, f"births/{i}/S_new"),
                                     int(b.get("seen", b["n"])),
                                     float(b.get("mass", self._mass(int(b["target"]))))))
        lap = meta["lap"]
        if lap is not None:
            self.lap_state = LapState(
                lap["lap"], arrays["lap/order"], arrays["lap/pairs"] if lap["pairs"] else None,
                arrays["lap/Hpair"], summary_from(arrays, "lap/S_prime"),
                tuple(int(t) for t in lap["targets"]), lap["pos"], arrays["lap/groups"],
                arrays["lap/Hgroup"], self._origin_N(arrays),
                tuple(int(u) for u in lap.get("deletes", [])))
        for i, batches in enumerate(meta["inflight"]):  # submitted again with the same globals
            g = Globals(arrays[f"inflight/{i}/uids"], arrays.group(f"inflight/{i}/post"),
                        arrays[f"inflight/{i}/Elogw"])
            self.inflight.append(self._submit(Wave([int(b) for b in batches], g)))

    def _origin_N(self, arrays: ArrayFile) -> np.ndarray:
        """The adopting origins' masses before the adoption; a checkpoint written before they
        were kept gives their current masses."""
        if "lap/origin_N" in arrays:
            return arrays["lap/origin_N"]
        return np.array([self._mass(int(row[0])) for row in arrays["lap/groups"]], dtype=float)
