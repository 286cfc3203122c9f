"""Gibbs sampling for the temporal DP mixture (Ahmed & Xing 2008, Sec. 5 with the exact W-epoch
look-ahead of docs/theory/tdpm.rst) and for its fixed-K baseline (K Kalman-filter chains that never
die).

The sampler's state is the chain labels z (one per item) and each chain's states φ over its span
[first occupied epoch, last occupied epoch]. Labels are canonical: a chain is a set of items whose
occupied epochs are at most W apart (farther apart, the later part is a chain born anew, as the
label-free prior of Eq. 4.4 says), so configurations and labelings correspond one to one.

One item's step (epoch t): remove it; if that empties the chain at t, the span shrinks, or the
chain splits where its occupied epochs are now more than W apart. Then draw the item's place
from its exact conditional given the other labels and the remaining states, over every
configuration that differs only in the item:
- an alive chain (m_{k,t} + n_{k,t} > 0): the state at t if inside the span, otherwise the
  forward marginal from the last state, N(x; φ_last, Σ + (t − t_last)ρ);
- a chain born in (t, t+W]: the item becomes its first member, the birth moves to t;
- two chains the item reconnects: one alive at t that ended before t, one born in (t, t+W]
  more than W after the first ended (the split above, undone);
- a new chain, α ∫F(x|φ) G_0(dφ).
Each weight is the product of the prior factors that change (``rcrp.chain_log_factors``, over
epochs t..t+W) and the likelihood with the new states integrated against the walk's conditional
given their neighbours; the chosen states are then drawn (and bridged to the neighbours). After
a sweep over items, the chains are relinked across each epoch boundary, whole chains are
merged or split and parts of chains grafted onto or peeled off others (``splitmerge.py``:
Gaussian emissions, not with fixed K or membership stability), then every chain's states are
redrawn by forward filtering, backward sampling.

Relinking (not in the paper; one item at a time, a chain cut in two, or two chains that cross,
takes many unlikely steps to mend). At boundary t every chain with members in [t − W, t − 1] is
a head, every chain with members in [t, t + W − 1] a tail, and the labels say which head each
tail continues (or none). A move picks a head h and gives it another tail: swapping tails with
another head, taking a tail that had no head, or (RCRP) letting its tail start a chain of its
own; links more than W epochs apart are excluded. The pieces' members and states do not change,
so the log joint changes only by the prior factors of the chains involved over epochs
t..t+W−1 and by the walk across the boundary, N(φ_τ(b); φ_h(a), (b − a)ρ) with the states in
between integrated out (a tail without a head: the birth N(0, σ)). The new tail is drawn from
the head's moves in proportion to their joints (the current one excluded) and accepted with
probability min(1, Σ_moves from here / Σ_moves from there), which leaves the posterior
invariant (Metropolised Gibbs); the states in between are then drawn from the walk's bridge.
Under fixed K the K chains are all heads and tails and only swap. Not with membership stability
(a stayer's coin would depend on the link).

With membership stability (``persistence.py``) the state also holds each returning item's stay
indicator; the item's step draws (chain, stay) jointly. Staying is one more option, the twin of
joining the previous chain, weighted (M_t + S_t + α)/(m_k + s_k) · P(heads)/P(tails); every
option also carries the change of the Beta-Binomial coin terms it causes: the item's own coin,
its next appearance's (a stayer there forces the item into that chain; a non-stayer's coin
exists iff the chain keeps it available), and the coins that appear when the item's chain
(or a reconnected pair) becomes alive at epochs where it was not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from ..alloc.rcrp import chain_log_factors, decay_weights, log_prior, own_factors, pseudo_counts
from .dynamics import RandomWalk, gauss_logpdf, gauss_product
from .emission import Emission
from .persistence import Persistence
from .splitmerge import SplitMerge


@dataclass(frozen=True)
class RCRPPrior:
    """The recurrent CRP: concentration α, window W, decay λ (Eq. 4.4, Sec. 6)."""

    alpha: float
    window: int
    decay: float

    def link_factors(self, cols: np.ndarray, rel: int) -> np.ndarray:
        """Each column's own factors of log P(c_s | past) over the epochs s = rel..rel+W−1 whose
        window straddles the boundary before row ``rel`` (the rows of ``cols`` end before
        rel + W): Γ(m + n)/Γ(m) or α Γ(n) (``rcrp.chain_log_factors``); M_s does not depend on
        how the chains on either side are linked."""
        return chain_log_factors(cols, rel, self.window, self.decay, self.alpha)


@dataclass(frozen=True)
class FixedKPrior:
    """The baseline: K chains alive at every epoch, born at the first. The paper's finite
    dynamic mixture (Sec. 4.3, ``carry``): π_t ~ Dir(n_{·,t−1} + α/K), so an item joins k with
    weight n_{k,t−1} + n_{k,t} + α/K (Eq. 4.5) times the look-ahead (n_{k,t} + n_{k,t+1} +
    α/K)/(n_{k,t} + α/K) of the next epoch's Dirichlet-multinomial; without ``carry``, each
    epoch's weights are Dir(α/K) on their own (weight n_{k,t} + α/K)."""

    K: int
    alpha: float
    carry: bool = True

    def weights(self, counts: np.ndarray, t: int) -> np.ndarray:
        """log prior weight of each chain for one more item at epoch t (the item removed)."""
        a = self.alpha / self.K
        n = counts[t, :self.K].astype(float)
        if not self.carry:
            return np.log(n + a)
        before = counts[t - 1, :self.K] if t > 0 else 0.0
        after = counts[t + 1, :self.K] if t + 1 < len(counts) else 0.0
        return np.log(before + n + a) + np.log(n + after + a) - np.log(n + a)

    def link_factors(self, cols: np.ndarray, rel: int) -> np.ndarray:
        """Each column's own factor of the epoch-``rel`` Dirichlet-multinomial given row rel − 1:
        log Γ(n_{k,t−1} + α/K + n_{k,t}) − log Γ(n_{k,t−1} + α/K) with ``carry`` (the sums over
        k do not depend on the labels), 0 without (Dir(α/K) is exchangeable)."""
        if not self.carry:
            return np.zeros(cols.shape[1])
        before = cols[rel - 1].astype(float) + self.alpha / self.K
        return gammaln(before + cols[rel]) - gammaln(before)

    def log_prior(self, counts: np.ndarray) -> float:
        """log P(c_1, ..., c_T): per epoch, the Dirichlet-multinomial of its counts."""
        a = self.alpha / self.K
        beta = np.full(counts.shape, a)
        if self.carry:
            beta[1:] += counts[:-1]
        return float(np.sum(gammaln(beta + counts) - gammaln(beta))
                     + np.sum(gammaln(beta.sum(1)) - gammaln(beta.sum(1) + counts.sum(1))))


