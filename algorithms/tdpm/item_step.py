"""One item's Gibbs step of the temporal DP mixture (Ahmed & Xing 2008, Sec. 5; docs/theory/
tdpm.rst): remove the item, which may shrink its chain's span or split the chain where its
occupied epochs are now more than W apart (labels are canonical: a chain's occupied epochs are
at most W apart, as the label-free prior of Eq. 4.4 says), draw its place from its exact
conditional (``options.item_options``; with membership stability ``coins.with_coins``), and
seat it there, drawing the states between the new state and its neighbours from the walk's
bridge. Every function updates the state's arrays in place and returns the state to go on with
(``state.ChainState``).
"""

from __future__ import annotations

import numpy as np

from .coins import refresh_coins, with_coins
from .options import Option, item_options
from .state import ChainModel, ChainState, draw, resample_states


def items_sweep(model: ChainModel, state: ChainState, rng: np.random.Generator,
                start_epoch: int = 0) -> ChainState:
    """Every item of epochs >= ``start_epoch`` once: epochs in order, items shuffled within
    each; items not yet seated are seated sequentially, and the states of the chains alive
    after such an epoch redrawn (FFBS)."""
    for t in range(start_epoch, model.T):
        seating = bool(np.any(state.z[model.by_epoch[t]] < 0))
        for i in rng.permutation(model.by_epoch[t]):
            state = step(model, state, int(i), rng)
        if seating:
            resample_states(model, state, rng, (state.active & (state.last == t)).nonzero()[0])
    return state


def step(model: ChainModel, state: ChainState, i: int, rng: np.random.Generator) -> ChainState:
    """Redraw item i's place from its exact conditional (module docstring)."""
    t = int(model.epochs[i])
    if state.z[i] >= 0:
        k = int(state.z[i])
        state, born = remove(model, state, i)
        if model.persist is not None:
            refresh_coins(model, state, t, (k, born), (i, int(model.persist.next[i])))
    opts = conditional(model, state, i, t, rng)
    logw = np.array([o.logw for o in opts])
    state = place(model, state, i, t, opts[draw(np.cumsum(np.exp(logw - logw.max())), rng)],
                  rng)
    if model.persist is not None:
        refresh_coins(model, state, t, (int(state.z[i]),), (i,))
    return state


def conditional(model: ChainModel, state: ChainState, i: int, t: int,
                rng: np.random.Generator) -> list[Option]:
    """Item i's places with their log weights (membership stability: with the coins' terms and
    the stay twins), the new states drawn with ``rng``."""
    opts = item_options(model, state, i, t, rng)
    return opts if model.persist is None else with_coins(model, state, i, t, opts)


def remove(model: ChainModel, state: ChainState, i: int) -> tuple[ChainState, int]:
    """Unseat item i; returns the state and the label of the chain split off (−1: no
    split)."""
    k, t = int(state.z[i]), int(model.epochs[i])
    state.z[i] = -1
    state.counts[t, k] -= 1
    coins = state.coins
    if coins is not None and coins.y[i]:
        coins.stay[t, k] -= 1
        coins.y[i] = False
    if model.fixed or state.counts[t, k] > 0:
        return state, -1
    occ = state.counts[:, k].nonzero()[0]
    f0 = int(state.first[k])
    if occ.size == 0:
        state.free(k)
    elif t == f0:
        state.phi[k] = state.phi[k][occ[0] - f0:]
        state.first[k] = occ[0]
    elif t == state.last[k]:
        state.phi[k] = state.phi[k][:occ[-1] - f0 + 1]
        state.last[k] = occ[-1]
    else:
        a, b = int(occ[occ < t].max()), int(occ[occ > t].min())
        if b - a > model.prior.window:
            return split(model, state, k, a, b)
    return state, -1


def split(model: ChainModel, state: ChainState, k: int, a: int, b: int
          ) -> tuple[ChainState, int]:
    """Chain k's occupied epochs a < b are more than W apart: from b on it is a new chain,
    whose label is returned with the state."""
    state, k2 = state.with_label()
    f0 = int(state.first[k])
    state.phi[k2] = state.phi[k][b - f0:]
    state.phi[k] = state.phi[k][:a - f0 + 1]
    state.first[k2], state.last[k2], state.last[k] = b, state.last[k], a
    state.counts[b:, k2] = state.counts[b:, k]
    state.counts[b:, k] = 0
    if state.coins is not None:
        state.coins.stay[b:, k2] = state.coins.stay[b:, k]
        state.coins.stay[b:, k] = 0
    state.z[(state.z == k) & (model.epochs >= b)] = k2
    return state, k2


def place(model: ChainModel, state: ChainState, i: int, t: int, option: Option,
          rng: np.random.Generator) -> ChainState:
    """Seat item i (epoch t) at ``option``: the drawn state joined to its chain(s) with the
    walk's bridges to the neighbouring states, or a new chain."""
    walk, phi, first, last = state.walk, option.state, state.first, state.last
    kind, labels = option.kind, option.chains
    if kind == "alive":
        k = labels[0]
    elif kind == "extend":
        k = labels[0]
        mid = walk.bridge(state.phi[k][-1], phi, t - int(last[k]), rng)
        state.phi[k] = np.vstack([state.phi[k], mid, phi[None]])
        last[k] = t
    elif kind == "prepend":
        k = labels[0]
        mid = walk.bridge(phi, state.phi[k][0], int(first[k]) - t, rng)
        state.phi[k] = np.vstack([phi[None], mid, state.phi[k]])
        first[k] = t
    elif kind == "bridge":
        k, b = labels
        left = walk.bridge(state.phi[k][-1], phi, t - int(last[k]), rng)
        right = walk.bridge(phi, state.phi[b][0], int(first[b]) - t, rng)
        state.phi[k] = np.vstack([state.phi[k], left, phi[None], right, state.phi[b]])
        last[k] = last[b]
        state.counts[:, k] += state.counts[:, b]
        if state.coins is not None:
            state.coins.stay[:, k] += state.coins.stay[:, b]
        state.z[state.z == b] = k
        state.free(b)
    else:
        state, k = state.with_label()
        state.phi[k] = phi[None].copy()
        state.first[k] = state.last[k] = t
    state.z[i] = k
    state.counts[t, k] += 1
    if option.stays:
        state.coins.y[i] = True
        state.coins.stay[t, k] += 1
    return state
