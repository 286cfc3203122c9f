"""Gibbs sampling for the temporal DP mixture (Ahmed & Xing 2008, Sec. 5 with the exact W-epoch
look-ahead of docs/theory/tdpm.rst) and for its fixed-K baseline (K Kalman-filter chains that never
die, Eq. 4.5).

The sampler's state (``state.ChainState``) is the chain labels z (one per item) and each chain's
states φ over its span [first occupied epoch, last occupied epoch]. Labels are canonical: a
chain is a set of items whose occupied epochs are at most W apart (farther apart, the later part
is a chain born anew, as the label-free prior of Eq. 4.4 says), so configurations and labelings
correspond one to one.

A sweep is the kernels over that state in turn: every item's exact conditional
(``item_step``, its places ``options``; with membership stability the coins, ``coins``), the
chains relinked across each epoch boundary (``relink``), whole chains merged or split and parts
of chains grafted onto or peeled off others (``splitmerge``, ``cuts``: not with fixed K or
membership stability), then every chain's states redrawn by forward filtering, backward
sampling. ``ChainSampler`` holds one chain's model, state and moves and runs its sweeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..alloc.rcrp import log_prior
from .coins import refresh_coins
from .dynamics import RandomWalk
from .emission import Emission
from .item_step import items_sweep
from .persistence import Persistence
from .priors import FixedKPrior, RCRPPrior
from .relink import relink
from .splitmerge import SplitMerge
from .state import ChainModel, ChainState, members, resample_states, smoothed_states


class ChainSampler:
    """One Markov chain of the sampler: its ``model``, its ``state`` and its moves (relinking
    unless ``relink`` is false or with membership stability; ``splitmerge``, None with fixed K,
    membership stability or ``split_merge`` false). The state's, its coins' and the model's
    fields read through (``s.z``, ``s.phi``, ``s.epochs``), and setting one of the state's
    fields replaces it in the state (``s.z = labels``)."""

    def __init__(self, epochs: np.ndarray, n_epochs: int, emission: Emission,
                 walk: RandomWalk, prior: RCRPPrior | FixedKPrior,
                 persistence: Persistence | None = None, relink: bool = True,
                 split_merge: bool = True) -> None:
        self.model = ChainModel.build(epochs, n_epochs, emission, prior, persistence)
        self.state = ChainState.empty(self.model, walk)
        self.relinking = relink and persistence is None
        self.relinked = 0  # relinking moves accepted so far
        self.splitmerge = (SplitMerge(self.model) if split_merge and not self.model.fixed
                           and persistence is None else None)

    def __getattr__(self, name: str) -> Any:
        for record in (self.__dict__.get("state"), self.__dict__.get("model")):
            if record is None:
                continue
            if name in record.__dataclass_fields__:
                return getattr(record, name)
            coins = getattr(record, "coins", None)
            if coins is not None and name in coins.__dataclass_fields__:
                return getattr(coins, name)
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        state = self.__dict__.get("state")
        if state is not None and name in state.__dataclass_fields__:
            self.__dict__["state"] = replace(state, **{name: value})
        else:
            super().__setattr__(name, value)

    def init_fixed(self, phi: np.ndarray) -> None:
        """Start the fixed-K baseline from states phi (K, T, D), every item unassigned."""
        s = self.state
        for k in range(self.model.prior.K):
            s.active[k] = True
            s.first[k], s.last[k] = 0, self.model.T - 1
            s.phi[k] = np.array(phi[k], float)

    def sweep(self, rng: np.random.Generator, start_epoch: int = 0) -> None:
        """One Gibbs sweep: every item of epochs >= ``start_epoch`` once (``items_sweep``), the
        relinking moves at every boundary after ``start_epoch``, the split-merge and cut moves,
        then every chain's states."""
        self.state = items_sweep(self.model, self.state, rng, start_epoch)
        if self.relinking:
            self.relink(rng, start_epoch)
        if self.splitmerge is not None:
            self.state = self.splitmerge.sweep(self.state, rng, start_epoch)
        resample_states(self.model, self.state, rng)

    def relink(self, rng: np.random.Generator, start_epoch: int = 0) -> int:
        """Relinking moves at every boundary t > ``start_epoch``; how many were accepted."""
        self.state, done = relink(self.model, self.state, rng, start_epoch)
        self.relinked += done
        return done

    def resample_variances(self, rng: np.random.Generator, noise: tuple[float, float] | None,
                           drift: tuple[float, float] | None) -> None:
        """Σ and ρ drawn from their conditionals (``resample_variances``)."""
        self.state = resample_variances(self.model, self.state, rng, noise, drift)

    def smoothed_states(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Every chain's states' posterior means and variances given its members (RTS)."""
        return smoothed_states(self.model, self.state)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The sample (labels, spans, states, stayers) and the split-merge proposals' scale,
        fixed when they were made; ``restore`` is its inverse."""
        out = self.state.to_arrays(self.model.emission.dim)
        if self.splitmerge is not None:
            out["bandwidth"] = np.array([self.splitmerge.bandwidth])
        return out

    def restore(self, arrays: Mapping[str, np.ndarray]) -> None:
        """The sample ``to_arrays`` wrote (a checkpoint's arrays may hold others too)."""
        self.state = ChainState.from_arrays(self.model, self.state.walk, arrays,
                                            len(self.state.active))
        if self.splitmerge is not None and "bandwidth" in arrays:
            self.splitmerge.bandwidth = float(arrays["bandwidth"][0])
        if self.model.persist is not None:
            refresh_coins(self.model, self.state, 0)

    def log_joint(self) -> float:
        """log p(z, φ, x) of the current sample (``log_joint``)."""
        return log_joint(self.model, self.state)

    def canonical(self) -> np.ndarray:
        """Labels renumbered 0, 1, ... by first epoch, then first item (unassigned stay −1)."""
        return relabel(self.state.z, self.model.epochs)


def resample_variances(model: ChainModel, state: ChainState, rng: np.random.Generator,
                       noise: tuple[float, float] | None, drift: tuple[float, float] | None
                       ) -> ChainState:
    """Draw Σ and ρ from their inverse-gamma conditionals given the labels and states, for
    priors IG(shape a, scale b) given as (a, b) (None: keep the value): Σ | · ~
    IG(a + N·D/2, b + ½ Σ_i ||x_i − φ_{z_i,t_i}||²) (Gaussian emissions; set on the emission),
    ρ | · ~ IG(a + n/2, b + ½ Σ ||Δφ||²) over the n increments inside the chains' spans (the
    state returned has the new walk)."""
    D = model.emission.dim
    chains = [int(k) for k in state.active.nonzero()[0]]
    if noise is not None:
        rss = sum(model.emission.sq_residuals(items, state.phi[k][u])
                  for k, mine in members(model, state).items()
                  for u, items in enumerate(mine) if len(items))
        a, b = noise
        n = int(np.sum(state.z >= 0)) * D
        model.emission.noise_var = float((b + rss / 2) / rng.gamma(a + n / 2))
    if drift is not None:
        sq = sum(float(np.sum(np.diff(state.phi[k], axis=0) ** 2)) for k in chains)
        m = sum(len(state.phi[k]) - 1 for k in chains) * D
        a, b = drift
        walk = RandomWalk(state.walk.birth_var, float((b + sq / 2) / rng.gamma(a + m / 2)))
        state = replace(state, walk=walk)
    return state


def log_joint(model: ChainModel, state: ChainState) -> float:
    """log p(z, φ, x) of a sample (the prior over labels, with the stayers and the coins if any,
    the walks' densities over the spans, the emissions)."""
    act = state.active.nonzero()[0]
    counts = state.counts[:, act]
    prior = model.prior
    if isinstance(prior, FixedKPrior):
        value = prior.log_prior(counts)
    elif state.coins is None or model.persist is None:
        value = log_prior(counts, prior.window, prior.decay, prior.alpha)
    else:
        value = log_prior(counts, prior.window, prior.decay, prior.alpha,
                          state.coins.stay[:, act])
        value += float(np.sum(model.persist.log_coins(state.coins.heads, state.coins.tails)))
    for k, mine in members(model, state).items():
        value += state.walk.log_density(state.phi[k])
        value += sum(model.emission.total_loglik(items, state.phi[k][u])
                     for u, items in enumerate(mine) if len(items))
    return value


def relabel(z: np.ndarray, epochs: np.ndarray) -> np.ndarray:
    """Chain labels renumbered 0, 1, ... in order of (first epoch, first item)."""
    z = np.asarray(z)
    out = np.full(len(z), -1, dtype=np.int64)
    order = np.lexsort((np.arange(len(z)), epochs))
    seen: dict[int, int] = {}
    for i in order:
        k = int(z[i])
        if k >= 0:
            out[i] = seen.setdefault(k, len(seen))
    return out


def alive_per_epoch(z: np.ndarray, epochs: np.ndarray, n_epochs: int, window: int) -> np.ndarray:
    """How many chains are alive at each epoch: m_{k,t} > 0 or n_{k,t} > 0, i.e. the chain has
    members at t or in the W epochs before."""
    z, epochs = np.asarray(z), np.asarray(epochs)
    keep = z >= 0
    _, zi = np.unique(z[keep], return_inverse=True)
    occ = np.zeros((n_epochs, zi.max() + 1 if zi.size else 0), bool)
    occ[epochs[keep], zi] = True
    alive = occ.copy()
    for h in range(1, window + 1):
        alive[h:] |= occ[:-h]
    return alive.sum(1)
