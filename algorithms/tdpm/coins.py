"""Membership stability in the item step (``persistence.py``; docs/theory/tdpm.rst).

The state also holds each returning item's stay indicator; the item's step draws (chain, stay)
jointly. Staying is one more option, the twin of joining the previous chain, weighted
(M_t + S_t + α)/(m_k + s_k) · P(heads)/P(tails); every option also carries the change of the
Beta-Binomial coin terms it causes: the item's own coin, its next appearance's (a stayer there
forces the item into that chain; a non-stayer's coin exists iff the chain keeps it available),
and the coins that appear when the item's chain (or a reconnected pair) becomes alive at epochs
where it was not.
"""

from __future__ import annotations

import numpy as np

from ..alloc.rcrp import pseudo_counts
from .options import Option
from .state import ChainModel, ChainState


def pseudo(model: ChainModel, state: ChainState, chains: np.ndarray,
           epochs: np.ndarray) -> np.ndarray:
    """m_{c,s} for pairs (chain c ≥ 0, epoch s)."""
    m = np.zeros(len(chains))
    for h, w in enumerate(model.decay_w, start=1):
        ok = epochs >= h
        m[ok] += w * state.counts[epochs[ok] - h, chains[ok]]
    return m


def refresh_coins(model: ChainModel, state: ChainState, t: int,
                  chains: tuple[int, ...] | None = None, items: tuple[int, ...] = ()) -> None:
    """Recompute the coins of the returning items of epochs >= t from the labels, and the per-id
    tallies, in place; given ``chains``, only of the items whose previous appearance is in one
    of them (an item's move at t changes the pseudo-counts of the chains it leaves and joins
    only, a split or reconnection the labels of those only) and of ``items`` (the moved item and
    its next appearance)."""
    P, c = model.persist, state.coins
    assert P is not None and c is not None
    R = model.returning[np.searchsorted(model.ret_epochs, t):]
    zp = state.z[P.prev[R]]
    if chains is not None:
        sel = np.isin(R, items)
        for k in chains:
            sel |= zp == k
        R, zp = R[sel], zp[sel]
    seated = (state.z[R] >= 0) & (zp >= 0)
    avail = seated.copy()
    avail[seated] = pseudo(model, state, zp[seated], model.epochs[R][seated]) > 0
    new = np.where(seated & c.y[R], 1, np.where(avail, 0, -1)).astype(np.int8)
    old = c.coin[R]
    ids = P.ids[R]
    np.add.at(c.heads, ids, (new == 1).astype(np.int64) - (old == 1))
    np.add.at(c.tails, ids, (new == 0).astype(np.int64) - (old == 0))
    c.coin[R] = new


def with_coins(model: ChainModel, state: ChainState, i: int, t: int,
               opts: list[Option]) -> list[Option]:
    """Each option with the change of the coin terms it causes, those that leave a stayer
    outside its previous chain dropped, and the stay twins added (module docstring)."""
    P, c = model.persist, state.coins
    assert P is not None and c is not None
    logw = np.array([o.logw for o in opts])
    lab0 = np.array([o.chains[0] if o.chains else -1 for o in opts], np.int64)
    lab1 = np.array([o.chains[1] if len(o.chains) > 1 else -1 for o in opts], np.int64)
    dh, df, valid = _next_coin(model, state, i, t, lab0, lab1)
    R = model.returning[np.searchsorted(model.ret_epochs, t, side="right"):]
    zR, zp = state.z[R], state.z[P.prev[R]]
    broken = c.y[R] & (zR >= 0) & (zp >= 0) & (zR != zp)
    for a, b in {(int(x), int(y)) for x, y in zip(zR[broken], zp[broken], strict=True)}:
        valid &= ((lab0 == a) & (lab1 == b)) | ((lab0 == b) & (lab1 == a))
    gain = _appearing(model, state, t, R, lab0, lab1)
    u = int(P.ids[i])
    h0, f0 = c.heads[u], c.tails[u]
    base = P.log_coins(h0, f0)
    p = int(P.prev[i])
    zpi = int(state.z[p]) if p >= 0 else -1
    avail = zpi >= 0 and pseudo(model, state, np.array([zpi]), np.array([t]))[0] > 0
    move = logw + gain + P.log_coins(h0 + dh, f0 + df + avail) - base
    keep = valid.nonzero()[0].tolist()
    out = [opts[o]._replace(logw=w) for o, w in zip(keep, move[keep].tolist(), strict=True)]
    twin = (valid & (lab0 == zpi)).nonzero()[0] if avail else np.zeros(0, np.int64)
    if twin.size:  # (M_t + S_t + α) / (m_k + s_k) at t, heads for tails
        big_m = pseudo_counts(state.counts, t, model.prior.window, model.prior.decay).sum()
        cols = [np.array(opts[o].chains) for o in twin.tolist()]
        seated = np.array([pseudo(model, state, k, np.full(len(k), t)).sum()
                           + c.stay[t, k].sum() for k in cols])
        seat = np.log(big_m + c.stay[t].sum() + model.prior.alpha) - np.log(seated)
        stay = (logw[twin] + gain[twin] + seat + P.log_coins(h0 + dh[twin] + 1, f0 + df[twin])
                - base)
        out += [opts[o]._replace(logw=w, stays=True)
                for o, w in zip(twin.tolist(), stay.tolist(), strict=True)]
    return out


