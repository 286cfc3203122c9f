"""What the moves over whole chains of the temporal DP mixture share (``splitmerge.py``'s
docstring: the target p(z | x) with the states integrated out, the anchors i and j, Dahl's
sequential allocation; ``cuts.py``): ``ChainMoves``, the evidence of a chain by the Kalman filter,
the prior factors of the chains a move changes, the allocation's probability, the anchors' draw
and its probability r_z(i), and the rebuild of the changed chains (their states drawn by FFBS).
"""

from __future__ import annotations

import math

import numpy as np

from ..alloc.rcrp import chain_log_prior
from .state import ChainModel, ChainState, draw, resample_states

FAR = 1 / 3  # the share of partners j drawn from every epoch rather than within W of i


class ChainMoves:
    """What the split-merge and cut moves over a ``ChainModel``'s states share: the collapsed
    target, the sequential allocation, the anchors, and the rebuild of the changed chains;
    ``attempts`` proposals a sweep, or ``rate`` proposals per item (of the epochs swept) when
    ``attempts`` is None, a share ``cut`` of them cut moves; ``moves`` counts the accepted
    moves by kind, ``accepted`` all of them."""

    def __init__(self, model: ChainModel, rate: float = 0.05, attempts: int | None = None,
                 cut: float = 0.5) -> None:
        self.model = model
        self.rate, self.attempts, self.cut = rate, attempts, cut
        self.moves = {"merge": 0, "split": 0, "graft": 0, "peel": 0}
        n = len(model.epochs)
        self.y, r, _ = model.emission.group_pseudo_obs(np.arange(n), np.arange(n))
        self.bandwidth = float(np.mean(r)) if n else 1.0
        # the items in epoch order, where each epoch's begin, and each item's place
        self.by_time = np.concatenate(model.by_epoch) if n else np.zeros(0, np.int64)
        self.epoch_start = np.cumsum([0] + [len(b) for b in model.by_epoch])
        self.rank = np.empty(n, np.int64)
        self.rank[self.by_time] = np.arange(n)
        self.accepted = 0

    # ---- the target ------------------------------------------------------------------------

    def evidence(self, state: ChainState, items: np.ndarray) -> float:
        """log p(x_items) of one chain, states integrated out (items sorted by epoch)."""
        ep = self.model.epochs[items]
        starts = np.diff(ep, prepend=-1).nonzero()[0]
        y, r, norm = self.model.emission.group_pseudo_obs(items, starts)
        occupied = ep[starts]
        return state.walk.log_evidence(y, r, occupied) + float(norm.sum())

    def _columns(self, groups: list[np.ndarray], lo: int, hi: int) -> np.ndarray:
        """Counts per epoch lo..hi−1 of each group of items."""
        cols = np.zeros((hi - lo, len(groups)))
        for g, items in enumerate(groups):
            np.add.at(cols[:, g], self.model.epochs[items] - lo, 1)
        return cols

    def log_gain(self, state: ChainState, new: list[np.ndarray], old: list[np.ndarray]
                 ) -> float:
        """log p(z_new, x) − log p(z_old, x) when the chains ``old`` (items sorted by epoch)
        become ``new`` (the same items) and the others stay: their prior factors and
        evidences."""
        m = self.model
        ep = m.epochs[np.concatenate(old)]
        lo, hi = int(ep.min()), min(m.T, int(ep.max()) + m.prior.window + 1)
        p = m.prior
        f = chain_log_prior(self._columns(new + old, lo, hi), p.window, p.decay, p.alpha)
        return (float(f[:len(new)].sum() - f[len(new):].sum())
                + sum(self.evidence(state, g) for g in new)
                - sum(self.evidence(state, g) for g in old))

    def log_ratio(self, state: ChainState, merged: np.ndarray, a: np.ndarray, b: np.ndarray
                  ) -> float:
        """log p(z_merged, x) − log p(z_split, x)."""
        return self.log_gain(state, [merged], [a, b])

    def valid(self, items: np.ndarray) -> bool:
        """A chain: occupied epochs at most W apart (items sorted by epoch)."""
        ep = self.model.epochs[items]
        return bool(np.all(np.diff(ep) <= self.model.prior.window))

    # ---- the proposal ----------------------------------------------------------------------

    def allocate(self, state: ChainState, items: np.ndarray, i: int, j: int,
                 rng: np.random.Generator | None, into_a: np.ndarray | None = None
                 ) -> tuple[np.ndarray, float]:
        """Sequential allocation of ``items`` (sorted by (epoch, item)) into pieces A ∋ i and
        B ∋ j: drawn with ``rng``, or the given ``into_a`` evaluated. Returns (into_a, log q).
        The pieces' predictives are the emission's (``Emission.pieces``)."""
        m = self.model
        alpha = m.prior.alpha
        ep = (m.epochs[items] - m.epochs[items[0]]).tolist()
        anchors = (int(np.flatnonzero(items == i)[0]), int(np.flatnonzero(items == j)[0]))
        pieces = m.emission.pieces(items, anchors, state.walk)
        w = m.decay_w.tolist()
        counts = [[0] * (ep[-1] + 1), [0] * (ep[-1] + 1)]
        empty = [True, True]
        out = np.zeros(len(items), dtype=bool)
        logq = 0.0
        for u, t in enumerate(ep):
            if u in anchors:
                side = anchors.index(u)
            else:  # weight (α if empty, m + n: 0 if dead) times the predictive
                logp = [-math.inf, -math.inf]
                for k in (0, 1):
                    c = counts[k]
                    weight = alpha if empty[k] else c[t] + sum(
                        w[h - 1] * c[t - h] for h in range(1, min(len(w), t) + 1))
                    if weight > 0:
                        logp[k] = math.log(weight) + pieces.log_predictive(k, u, t)
                total = max(logp) + math.log1p(math.exp(min(logp) - max(logp)))
                if into_a is None:
                    side = 0 if rng.random() < math.exp(logp[0] - total) else 1
                else:
                    side = 0 if into_a[u] else 1
                logq += logp[side] - total
            out[u] = side == 0
            pieces.absorb(side, u, t)
            empty[side] = False
            counts[side][t] += 1
        return out, logq

    def partner(self, i: int, rng: np.random.Generator, start_epoch: int) -> int:
        """j given i (from ``start_epoch`` on): with probability FAR uniform over all items,
        else within W epochs of i, ½ uniform and ½ by the kernel κ; −1 if there is none."""
        m = self.model
        if rng.random() < FAR:  # anywhere: the two sides of a chain that changed cluster
            lo = self.epoch_start[start_epoch]
            n = len(self.by_time) - lo - 1  # the items from start_epoch on, but i
            if n <= 0:
                return -1
            k = lo + int(rng.integers(n))
            return int(self.by_time[k + (k >= self.rank[i])])
        t = int(m.epochs[i])
        lo, hi = max(start_epoch, t - m.prior.window), min(m.T, t + m.prior.window + 1)
        cand = np.concatenate(m.by_epoch[lo:hi])
        cand = cand[cand != i]
        if cand.size == 0:
            return -1
        if rng.random() < 0.5:
            return int(cand[rng.integers(len(cand))])
        d = np.sum((self.y[cand] - self.y[i]) ** 2, axis=1)
        p = np.exp(-(d - d.min()) / (2 * self.bandwidth))
        return int(cand[draw(np.cumsum(p), rng)])

    def anchor(self, state: ChainState, pool: np.ndarray, rng: np.random.Generator,
               start_epoch: int) -> int:
        """i: ½ uniformly from ``pool`` (the items of epochs >= start_epoch), ½ from a chain
        drawn uniformly among those with items in the pool (module docstring)."""
        if rng.random() < 0.5:
            return int(pool[rng.integers(pool.size)])
        chains = (state.active & (state.last >= start_epoch)).nonzero()[0]
        k = chains[rng.integers(chains.size)]
        items = pool[state.z[pool] == k]
        return int(items[rng.integers(items.size)])

    @staticmethod
    def log_pick(n_pool: int, n_chains: int, n_own: int) -> float:
        """log r(i) = log(½ / N + ½ / (K n_{z_i}))."""
        return math.log(0.5 / n_pool + 0.5 / (n_chains * n_own))

    def pick_ratio(self, state: ChainState, i: int, start_epoch: int, own_after: int,
                   chains_change: int) -> float:
        """log r_{z'}(i) − log r_z(i) when the move changes the number of chains with items in
        the pool by ``chains_change`` and leaves i's chain with ``own_after`` pool items."""
        n_pool = sum(len(b) for b in self.model.by_epoch[start_epoch:])
        K = int(np.sum(state.active & (state.last >= start_epoch)))
        own = int(state.counts[start_epoch:, state.z[i]].sum())
        return (self.log_pick(n_pool, K + chains_change, own_after)
                - self.log_pick(n_pool, K, own))

    def members(self, state: ChainState, k: int) -> np.ndarray:
        """Chain k's items sorted by (epoch, item)."""
        items = (state.z == k).nonzero()[0]
        return items[np.argsort(self.model.epochs[items], kind="stable")]

    def move(self, state: ChainState, items: np.ndarray, k: int, changed: list[int],
             rng: np.random.Generator) -> None:
        """Give ``items`` the label k, then rebuild the ``changed`` chains' counts and spans
        and draw their states (FFBS), in place."""
        m = self.model
        state.z[items] = k
        for c in changed:
            mine = (state.z == c).nonzero()[0]
            state.counts[:, c] = np.bincount(m.epochs[mine], minlength=m.T)
            state.first[c], state.last[c] = m.epochs[mine].min(), m.epochs[mine].max()
            state.phi[c] = np.zeros((int(state.last[c] - state.first[c] + 1), m.emission.dim))
        resample_states(m, state, rng, changed)
