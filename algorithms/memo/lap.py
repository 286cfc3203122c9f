"""A memoized lap as kernels over MemoState: its start (births adopted, pairs planned, birth
targets and deletions chosen, the order drawn), one batch's visit (Eq. 11: S^0 <- S^0 - old +
new) and the global update from S^0 (Eq. 10)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bnpmix.algorithms import sparse_stats
from bnpmix.algorithms.alloc.base import VariationalAllocation
from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.obs.base import ObsModel
from bnpmix.algorithms.summary import Insert, Move, Summary
from bnpmix.algorithms.vb.birth import choose_targets
from bnpmix.algorithms.vb.delete import delete_candidates
from bnpmix.algorithms.vb.local import BatchResult, Plan
from bnpmix.algorithms.vb.merge import plan_pairs

from .state import Birth, Lap, MemoState, Options


@dataclass(frozen=True)
class Env:
    """What the kernels read besides the state: the observation model (the learned prior's),
    the allocation, the options, the run's random streams (order, birth, merge), the corpus's
    items and partitions, and whether every batch has a summary yet."""

    obs: ObsModel
    alloc: VariationalAllocation
    cfg: Options
    rng: Any
    n_items: int
    n_partitions: int
    complete: bool

    @property
    def births_on(self) -> bool:
        return "birth" in self.cfg.moves

    @property
    def merges_on(self) -> bool:
        return "merge" in self.cfg.moves


def deletes_on(state: MemoState, env: Env) -> bool:
    return "delete" in env.cfg.moves and state.past is None  # past blocks have no items


def logged(state: MemoState, move: Move) -> MemoState:
    """A move applied to S^0 and the past blocks (the engine logs it for the stored batches)."""
    past = None if state.past is None else move.apply(state.past)
    return replace(state, S0=move.apply(state.S0), past=past)


def family_groups(families: list[tuple[int, tuple[int, ...]]]) -> np.ndarray:
    """Rows (origin, newborn, ...) padded with -1."""
    width = 1 + max((len(n) for _, n in families), default=0)
    rows = np.full((len(families), width), -1, dtype=np.int64)
    for i, (origin, newborns) in enumerate(families):
        rows[i, : 1 + len(newborns)] = (origin, *newborns)
    return rows


def adopt(state: MemoState, env: Env) -> tuple[MemoState, Summary | None, list[Move]]:
    """Insert created components into S^0 (zero mass); return S' to keep beside it (the
    families (origin, newborns) and each origin's mass when its newborns were created are the
    births kept in the state until the lap starts). One family per origin: two births whose
    targets were merged into one component in the creating lap share it, and verifying the
    first family (undone or kept, its origin deleted) voids the second's group entropy."""
    done: list[Birth] = []
    for b in state.births:
        if b.S_new is not None and all(b.target != d.target for d in done):
            done.append(b)
    state = replace(state, births=tuple(done))
    if not done:
        return state, None, []
    uids = tuple(int(u) for b in done for u in b.S_new.uids)
    move = Insert(uids)
    state = logged(state, move)
    S_prime = Summary.zeros(state.S0.uids, env.obs.stat_shapes(), env.obs.shared_shapes())
    for b in done:
        s = b.S_new
        idx = np.array([S_prime.index(u) for u in s.uids])
        S_prime.N[idx] = s.N
        for k in S_prime.stats:
            sparse_stats.place(S_prime.stats[k], idx, s.stats[k])
        for k in S_prime.shared:  # the collected items' (tied-gauss: their scatter)
            S_prime.shared[k] += s.shared[k]
    laps_since = {**state.laps_since, **dict.fromkeys(uids, 1)}
    return replace(state, laps_since=laps_since), S_prime, [move]


def still_failed(state: MemoState, env: Env, uid: int, n: float, lap: int) -> bool:
    """Closed: its birth failed 1 + birth.retries times in a row at about its mass (within
    10 %; until then it is retried from the next lap, with new seeds, or at once after a
    settled lap), and either the last failure was at the end of the previous lap or its mass
    has not changed by 10 % since."""
    if uid not in state.failed:
        return False
    mass, failed_at, count = state.failed[uid]
    if count <= env.cfg.birth.retries:
        return False
    return lap <= failed_at + 1 or abs(n - mass) <= 0.1 * mass


