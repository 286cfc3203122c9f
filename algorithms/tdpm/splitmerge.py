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
from typing import Any

import numpy as np

from ..alloc.rcrp import chain_log_prior

FAR = 1 / 3  # the share of partners j drawn from every epoch rather than within W of i


class SplitMerge:
    """Split-merge and cut moves of one ``ChainSampler`` (module docstring): ``attempts``
    proposals a sweep, or ``rate`` proposals per item (of the epochs swept) when ``attempts`` is
    None; a share ``cut`` of them cut moves. ``moves`` counts the accepted moves by kind."""

    def __init__(self, sampler: Any, rate: float = 0.05, attempts: int | None = None,
                 cut: float = 0.5):
        # sampler: gibbs.ChainSampler (not imported: gibbs imports this module)
        self.s = sampler
        self.rate, self.attempts, self.cut = rate, attempts, cut
        self.moves = {"merge": 0, "split": 0, "graft": 0, "peel": 0}
        n = len(sampler.epochs)
        self.y, r, _ = sampler.emission.group_pseudo_obs(np.arange(n), np.arange(n))
        self.bandwidth = float(np.mean(r)) if n else 1.0
        # the items in epoch order, where each epoch's begin, and each item's place
        self.by_time = np.concatenate(sampler.by_epoch) if n else np.zeros(0, np.int64)
        self.epoch_start = np.cumsum([0] + [len(b) for b in sampler.by_epoch])
        self.rank = np.empty(n, np.int64)
        self.rank[self.by_time] = np.arange(n)
        self.accepted = 0

    # ---- the target ------------------------------------------------------------------------

    def _evidence(self, items: np.ndarray) -> float:
        """log p(x_items) of one chain, states integrated out (items sorted by epoch)."""
        s = self.s
        ep = s.epochs[items]
        starts = np.diff(ep, prepend=-1).nonzero()[0]
        y, r, norm = s.emission.group_pseudo_obs(items, starts)
        occupied = ep[starts]
        return s.walk.log_evidence(y, r, occupied) + float(norm.sum())

    def _columns(self, groups: list[np.ndarray], lo: int, hi: int) -> np.ndarray:
        """Counts per epoch lo..hi−1 of each group of items."""
        cols = np.zeros((hi - lo, len(groups)))
        for g, items in enumerate(groups):
            np.add.at(cols[:, g], self.s.epochs[items] - lo, 1)
        return cols

    def _log_gain(self, new: list[np.ndarray], old: list[np.ndarray]) -> float:
        """log p(z_new, x) − log p(z_old, x) when the chains ``old`` (items sorted by epoch)
        become ``new`` (the same items) and the others stay: their prior factors and
        evidences."""
        s = self.s
        ep = s.epochs[np.concatenate(old)]
        lo, hi = int(ep.min()), min(s.T, int(ep.max()) + s.prior.window + 1)
        p = s.prior
        f = chain_log_prior(self._columns(new + old, lo, hi), p.window, p.decay, p.alpha)
        return (float(f[:len(new)].sum() - f[len(new):].sum())
                + sum(self._evidence(g) for g in new) - sum(self._evidence(g) for g in old))

    def _log_ratio(self, merged: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
        """log p(z_merged, x) − log p(z_split, x)."""
        return self._log_gain([merged], [a, b])

    def _valid(self, items: np.ndarray) -> bool:
        """A chain: occupied epochs at most W apart (items sorted by epoch)."""
        ep = self.s.epochs[items]
        return bool(np.all(np.diff(ep) <= self.s.prior.window))

    # ---- the proposal ----------------------------------------------------------------------

    def allocate(self, items: np.ndarray, i: int, j: int, rng: np.random.Generator | None,
                 into_a: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """Sequential allocation of ``items`` (sorted by (epoch, item)) into pieces A ∋ i and
        B ∋ j: drawn with ``rng``, or the given ``into_a`` evaluated. Returns (into_a, log q).
        The pieces' predictives are the emission's (``Emission.pieces``)."""
        s = self.s
        alpha = s.prior.alpha
        ep = (s.epochs[items] - s.epochs[items[0]]).tolist()
        anchors = (int(np.flatnonzero(items == i)[0]), int(np.flatnonzero(items == j)[0]))
        pieces = s.emission.pieces(items, anchors, s.walk)
        w = s.decay_w.tolist()
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

    def _partner(self, i: int, rng: np.random.Generator, start_epoch: int) -> int:
        """j given i (from ``start_epoch`` on): with probability FAR uniform over all items,
        else within W epochs of i, ½ uniform and ½ by the kernel κ; −1 if there is none."""
        s = self.s
        if rng.random() < FAR:  # anywhere: the two sides of a chain that changed cluster
            lo = self.epoch_start[start_epoch]
            n = len(self.by_time) - lo - 1  # the items from start_epoch on, but i
            if n <= 0:
                return -1
            k = lo + int(rng.integers(n))
            return int(self.by_time[k + (k >= self.rank[i])])
        t = int(s.epochs[i])
        lo, hi = max(start_epoch, t - s.prior.window), min(s.T, t + s.prior.window + 1)
        cand = np.concatenate(s.by_epoch[lo:hi])
        cand = cand[cand != i]
        if cand.size == 0:
            return -1
        if rng.random() < 0.5:
            return int(cand[rng.integers(len(cand))])
        d = np.sum((self.y[cand] - self.y[i]) ** 2, axis=1)
        p = np.exp(-(d - d.min()) / (2 * self.bandwidth))
        c = np.cumsum(p)
        return int(cand[min(int(np.searchsorted(c, rng.random() * c[-1], side="right")),
                            len(c) - 1)])

    # ---- the move --------------------------------------------------------------------------

    def sweep(self, rng: np.random.Generator, start_epoch: int = 0) -> int:
        """The sweep's proposals; returns how many were accepted."""
        s = self.s
        pool = np.concatenate(s.by_epoch[start_epoch:])
        if pool.size < 2:
            return 0
        # rate · items proposals, rounded up or down at random (not by the state)
        n = (self.attempts if self.attempts is not None
             else int(self.rate * pool.size + rng.random()))
        done = 0
        for _ in range(n):
            i = self._anchor(pool, rng, start_epoch)
            j = self._partner(i, rng, start_epoch)
            if j >= 0:
                move = self.propose_cut if rng.random() < self.cut else self.propose
                done += move(i, j, rng, start_epoch)
        self.accepted += done
        return done

    def _anchor(self, pool: np.ndarray, rng: np.random.Generator, start_epoch: int) -> int:
        """i: ½ uniformly from ``pool`` (the items of epochs >= start_epoch), ½ from a chain
        drawn uniformly among those with items in the pool (module docstring)."""
        if rng.random() < 0.5:
            return int(pool[rng.integers(pool.size)])
        s = self.s
        chains = (s.active & (s.last >= start_epoch)).nonzero()[0]
        k = chains[rng.integers(chains.size)]
        items = pool[s.z[pool] == k]
        return int(items[rng.integers(items.size)])

    @staticmethod
    def _log_pick(n_pool: int, n_chains: int, n_own: int) -> float:
        """log r(i) = log(½ / N + ½ / (K n_{z_i}))."""
        return math.log(0.5 / n_pool + 0.5 / (n_chains * n_own))

    def _pick_ratio(self, i: int, start_epoch: int, own_after: int, chains_change: int) -> float:
        """log r_{z'}(i) − log r_z(i) when the move changes the number of chains with items in
        the pool by ``chains_change`` and leaves i's chain with ``own_after`` pool items."""
        s = self.s
        n_pool = sum(len(b) for b in s.by_epoch[start_epoch:])
        K = int(np.sum(s.active & (s.last >= start_epoch)))
        own = int(s.counts[start_epoch:, s.z[i]].sum())
        return (self._log_pick(n_pool, K + chains_change, own_after)
                - self._log_pick(n_pool, K, own))

    def _members(self, k: int) -> np.ndarray:
        """Chain k's items sorted by (epoch, item)."""
        s = self.s
        items = (s.z == k).nonzero()[0]
        return items[np.argsort(s.epochs[items], kind="stable")]

    def propose(self, i: int, j: int, rng: np.random.Generator, start_epoch: int = 0) -> bool:
        """One proposal with anchors i and j (module docstring); True if accepted."""
        s = self.s
        a, b = int(s.z[i]), int(s.z[j])
        if a < 0 or b < 0 or min(s.first[a], s.first[b]) < start_epoch:
            return False
        if a == b:
            items = self._members(a)
            into_a, logq = self.allocate(items, i, j, rng)
            A, B = items[into_a], items[~into_a]
            if not (self._valid(A) and self._valid(B)):
                return False
            pick = self._pick_ratio(i, start_epoch, int(np.sum(s.epochs[A] >= start_epoch)), 1)
            if math.log(rng.random()) < -self._log_ratio(items, A, B) - logq + pick:
                self._split(a, B, rng)
                self.moves["split"] += 1
                return True
            return False
        A, B = self._members(a), self._members(b)
        items = np.concatenate([A, B])
        items = items[np.lexsort((items, s.epochs[items]))]
        if not self._valid(items):
            return False
        _, logq = self.allocate(items, i, j, None, np.isin(items, A))
        pick = self._pick_ratio(i, start_epoch, int(np.sum(s.epochs[items] >= start_epoch)), -1)
        if math.log(rng.random()) < self._log_ratio(items, A, B) + logq + pick:
            self._merge(a, b, rng)
            self.moves["merge"] += 1
            return True
        return False

    # ---- the cut moves ---------------------------------------------------------------------

    def _graft_options(self, ti: int, tj: int, occ_b: np.ndarray) -> list[tuple[int, int]]:
        """Grafts of the chain with occupied epochs ``occ_b`` for anchors at epochs ti, tj:
        (+1, c), c after both (its part before c moves), and (−1, c), c before both (its part
        after c moves)."""
        return ([(1, int(c)) for c in occ_b[occ_b > max(ti, tj)]]
                + [(-1, int(c)) for c in occ_b[occ_b < min(ti, tj)]])

    def _peel_options(self, ti: int, tj: int, occ_a: np.ndarray, others: np.ndarray,
                      first: np.ndarray, last: np.ndarray) -> list[tuple[int, int]]:
        """Peels of the chain occupied at epochs ``occ_a`` (T booleans) toward the chains
        ``others`` (spans first..last): (+1, b) for b beginning after both anchors with the chain
        occupied in the W epochs before it, (−1, b) for b ending before both with the chain
        occupied in the W epochs after."""
        W, T = self.s.prior.window, self.s.T
        cum = np.concatenate([[0], np.cumsum(occ_a)])
        before = cum[first] - cum[np.maximum(first - W, 0)] > 0
        after = cum[np.minimum(last + W + 1, T)] - cum[last + 1] > 0
        head = others[(first > max(ti, tj)) & before]
        tail = others[(last < min(ti, tj)) & after]
        return [(1, int(b)) for b in head] + [(-1, int(b)) for b in tail]

    def _sorted(self, items: np.ndarray) -> np.ndarray:
        """Items sorted by (epoch, item)."""
        return items[np.lexsort((items, self.s.epochs[items]))]

    def _side(self, items: np.ndarray, side: int, c: int) -> np.ndarray:
        """The items before epoch c (side +1) or after it (side −1)."""
        ep = self.s.epochs[items]
        return items[ep < c] if side > 0 else items[ep > c]

    def _occupied(self, items: np.ndarray) -> np.ndarray:
        """The epochs where ``items`` are, as T booleans."""
        occ = np.zeros(self.s.T, dtype=bool)
        occ[self.s.epochs[items]] = True
        return occ

    def cut_options(self, i: int, j: int) -> list[tuple[int, int]]:
        """The cut moves of anchors i and j: grafts (side, c) if they are in two chains, peels
        (side, b) if in one (module docstring)."""
        s = self.s
        a, b = int(s.z[i]), int(s.z[j])
        ti, tj = int(s.epochs[i]), int(s.epochs[j])
        if a != b:
            return self._graft_options(ti, tj, s.counts[:, b].nonzero()[0])
        others = s.active.nonzero()[0]
        others = others[others != a]
        return self._peel_options(ti, tj, s.counts[:, a] > 0, others, s.first[others],
                                  s.last[others])

    def propose_cut(self, i: int, j: int, rng: np.random.Generator,
                    start_epoch: int = 0) -> bool:
        """One cut move with anchors i and j, its option drawn uniformly; True if accepted."""
        s = self.s
        a, b = int(s.z[i]), int(s.z[j])
        if a < 0 or b < 0 or min(s.first[a], s.first[b]) < start_epoch:
            return False
        options = self.cut_options(i, j)
        if not options:
            return False
        side, c = options[rng.integers(len(options))]
        if a == b and s.first[c] < start_epoch:
            return False
        kind, (moved, target, ratio) = (("graft", self.graft(i, j, side, c, start_epoch))
                                        if a != b else
                                        ("peel", self.peel(i, j, side, c, rng, start_epoch)))
        if math.log(rng.random()) < ratio:
            self._move(moved, target, [a, b if a != b else c], rng)
            self.moves[kind] += 1
            return True
        return False

    def graft(self, i: int, j: int, side: int, c: int,
              start_epoch: int = 0) -> tuple[np.ndarray, int, float]:
        """The graft (side, c) of z_j's chain b into z_i's chain a: the items moved, the label
        they take (a), and the log MH ratio log[p(z') r_{z'}(i) #grafts(z) q(B)] −
        log[p(z) r_z(i) #peels(z')] (−inf if z' is not a valid labelling)."""
        s = self.s
        a, b = int(s.z[i]), int(s.z[j])
        A, B = self._members(a), self._members(b)
        moved = self._side(B, side, c)
        kept, grown = B[~np.isin(B, moved)], self._sorted(np.concatenate([A, moved]))
        if not self._valid(grown):
            return moved, a, -math.inf
        others = s.active.nonzero()[0]
        others = others[others != a]
        first, last = s.first[others].copy(), s.last[others].copy()
        first[others == b], last[others == b] = s.epochs[kept].min(), s.epochs[kept].max()
        back = self._peel_options(int(s.epochs[i]), int(s.epochs[j]), self._occupied(grown),
                                  others, first, last)
        region = self._side(grown, side, c)
        _, logq = self.allocate(region, i, j, None, ~np.isin(region, moved))
        n_own = int(np.sum(s.epochs[A] >= start_epoch))
        return moved, a, (self._log_gain([grown, kept], [A, B]) + logq
                          + math.log(len(self.cut_options(i, j))) - math.log(len(back))
                          + self._pick_ratio(i, start_epoch, n_own + len(moved), 0))

    def peel(self, i: int, j: int, side: int, b: int, rng: np.random.Generator | None,
             start_epoch: int = 0, into_a: np.ndarray | None = None
             ) -> tuple[np.ndarray, int, float]:
        """The peel (side, b) of z_i = z_j's chain a toward chain b, allocated with ``rng`` (or
        the given ``into_a``, over a's items on that side of b): the items moved, the label
        they take (b), and the log MH ratio (the graft's, inverted)."""
        s = self.s
        a = int(s.z[i])
        A, B = self._members(a), self._members(b)
        c = int(s.first[b] if side > 0 else s.last[b])
        region = self._side(A, side, c)
        into_a, logq = self.allocate(region, i, j, rng, into_a)
        moved = region[~into_a]
        kept, grown = A[~np.isin(A, moved)], self._sorted(np.concatenate([B, moved]))
        if not (self._valid(kept) and self._valid(grown)):
            return moved, b, -math.inf
        back = self._graft_options(int(s.epochs[i]), int(s.epochs[j]),
                                   self._occupied(grown).nonzero()[0])
        n_own = int(np.sum(s.epochs[A] >= start_epoch))
        return moved, b, (self._log_gain([kept, grown], [A, B]) - logq
                          + math.log(len(self.cut_options(i, j))) - math.log(len(back))
                          + self._pick_ratio(i, start_epoch, n_own - len(moved), 0))

    # ---- the state -------------------------------------------------------------------------

    def _move(self, items: np.ndarray, k: int, changed: list[int],
              rng: np.random.Generator) -> None:
        """Give ``items`` the label k, then rebuild the ``changed`` chains' counts and spans
        and draw their states (FFBS)."""
        s = self.s
        s.z[items] = k
        for c in changed:
            mine = (s.z == c).nonzero()[0]
            s.counts[:, c] = np.bincount(s.epochs[mine], minlength=s.T)
            s.first[c], s.last[c] = s.epochs[mine].min(), s.epochs[mine].max()
            s.phi[c] = np.zeros((int(s.last[c] - s.first[c] + 1), s.emission.dim))
        s.resample_states(rng, changed)

    def _merge(self, a: int, b: int, rng: np.random.Generator) -> None:
        s = self.s
        B = (s.z == b).nonzero()[0]
        s._free(b)
        self._move(B, a, [a], rng)

    def _split(self, a: int, B: np.ndarray, rng: np.random.Generator) -> None:
        b = self.s._new_label()
        self._move(B, b, [a, b], rng)
