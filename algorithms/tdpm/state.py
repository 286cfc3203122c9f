"""The state of one Markov chain of the temporal DP mixture's sampler (docs/theory/tdpm.rst), and
what it is conditioned on.

``ChainModel`` is fixed for a run: the items' epochs, the emission, the prior over labels, the
ids' appearances (membership stability). ``ChainState`` is what the kernels (``item_step``,
``relink``, ``splitmerge``, ``cuts``) move: the labels z, the counts n_{k,t}, each chain's span
[first, last] and states φ over it, the random walk (ρ is sampled) and, with membership
stability, the ``Coins``. Both records are frozen; the kernels update the arrays (and the dict
of states) a state owns in place, since copying the T × K counts at every item step would cost
more than the step, and return the state to go on with: a new record only when the label slots
grow (``with_label``). A state given to a kernel is not used after it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ..alloc.rcrp import decay_weights
from .dynamics import RandomWalk
from .emission import Emission
from .persistence import Persistence
from .priors import FixedKPrior, RCRPPrior


@dataclass(frozen=True)
class ChainModel:
    """What the sampler conditions on: the items' epochs in [0, T) and each epoch's items, the
    emission (its Σ, when sampled, is updated on it), the prior and its decay weights, and with
    membership stability the ids' appearances and the returning items sorted by epoch."""

    epochs: np.ndarray
    T: int
    emission: Emission
    prior: RCRPPrior | FixedKPrior
    persist: Persistence | None
    by_epoch: tuple[np.ndarray, ...]
    decay_w: np.ndarray
    returning: np.ndarray
    ret_epochs: np.ndarray

    @classmethod
    def build(cls, epochs: np.ndarray, n_epochs: int, emission: Emission,
              prior: RCRPPrior | FixedKPrior,
              persistence: Persistence | None = None) -> ChainModel:
        """The model of items at ``epochs`` (in [0, n_epochs))."""
        epochs = np.asarray(epochs, dtype=np.int64)
        T = int(n_epochs)
        if epochs.size and (epochs.min() < 0 or epochs.max() >= T):
            raise ValueError("epochs must lie in [0, n_epochs)")
        fixed = isinstance(prior, FixedKPrior)
        if persistence is not None and fixed:
            raise ValueError("membership stability needs the recurrent CRP, not fixed K")
        returning = np.zeros(0, np.int64)
        if persistence is not None:
            back = (persistence.prev >= 0).nonzero()[0]
            returning = back[np.argsort(epochs[back], kind="stable")]
        return cls(epochs, T, emission, prior, persistence,
                   tuple((epochs == t).nonzero()[0] for t in range(T)),
                   np.ones(1) if fixed else decay_weights(prior.window, prior.decay),
                   returning, epochs[returning])

    @property
    def fixed(self) -> bool:
        """The fixed-K baseline: K chains alive at every epoch, never born or ended."""
        return isinstance(self.prior, FixedKPrior)


@dataclass(frozen=True)
class Coins:
    """Membership stability's part of the state: each item's stay indicator y, the stayers
    s_{k,t} per (epoch, chain), each returning item's coin (1 heads, 0 tails, −1 none) and each
    id's heads and tails."""

    y: np.ndarray
    stay: np.ndarray
    coin: np.ndarray
    heads: np.ndarray
    tails: np.ndarray

    @classmethod
    def empty(cls, model: ChainModel, shape: tuple[int, int]) -> Coins:
        """No stayer, no coin."""
        assert model.persist is not None
        N, n_ids = len(model.epochs), model.persist.n_ids
        return cls(np.zeros(N, dtype=bool), np.zeros(shape, dtype=np.int64),
                   np.full(N, -1, dtype=np.int8), np.zeros(n_ids, dtype=np.int64),
                   np.zeros(n_ids, dtype=np.int64))