def open_targets(state: MemoState, env: Env, N: np.ndarray, adopting: set[int],
                 lap: int) -> np.ndarray:
    """Components a birth may target in ``lap``: not an origin whose newborns take over its
    data in this lap, not one too small to give a fresh run 2 K' items (once masses are
    known), and not one whose births failed (retries spent; still_failed), until a lap has
    passed since (masses right after an undone birth are not yet back) and its mass has
    changed by 10 %."""
    floor = 2 * env.cfg.birth.fresh_K if env.complete else 0
    return np.array([int(u) not in adopting and n >= floor
                     and not still_failed(state, env, int(u), n, lap)
                     for u, n in zip(state.S0.uids, N, strict=True)], dtype=bool)


def choose_births(state: MemoState, env: Env, lap: int, adopting: set[int],
                  S_prime: Summary | None) -> MemoState:
    """Targets ∝ N_k L_k² (suppl. Eq. 22) among the open components. In a lap adopting
    births the newborns may be targets too, at the mass S' gives them (in S^0 they start
    empty): when every component is an origin, the lap still collects for the next births,
    so K can grow every lap instead of every other one."""
    state = replace(state, births=())
    cfg = env.cfg.birth
    if not env.births_on or lap > env.cfg.laps - 3:
        return state  # a birth collected now could not be adopted and then judged by merges
    laps = np.array([state.laps_since[int(u)] for u in state.S0.uids])
    N = state.S0.N if env.complete else np.ones(state.S0.K)
    if S_prime is not None:
        N = N + S_prime.N
    open_ = open_targets(state, env, N, adopting, lap)
    if not open_.any():
        return state
    n = max(cfg.per_lap, cfg.settled_per_lap if state.settled else 0,
            min(cfg.settled_per_lap, 2 * state.births_kept))
    targets = choose_targets(state.S0.uids[open_], N[open_], laps[open_], n, env.rng.birth)
    return replace(state, births=tuple(Birth(t) for t in targets),
                   laps_since={**state.laps_since, **dict.fromkeys(targets, 0)})


def delete_open(state: MemoState, env: Env) -> np.ndarray:
    """Components a deletion may try, smallest first: small (DeleteConfig) and not refused
    at about their current mass (within 10 %), once every batch has a summary."""
    if not (deletes_on(state, env) and env.complete):
        return np.zeros(0, dtype=np.int64)
    small = delete_candidates(state.S0.uids, state.S0.N, env.cfg.delete)
    kept = state.kept
    return np.array([u for u in small.tolist() if u not in kept
                     or abs(state.mass(u) - kept[u]) > 0.1 * kept[u]], dtype=np.int64)


def begin(state: MemoState, env: Env) -> tuple[MemoState, list[Move]]:
    """A lap's start: last lap's births adopted (q the update of S^0 + S'), merge pairs
    planned, birth targets chosen, the order drawn, and up to delete.per_lap of the smallest
    open deletions tried (not in a lap adopting births: its visits record the group
    entropies of their verification, which the changes would lack). Returns the moves the
    stored batch summaries take."""
    lap = state.next_lap
    state, S_prime, moves = adopt(state, env)
    families = [(b.target, tuple(int(u) for u in b.S_new.uids)) for b in state.births]
    masses = np.array([b.mass for b in state.births], dtype=float)
    if S_prime is not None:
        state = replace(state, model=Mixture.from_summary(env.obs, env.alloc, state.S0 + S_prime),
                        model_is_S0=False, model_is_prime=True)
    pairs = plan_pairs(env.obs, state.S0, env.cfg.merge) if env.merges_on else None
    state = choose_births(state, env, lap, {origin for origin, _ in families}, S_prime)
    order = env.rng.order.permutation(env.n_partitions)
    groups = family_groups(families)
    deletes = () if families else tuple(int(u) for u in
                                        delete_open(state, env)[: env.cfg.delete.per_lap])
    return replace(state, lap=Lap(lap, order, pairs,
                                  np.zeros(0 if pairs is None else len(pairs)), S_prime,
                                  tuple(b.target for b in state.births), 0, groups,
                                  np.zeros(len(groups)), masses, deletes)), moves


