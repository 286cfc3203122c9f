"""Cut moves over whole chains of the temporal DP mixture, beside the split-merge moves
(``splitmerge.py``; their target, anchors and allocation are ``chainmoves.py``'s;
docs/theory/tdpm.rst).

Cut moves (a graft and its reverse, a peel; each proposal is one with probability ``cut``,
chosen before the anchors' labels are looked at). One cluster held by two chains that overlap
in time, one of which is impure (it holds the cluster for a few epochs, then continues as
another), is not mended by a whole merge: the union keeps the impurity, and the reverse split
must guess every item. A graft moves the part of one chain on one side of a cut into another:
with a = z_i ≠ b = z_j, an option (side, c) is drawn uniformly among b's occupied epochs c
after both anchors (head: b's items before c join a, b continues from c) and before both
(tail: b's items after c join a, b ends at c). Its reverse is the peel with the same anchors,
now in one chain a': an option (side, b') is drawn uniformly among the other chains b' that
begin after both anchors with a' occupied in the W epochs before b' begins (head), or end
before both with a' occupied in the W epochs after (tail); a''s items before b' begins (after
it ends) are allocated sequentially into A ∋ i and B ∋ j as above, and B joins b'. The graft
made from the peel's result with the same anchors takes c = b''s first (last) epoch, which is
one of its options, and gives the peel's state back (and the other way round), so the MH ratio
of a graft is [p(z') / p(z)] · [r_{z'}(i) / r_z(i)] · [#grafts(z) / #peels(z')] · q(B), and a
peel's its inverse. The number of chains does not change.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .chainmoves import ChainMoves
from .state import ChainModel, ChainState


class CutOption(NamedTuple):
    """A graft (side, c): the part of z_j's chain before (side +1) or after (−1) its occupied
    epoch c moves into z_i's; or a peel (side, c): z_i's chain's items before chain c begins
    (+1) or after it ends (−1) are allocated, and the piece of j joins c."""

    side: int
    c: int


class CutMove(NamedTuple):
    """A cut move's outcome: the items moved, the label they take, and the log MH ratio (−inf
    if the labelling reached is not valid)."""

    moved: np.ndarray
    target: int
    log_ratio: float


def sort_items(model: ChainModel, items: np.ndarray) -> np.ndarray:
    """Items sorted by (epoch, item)."""
    return items[np.lexsort((items, model.epochs[items]))]


def side_of(model: ChainModel, items: np.ndarray, side: int, c: int) -> np.ndarray:
    """The items before epoch c (side +1) or after it (side −1)."""
    ep = model.epochs[items]
    return items[ep < c] if side > 0 else items[ep > c]


def _occupied(model: ChainModel, items: np.ndarray) -> np.ndarray:
    """The epochs where ``items`` are, as T booleans."""
    occ = np.zeros(model.T, dtype=bool)
    occ[model.epochs[items]] = True
    return occ


def graft_options(ti: int, tj: int, occ_b: np.ndarray) -> list[CutOption]:
    """Grafts of the chain with occupied epochs ``occ_b`` for anchors at epochs ti, tj:
    (+1, c), c after both (its part before c moves), and (−1, c), c before both (its part
    after c moves)."""
    return ([CutOption(1, int(c)) for c in occ_b[occ_b > max(ti, tj)]]
            + [CutOption(-1, int(c)) for c in occ_b[occ_b < min(ti, tj)]])


def peel_options(model: ChainModel, ti: int, tj: int, occ_a: np.ndarray, others: np.ndarray,
                 first: np.ndarray, last: np.ndarray) -> list[CutOption]:
    """Peels of the chain occupied at epochs ``occ_a`` (T booleans) toward the chains
    ``others`` (spans first..last): (+1, b) for b beginning after both anchors with the chain
    occupied in the W epochs before it, (−1, b) for b ending before both with the chain
    occupied in the W epochs after."""
    W, T = model.prior.window, model.T
    cum = np.concatenate([[0], np.cumsum(occ_a)])
    before = cum[first] - cum[np.maximum(first - W, 0)] > 0
    after = cum[np.minimum(last + W + 1, T)] - cum[last + 1] > 0
    head = others[(first > max(ti, tj)) & before]
    tail = others[(last < min(ti, tj)) & after]
    return [CutOption(1, int(b)) for b in head] + [CutOption(-1, int(b)) for b in tail]


def cut_options(model: ChainModel, state: ChainState, i: int, j: int) -> list[CutOption]:
    """The cut moves of anchors i and j: grafts if they are in two chains, peels if in one
    (module docstring)."""
    a, b = int(state.z[i]), int(state.z[j])
    ti, tj = int(model.epochs[i]), int(model.epochs[j])
    if a != b:
        return graft_options(ti, tj, state.counts[:, b].nonzero()[0])
    others = state.active.nonzero()[0]
    others = others[others != a]
    return peel_options(model, ti, tj, state.counts[:, a] > 0, others, state.first[others],
                        state.last[others])


def propose_cut(sm: ChainMoves, state: ChainState, i: int, j: int, rng: np.random.Generator,
                start_epoch: int = 0) -> tuple[ChainState, bool]:
    """One cut move with anchors i and j, its option drawn uniformly: the state and whether it
    was accepted."""
    a, b = int(state.z[i]), int(state.z[j])
    if a < 0 or b < 0 or min(state.first[a], state.first[b]) < start_epoch:
        return state, False
    options = cut_options(sm.model, state, i, j)
    if not options:
        return state, False
    side, c = options[rng.integers(len(options))]
    if a == b and state.first[c] < start_epoch:
        return state, False
    kind, move = (("graft", graft(sm, state, i, j, side, c, start_epoch)) if a != b else
                  ("peel", peel(sm, state, i, j, side, c, rng, start_epoch)))
    if math.log(rng.random()) < move.log_ratio:
        sm.move(state, move.moved, move.target, [a, b if a != b else c], rng)
        sm.moves[kind] += 1
        return state, True
    return state, False


def graft(sm: ChainMoves, state: ChainState, i: int, j: int, side: int, c: int,
          start_epoch: int = 0) -> CutMove:
    """The graft (side, c) of z_j's chain b into z_i's chain a: the items moved, the label
    they take (a), and the log MH ratio log[p(z') r_{z'}(i) #grafts(z) q(B)] −
    log[p(z) r_z(i) #peels(z')]."""
    m = sm.model
    a, b = int(state.z[i]), int(state.z[j])
    A, B = sm.members(state, a), sm.members(state, b)
    moved = side_of(m, B, side, c)
    kept, grown = B[~np.isin(B, moved)], sort_items(m, np.concatenate([A, moved]))
    if not sm.valid(grown):
        return CutMove(moved, a, -math.inf)
    others = state.active.nonzero()[0]
    others = others[others != a]
    first, last = state.first[others].copy(), state.last[others].copy()
    first[others == b], last[others == b] = m.epochs[kept].min(), m.epochs[kept].max()
    back = peel_options(m, int(m.epochs[i]), int(m.epochs[j]), _occupied(m, grown), others,
                        first, last)
    region = side_of(m, grown, side, c)
    _, logq = sm.allocate(state, region, i, j, None, ~np.isin(region, moved))
    n_own = int(np.sum(m.epochs[A] >= start_epoch))
    return CutMove(moved, a, (sm.log_gain(state, [grown, kept], [A, B]) + logq
                              + math.log(len(cut_options(m, state, i, j))) - math.log(len(back))
                              + sm.pick_ratio(state, i, start_epoch, n_own + len(moved), 0)))


def peel(sm: ChainMoves, state: ChainState, i: int, j: int, side: int, b: int,
         rng: np.random.Generator | None, start_epoch: int = 0,
         into_a: np.ndarray | None = None) -> CutMove:
    """The peel (side, b) of z_i = z_j's chain a toward chain b, allocated with ``rng`` (or
    the given ``into_a``, over a's items on that side of b): the items moved, the label they
    take (b), and the log MH ratio (the graft's, inverted)."""
    m = sm.model
    a = int(state.z[i])
    A, B = sm.members(state, a), sm.members(state, b)
    c = int(state.first[b] if side > 0 else state.last[b])
    region = side_of(m, A, side, c)
    into_a, logq = sm.allocate(state, region, i, j, rng, into_a)
    moved = region[~into_a]
    kept, grown = A[~np.isin(A, moved)], sort_items(m, np.concatenate([B, moved]))
    if not (sm.valid(kept) and sm.valid(grown)):
        return CutMove(moved, b, -math.inf)
    back = graft_options(int(m.epochs[i]), int(m.epochs[j]), _occupied(m, grown).nonzero()[0])
    n_own = int(np.sum(m.epochs[A] >= start_epoch))
    return CutMove(moved, b, (sm.log_gain(state, [kept, grown], [A, B]) - logq
                              + math.log(len(cut_options(m, state, i, j))) - math.log(len(back))
                              + sm.pick_ratio(state, i, start_epoch, n_own - len(moved), 0)))
