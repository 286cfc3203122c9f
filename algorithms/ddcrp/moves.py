"""Hard partitions of one sequence under the sequential ddCRP, and moves over whole tables
(docs/theory/ddcrp.rst, moves over whole tables): the high ground of the VI bound that coordinate
steps on single links cannot reach.

A partition P puts each customer at a table T (labelled by its root, its first member). Its
links state q_P is q(c_i = j) ∝ p_ij over the earlier members j of i's table within the band
(every such link puts i at T, so this is the best q(c_i) among those that keep i at T; the
root links to itself), with q(θ_T) the exact posterior. Then Z is hard and the VI bound is

    L(P) = Σ_T [ Σ_{i ∈ T} log S_i(T) + log M(T) ],   S_i(T) = Σ_{j ∈ T, j < i} p_ij

(S_i = p_ii at the root), since the links' term is Σ_i log S_i and the tables' term at the
optimal q(θ) is log M(T).
Π_i S_i(T) sums p(c) over every link graph that induces P, so L(P) = log p(P, x): the joint of
the partition (with f ≡ 1, log CRP(P) + Σ_T log M(T)). A table whose non-root member has no
earlier member within reach (a window, or f = 0) has S_i = 0: such a P is not a ddCRP state.

The bound is a sum of table scores, so a merge (the later root relinked into the other table)
or a split (a table cut in two) changes only its own tables' terms. ``improve`` takes the
best exact gain among merges and splits until none is positive: the bound never decreases.
Every pair's merge gain is exact (``Tables.merge_gains``); split candidates are screened by the
tables' term alone (one ``log_marginal`` call over all cuts of a table) and the exact gain
computed for the best few: the cuts of a tree over the table, each member linked to its
nearest earlier member in ``obs.features`` (cutting the link above customer c separates c and
the customers whose tree paths pass through c), runs of consecutive members (two cuts in the
chain of each member to the one before it: a stretch of the sequence leaves the table), and the
two 2-way partitions of the vb births (``vb.init.proposal_splits``).

A partition is a frozen ``Tables`` value; ``merge``, ``split`` and ``improve`` return new ones.
Its ``splits`` (each table's best split, found with random 2-way proposals) is part of the state:
a table's best split is drawn once and kept until the table changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from ..obs.base import Arrays, Data, ObsModel
from ..vb.init import proposal_splits, sq_distances
from .gibbs import item_stats
from .vi import LinkState

SCREEN = 4  # split candidates per table and kind (tree cuts, runs) whose exact gain is computed
INTERVAL_GRID = 100  # run ends per table at most
INTERVAL_ENTRIES = 1 << 22  # statistics' entries of a table's screened runs at most
MIN_GAIN = 1e-9  # a move must raise the bound by more than this (relative to |L|)


def table_weights(members: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """(|T|, |T|): log p_ij from each member i to each earlier member j within the band (row i,
    column j, members in order), the root's self-link log p_rr at [0, 0], −inf elsewhere."""
    gap = members[:, None] - members[None, :]
    ok = (gap > 0) & (gap < logp.shape[1])
    w = np.full(gap.shape, -np.inf)
    w[ok] = logp[np.broadcast_to(members[:, None], gap.shape)[ok], gap[ok]]
    w[0, 0] = logp[members[0], 0]
    return w


def log_rows(w: np.ndarray) -> np.ndarray:
    """log Σ_d exp(w_d) per row, −inf for a row with no finite entry."""
    top = w.max(1)
    ok = np.isfinite(top)
    out = np.full(len(w), -np.inf)
    out[ok] = top[ok] + np.log(np.exp(w[ok] - top[ok, None]).sum(1))
    return out


