"""Relinking chains across an epoch boundary (not in the paper; docs/theory/tdpm.rst): one item
at a time, a chain cut in two, or two chains that cross, takes many unlikely steps to mend.

At boundary t every chain with members in [t − W, t − 1] is a head, every chain with members in
[t, t + W − 1] a tail, and the labels say which head each tail continues (or none). A move picks
a head h and gives it another tail: swapping tails with another head, taking a tail that had no
head, or (RCRP) letting its tail start a chain of its own; links more than W epochs apart are
excluded. The pieces' members and states do not change, so the log joint changes only by the
prior factors of the chains involved over epochs t..t+W−1 and by the walk across the boundary,
N(φ_τ(b); φ_h(a), (b − a)ρ) with the states in between integrated out (a tail without a head:
the birth N(0, σ)). The new tail is drawn from the head's moves in proportion to their joints
(the current one excluded) and accepted with probability min(1, Σ_moves from here /
Σ_moves from there), which leaves the posterior invariant (Metropolised Gibbs); the states in
between are then drawn from the walk's bridge. Under fixed K the K chains are all heads and
tails and only swap. Not with membership stability (a stayer's coin would depend on the link).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .dynamics import gauss_logpdf
from .state import ChainModel, ChainState, draw


class Boundary(NamedTuple):
    """The heads and tails at boundary t: their labels, each head's last occupied epoch a < t
    and each tail's first b >= t, and the rows lo..hi−1 (t at row rel) their factors read."""

    t: int
    heads: np.ndarray
    tails: np.ndarray
    a: np.ndarray
    b: np.ndarray
    lo: int
    hi: int
    rel: int


class HeadMoves(NamedTuple):
    """A head's moves from a matching: the other head involved (−1: none), the tail the head
    takes (−1: none), and the change of the log joint of each."""

    other: np.ndarray
    tail: np.ndarray
    delta: np.ndarray


def relink(model: ChainModel, state: ChainState, rng: np.random.Generator,
           start_epoch: int = 0) -> tuple[ChainState, int]:
    """Relinking moves at every boundary t > ``start_epoch`` (module docstring): the state and
    how many moves were accepted."""
    done = 0
    for t in range(max(1, start_epoch), model.T):
        state, accepted = relink_at(model, state, t, rng)
        done += accepted
    return state, done


def boundary(model: ChainModel, state: ChainState, t: int, W: int) -> Boundary:
    """The heads and tails at boundary t (window W)."""
    act = state.active.nonzero()[0]
    lo, hi = max(0, t - W), min(model.T, t + W)
    if model.fixed:  # K chains alive at every epoch
        return Boundary(t, act, act, np.full(len(act), t - 1), np.full(len(act), t), lo, hi,
                        t - lo)
    pre, post = state.counts[lo:t, act] > 0, state.counts[t:hi, act] > 0
    is_head, is_tail = pre.any(0), post.any(0)
    a = t - 1 - np.argmax(pre[::-1, is_head], axis=0)  # last occupied epoch < t
    b = t + np.argmax(post[:, is_tail], axis=0)  # first occupied epoch >= t
    return Boundary(t, act[is_head], act[is_tail], a, b, lo, hi, t - lo)


def link_joints(model: ChainModel, state: ChainState, bd: Boundary, W: int) -> np.ndarray:
    """J[h, τ] (index −1: none): the prior factors of head h joined to tail τ plus the walk
    across, L[h, τ] = log N(φ_τ(b); φ_h(a), (b − a)ρ) if b − a <= W (a tail without a head is
    born, log N(φ_τ(b); 0, σ); a head without a tail ends, 0). A move changes the log joint by
    J over the links it makes minus J over those it breaks."""
    heads, tails, lo, hi, rel = bd.heads, bd.tails, bd.lo, bd.hi, bd.rel
    nH, nT = len(heads), len(tails)
    # count columns of the pieces (rows lo..hi−1), and a zero column (index −1) for "none"
    Hc, Tc = np.zeros((hi - lo, nH + 1)), np.zeros((hi - lo, nT + 1))
    Hc[:rel, :nH] = state.counts[lo:bd.t, heads]
    Tc[rel:, :nT] = state.counts[bd.t:hi, tails]
    L = np.zeros((nH + 1, nT + 1))
    if nT:
        phi, first = state.phi, state.first
        phi_a = np.stack([phi[int(k)][bd.a[h] - first[k]] for h, k in enumerate(heads)])
        phi_b = np.stack([phi[int(k)][bd.b[j] - first[k]] for j, k in enumerate(tails)])
        gap = bd.b[None, :] - bd.a[:, None]
        link = gauss_logpdf(phi_b[None], phi_a[:, None],
                            state.walk.drift_var * np.maximum(gap, 1)[..., None])
        L[:nH, :nT] = np.where(gap <= W, link, -np.inf)
        L[-1, :nT] = gauss_logpdf(phi_b, 0.0, state.walk.birth_var)
    pieces = (Hc[:, :, None] + Tc[:, None, :]).reshape(hi - lo, -1)
    return model.prior.link_factors(pieces, rel).reshape(nH + 1, nT + 1) + L