def plan(state: MemoState, env: Env) -> Plan:
    """What the lap asks of each visit (local.Plan): the planned pairs and groups, the birth
    targets and the rows each still lacks of its cap, the deletions, the absent origins."""
    st, cap = state.lap, env.cfg.birth.max_collect
    # the rows each target's birth still lacks of its cap now; by the time a visit's result is
    # collected it lacks no more, so the visit's first rows past tau are the ones collect
    # would keep of them all
    wanted = tuple(max([cap - b.n for b in state.births if b.target == t], default=0)
                   for t in st.targets)
    return Plan(st.pairs, st.groups, st.targets, env.cfg.birth.tau, st.deletes,
                tuple(origin for origin, _ in st.families), wanted=wanted)


def changed_where(old: Summary | None, new: Summary) -> Any:
    """Where S^0 changed when ``old`` left and ``new`` entered (None: anywhere)."""
    pattern = new.changed_pattern()
    if pattern is None or old is None:
        return pattern
    before = old.changed_pattern()
    return None if before is None else sparse_stats.canonical((pattern + before).sign())


def collect(state: MemoState, res: BatchResult, cap: int,
            key: int) -> tuple[MemoState, list[tuple[int, Any]]]:
    """The rows a visit collected for each birth, up to its cap N' (suppl. Eq. 23), as
    (key, rows) for the engine's store of collected rows, keys from ``key`` on."""
    births, rows_out = [], []
    for birth in state.births:
        rows = res.collected.get(birth.target)
        if rows is not None:
            birth = replace(birth, seen=birth.seen + res.qualified[birth.target])
            if birth.n < cap:
                rows = rows[: cap - birth.n]
                rows_out.append((key, rows))
                birth = replace(birth, chunks=(*birth.chunks, key), n=birth.n + rows.shape[0])
                key += 1
        births.append(birth)
    return replace(state, births=tuple(births)), rows_out


def absorb(state: MemoState, old: Summary | None, res: BatchResult) -> MemoState:
    """Eq. 11 for one batch: its old summary leaves S^0 and its new one enters (in place: S^0
    is the state's own, and a copy would cost O(K·V) a visit on text), the lap's pair and
    group entropies add the batch's, and the lap moves on by one batch."""
    new = res.summary.without_pairs()
    if old is not None:
        state.S0.add_in_place(old.without_pairs(), -1.0)
    state.S0.add_in_place(new)
    st = state.lap
    st = replace(st, Hpair=st.Hpair + res.summary.Hpair, Hgroup=st.Hgroup + res.summary.Hgroup,
                 pos=st.pos + 1)
    return replace(state, lap=st)


def global_update(state: MemoState, env: Env, changed: Any) -> MemoState:
    """Eq. 10 from S^0 after a visit. S' (births being adopted) counts in every update of the
    lap but the last: the lap's final q, which its merges judge and the next lap starts from,
    rests on the batches' own summaries alone (suppl. Sec. 2.3). q changes only where the
    batch's statistics can change it (a Mult batch's (component, word) entries) while it is
    the update of S^0 itself (in an adoption lap: of S^0 + S'). A warm start's globals stand
    until every batch has been visited once."""
    if state.hold_globals and not env.complete:
        return state
    st = state.lap
    use_prime = st.S_prime is not None and not st.last
    S = state.S0 + st.S_prime if use_prime else state.S0
    if changed is not None and (state.model_is_prime if use_prime else state.model_is_S0):
        model = state.model
        if state.best is not None and state.best.model is model:
            model = model.copy()  # updated writes into q(θ): the best lap end's is kept
        model = model.updated(S, changed)  # S^0 (+ S') moved only there
    else:
        model = Mixture.from_summary(env.obs, env.alloc, S)
    return replace(state, model=model, hold_globals=False, model_is_S0=not use_prime,
                   model_is_prime=use_prime)


def visit_elbo(state: MemoState, env: Env) -> float:
    """Eq. 8 after a visit (exact at q's optimum for S^0); nan until every batch has a summary."""
    if not env.complete:
        return float("nan")
    return state.model.elbo(state.S0, at_optimum=state.model_is_S0)