def reach_mass(which: np.ndarray, K: int, logp: np.ndarray, chunk: int = 1 << 22
               ) -> np.ndarray:
    """C (N × K): C_ik = Σ_{d ≥ 1} p_{i, i−d} 1[customer i − d sits at table k] (``which``:
    each customer's table, 0..K − 1), summed over the band in blocks of rows."""
    N, width = logp.shape
    C = np.zeros(N * K)
    rows = max(1, chunk // max(width, 1))
    d = np.arange(1, width)[None, :]
    for a in range(0, N, rows):
        i = np.arange(a, min(a + rows, N))[:, None]
        j = i - d
        w = np.where(j >= 0, np.exp(logp[i, d]), 0.0)
        C += np.bincount((i * K + which[np.maximum(j, 0)]).ravel(), w.ravel(), N * K)
    return C.reshape(N, K)


def roots_of(labels: np.ndarray, logp: np.ndarray, floor: np.ndarray | None = None
             ) -> np.ndarray:
    """Each customer's table as its root: the first customer of its label, or itself when the
    most recent earlier customer of its label is out of reach (beyond the band, or log p at
    most ``floor_i``, default −inf: p = 0), so that every table is a ddCRP state (a label may
    become several tables)."""
    width = logp.shape[1]
    floor = np.full(len(labels), -np.inf) if floor is None else floor
    out = np.empty(len(labels), np.intp)
    last: dict[int, int] = {}
    for i, k in enumerate(np.asarray(labels).tolist()):
        j = last.get(k)
        out[i] = i if j is None or i - j >= width or not logp[i, i - j] > floor[i] else out[j]
        last[k] = i
    return out


def _dense(F: Data) -> np.ndarray:
    return F.toarray() if sp.issparse(F) else np.asarray(F)


@dataclass(frozen=True)
class Move:
    """An accepted move: ``kind`` merge or split, the tables it took and made (roots), its
    exact gain and the bound after it."""

    kind: str
    before: tuple[int, ...]
    after: tuple[int, ...]
    gain: float
    bound: float


@dataclass(frozen=True, eq=False)
class Tables:
    """A hard partition of X's customers (``labels``: each customer's root) with each table's
    members, count, statistics and score Σ log S_i + log M (the module docstring), in the order
    the tables were made (``bound`` sums them in it), and the best splits found so far."""

    X: Data
    logp: np.ndarray
    obs: ObsModel
    labels: np.ndarray
    members: dict[int, np.ndarray]
    n: dict[int, float]
    stats: dict[int, Arrays]
    score: dict[int, float]
    splits: dict[int, tuple[float, np.ndarray | None]]

    @classmethod
    def of(cls, X: Data, labels: np.ndarray, logp: np.ndarray, obs: ObsModel) -> Tables:
        """The tables of any labelling (``roots_of``)."""
        logp = np.asarray(logp, float)
        if len(labels) != logp.shape[0] or X.shape[0] != logp.shape[0]:
            raise ValueError(f"{len(labels)} labels, {X.shape[0]} rows and {logp.shape[0]} "
                             "customers must agree")
        roots = roots_of(labels, logp)
        empty = cls(X, logp, obs, roots, {}, {}, {}, {}, {})
        return _remade(empty, (), [(np.flatnonzero(roots == r), None)
                                   for r in np.unique(roots).tolist()])[0]

    def table_score(self, members: np.ndarray, stats: Arrays) -> float:
        """Σ_{i ∈ T} log S_i(T) + log M(T) (−inf if T is not a ddCRP table)."""
        links = float(log_rows(table_weights(members, self.logp)).sum())
        return links + float(self.obs.log_marginal(np.array([float(len(members))]), stats)[0])

    def bound(self) -> float:
        """L(P) = Σ_T score(T) = log p(P, x)."""
        return float(sum(self.score.values()))

    def links(self, prune: float = 0.0) -> LinkState:
        """q_P: each q(c_i) ∝ p_ij over the earlier members of i's table, the roots' self-links."""
        q = np.zeros_like(self.logp)
        for members in self.members.values():
            w = table_weights(members, self.logp)
            i, j = np.nonzero(np.isfinite(w))
            q[members[i], members[i] - members[j]] = np.exp(w[i, j] - log_rows(w)[i])
        return LinkState.of(self.logp, q, prune)

    # ------------------------------------------------------------ merges

    def merge_gains(self) -> tuple[np.ndarray, np.ndarray]:
        """The exact change of L for merging every pair of tables: the roots (sorted) and a
        K × K matrix (upper triangle; −inf below and where the merged table would not be a
        ddCRP table). With C_ik = Σ_{j ∈ k, j < i} p_ij (``reach_mass``), a non-root i of
        table a has S_i = C_ia, and C_ia + C_ib once a and b merge; the later root r_b links
        into a with S = C_{r_b a} instead of p_{r_b r_b}. The tables' term is Eq. 12's
        log M(a ∪ b) − log M(a) − log M(b) (``obs.merge_gains``)."""
        roots = np.array(sorted(self.members))
        K = len(roots)
        gains = np.full((K, K), -np.inf)
        if K < 2:
            return roots, gains
        which = np.searchsorted(roots, self.labels)
        C = reach_mass(which, K, self.logp)
        N = len(which)
        is_root = self.labels == np.arange(N)
        inner = np.flatnonzero(~is_root)
        with np.errstate(divide="ignore"):
            rise = np.log1p(C[inner] / C[inner, which[inner]][:, None])
            G = np.zeros((K, K))
            np.add.at(G, which[inner], rise)
            later = roots[:, None] > roots[None, :]  # a's root after b's: it relinks into b
            G += np.where(later, np.log(C[roots]) - self.logp[roots, 0][:, None], 0.0)
        a, b = np.triu_indices(K, 1)
        n = np.array([self.n[r] for r in roots])
        stats = {k: np.concatenate([self.stats[r][k] for r in roots]) for k in self.stats[roots[0]]}
        gains[a, b] = G[a, b] + G[b, a] + self.obs.merge_gains(n, stats, a, b)
        gains[~np.isfinite(gains)] = -np.inf
        return roots, gains

    def best_merge(self) -> tuple[float, int, int]:
        """The merge of largest exact gain: (gain, root a, root b)."""
        roots, gains = self.merge_gains()
        if len(roots) < 2:
            return -np.inf, -1, -1
        a, b = np.unravel_index(int(np.argmax(gains)), gains.shape)
        return float(gains[a, b]), int(roots[a]), int(roots[b])

    # ------------------------------------------------------------ splits

    def split_gain(self, r: int, side: np.ndarray) -> float:
        """The exact change of L when table r's members with ``side`` True leave it."""
        members = self.members[r]
        parts = [members[~side], members[side]]
        if not (len(parts[0]) and len(parts[1])):
            return -np.inf
        scores = [self.table_score(p, self.obs.stats(self.X[p], np.ones((len(p), 1))))
                  for p in parts]
        return scores[0] + scores[1] - self.score[r]

    def tree(self, members: np.ndarray) -> np.ndarray:
        """Each member's nearest earlier member in ``obs.features`` among those within reach
        (positions in ``members``; −1 for the root)."""
        F = _dense(self.obs.features(self.X[members]))
        reach = np.isfinite(table_weights(members, self.logp))
        reach[0, 0] = False
        D = np.where(reach, sq_distances(F, F), np.inf)
        parent = D.argmin(1)
        parent[~reach.any(1)] = -1
        return parent

    def cuts(self, r: int) -> list[np.ndarray]:
        """Sides of the SCREEN cuts of table r's ``tree`` (nearest in features) and of its
        SCREEN ``intervals`` that gain most in the tables' term."""
        return self.tree_cuts(r, self.tree(self.members[r])) + self.intervals(r)

    def intervals(self, r: int) -> list[np.ndarray]:
        """The SCREEN runs of consecutive members of table r (in sequence order) whose removal
        gains most in log M(run) + log M(rest): two links cut in the chain of each member to
        the one before it (one, for a run that ends the table). Run ends on a grid of at most
        INTERVAL_GRID points (fewer for large statistics), statistics by prefix sums."""
        members = self.members[r]
        m = len(members)
        size = sum(int(np.prod(v.shape[1:])) for v in self.stats[r].values())
        points = max(2, min(m, INTERVAL_GRID, int(np.sqrt(2 * INTERVAL_ENTRIES / size))))
        grid = np.unique(np.linspace(0, m, points + 1).round().astype(int))
        lo, hi = np.triu_indices(len(grid), 1)
        lo, hi = grid[lo], grid[hi]
        keep = hi - lo < m
        lo, hi = lo[keep], hi[keep]
        if not len(lo):
            return []
        prefix = {k: np.concatenate([np.zeros((1, *v.shape[1:])), np.cumsum(v, 0)])
                  for k, v in item_stats(self.X[members], self.obs).items()}
        part = {k: v[hi] - v[lo] for k, v in prefix.items()}
        n = (hi - lo).astype(float)
        lm = self.obs.log_marginal(np.concatenate([n, m - n]), {
            k: np.concatenate([v, self.stats[r][k] - v]) for k, v in part.items()})
        screen = lm[:len(n)] + lm[len(n):]
        sides = []
        for c in np.argsort(-screen, kind="stable")[:SCREEN].tolist():
            side = np.zeros(m, bool)
            side[lo[c]:hi[c]] = True
            sides.append(side)
        return sides

    def tree_cuts(self, r: int, parent: np.ndarray) -> list[np.ndarray]:
        """The SCREEN cuts of the tree ``parent`` over table r (parents before children) that
        gain most in log M(part) + log M(rest), as sides (the part below the cut link)."""
        members = self.members[r]
        sub = item_stats(self.X[members], self.obs)
        count = np.ones(len(members))
        for c in range(len(members) - 1, 0, -1):  # parents come first: sum subtrees upwards
            p = parent[c]
            if p >= 0:
                count[p] += count[c]
                for k in sub:
                    sub[k][p] += sub[k][c]
        cut = np.flatnonzero(parent >= 0)
        if not len(cut):
            return []
        total = self.stats[r]
        both = np.concatenate([count[cut], self.n[r] - count[cut]])
        lm = self.obs.log_marginal(both, {k: np.concatenate([v[cut], total[k] - v[cut]])
                                          for k, v in sub.items()})
        screen = lm[:len(cut)] + lm[len(cut):]
        sides = []
        for c in cut[np.argsort(-screen, kind="stable")[:SCREEN]].tolist():
            side = np.zeros(len(members), bool)
            side[c] = True
            for k in range(c + 1, len(members)):
                side[k] = parent[k] >= 0 and side[parent[k]]
            sides.append(side)
        return sides


def _remade(t: Tables, drop: tuple[int, ...], add: list[tuple[np.ndarray, Arrays | None]]
            ) -> tuple[Tables, tuple[int, ...]]:
    """The partition without tables ``drop`` and with tables of members ``add`` (statistics
    given, or summed when None) made after the others; and the new tables' roots."""
    labels = t.labels.copy()
    members, n, stats, score = dict(t.members), dict(t.n), dict(t.stats), dict(t.score)
    splits = dict(t.splits)
    for r in drop:
        for d in (members, n, stats, score):
            del d[r]
        splits.pop(r, None)
    roots = []
    for m, st in add:
        r = int(m[0])
        labels[m] = r
        members[r] = m
        n[r] = float(len(m))
        stats[r] = t.obs.stats(t.X[m], np.ones((len(m), 1))) if st is None else st
        score[r] = t.table_score(m, stats[r])
        roots.append(r)
    return replace(t, labels=labels, members=members, n=n, stats=stats, score=score,
                   splits=splits), tuple(roots)


def merge(t: Tables, a: int, b: int) -> tuple[Tables, int]:
    """Tables a and b as one (their statistics added); returns the partition and its root."""
    members = np.union1d(t.members[a], t.members[b])
    stats = {k: v + t.stats[b][k] for k, v in t.stats[a].items()}
    t, (root,) = _remade(t, (a, b), [(members, stats)])
    return t, root


def split(t: Tables, r: int, side: np.ndarray) -> tuple[Tables, tuple[int, ...]]:
    """Table r cut in two (``side`` True: the second part); the partition and the parts' roots."""
    members = t.members[r]
    return _remade(t, (r,), [(members[~side], None), (members[side], None)])


def best_split(t: Tables, r: int, rng: np.random.Generator) -> tuple[float, np.ndarray | None]:
    """Table r's best split among its screened cuts and the 2-way proposals, with its exact
    gain."""
    members = t.members[r]
    best: tuple[float, np.ndarray | None] = (-np.inf, None)
    if len(members) > 1:
        F = t.obs.features(t.X[members])
        sides = t.cuts(r) + [s.astype(bool) for s in proposal_splits(F, rng)]
        for side in sides:
            gain = t.split_gain(r, side)
            if gain > best[0]:
                best = (gain, side)
    return best


# ------------------------------------------------------------ the climb

def improve(t: Tables, rng: np.random.Generator, max_moves: int = 1000
            ) -> tuple[Tables, list[Move]]:
    """Apply the best of the screened merges and every table's best split (``best_split``,
    drawn once per table until it changes) while it raises L by more than MIN_GAIN |L|;
    returns the partition and the moves made."""
    made = []
    for _ in range(max_moves):
        bound = t.bound()
        floor = MIN_GAIN * max(abs(bound), 1.0)
        best = t.best_merge()
        splits = dict(t.splits)
        for r in sorted(t.members):
            if r not in splits:
                splits[r] = best_split(t, r, rng)
        t = replace(t, splits=splits)
        chosen = max(((*splits[r], r) for r in sorted(t.members)),
                     key=lambda c: c[0], default=(-np.inf, None, -1))
        if max(best[0], chosen[0]) <= floor:
            break
        if best[0] >= chosen[0]:
            _, a, b = best
            t, root = merge(t, a, b)
            made.append(Move("merge", (a, b), (root,), best[0], t.bound()))
        else:
            gain, side, r = chosen
            t, roots = split(t, r, side)
            made.append(Move("split", (r,), roots, gain, t.bound()))
    return t, made