def head_moves(J: np.ndarray, h: int, tail_of: np.ndarray, fixed: bool) -> HeadMoves:
    """Head h's moves from matching ``tail_of``: swap tails with another head g, take an
    unmatched tail (g = −1) or, under the RCRP, let its tail go (g = gt = −1); the change of
    the log joint of each."""
    nH, nT = J.shape[0] - 1, J.shape[1] - 1
    th = tail_of[h]
    g = np.delete(np.arange(nH), h)
    gt = tail_of[g]
    if not fixed:
        held = np.zeros(nT + 1, dtype=bool)
        held[tail_of] = True  # (index −1, "none", lands on the spare slot)
        free = (~held[:nT]).nonzero()[0]
        g = np.concatenate([g, np.full(len(free) + 1, -1)])
        gt = np.concatenate([gt, free, [-1]])
    keep = gt != th
    g, gt = g[keep], gt[keep]
    return HeadMoves(g, gt, J[h, gt] + J[g, th] - J[g, gt] - J[h, th])


def relink_at(model: ChainModel, state: ChainState, t: int, rng: np.random.Generator
              ) -> tuple[ChainState, int]:
    """Metropolised Gibbs moves over how the heads (chains' parts before t) connect to the
    tails (parts from t on), then the chains rebuilt if any move was accepted: the state and
    how many were."""
    W = 1 if model.fixed else model.prior.window
    if W == 0:  # no chain crosses a boundary
        return state, 0
    bd = boundary(model, state, t, W)
    if bd.heads.size == 0:
        return state, 0
    J = link_joints(model, state, bd, W)
    where = {int(k): j for j, k in enumerate(bd.tails)}
    tail_of = np.array([where.get(int(k), -1) for k in bd.heads], dtype=np.int64)
    accepted = 0
    for h in rng.permutation(len(bd.heads)).tolist():
        moves = head_moves(J, h, tail_of, model.fixed)
        if not np.any(np.isfinite(moves.delta)):
            continue
        j = draw(np.cumsum(np.exp(moves.delta - moves.delta.max())), rng)
        proposal = tail_of.copy()
        proposal[h] = moves.tail[j]
        if moves.other[j] >= 0:
            proposal[moves.other[j]] = tail_of[h]
        back = head_moves(J, h, proposal, model.fixed).delta
        ratio = (np.logaddexp.reduce(moves.delta) - np.logaddexp.reduce(back)
                 - moves.delta[j])
        if np.log(rng.random()) < ratio:
            tail_of = proposal
            accepted += 1
    if accepted:
        state = rejoin(model, state, bd, tail_of, rng)
    return state, accepted


def rejoin(model: ChainModel, state: ChainState, bd: Boundary, tail_of: np.ndarray,
           rng: np.random.Generator) -> ChainState:
    """Rebuild the chains across boundary t from the matching: a head keeps its label and takes
    its tail's items, counts and states (the states between a and b drawn from the walk's
    bridge); an unmatched tail gets a label of its own."""
    t, heads, tails, a, b = bd.t, bd.heads, bd.tails, bd.a, bd.b
    first, last = state.first.copy(), state.last.copy()
    head_phi = [state.phi[k][:e - first[k] + 1] for k, e in zip(heads, a, strict=True)]
    tail_phi = [state.phi[k][e - first[k]:] for k, e in zip(tails, b, strict=True)]
    tail_counts = state.counts[t:, tails].copy()
    z = state.z
    later = (state.mask(tails)[z] & (z >= 0) & (model.epochs >= t)).nonzero()[0]
    tail_items = [later[z[later] == k] for k in tails]
    for k in tails[~state.mask(heads)[tails]].tolist():
        state.free(k)
    for h, k in enumerate(heads.tolist()):
        j = int(tail_of[h])
        state.counts[t:, k] = 0 if j < 0 else tail_counts[:, j]
        state.last[k] = a[h] if j < 0 else last[tails[j]]
        parts = [head_phi[h]]
        if j >= 0:
            parts += [state.walk.bridge(head_phi[h][-1], tail_phi[j][0], int(b[j] - a[h]), rng),
                      tail_phi[j]]
            z[tail_items[j]] = k
        state.phi[k] = np.vstack(parts)
    matched = np.zeros(len(tails) + 1, dtype=bool)
    matched[tail_of] = True  # (−1, no tail, lands on the spare slot)
    for j in (~matched[:-1]).nonzero()[0].tolist():
        state, k = state.with_label()
        state.counts[t:, k] = tail_counts[:, j]
        state.first[k], state.last[k] = b[j], last[tails[j]]
        state.phi[k] = tail_phi[j].copy()
        state.z[tail_items[j]] = k
    return state