def _next_coin(model: ChainModel, state: ChainState, i: int, t: int, lab0: np.ndarray,
               lab1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per option, the heads and tails the coin of item i's next appearance j adds, and which
    options are allowed (a stayer j forces the item into j's chain)."""
    P, c = model.persist, state.coins
    assert P is not None and c is not None
    n = len(lab0)
    dh, df = np.zeros(n), np.zeros(n)
    valid = np.ones(n, dtype=bool)
    j = int(P.next[i])
    if j >= 0 and state.z[j] >= 0:  # the next appearance's coin depends on this chain
        if c.y[j]:
            valid &= (lab0 == state.z[j]) | (lab1 == state.z[j])
            dh += 1
        elif model.epochs[j] - t <= model.prior.window:
            df += 1
        else:
            sj = np.full(n, model.epochs[j])
            m = np.where(lab0 >= 0, pseudo(model, state, np.maximum(lab0, 0), sj), 0.0)
            m += np.where(lab1 >= 0, pseudo(model, state, np.maximum(lab1, 0), sj), 0.0)
            df += m > 0
    return dh, df, valid


def _appearing(model: ChainModel, state: ChainState, t: int, R: np.ndarray, lab0: np.ndarray,
               lab1: np.ndarray) -> np.ndarray:
    """Per option, the change of the coin terms of the seated non-stayers of epochs after t
    without a coin whose previous chain the option makes alive (never the item's own id: its
    later appearances follow its next one, at most W back)."""
    P, c = model.persist, state.coins
    assert P is not None and c is not None
    W, bridge = model.prior.window, lab1 >= 0
    zR, zp = state.z[R], state.z[P.prev[R]]
    gain = np.zeros(len(lab0))
    flips: dict[int, dict[int, int]] = {}
    near = model.epochs[R] <= t + W
    cand = (c.coin[R] == -1) & (zR >= 0) & (zp >= 0) & (near | np.isin(zp, lab0[bridge]))
    for v, k in zip(R[cand].tolist(), zp[cand].tolist(), strict=True):
        s = int(model.epochs[v])
        if s - t <= W:
            hit = ((lab0 == k) | (lab1 == k)).nonzero()[0]
        else:
            hit = (bridge & (lab0 == k)).nonzero()[0]
            hit = hit[pseudo(model, state, lab1[hit], np.full(len(hit), s)) > 0]
        uv = int(P.ids[v])
        for o in hit.tolist():
            flips.setdefault(o, {}).setdefault(uv, 0)
            flips[o][uv] += 1
    for o, tallies in flips.items():
        ids = np.array(list(tallies), np.int64)
        add = np.array(list(tallies.values()))
        gain[o] = float(np.sum(P.log_coins(c.heads[ids], c.tails[ids] + add)
                               - P.log_coins(c.heads[ids], c.tails[ids])))
    return gain
