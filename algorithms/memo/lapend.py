"""The end of a memoized lap as kernels over MemoState and an End record: the births adopted
in the lap verified, a deletion judged, a merge round, the reordering by mass, the births'
creation recorded, the lap's figures and the convergence test. Each move is accepted only
when the exact full-data ELBO (Eq. 8) rises; each kernel returns the moves the stored batch
summaries take (the engine logs them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.summary import Delete, Merge, MergeGroup, Move, Reorder, Summary
from bnpmix.algorithms.vb.birth import verify
from bnpmix.algorithms.vb.delete import judge
from bnpmix.algorithms.vb.merge import merge_round

from .lap import Env, delete_open, logged, open_targets
from .state import RECENT_LAPS, SETTLED, Best, MemoState, without

Moves = list[Move]


@dataclass(frozen=True)
class End:
    """A lap end in progress: S (S^0 with the lap's pair and group entropies), ``planned``
    (S as the lap left it), whether a move was accepted, the verified births' and merges'
    moves (the past blocks take them) and the deletion accepted."""

    S: Summary
    planned: Summary
    moved: bool = False
    verified: tuple[Move, ...] = ()
    accepted: tuple[Move, ...] = ()
    deleted: bool = False


def opened(state: MemoState) -> End:
    """S^0 with the entropies the lap recorded for its planned pairs and groups."""
    st = state.lap
    pairs = st.pairs if st.pairs is not None else np.zeros((0, 2), np.int64)
    S = state.S0.with_pairs(pairs, st.Hpair, st.groups, st.Hgroup)
    return End(S, S)


def failure(state: MemoState, uid: int, mass: float, lap: int, tries: int = 1) -> MemoState:
    """A failed birth on ``uid`` at ``mass`` that stood for ``tries`` failures (its retries
    made at once): that many more in a row if the previous one was at about the same mass,
    else the first ones."""
    prev = state.failed.get(uid)
    same = prev is not None and abs(mass - prev[0]) <= 0.1 * prev[0]
    return replace(state, failed={**state.failed, uid: (mass, lap, (prev[2] if same else 0)
                                                        + tries)})


def verify_births(state: MemoState, end: End, env: Env) -> tuple[MemoState, End, Moves]:
    """Each family adopted in the lap undone (MergeGroup) or kept (settle_family), judged
    against the state the adoption replaced too: the previous lap end's. An undone birth's
    origin failed at the mass it had before the adoption lap (to which it returns); its
    newborns go with any birth this lap collected for them."""
    st = state.lap
    if not len(st.groups):
        return replace(state, births_kept=0), end, []
    S, verified = verify(env.obs, env.alloc, end.S, st.families,
                         drop_origins=state.past is None, replaced=state.last_elbo)
    undone = [m for m in verified if isinstance(m, MergeGroup)]
    origin_N = dict(zip((origin for origin, _ in st.families), st.origin_N, strict=True))
    for move in undone:
        state = failure(state, move.keep, float(origin_N[move.keep]), st.lap)
        for u in move.gone:
            state = state.forget(u)
    for origin, _ in st.families:
        if not any(m.keep == origin for m in undone):
            state = replace(state, failed=without(state.failed, origin))
    for move in verified:
        if isinstance(move, Merge):  # newborns merged inside their family
            state = state.forget(move.b, into=move.a)
        elif isinstance(move, Delete):  # a kept family's empty origin
            state = state.forget(move.uid)
    # while births are kept, twice as many targets next lap (up to settled_per_lap): K far
    # below what the data support grows geometrically, not by one component a lap
    state = replace(state, births_kept=len(st.groups) - len(undone))
    end = replace(end, S=S, verified=tuple(verified), moved=len(undone) < len(st.groups))
    return state, end, list(verified)  # S^0 has no group entropies: the stored ones take them


def judge_deletes(state: MemoState, end: End, env: Env,
                  alternatives: Iterable[tuple[int, Summary]]) -> tuple[MemoState, End, int | None]:
    """The lap's deletions judged on the exact ELBO (delete.judge), each from its alternative
    S^0 (without it, plus the batches' changes); the accepted one's alternative becomes S^0
    (no merges then: the pair entropies were S^0's). Refused ones wait for a change of their
    mass."""
    accepted, S, refused = judge(env.obs, env.alloc, state.S0, alternatives)
    state = replace(state, kept={**state.kept, **{uid: state.mass(uid) for uid in refused}})
    if accepted is None:
        return state, end, None
    state = replace(state, S0=S).forget(accepted)
    return state, replace(end, S=S, moved=True, deleted=True), accepted


def merges(state: MemoState, end: End, env: Env) -> tuple[MemoState, End, Moves]:
    """One merge round on S with the lap's summed pair entropies (merge.merge_round)."""
    if not (env.merges_on and len(end.S.pairs)):
        return state, end, []
    S, accepted, _ = merge_round(env.obs, env.alloc, end.S, env.rng.merge, env.cfg.merge)
    for move in accepted:
        state = state.forget(move.b, into=move.a)  # b's data is now a's
    return state, replace(end, S=S, accepted=tuple(accepted),
                          moved=end.moved or bool(accepted)), list(accepted)


def settle(state: MemoState, end: End) -> MemoState:
    """S^0 after the moves; the verified births and merges applied to the past blocks too:
    their one-hot q(z) gives every pair and group merge entropy 0, which the planned pairs
    and groups carry for the past as zeros."""
    state = replace(state, S0=end.S.without_pairs())
    moves = [*end.verified, *end.accepted]
    if state.past is None or not moves:
        return state
    S = end.planned
    zeros = np.zeros(len(S.pairs)), np.zeros(len(S.groups))
    past = state.past.with_pairs(S.pairs, zeros[0], S.groups, zeros[1])
    for move in moves:
        past = move.apply(past)
    return replace(state, past=past.without_pairs())


def reorder(state: MemoState, move: Reorder | None) -> tuple[MemoState, Moves]:
    """The components sorted by decreasing mass (``move``: the sort when it raises the ELBO,
    stick-breaking order, else None)."""
    return (state, []) if move is None else (logged(state, move), [move])


def births_created(state: MemoState, created: list[Summary | None], tries: int) -> MemoState:
    """The lap's births after creation (``created``: each birth's S', None when it failed, in
    order; a birth that collected no rows keeps its own): failures recorded at the target's
    mass, the rows released, and every component a lap further from its last birth."""
    births, lap = [], state.lap.lap
    for birth, S_new in zip(state.births, created, strict=True):
        if birth.n:
            birth = replace(birth, S_new=S_new, mass=state.mass(birth.target))
        if birth.S_new is None and birth.target in state.laps_since:
            state = failure(state, birth.target, state.mass(birth.target), lap, tries)
        births.append(replace(birth, chunks=()))
    return replace(state, births=tuple(births),
                   laps_since={u: n + 1 for u, n in state.laps_since.items()})


def record(state: MemoState, end: End, env: Env, elbo: float) -> MemoState:
    """The lap end's figures among the last RECENT_LAPS (summary.json's ``last_laps``): its
    ELBO change per item since the previous lap end (None for the first, or while some batch
    has no summary yet), K, and the births kept, merges and deletions accepted at it."""
    previous = state.last_elbo
    change = None if previous is None or not env.complete else (elbo - previous) / env.n_items
    row = {"lap": state.lap.lap + 1, "elbo_change_per_item": change, "K": int(state.model.K),
           "births": int(state.births_kept), "merges": len(end.accepted),
           "deletes": int(end.deleted)}
    return replace(state, recent=(*state.recent, row)[-RECENT_LAPS:])


def converge(state: MemoState, end: End, env: Env, elbo: float) -> MemoState:
    """Converged: a complete lap that adopted, kept, merged and deleted nothing, has no birth
    waiting and none left to try (every component's birth failed, retries included), no
    deletion left to try, and changed the ELBO by less than tol per item. Settled (the next
    lap tries births on more targets): such a lap that changed the ELBO by less than SETTLED
    per item, whatever the births left."""
    st = state.lap
    still = (st.S_prime is None and not end.moved
             and not any(b.S_new is not None for b in state.births))
    quiet = (still and not (env.births_on
                            and open_targets(state, env, state.S0.N, set(), st.lap + 1).any())
             and not len(delete_open(state, env)))
    previous = state.last_elbo
    complete = previous is not None and env.complete
    change = abs(elbo - previous) / env.n_items if complete else np.inf
    state = replace(state, last_elbo=elbo, settled=still and change < SETTLED)
    if env.cfg.tol > 0 and quiet and change < env.cfg.tol:
        state = replace(state, stopped=f"converged at lap {st.lap + 1}: ELBO change "
                        f"{change:.3g} per item < tol {env.cfg.tol:g}, no move accepted, "
                        f"K = {state.model.K}")
    return state


def close(state: MemoState, end: End, env: Env, elbo: float) -> MemoState:
    """The lap's figures, the convergence test, the best lap-end state kept (q itself, until
    a visit changes it), and the next lap."""
    state = converge(record(state, end, env, elbo), end, env, elbo)
    if state.best is None or elbo > state.best.elbo:
        state = replace(state, best=Best(elbo, state.lap.lap + 1, state.model, state.past))
    return replace(state, lap=None, next_lap=state.next_lap + 1)


def learned(state: MemoState, model: Mixture) -> MemoState:
    """q after the moves: the global update of S^0 (under the prior learned from it)."""
    return replace(state, model=model, model_is_S0=True, model_is_prime=False)
