"""One item's places and their weights: the exact conditional of its label given the others and
the remaining states (Ahmed & Xing 2008, Sec. 5 with the W-epoch look-ahead of
docs/theory/tdpm.rst).

Item i at epoch t (unseated) may join
- an alive chain (m_{k,t} + n_{k,t} > 0): the state at t if inside the span ("alive"), otherwise
  the forward marginal from the last state, N(x; φ_last, Σ + (t − t_last)ρ) ("extend");
- a chain born in (t, t+W]: the item becomes its first member, the birth moves to t
  ("prepend");
- two chains it reconnects: one alive at t that ended before t, one born in (t, t+W] more than
  W after the first ended ("bridge");
- a new chain, α ∫F(x|φ) G_0(dφ) ("new").
Each weight is the product of the prior factors that change (``rcrp.own_factors`` over epochs
t..t+W) and the likelihood, with a new state at t integrated against the walk's conditional
given its neighbours (``Emission.candidates``, which also draws it).
"""

from __future__ import annotations

from itertools import repeat
from typing import NamedTuple

import numpy as np

from ..alloc.rcrp import own_factors
from .dynamics import gauss_logpdf, gauss_product
from .state import ChainModel, ChainState


class Option(NamedTuple):
    """One place of an item: its kind ("alive": the chain has a state at t; "extend",
    "prepend", "bridge", "new": a state at t is drawn), the chains it joins (a bridge's two,
    the earlier first; none for a new chain), its log weight, the drawn state at t (None for
    "alive") and whether the item stays in its previous chain (membership stability)."""

    kind: str
    chains: tuple[int, ...]
    logw: float
    state: np.ndarray | None
    stays: bool = False


class Places(NamedTuple):
    """The chains an item of epoch t may join, by kind, and the rows lo..hi−1 (t at row rel) of
    the counts its prior factors read."""

    inside: np.ndarray
    ext: np.ndarray
    soon: np.ndarray
    pairs: np.ndarray  # (n, 2): the bridges' earlier and later chain
    lo: int
    hi: int
    rel: int


def item_options(model: ChainModel, state: ChainState, i: int, t: int,
                 rng: np.random.Generator) -> list[Option]:
    """Item i's places at epoch t with their log weights (module docstring; fixed K: the K
    chains, Eq. 4.5), the new states drawn with ``rng``."""
    if model.fixed:
        return _fixed_options(model, state, i, t)
    places = _places(model, state, t)
    gain = _prior_gains(model, state, places)
    inside = places.inside
    lik_inside = (model.emission.loglik(i, np.array([state.phi[k][t - state.first[k]]
                                                     for k in inside.tolist()]))
                  if inside.size else np.zeros(0))
    means, variances, moved = _new_state_priors(state, places, t, model.emission.dim)
    lik_new, states = model.emission.candidates(i, means, variances[:, None], rng)
    logw = gain + np.concatenate([lik_inside, lik_new + moved])
    ext, soon, pairs = places.ext, places.soon, places.pairs
    kinds = (["alive"] * len(inside) + ["extend"] * len(ext) + ["prepend"] * len(soon)
             + ["bridge"] * len(pairs) + ["new"])
    chains = ([(int(k),) for k in inside] + [(int(k),) for k in ext]
              + [(int(k),) for k in soon] + [tuple(p) for p in pairs.tolist()] + [()])
    return records(kinds, chains, logw, [None] * len(inside) + list(states))


def _fixed_options(model: ChainModel, state: ChainState, i: int, t: int) -> list[Option]:
    """The fixed-K baseline: each of the K chains, at its state at t."""
    K = model.prior.K
    phi_t = np.stack([state.phi[k][t] for k in range(K)])
    logw = model.prior.weights(state.counts, t) + model.emission.loglik(i, phi_t)
    return records(["alive"] * K, [(k,) for k in range(K)], logw, [None] * K)


def records(kinds: list[str], chains: list[tuple[int, ...]], logw: np.ndarray,
            states: list[np.ndarray | None]) -> list[Option]:
    """The options of parallel lists, none staying (tuple.__new__ over zip: an item step makes
    tens of records, and ``Option(...)`` costs a Python call each)."""
    n = len(kinds)
    return list(map(tuple.__new__, repeat(Option, n),
                    zip(kinds, chains, logw.tolist(), states, repeat(False, n), strict=True)))