@dataclass
class _Options:
    """One item's places: log weights, kinds ("alive": a state at t exists; "extend", "prepend",
    "bridge", "new": a state at t is drawn), the chains involved, the drawn states, and whether
    the item stays (membership stability)."""

    logw: np.ndarray
    kinds: list[str]
    labels: list[tuple[int, ...]]
    states: list[np.ndarray | None]
    stays: list[bool] | None = None


class ChainSampler:
    """The state of one Markov chain of the sampler, and its moves."""

    def __init__(self, epochs: np.ndarray, n_epochs: int, emission: Emission,
                 walk: RandomWalk, prior: RCRPPrior | FixedKPrior,
                 persistence: Persistence | None = None, relink: bool = True,
                 split_merge: bool = True):
        self.epochs = np.asarray(epochs, dtype=np.int64)
        self.T = int(n_epochs)
        if self.epochs.size and (self.epochs.min() < 0 or self.epochs.max() >= self.T):
            raise ValueError("epochs must lie in [0, n_epochs)")
        self.emission, self.walk, self.prior = emission, walk, prior
        self.fixed = isinstance(prior, FixedKPrior)
        self.z = np.full(len(self.epochs), -1, dtype=np.int64)
        cap = prior.K if self.fixed else 16
        self.counts = np.zeros((self.T, cap), dtype=np.int64)
        self.first = np.full(cap, -1, dtype=np.int64)
        self.last = np.full(cap, -1, dtype=np.int64)
        self.active = np.zeros(cap, dtype=bool)
        self.phi: dict[int, np.ndarray] = {}
        self.by_epoch = [(self.epochs == t).nonzero()[0] for t in range(self.T)]
        self.persist = persistence
        self.relinking = relink and persistence is None
        self.relinked = 0  # relinking moves accepted so far
        self.decay_w = np.ones(1) if self.fixed else decay_weights(prior.window, prior.decay)
        self.splitmerge = (SplitMerge(self) if split_merge and not self.fixed
                           and persistence is None else None)
        if persistence is not None:
            if self.fixed:
                raise ValueError("membership stability needs the recurrent CRP, not fixed K")
            self.y = np.zeros(len(self.epochs), dtype=bool)
            self.stay = np.zeros_like(self.counts)
            self.coin = np.full(len(self.epochs), -1, dtype=np.int8)
            self.heads = np.zeros(persistence.n_ids, dtype=np.int64)
            self.tails = np.zeros(persistence.n_ids, dtype=np.int64)
            back = (persistence.prev >= 0).nonzero()[0]
            self.returning = back[np.argsort(self.epochs[back], kind="stable")]
            self.ret_epochs = self.epochs[self.returning]

    # ---- labels ---------------------------------------------------------------------------

    def _new_label(self) -> int:
        free = (~self.active).nonzero()[0]
        if free.size == 0:
            cap = len(self.active)
            self.counts = np.pad(self.counts, ((0, 0), (0, cap)))
            self.first = np.pad(self.first, (0, cap), constant_values=-1)
            self.last = np.pad(self.last, (0, cap), constant_values=-1)
            self.active = np.pad(self.active, (0, cap))
            if self.persist is not None:
                self.stay = np.pad(self.stay, ((0, 0), (0, cap)))
            free = np.array([cap])
        k = int(free[0])
        self.active[k] = True
        return k

    def _free(self, k: int) -> None:
        self.active[k] = False
        self.first[k] = self.last[k] = -1
        self.counts[:, k] = 0
        if self.persist is not None:
            self.stay[:, k] = 0
        self.phi.pop(k, None)

    def init_fixed(self, phi: np.ndarray) -> None:
        """Start the fixed-K baseline from states phi (K, T, D), every item unassigned."""
        for k in range(self.prior.K):
            self.active[k] = True
            self.first[k], self.last[k] = 0, self.T - 1
            self.phi[k] = np.array(phi[k], float)

    # ---- one item --------------------------------------------------------------------------

    def _remove(self, i: int) -> int:
        """Unseat item i; returns the label of the chain split off (−1: no split)."""
        k, t = int(self.z[i]), int(self.epochs[i])
        self.z[i] = -1
        self.counts[t, k] -= 1
        if self.persist is not None and self.y[i]:
            self.stay[t, k] -= 1
            self.y[i] = False
        if self.fixed or self.counts[t, k] > 0:
            return -1
        occ = self.counts[:, k].nonzero()[0]
        f0 = int(self.first[k])
        if occ.size == 0:
            self._free(k)
        elif t == f0:
            self.phi[k] = self.phi[k][occ[0] - f0:]
            self.first[k] = occ[0]
        elif t == self.last[k]:
            self.phi[k] = self.phi[k][:occ[-1] - f0 + 1]
            self.last[k] = occ[-1]
        else:
            a, b = int(occ[occ < t].max()), int(occ[occ > t].min())
            if b - a > self.prior.window:
                return self._split(k, a, b)
        return -1

    def _split(self, k: int, a: int, b: int) -> int:
        """Chain k's occupied epochs a < b are more than W apart: from b on it is a new chain."""
        k2 = self._new_label()
        f0 = int(self.first[k])
        self.phi[k2] = self.phi[k][b - f0:]
        self.phi[k] = self.phi[k][:a - f0 + 1]
        self.first[k2], self.last[k2], self.last[k] = b, self.last[k], a
        self.counts[b:, k2] = self.counts[b:, k]
        self.counts[b:, k] = 0
        if self.persist is not None:
            self.stay[b:, k2] = self.stay[b:, k]
            self.stay[b:, k] = 0
        self.z[(self.z == k) & (self.epochs >= b)] = k2
        return k2

    def _options(self, i: int, t: int, rng: np.random.Generator) -> _Options:
        if self.fixed:
            K = self.prior.K
            phi_t = np.stack([self.phi[k][t] for k in range(K)])
            logw = self.prior.weights(self.counts, t) + self.emission.loglik(i, phi_t)
            return _Options(logw, ["alive"] * K, [(k,) for k in range(K)], [None] * K)
        prior, walk = self.prior, self.walk
        W = prior.window
        act = self.active.nonzero()[0]
        lo, hi = max(0, t - W), min(self.T, t + W + 1)
        sub = self.counts[lo:hi]
        rel = t - lo
        recent = sub[:rel + 1, act].sum(0) > 0
        alive = act[recent]
        soon = act[~recent & (self.first[act] > t) & (self.first[act] <= t + W)]
        inside = alive[self.last[alive] >= t]
        ext = alive[self.last[alive] < t]
        pairs = np.array([(a, b) for a in ext for b in soon
                          if self.first[b] - self.last[a] > W], dtype=np.int64).reshape(-1, 2)
        e = np.zeros((hi - lo, 1), dtype=np.int64)
        e[rel] = 1
        # prior: each option's changed chain factors over epochs t..t+W
        joined = sub[:, pairs[:, 0]] + sub[:, pairs[:, 1]]
        single = np.concatenate([inside, ext, soon])
        stay = None
        if self.persist is not None:
            ss = self.stay[lo:hi]
            stay = np.hstack([ss[:, single], ss[:, single],
                              ss[:, pairs[:, 0]] + ss[:, pairs[:, 1]], 0 * e])
        f = own_factors(np.hstack([sub[:, single], sub[:, single] + e, joined + e, e]), rel,
                        min(rel + W, hi - lo - 1) + 1, self.decay_w, prior.alpha, stay)
        n1, n2 = len(single), len(pairs)
        if n2:
            before = dict(zip(single.tolist(), f[:n1], strict=True))
            bridged = f[2 * n1:2 * n1 + n2] - [before[a] + before[b] for a, b in pairs.tolist()]
        else:
            bridged = f[:0]
        gain = np.concatenate([f[n1:2 * n1] - f[:n1], bridged, f[-1:]])
        # likelihood: at the state where the chain has one at t, otherwise integrated over the
        # new state's conditional given its neighbours (extension, prepend, bridge, new)
        lik_inside = (self.emission.loglik(i, np.array([self.phi[k][t - self.first[k]]
                                                        for k in inside.tolist()]))
                      if inside.size else np.zeros(0))
        D = self.emission.dim
        means, variances, moved = [], [], []
        if ext.size:
            means.append(np.stack([self.phi[k][-1] for k in ext]))
            variances.append(walk.drift_var * (t - self.last[ext]))
            moved.append(np.zeros(len(ext)))
        if soon.size:
            phi_b = np.stack([self.phi[k][0] for k in soon])
            gap = walk.drift_var * (self.first[soon] - t)[:, None]
            m, v = gauss_product(0.0, walk.birth_var, phi_b, gap)
            means.append(m)
            variances.append(v[:, 0])
            moved.append(gauss_logpdf(phi_b, 0.0, walk.birth_var + gap)
                         - gauss_logpdf(phi_b, 0.0, walk.birth_var))
        if n2:
            phi_a = np.stack([self.phi[a][-1] for a in pairs[:, 0]])
            phi_b = np.stack([self.phi[b][0] for b in pairs[:, 1]])
            ga = walk.drift_var * (t - self.last[pairs[:, 0]])[:, None]
            gb = walk.drift_var * (self.first[pairs[:, 1]] - t)[:, None]
            m, v = gauss_product(phi_a, ga, phi_b, gb)
            means.append(m)
            variances.append(v[:, 0])
            moved.append(gauss_logpdf(phi_b, phi_a, ga + gb)
                         - gauss_logpdf(phi_b, 0.0, walk.birth_var))
        means.append(np.zeros((1, D)))
        variances.append(np.array([walk.birth_var]))
        moved.append(np.zeros(1))
        lik_new, states = self.emission.candidates(
            i, np.concatenate(means), np.concatenate(variances)[:, None], rng)
        logw = gain + np.concatenate([lik_inside, lik_new + np.concatenate(moved)])
        kinds = (["alive"] * len(inside) + ["extend"] * len(ext) + ["prepend"] * len(soon)
                 + ["bridge"] * n2 + ["new"])
        labels = ([(int(k),) for k in inside] + [(int(k),) for k in ext]
                  + [(int(k),) for k in soon] + [tuple(p) for p in pairs.tolist()] + [()])
        opts = _Options(logw, kinds, labels, [None] * len(inside) + list(states))
        return opts if self.persist is None else self._with_coins(i, t, opts)

    # ---- membership stability ----------------------------------------------------------------

    def _pseudo(self, chains: np.ndarray, epochs: np.ndarray) -> np.ndarray:
        """m_{c,s} for pairs (chain c ≥ 0, epoch s)."""
        m = np.zeros(len(chains))
        for h, w in enumerate(self.decay_w, start=1):
            ok = epochs >= h
            m[ok] += w * self.counts[epochs[ok] - h, chains[ok]]
        return m

    def _refresh_coins(self, t: int, chains: tuple[int, ...] | None = None,
                       items: tuple[int, ...] = ()) -> None:
        """Recompute the coins (1 heads, 0 tails, −1 none) of the returning items of epochs
        >= t from the labels, and the per-id tallies; given ``chains``, only of the items whose
        previous appearance is in one of them (an item's move at t changes the pseudo-counts
        of the chains it leaves and joins only, a split or reconnection the labels of those
        only) and of ``items`` (the moved item and its next appearance)."""
        R = self.returning[np.searchsorted(self.ret_epochs, t):]
        zp = self.z[self.persist.prev[R]]
        if chains is not None:
            sel = np.isin(R, items)
            for c in chains:
                sel |= zp == c
            R, zp = R[sel], zp[sel]
        seated = (self.z[R] >= 0) & (zp >= 0)
        avail = seated.copy()
        avail[seated] = self._pseudo(zp[seated], self.epochs[R][seated]) > 0
        new = np.where(seated & self.y[R], 1, np.where(avail, 0, -1)).astype(np.int8)
        old = self.coin[R]
        ids = self.persist.ids[R]
        np.add.at(self.heads, ids, (new == 1).astype(np.int64) - (old == 1))
        np.add.at(self.tails, ids, (new == 0).astype(np.int64) - (old == 0))
        self.coin[R] = new

    def _with_coins(self, i: int, t: int, opts: _Options) -> _Options:
        """Add to each option the change of the coin terms it causes, drop the options that
        leave a stayer outside its previous chain, and add the stay twin (module docstring)."""
        P, W = self.persist, self.prior.window
        n = len(opts.labels)
        lab0 = np.array([lab[0] if lab else -1 for lab in opts.labels], np.int64)
        lab1 = np.array([lab[1] if len(lab) > 1 else -1 for lab in opts.labels], np.int64)
        bridge = lab1 >= 0
        u = int(P.ids[i])
        dh, df = np.zeros(n), np.zeros(n)
        valid = np.ones(n, dtype=bool)
        j = int(P.next[i])
        if j >= 0 and self.z[j] >= 0:  # the next appearance's coin depends on this chain
            if self.y[j]:
                valid &= (lab0 == self.z[j]) | (lab1 == self.z[j])
                dh += 1
            elif self.epochs[j] - t <= W:
                df += 1
            else:
                sj = np.full(n, self.epochs[j])
                m = np.where(lab0 >= 0, self._pseudo(np.maximum(lab0, 0), sj), 0.0)
                m += np.where(bridge, self._pseudo(np.maximum(lab1, 0), sj), 0.0)
                df += m > 0
        R = self.returning[np.searchsorted(self.ret_epochs, t, side="right"):]
        zR, zp = self.z[R], self.z[P.prev[R]]
        broken = self.y[R] & (zR >= 0) & (zp >= 0) & (zR != zp)
        for a, b in {(int(x), int(y)) for x, y in zip(zR[broken], zp[broken], strict=True)}:
            valid &= ((lab0 == a) & (lab1 == b)) | ((lab0 == b) & (lab1 == a))
        # coins that appear: seated non-stayers without one whose previous chain comes alive
        # (never the item's own id: its later appearances follow its next one, at most W back)
        gain = np.zeros(n)
        flips: dict[int, dict[int, int]] = {}
        near = self.epochs[R] <= t + W
        cand = (self.coin[R] == -1) & (zR >= 0) & (zp >= 0) & (near | np.isin(zp, lab0[bridge]))
        for v, c in zip(R[cand].tolist(), zp[cand].tolist(), strict=True):
            s = int(self.epochs[v])
            if s - t <= W:
                hit = ((lab0 == c) | (lab1 == c)).nonzero()[0]
            else:
                hit = (bridge & (lab0 == c)).nonzero()[0]
                hit = hit[self._pseudo(lab1[hit], np.full(len(hit), s)) > 0]
            uv = int(P.ids[v])
            for o in hit.tolist():
                flips.setdefault(o, {}).setdefault(uv, 0)
                flips[o][uv] += 1
        for o, tallies in flips.items():
            ids = np.array(list(tallies), np.int64)
            add = np.array(list(tallies.values()))
            gain[o] = float(np.sum(P.log_coins(self.heads[ids], self.tails[ids] + add)
                                   - P.log_coins(self.heads[ids], self.tails[ids])))
        h0, f0 = self.heads[u], self.tails[u]
        base = P.log_coins(h0, f0)
        p = int(P.prev[i])
        zpi = int(self.z[p]) if p >= 0 else -1
        avail = zpi >= 0 and self._pseudo(np.array([zpi]), np.array([t]))[0] > 0
        move = opts.logw + gain + P.log_coins(h0 + dh, f0 + df + avail) - base
        keep = valid.nonzero()[0]
        logw, rows, stays = [move[keep]], keep.tolist(), [False] * len(keep)
        if avail:
            twin = (valid & (lab0 == zpi)).nonzero()[0]
            if twin.size:  # (M_t + S_t + α) / (m_k + s_k) at t, heads for tails
                big_m = pseudo_counts(self.counts, t, W, self.prior.decay).sum()
                cols = [np.array(opts.labels[o]) for o in twin.tolist()]
                seated = np.array([self._pseudo(c, np.full(len(c), t)).sum()
                                   + self.stay[t, c].sum() for c in cols])
                seat = np.log(big_m + self.stay[t].sum() + self.prior.alpha) - np.log(seated)
                logw.append(opts.logw[twin] + gain[twin] + seat
                            + P.log_coins(h0 + dh[twin] + 1, f0 + df[twin])
                            - base)
                rows += twin.tolist()
                stays += [True] * len(twin)
        return _Options(np.concatenate(logw), [opts.kinds[o] for o in rows],
                        [opts.labels[o] for o in rows], [opts.states[o] for o in rows], stays)

    def _apply(self, i: int, t: int, kind: str, labels: tuple[int, ...],
               phi: np.ndarray | None, rng: np.random.Generator, stays: bool = False) -> None:
        walk = self.walk
        if kind == "alive":
            k = labels[0]
        elif kind == "extend":
            k = labels[0]
            mid = walk.bridge(self.phi[k][-1], phi, t - int(self.last[k]), rng)
            self.phi[k] = np.vstack([self.phi[k], mid, phi[None]])
            self.last[k] = t
        elif kind == "prepend":
            k = labels[0]
            mid = walk.bridge(phi, self.phi[k][0], int(self.first[k]) - t, rng)
            self.phi[k] = np.vstack([phi[None], mid, self.phi[k]])
            self.first[k] = t
        elif kind == "bridge":
            k, b = labels
            left = walk.bridge(self.phi[k][-1], phi, t - int(self.last[k]), rng)
            right = walk.bridge(phi, self.phi[b][0], int(self.first[b]) - t, rng)
            self.phi[k] = np.vstack([self.phi[k], left, phi[None], right, self.phi[b]])
            self.last[k] = self.last[b]
            self.counts[:, k] += self.counts[:, b]
            if self.persist is not None:
                self.stay[:, k] += self.stay[:, b]
            self.z[self.z == b] = k
            self._free(b)
        else:
            k = self._new_label()
            self.phi[k] = phi[None].copy()
            self.first[k] = self.last[k] = t
        self.z[i] = k
        self.counts[t, k] += 1
        if stays:
            self.y[i] = True
            self.stay[t, k] += 1

    def step(self, i: int, rng: np.random.Generator) -> None:
        """Redraw item i's chain from its exact conditional (the module docstring)."""
        t = int(self.epochs[i])
        if self.z[i] >= 0:
            k = int(self.z[i])
            born = self._remove(i)
            if self.persist is not None:
                self._refresh_coins(t, (k, born), (i, int(self.persist.next[i])))
        opts = self._options(i, t, rng)
        cdf = np.cumsum(np.exp(opts.logw - opts.logw.max()))
        j = min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(cdf) - 1)
        self._apply(i, t, opts.kinds[j], opts.labels[j], opts.states[j], rng,
                    bool(opts.stays[j]) if opts.stays else False)
        if self.persist is not None:
            self._refresh_coins(t, (int(self.z[i]),), (i,))

    # ---- relinking chains across an epoch boundary -----------------------------------------

    def relink(self, rng: np.random.Generator, start_epoch: int = 0) -> int:
        """Relinking moves at every boundary t > ``start_epoch`` (module docstring); returns
        how many were accepted."""
        done = sum(self._relink_at(t, rng) for t in range(max(1, start_epoch), self.T))
        self.relinked += done
        return done

    def _relink_at(self, t: int, rng: np.random.Generator) -> int:
        """Metropolised Gibbs moves over how the heads (chains' parts before t) connect to the
        tails (parts from t on), then the chains rebuilt if any move was accepted."""
        W = 1 if self.fixed else self.prior.window
        if W == 0:  # no chain crosses a boundary
            return 0
        act = self.active.nonzero()[0]
        lo, hi = max(0, t - W), min(self.T, t + W)
        rel = t - lo
        if self.fixed:  # K chains alive at every epoch
            heads = tails = act
            a, b = np.full(len(act), t - 1), np.full(len(act), t)
        else:
            pre, post = self.counts[lo:t, act] > 0, self.counts[t:hi, act] > 0
            is_head, is_tail = pre.any(0), post.any(0)
            heads, tails = act[is_head], act[is_tail]
            a = t - 1 - np.argmax(pre[::-1, is_head], axis=0)  # last occupied epoch < t
            b = t + np.argmax(post[:, is_tail], axis=0)  # first occupied epoch >= t
        if heads.size == 0:
            return 0
        nH, nT = len(heads), len(tails)
        # count columns of the pieces (rows lo..hi−1), and a zero column (index −1) for "none"
        Hc, Tc = np.zeros((hi - lo, nH + 1)), np.zeros((hi - lo, nT + 1))
        Hc[:rel, :nH] = self.counts[lo:t, heads]
        Tc[rel:, :nT] = self.counts[t:hi, tails]
        # the walk across the boundary: L[h, τ] = log N(φ_τ(b); φ_h(a), (b − a)ρ) if b − a <= W;
        # a tail without a head is born, log N(φ_τ(b); 0, σ); a head without a tail ends (0)
        L = np.zeros((nH + 1, nT + 1))
        if nT:
            phi_a = np.stack([self.phi[int(k)][a[h] - self.first[k]] for h, k in enumerate(heads)])
            phi_b = np.stack([self.phi[int(k)][b[j] - self.first[k]] for j, k in enumerate(tails)])
            gap = b[None, :] - a[:, None]
            link = gauss_logpdf(phi_b[None], phi_a[:, None],
                                self.walk.drift_var * np.maximum(gap, 1)[..., None])
            L[:nH, :nT] = np.where(gap <= W, link, -np.inf)
            L[-1, :nT] = gauss_logpdf(phi_b, 0.0, self.walk.birth_var)
        # J[h, τ]: the prior factors of head h joined to tail τ plus the walk across; a move
        # changes the log joint by J over the links it makes minus J over those it breaks
        pieces = (Hc[:, :, None] + Tc[:, None, :]).reshape(hi - lo, -1)
        J = self.prior.link_factors(pieces, rel).reshape(nH + 1, nT + 1) + L
        where = {int(k): j for j, k in enumerate(tails)}
        tail_of = np.array([where.get(int(k), -1) for k in heads], dtype=np.int64)

        def options(h: int, tail_of: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            """Head h's moves from matching ``tail_of``: swap tails with another head g, take an
            unmatched tail (g = −1) or, under the RCRP, let its tail go (g = gt = −1); the change
            of the log joint of each."""
            th = tail_of[h]
            g = np.delete(np.arange(nH), h)
            gt = tail_of[g]
            if not self.fixed:
                held = np.zeros(nT + 1, dtype=bool)
                held[tail_of] = True  # (index −1, "none", lands on the spare slot)
                free = (~held[:nT]).nonzero()[0]
                g = np.concatenate([g, np.full(len(free) + 1, -1)])
                gt = np.concatenate([gt, free, [-1]])
            keep = gt != th
            g, gt = g[keep], gt[keep]
            return g, gt, J[h, gt] + J[g, th] - J[g, gt] - J[h, th]

        accepted = 0
        for h in rng.permutation(nH).tolist():
            g, gt, delta = options(h, tail_of)
            if not np.any(np.isfinite(delta)):
                continue
            cdf = np.cumsum(np.exp(delta - delta.max()))
            j = min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(cdf) - 1)
            proposal = tail_of.copy()
            proposal[h] = gt[j]
            if g[j] >= 0:
                proposal[g[j]] = tail_of[h]
            back = options(h, proposal)[2]
            ratio = np.logaddexp.reduce(delta) - np.logaddexp.reduce(back) - delta[j]
            if np.log(rng.random()) < ratio:
                tail_of = proposal
                accepted += 1
        if accepted:
            self._rejoin(t, heads, tails, a, b, tail_of, rng)
        return accepted

    def _rejoin(self, t: int, heads: np.ndarray, tails: np.ndarray, a: np.ndarray,
                b: np.ndarray, tail_of: np.ndarray, rng: np.random.Generator) -> None:
        """Rebuild the chains across boundary t from the matching: a head keeps its label and
        takes its tail's items, counts and states (the states between a and b drawn from the
        walk's bridge); an unmatched tail gets a label of its own."""
        first, last = self.first.copy(), self.last.copy()
        head_phi = [self.phi[k][:e - first[k] + 1] for k, e in zip(heads, a, strict=True)]
        tail_phi = [self.phi[k][e - first[k]:] for k, e in zip(tails, b, strict=True)]
        tail_counts = self.counts[t:, tails].copy()
        later = (self._mask(tails)[self.z] & (self.z >= 0) & (self.epochs >= t)).nonzero()[0]
        tail_items = [later[self.z[later] == k] for k in tails]
        for k in tails[~self._mask(heads)[tails]].tolist():
            self._free(k)
        for h, k in enumerate(heads.tolist()):
            j = int(tail_of[h])
            self.counts[t:, k] = 0 if j < 0 else tail_counts[:, j]
            self.last[k] = a[h] if j < 0 else last[tails[j]]
            parts = [head_phi[h]]
            if j >= 0:
                parts += [self.walk.bridge(head_phi[h][-1], tail_phi[j][0], int(b[j] - a[h]), rng),
                          tail_phi[j]]
                self.z[tail_items[j]] = k
            self.phi[k] = np.vstack(parts)
        matched = np.zeros(len(tails) + 1, dtype=bool)
        matched[tail_of] = True  # (−1, no tail, lands on the spare slot)
        for j in (~matched[:-1]).nonzero()[0].tolist():
            k = self._new_label()
            self.counts[t:, k] = tail_counts[:, j]
            self.first[k], self.last[k] = b[j], last[tails[j]]
            self.phi[k] = tail_phi[j].copy()
            self.z[tail_items[j]] = k

    # ---- sweeps ----------------------------------------------------------------------------

    def _mask(self, labels: np.ndarray) -> np.ndarray:
        """A boolean per label slot: True at ``labels``."""
        mask = np.zeros(len(self.active), dtype=bool)
        mask[labels] = True
        return mask

    def members(self, labels=None) -> dict[int, list[np.ndarray]]:
        """Each active chain's (or each of ``labels``') items by epoch of its span (one sort of
        the seated items)."""
        if labels is None:
            labels = self.active.nonzero()[0]
            seated = (self.z >= 0).nonzero()[0]
        else:
            seated = (self._mask(labels)[self.z] & (self.z >= 0)).nonzero()[0]
        order = seated[np.lexsort((self.epochs[seated], self.z[seated]))]
        keys = self.z[order] * self.T + self.epochs[order]
        cuts = np.diff(keys).nonzero()[0] + 1
        groups = np.split(order, cuts)
        out = {int(k): [np.zeros(0, np.int64)] * int(self.last[k] - self.first[k] + 1)
               for k in labels}
        for g in groups:
            if g.size:
                k = int(self.z[g[0]])
                out[k][int(self.epochs[g[0]] - self.first[k])] = g
        return out

    def _pseudo_obs(self, k: int, mine: list[np.ndarray]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Chain k's Gaussian pseudo-observations (y, r) over its span from its members by
        epoch, and which epochs have members."""
        L, D = len(mine), self.emission.dim
        y, r = np.zeros((L, D)), np.ones((L, D))
        observed = np.array([len(items) > 0 for items in mine])
        for u in observed.nonzero()[0]:
            y[u], r[u] = self.emission.pseudo_obs(mine[u], self.phi[k][u])
        return y, r, observed

    def resample_states(self, rng: np.random.Generator, labels=None) -> None:
        """Forward filtering, backward sampling of every chain's states over its span."""
        members = self.members(labels)
        for k in members:
            self.phi[int(k)] = self.walk.ffbs(*self._pseudo_obs(int(k), members[int(k)]), rng)

    def smoothed_states(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Every chain's states' posterior means and variances given its members (RTS)."""
        return {k: self.walk.smooth(*self._pseudo_obs(k, mine))
                for k, mine in self.members().items()}

    def sweep(self, rng: np.random.Generator, start_epoch: int = 0) -> None:
        """One Gibbs sweep: every item of epochs >= ``start_epoch`` once (epochs in order, items
        shuffled within each; items not yet seated are seated sequentially, redrawing the states
        of the chains alive after each epoch), the relinking moves at every boundary after
        ``start_epoch``, the split-merge and cut moves (``splitmerge.py``), then every chain's
        states."""
        for t in range(start_epoch, self.T):
            seating = bool(np.any(self.z[self.by_epoch[t]] < 0))
            for i in rng.permutation(self.by_epoch[t]):
                self.step(int(i), rng)
            if seating:
                self.resample_states(rng, (self.active & (self.last == t)).nonzero()[0])
        if self.relinking:
            self.relink(rng, start_epoch)
        if self.splitmerge is not None:
            self.splitmerge.sweep(rng, start_epoch)
        self.resample_states(rng)

    def resample_variances(self, rng: np.random.Generator, noise: tuple[float, float] | None,
                           drift: tuple[float, float] | None) -> None:
        """Draw Σ and ρ from their inverse-gamma conditionals given the labels and states, for
        priors IG(shape a, scale b) given as (a, b) (None: keep the value): Σ | · ~
        IG(a + N·D/2, b + ½ Σ_i ||x_i − φ_{z_i,t_i}||²) (Gaussian emissions), ρ | · ~
        IG(a + n/2, b + ½ Σ ||Δφ||²) over the n increments inside the chains' spans."""
        D = self.emission.dim
        chains = [int(k) for k in self.active.nonzero()[0]]
        if noise is not None:
            rss = sum(self.emission.sq_residuals(items, self.phi[k][u])
                      for k, mine in self.members().items()
                      for u, items in enumerate(mine) if len(items))
            a, b = noise
            n = int(np.sum(self.z >= 0)) * D
            self.emission.noise_var = float((b + rss / 2) / rng.gamma(a + n / 2))
        if drift is not None:
            sq = sum(float(np.sum(np.diff(self.phi[k], axis=0) ** 2)) for k in chains)
            m = sum(len(self.phi[k]) - 1 for k in chains) * D
            a, b = drift
            self.walk = RandomWalk(self.walk.birth_var, float((b + sq / 2) / rng.gamma(a + m / 2)))

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The sample (labels, spans, states) as arrays; ``restore`` is its inverse."""
        act = self.active.nonzero()[0]
        phi = [self.phi[int(k)] for k in act]
        out = {"z": self.z.copy(), "labels": act, "first": self.first[act],
               "last": self.last[act],
               "phi": np.concatenate(phi) if phi else np.zeros((0, self.emission.dim))}
        if self.persist is not None:
            out["stay"] = self.y.copy()
        if self.splitmerge is not None:  # its proposals' scale, fixed when it was made
            out["bandwidth"] = np.array([self.splitmerge.bandwidth])
        return out

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        labels = np.asarray(arrays["labels"], np.int64)
        cap = max(len(self.active), int(labels.max()) + 1 if labels.size else 0)
        self.counts = np.zeros((self.T, cap), dtype=np.int64)
        self.first, self.last = np.full(cap, -1, np.int64), np.full(cap, -1, np.int64)
        self.active = np.zeros(cap, dtype=bool)
        self.z = np.asarray(arrays["z"], np.int64).copy()
        seated = self.z >= 0
        np.add.at(self.counts, (self.epochs[seated], self.z[seated]), 1)
        self.active[labels] = True
        self.first[labels] = arrays["first"]
        self.last[labels] = arrays["last"]
        spans = self.last[labels] - self.first[labels] + 1
        cuts = np.concatenate([[0], np.cumsum(spans)])
        phi = np.asarray(arrays["phi"], float)
        self.phi = {int(k): phi[cuts[j]:cuts[j + 1]].copy() for j, k in enumerate(labels)}
        if self.splitmerge is not None and "bandwidth" in arrays:
            self.splitmerge.bandwidth = float(arrays["bandwidth"][0])
        if self.persist is not None:
            self.y = np.asarray(arrays.get("stay", np.zeros(len(self.z), bool)), bool).copy()
            self.y &= self.z >= 0  # an unseated item stays nowhere
            self.stay = np.zeros_like(self.counts)
            np.add.at(self.stay, (self.epochs[self.y], self.z[self.y]), 1)
            self.coin[:] = -1
            self.heads[:] = 0
            self.tails[:] = 0
            self._refresh_coins(0)

    # ---- summaries -------------------------------------------------------------------------

    def log_joint(self) -> float:
        """log p(z, φ, x) of the current sample (the prior over labels, with the stayers and the
        coins if any, the walks' densities over the spans, the emissions)."""
        act = self.active.nonzero()[0]
        counts = self.counts[:, act]
        if self.fixed:
            value = self.prior.log_prior(counts)
        elif self.persist is None:
            value = log_prior(counts, self.prior.window, self.prior.decay, self.prior.alpha)
        else:
            value = log_prior(counts, self.prior.window, self.prior.decay, self.prior.alpha,
                              self.stay[:, act])
            value += float(np.sum(self.persist.log_coins(self.heads, self.tails)))
        for k, mine in self.members().items():
            value += self.walk.log_density(self.phi[k])
            value += sum(self.emission.total_loglik(items, self.phi[k][u])
                         for u, items in enumerate(mine) if len(items))
        return value

    def canonical(self) -> np.ndarray:
        """Labels renumbered 0, 1, ... by first epoch, then first item (unassigned stay −1)."""
        return relabel(self.z, self.epochs)


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
