"""Split-merge moves over whole chains of the temporal DP mixture (not in the paper;
docs/theory/tdpm.rst).

One cluster held as two parallel chains is a mode that item moves leave only through many
unlikely steps (each item that changes chain costs the prior and walk of a half-empty chain),
and relinking cannot leave it (the two chains cross no boundary differently). A merge joins
the two chains in one step; its reverse, a split, cuts a chain in two.

Target. The move is Metropolis-Hastings on the labels with the chains' states integrated out,
p(z | x) ∝ P(z) Π_k p(x_k) (the label-free prior of Eq. 4.4; p(x_k) a chain's marginal
likelihood by the Kalman filter, exact for emissions with exact Gaussian pseudo-observations),
followed by a draw of the changed chains' states from p(φ_k | x_k) (forward filtering, backward
sampling). Since p(z, φ, x) = P(z) Π_k p(x_k) p(φ_k | x_k), proposing (z', φ') with φ' from that
exact conditional makes the joint acceptance ratio the collapsed one,
[P(z') Π p(x'_k) q(z | z')] / [P(z) Π p(x_k) q(z' | z)]. The prior ratio needs the factors of
the chains involved only: M_t and N_t are sums over all chains (linear in their counts), so
Γ(M_t + α)/Γ(M_t + N_t + α) is the same before and after (``rcrp.chain_log_prior``).

Proposal (the anchors of Jain & Neal 2004, with Dahl's sequential allocation). Pick an item i
among the N items of epochs >= ``start_epoch``: with probability ½ uniformly, with ½ a chain
uniformly among the K chains with such items and i uniformly among its n_{z_i} of them, so
r_z(i) = ½ / N + ½ / (K n_{z_i}) (a chain of a few items, the stub beside a large chain that
holds the same cluster, is anchored as often as a large one). Then j ≠ i: with probability
FAR uniformly among all items (a chain that holds one cluster and then another, as where one
topic dies and another is born, is split only by anchors on both sides of the change, which are
rarely within W epochs of each other), else among the items within W epochs of i with
probability ½ / n_i + ½ κ(x_i, x_j) / Σ κ (κ = exp(−|y_i − y_j|² / 2h), y an item's
pseudo-observation and h its variance at construction: x and Σ for Gaussians). j's
probability does not depend on the labels and cancels; i's does, and the ratio carries
r_{z'}(i) / r_z(i) (the reverse move is the same ordered pair from z'): each ordered pair is an
MH kernel of its own.
If i and j share a chain c, split it: i seeds piece A, j piece B, and the other members, in
order of (epoch, item), join A or B with probability ∝ weight × predictive: the weight of
Eq. 4.4 for the piece so far (m_{P,t} + n_{P,t}; α for a piece still empty; 0 for a piece dead
by t) and the emission's predictive of the item given the piece's members so far
(``Emission.pieces``: for Gaussians the Kalman predictive N(y; mean, var + r) of its
pseudo-observation; for text the smoothed word frequencies of the piece's documents, its anchor
counted from the start, see ``text.CountPieces``). Otherwise merge z_i's and z_j's chains: the
reverse split's
probability is that allocation evaluated at the two chains as they are. A proposal that leaves
a chain with occupied epochs more than W apart has target 0 and is rejected; under online
continuation (``start_epoch`` > 0) chains with items before it are left alone.
The cut moves, a share ``cut`` of the proposals, are ``cuts.py``'s.
"""

from __future__ import annotations

import math

import numpy as np

from ..alloc.rcrp import chain_log_prior
from .cuts import propose_cut
from .state import ChainModel, ChainState, draw, resample_states

FAR = 1 / 3  # the share of partners j drawn from every epoch rather than within W of i


class SplitMerge:
    """Split-merge and cut moves over a ``ChainModel``'s states (module docstring):
    ``attempts`` proposals a sweep, or ``rate`` proposals per item (of the epochs swept) when
    ``attempts`` is None; a share ``cut`` of them cut moves. ``moves`` counts the accepted
    moves by kind, ``accepted`` all of them."""

    def __init__(self, model: ChainModel, rate: float = 0.05, attempts: int | None = None,
                 cut: float = 0.5):
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

    # ---- the move --------------------------------------------------------------------------

    def sweep(self, state: ChainState, rng: np.random.Generator, start_epoch: int = 0
              ) -> ChainState:
        """The sweep's proposals (``accepted`` counts those accepted); the state to go on
        with."""
        pool = np.concatenate(self.model.by_epoch[start_epoch:])
        if pool.size < 2:
            return state
        # rate · items proposals, rounded up or down at random (not by the state)
        n = (self.attempts if self.attempts is not None
             else int(self.rate * pool.size + rng.random()))
        for _ in range(n):
            i = self.anchor(state, pool, rng, start_epoch)
            j = self.partner(i, rng, start_epoch)
            if j >= 0:
                if rng.random() < self.cut:
                    state, done = propose_cut(self, state, i, j, rng, start_epoch)
                else:
                    state, done = self.propose(state, i, j, rng, start_epoch)
                self.accepted += done
        return state

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

    def propose(self, state: ChainState, i: int, j: int, rng: np.random.Generator,
                start_epoch: int = 0) -> tuple[ChainState, bool]:
        """One proposal with anchors i and j (module docstring): the state and whether it was
        accepted."""
        epochs = self.model.epochs
        a, b = int(state.z[i]), int(state.z[j])
        if a < 0 or b < 0 or min(state.first[a], state.first[b]) < start_epoch:
            return state, False
        if a == b:
            items = self.members(state, a)
            into_a, logq = self.allocate(state, items, i, j, rng)
            A, B = items[into_a], items[~into_a]
            if not (self.valid(A) and self.valid(B)):
                return state, False
            pick = self.pick_ratio(state, i, start_epoch, int(np.sum(epochs[A] >= start_epoch)),
                                   1)
            if math.log(rng.random()) < -self.log_ratio(state, items, A, B) - logq + pick:
                state, k = state.with_label()
                self.move(state, B, k, [a, k], rng)
                self.moves["split"] += 1
                return state, True
            return state, False
        A, B = self.members(state, a), self.members(state, b)
        items = np.concatenate([A, B])
        items = items[np.lexsort((items, epochs[items]))]
        if not self.valid(items):
            return state, False
        _, logq = self.allocate(state, items, i, j, None, np.isin(items, A))
        pick = self.pick_ratio(state, i, start_epoch, int(np.sum(epochs[items] >= start_epoch)),
                               -1)
        if math.log(rng.random()) < self.log_ratio(state, items, A, B) + logq + pick:
            B = (state.z == b).nonzero()[0]
            state.free(b)
            self.move(state, B, a, [a], rng)
            self.moves["merge"] += 1
            return state, True
        return state, False

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