@dataclass(frozen=True)
class ChainState:
    """Labels z (−1: unseated), counts (T, slots), each slot's span first..last (−1 if free),
    which slots are chains, each chain's states over its span (``phi[k]``: (last − first + 1,
    D)), the walk and the coins (None without membership stability)."""

    z: np.ndarray
    counts: np.ndarray
    first: np.ndarray
    last: np.ndarray
    active: np.ndarray
    phi: dict[int, np.ndarray]
    walk: RandomWalk
    coins: Coins | None

    @classmethod
    def empty(cls, model: ChainModel, walk: RandomWalk, slots: int = 16) -> ChainState:
        """Every item unseated, no chain (fixed K: K slots)."""
        cap = model.prior.K if isinstance(model.prior, FixedKPrior) else slots
        shape = (model.T, cap)
        return cls(np.full(len(model.epochs), -1, dtype=np.int64), np.zeros(shape, np.int64),
                   np.full(cap, -1, dtype=np.int64), np.full(cap, -1, dtype=np.int64),
                   np.zeros(cap, dtype=bool), {}, walk,
                   None if model.persist is None else Coins.empty(model, shape))

    def with_label(self) -> tuple[ChainState, int]:
        """A free slot made a chain: the state (a new record if the slots doubled) and k."""
        state, free = self, (~self.active).nonzero()[0]
        if free.size == 0:
            cap = len(self.active)
            coins = self.coins
            if coins is not None:
                coins = replace(coins, stay=np.pad(coins.stay, ((0, 0), (0, cap))))
            state = replace(self, counts=np.pad(self.counts, ((0, 0), (0, cap))),
                            first=np.pad(self.first, (0, cap), constant_values=-1),
                            last=np.pad(self.last, (0, cap), constant_values=-1),
                            active=np.pad(self.active, (0, cap)), coins=coins)
            free = np.array([cap])
        k = int(free[0])
        state.active[k] = True
        return state, k

    def free(self, k: int) -> None:
        """Slot k no longer a chain."""
        self.active[k] = False
        self.first[k] = self.last[k] = -1
        self.counts[:, k] = 0
        if self.coins is not None:
            self.coins.stay[:, k] = 0
        self.phi.pop(k, None)

    def mask(self, labels: np.ndarray) -> np.ndarray:
        """A boolean per label slot: True at ``labels``."""
        mask = np.zeros(len(self.active), dtype=bool)
        mask[labels] = True
        return mask

    def to_arrays(self, dim: int) -> dict[str, np.ndarray]:
        """The sample as arrays (labels, spans, states of dimension ``dim``, stayers):
        ``from_arrays`` is its inverse (the checkpoint's and the warm start's format)."""
        act = self.active.nonzero()[0]
        phi = [self.phi[int(k)] for k in act]
        out = {"z": self.z.copy(), "labels": act, "first": self.first[act],
               "last": self.last[act],
               "phi": np.concatenate(phi) if phi else np.zeros((0, dim))}
        if self.coins is not None:
            out["stay"] = self.coins.y.copy()
        return out

    @classmethod
    def from_arrays(cls, model: ChainModel, walk: RandomWalk, arrays: Mapping[str, np.ndarray],
                    slots: int = 16) -> ChainState:
        """The state ``to_arrays`` wrote (at least ``slots`` label slots); counts, stayers and
        coins recomputed from the labels."""
        labels = np.asarray(arrays["labels"], np.int64)
        cap = max(slots, int(labels.max()) + 1 if labels.size else 0)
        state = cls.empty(model, walk, cap)
        z = np.asarray(arrays["z"], np.int64).copy()
        state = replace(state, z=z)
        seated = z >= 0
        np.add.at(state.counts, (model.epochs[seated], z[seated]), 1)
        state.active[labels] = True
        state.first[labels] = arrays["first"]
        state.last[labels] = arrays["last"]
        spans = state.last[labels] - state.first[labels] + 1
        cuts = np.concatenate([[0], np.cumsum(spans)])
        phi = np.asarray(arrays["phi"], float)
        state.phi.update({int(k): phi[cuts[j]:cuts[j + 1]].copy() for j, k in enumerate(labels)})
        if state.coins is not None:
            y = np.asarray(arrays.get("stay", np.zeros(len(z), bool)), bool).copy()
            y &= z >= 0  # an unseated item stays nowhere
            state.coins.y[:] = y
            np.add.at(state.coins.stay, (model.epochs[y], z[y]), 1)
        return state


def members(model: ChainModel, state: ChainState,
            labels: np.ndarray | list[int] | None = None) -> dict[int, list[np.ndarray]]:
    """Each active chain's (or each of ``labels``') items by epoch of its span (one sort of the
    seated items)."""
    z, epochs = state.z, model.epochs
    if labels is None:
        labels = state.active.nonzero()[0]
        seated = (z >= 0).nonzero()[0]
    else:
        seated = (state.mask(labels)[z] & (z >= 0)).nonzero()[0]
    order = seated[np.lexsort((epochs[seated], z[seated]))]
    keys = z[order] * model.T + epochs[order]
    cuts = np.diff(keys).nonzero()[0] + 1
    groups = np.split(order, cuts)
    out = {int(k): [np.zeros(0, np.int64)] * int(state.last[k] - state.first[k] + 1)
           for k in labels}
    for g in groups:
        if g.size:
            k = int(z[g[0]])
            out[k][int(epochs[g[0]] - state.first[k])] = g
    return out


def _pseudo_obs(model: ChainModel, state: ChainState, k: int, mine: list[np.ndarray]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chain k's Gaussian pseudo-observations (y, r) over its span from its members by epoch,
    and which epochs have members."""
    L, D = len(mine), model.emission.dim
    y, r = np.zeros((L, D)), np.ones((L, D))
    observed = np.array([len(items) > 0 for items in mine])
    for u in observed.nonzero()[0]:
        y[u], r[u] = model.emission.pseudo_obs(mine[u], state.phi[k][u])
    return y, r, observed


def resample_states(model: ChainModel, state: ChainState, rng: np.random.Generator,
                    labels: np.ndarray | list[int] | None = None) -> None:
    """Forward filtering, backward sampling of every chain's (or ``labels``') states over its
    span, in place."""
    mine = members(model, state, labels)
    for k in mine:
        state.phi[int(k)] = state.walk.ffbs(*_pseudo_obs(model, state, int(k), mine[int(k)]),
                                            rng)


def smoothed_states(model: ChainModel, state: ChainState
                    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Every chain's states' posterior means and variances given its members (RTS)."""
    return {k: state.walk.smooth(*_pseudo_obs(model, state, k, mine))
            for k, mine in members(model, state).items()}


def draw(cdf: np.ndarray, rng: np.random.Generator) -> int:
    """An index drawn with probability ∝ the increments of the cumulative weights ``cdf``."""
    return min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(cdf) - 1)