def _places(model: ChainModel, state: ChainState, t: int) -> Places:
    """The chains alive at t with a state there, alive past their last state, born in
    (t, t+W], and the pairs a bridge reconnects."""
    W = model.prior.window
    act = state.active.nonzero()[0]
    lo, hi = max(0, t - W), min(model.T, t + W + 1)
    rel = t - lo
    recent = state.counts[lo:hi][:rel + 1, act].sum(0) > 0
    alive = act[recent]
    first, last = state.first, state.last
    soon = act[~recent & (first[act] > t) & (first[act] <= t + W)]
    ext = alive[last[alive] < t]
    pairs = np.array([(a, b) for a in ext for b in soon
                      if first[b] - last[a] > W], dtype=np.int64).reshape(-1, 2)
    return Places(alive[last[alive] >= t], ext, soon, pairs, lo, hi, rel)


def _prior_gains(model: ChainModel, state: ChainState, places: Places) -> np.ndarray:
    """Each place's change of the log prior over epochs t..t+W, in the order alive, extend,
    prepend (one chain gains the item), bridge (two chains joined and the item), new: the
    chains' own factors (``rcrp.own_factors``) with and without the change, in one call."""
    lo, hi, rel = places.lo, places.hi, places.rel
    sub = state.counts[lo:hi]
    e = np.zeros((hi - lo, 1), dtype=np.int64)
    e[rel] = 1
    pairs = places.pairs
    single = np.concatenate([places.inside, places.ext, places.soon])
    blocks = {"as_is": sub[:, single], "joined": sub[:, single] + e,
              "bridged": sub[:, pairs[:, 0]] + sub[:, pairs[:, 1]] + e, "new": e}
    stay = None
    if state.coins is not None:
        ss = state.coins.stay[lo:hi]
        stay = np.hstack([ss[:, single], ss[:, single],
                          ss[:, pairs[:, 0]] + ss[:, pairs[:, 1]], 0 * e])
    values = own_factors(np.hstack(list(blocks.values())), rel,
                         min(rel + model.prior.window, hi - lo - 1) + 1, model.decay_w,
                         model.prior.alpha, stay)
    f, start = {}, 0
    for name, cols in blocks.items():
        f[name] = values[start:start + cols.shape[1]]
        start += cols.shape[1]
    bridged = f["bridged"]
    if len(pairs):
        before = dict(zip(single.tolist(), f["as_is"], strict=True))
        bridged = bridged - [before[a] + before[b] for a, b in pairs.tolist()]
    return np.concatenate([f["joined"] - f["as_is"], bridged, f["new"]])


def _new_state_priors(state: ChainState, places: Places, t: int, D: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each place that draws a state at t (extend, prepend, bridge, new): the walk's
    conditional of that state given its neighbours (mean, variance) and the change of the walk's
    density of the neighbours it moves (a prepended chain's birth; a bridge's later chain, born
    before, now continuing)."""
    walk, first, last, phi = state.walk, state.first, state.last, state.phi
    ext, soon, pairs = places.ext, places.soon, places.pairs
    means, variances, moved = [], [], []
    if ext.size:
        means.append(np.stack([phi[k][-1] for k in ext]))
        variances.append(walk.drift_var * (t - last[ext]))
        moved.append(np.zeros(len(ext)))
    if soon.size:
        phi_b = np.stack([phi[k][0] for k in soon])
        gap = walk.drift_var * (first[soon] - t)[:, None]
        m, v = gauss_product(0.0, walk.birth_var, phi_b, gap)
        means.append(m)
        variances.append(v[:, 0])
        moved.append(gauss_logpdf(phi_b, 0.0, walk.birth_var + gap)
                     - gauss_logpdf(phi_b, 0.0, walk.birth_var))
    if len(pairs):
        phi_a = np.stack([phi[a][-1] for a in pairs[:, 0]])
        phi_b = np.stack([phi[b][0] for b in pairs[:, 1]])
        ga = walk.drift_var * (t - last[pairs[:, 0]])[:, None]
        gb = walk.drift_var * (first[pairs[:, 1]] - t)[:, None]
        m, v = gauss_product(phi_a, ga, phi_b, gb)
        means.append(m)
        variances.append(v[:, 0])
        moved.append(gauss_logpdf(phi_b, phi_a, ga + gb)
                     - gauss_logpdf(phi_b, 0.0, walk.birth_var))
    means.append(np.zeros((1, D)))
    variances.append(np.array([walk.birth_var]))
    moved.append(np.zeros(1))
    return np.concatenate(means), np.concatenate(variances), np.concatenate(moved)
