"""Gibbs samplers over the links of the sequential ddCRP (docs/theory/ddcrp.rst; Blei & Frazier
2011's link sampler, applied to Bartunov & Vetrov 2014's sequential prior): ``LinkSampler`` is
collapsed, ``ThetaSampler`` keeps the tables' parameters θ as the paper's Sec. 5.3 baseline does.

Customer i's step removes its link: since links only point backwards, i's table splits into A,
the customers whose paths reach i (i and later customers only), and the rest (empty if i linked
to itself). Relative to that split, a self-link leaves A a table of its own, and a link to any
j < i (in the rest or in another table B, as j ∉ A) merges A with j's table.

Collapsed (θ integrated out with the conjugate marginal M(S) = ∫ Π_{s∈S} p(x_s | θ) G_0(θ) dθ),
the state is the links c alone and the target is p(c | X) ∝ Π_i p(c_i) · Π_tables M(table):

    log p(c_i = i | …) = log p_ii + const,
    log p(c_i = j | …) = log p_ij + log M(A ∪ B) − log M(A) − log M(B) + const   (j ∈ B).

The statistics add over customers, so the merges' statistics are S(B) + S(A) for every candidate
table B at once and the step costs one ``log_marginal`` call on K + 2 tables (the merges, A and
the rest). Per-table statistics and log marginals are cached by table root and updated as
customers move; they are rebuilt from the per-customer statistics at the start of each sweep,
so rounding cannot accumulate.

Uncollapsed, the state is (c, θ_r for every root r) with target
p(c) Π_r G_0(θ_r) Π_s p(x_s | θ_{table of s}). The link step is Neal's (2000) Algorithm 8 with
one auxiliary table: A's self-link is scored with θ_i if i was already a root (A is then its
whole table) and with a fresh draw θ_i ~ G_0 otherwise:

    log p(c_i = j | …) = log p_ij + Σ_{s∈A} log p(x_s | θ_B)   (j ∈ B, j < i),
    log p(c_i = i | …) = log p_ii + Σ_{s∈A} log p(x_s | θ_i).

After the links, every table's θ_r is drawn from its conjugate posterior given its members.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ..obs.base import Arrays, Data, ObsModel

_CHUNK = 256  # customers per obs.stats call when building the per-customer statistics


def tables_of(links: np.ndarray) -> np.ndarray:
    """Each customer's table, labelled by its root (the self-linker its path ends at):
    label_i = i if c_i = i, else label_{c_i} (c_i < i, so one forward pass)."""
    c = _check_links(links)
    labels = np.empty(len(c), dtype=np.intp)
    for i, j in enumerate(c.tolist()):
        labels[i] = i if j == i else labels[j]
    return labels


def log_joint(links: np.ndarray, X: Data, logp: np.ndarray, obs: ObsModel) -> float:
    """log p(c, X) = Σ_i log p(c_i) + Σ_tables log M(table), θ integrated out."""
    c = _check_links(links)
    logp = np.asarray(logp, dtype=float)
    if logp.shape != (len(c), len(c)):
        raise ValueError(f"logp must be {len(c)} x {len(c)}, not {logp.shape}")
    labels = tables_of(c)
    roots, which = np.unique(labels, return_inverse=True)
    R = np.zeros((len(c), len(roots)))
    R[np.arange(len(c)), which] = 1.0
    prior = float(logp[np.arange(len(c)), c].sum())
    return prior + float(obs.log_marginal(R.sum(0), obs.stats(X, R)).sum())


def item_stats(X: Data, obs: ObsModel) -> Arrays:
    """Each row's own statistics t(x_s): arrays with a leading N axis (in chunks of rows)."""
    N = X.shape[0]
    parts = [obs.stats(X[a:a + _CHUNK], np.eye(min(_CHUNK, N - a))) for a in range(0, N, _CHUNK)]
    if not parts:
        return {k: np.zeros((0, *s)) for k, s in obs.stat_shapes().items()}
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _check_links(links: np.ndarray) -> np.ndarray:
    c = np.asarray(links)
    if c.ndim != 1 or (c.size and not np.issubdtype(c.dtype, np.integer)):
        raise ValueError("links must be a one-dimensional integer array")
    c = c.astype(np.intp)
    if np.any(c < 0) or np.any(c > np.arange(len(c))):
        raise ValueError("every link must point to an earlier customer or itself: 0 <= c_i <= i")
    return c


class _Chain(ABC):
    """What both samplers share: the links c given data X (n rows), the link prior ``logp``
    (``links.log_link_prior``: N × N, log p(c_i = j)) and an observation model; each customer's
    table (``labels``, its root); cutting and re-joining customer i's part A; the sweep.

    The default start is every customer linked to itself (N singleton tables): a state that
    always has positive probability (α > 0), whatever the decay's support. ``links`` and
    ``labels`` are the current state; treat them as read-only.
    """

    def __init__(self, X: Data, logp: np.ndarray, obs: ObsModel,
                 links: np.ndarray | None = None) -> None:
        self.logp = np.asarray(logp, dtype=float)
        N = self.logp.shape[0]
        if self.logp.shape != (N, N):
            raise ValueError(f"logp must be square, not {self.logp.shape}")
        if X.shape[0] != N:
            raise ValueError(f"X has {X.shape[0]} rows for {N} customers")
        self.X, self.obs, self.N = X, obs, N
        self.links = (np.arange(N, dtype=np.intp) if links is None
                      else _check_links(np.array(links, copy=True)))
        if len(self.links) != N:
            raise ValueError(f"{len(self.links)} links for {N} customers")
        if not np.all(np.isfinite(self.logp[np.arange(N), self.links])):
            raise ValueError("the starting links have zero prior probability")
        self._relabel()

    def _relabel(self) -> None:
        self.labels = tables_of(self.links)
        self._is_root = self.links == np.arange(self.N)

    def _part(self, i: int) -> np.ndarray:
        """A: i and the later customers whose link paths pass through i (sorted)."""
        root = int(self.labels[i])
        members = np.flatnonzero(self.labels == root)
        if root == i:
            return members
        links = self.links
        inside = {i}
        for k in members[members > i].tolist():
            if int(links[k]) in inside:
                inside.add(k)
        return np.fromiter(sorted(inside), dtype=np.intp, count=len(inside))

    def _cut(self, i: int, A: np.ndarray) -> None:
        """c_i = i: A becomes a table rooted at i."""
        self.links[i] = i
        self._is_root[i] = True
        self.labels[A] = i

    def _join(self, i: int, A: np.ndarray, j: int) -> int:
        """c_i = j < i: A joins j's table; returns that table's root."""
        r = int(self.labels[j])
        self.links[i] = j
        self._is_root[i] = False
        self.labels[A] = r
        return r

    @staticmethod
    def _choose(score: np.ndarray, rng: np.random.Generator) -> int:
        """A draw from the categorical with log weights ``score`` (the last one finite)."""
        # the max shift is logsumexp's own; scipy's wrapper alone took half of a step's time
        cdf = np.cumsum(np.exp(score - score.max()))
        return min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")),
                   len(score) - 1)

    @abstractmethod
    def _refresh(self, rng: np.random.Generator) -> None:
        """Rebuild the tables' caches from the links (at each sweep's start)."""

    @abstractmethod
    def step(self, i: int, rng: np.random.Generator) -> None:
        """Draw customer i's link given everything else."""

    def sweep(self, rng: np.random.Generator) -> None:
        """The tables' caches rebuilt (the uncollapsed sampler: θ drawn given the tables), then
        every customer's link once, in a random order."""
        self._refresh(rng)
        for i in rng.permutation(self.N).tolist():
            self.step(i, rng)


class LinkSampler(_Chain):
    """Collapsed Gibbs sampling of the links (the module docstring's first scores)."""

    def __init__(self, X: Data, logp: np.ndarray, obs: ObsModel,
                 links: np.ndarray | None = None) -> None:
        super().__init__(X, logp, obs, links)
        self._items = item_stats(X, obs)
        self._refresh(None)

    def _refresh(self, rng: np.random.Generator | None) -> None:
        """Labels, counts, statistics and log marginals of every table from scratch, stored at
        the table's root (entries at non-roots are unused)."""
        N = self.N
        self._relabel()
        onehot = np.zeros((N, N))
        onehot[np.arange(N), self.labels] = 1.0
        self._n = onehot.sum(0)
        self._stats = {k: (onehot.T @ v.reshape(N, -1)).reshape(v.shape)
                       for k, v in self._items.items()}
        self._lm = np.zeros(N)
        roots = np.flatnonzero(self._is_root)
        if len(roots):
            self._lm[roots] = self.obs.log_marginal(
                self._n[roots], {k: v[roots] for k, v in self._stats.items()})

    def step(self, i: int, rng: np.random.Generator) -> None:
        """Draw c_i from p(c_i | c_−i, X) (the module docstring's scores) and re-join."""
        i = int(i)
        old_root = int(self.labels[i])
        A = self._part(i)
        S_A = {k: v[A].sum(0) for k, v in self._items.items()}
        n_A = float(len(A))
        rest = old_root != i
        if rest:  # cut i's link: the old table keeps its root and loses A
            self._n[old_root] -= n_A
            for k, v in self._stats.items():
                v[old_root] -= S_A[k]
        self._cut(i, A)
        self._n[i] = n_A
        for k, v in self._stats.items():
            v[i] = S_A[k]

        roots = np.flatnonzero(self._is_root[:i])  # the tables a link to j < i can reach
        K = len(roots)
        batch = {k: np.concatenate([v[roots] + S_A[k], S_A[k][None],
                                    v[old_root][None]]) for k, v in self._stats.items()}
        counts = np.concatenate([self._n[roots] + n_A, [n_A, self._n[old_root]]])
        lm = self.obs.log_marginal(counts, batch)
        self._lm[i] = lm[K]
        if rest:
            self._lm[old_root] = lm[K + 1]
        gain = np.zeros(self.N)
        gain[roots] = lm[:K] - self._lm[roots] - lm[K]

        score = np.empty(i + 1)
        score[:i] = self.logp[i, :i] + gain[self.labels[:i]]
        score[i] = self.logp[i, i]  # finite: α > 0
        j = self._choose(score, rng)
        if j == i:
            return
        r = self._join(i, A, j)
        self._n[r] += n_A
        for k, v in self._stats.items():
            v[r] += S_A[k]
        self._lm[r] = lm[int(np.searchsorted(roots, r))]

    def log_joint(self) -> float:
        """log p(c, X) of the current links (``log_joint``, from the cached tables)."""
        N = self.N
        prior = float(self.logp[np.arange(N), self.links].sum())
        return prior + float(self._lm[self._is_root].sum())


class ThetaSampler(_Chain):
    """Uncollapsed Gibbs sampling of the links and the tables' parameters θ (the module
    docstring's Algorithm-8 scores), as in the paper's Sec. 5.3. Needs ``obs.draw`` and
    ``obs.loglik``. θ is first drawn at the first sweep's start."""

    def __init__(self, X: Data, logp: np.ndarray, obs: ObsModel,
                 links: np.ndarray | None = None) -> None:
        super().__init__(X, logp, obs, links)
        self._prior = obs.prior_post(1)
        self._ll = np.zeros((self.N, self.N))  # column r: log p(x_s | θ_r), at roots only

    def _refresh(self, rng: np.random.Generator) -> None:
        """θ_r ~ p(θ | the members of r's table) for every table, and their columns of log
        p(x_s | θ_r)."""
        self._relabel()
        roots, which = np.unique(self.labels, return_inverse=True)
        onehot = np.zeros((self.N, len(roots)))
        onehot[np.arange(self.N), which] = 1.0
        post = self.obs.post(onehot.sum(0), self.obs.stats(self.X, onehot))
        self._ll[:, roots] = self.obs.loglik(self.X, self.obs.draw(post, rng))

    def step(self, i: int, rng: np.random.Generator) -> None:
        """Draw c_i given the links, θ and X, with a fresh θ_i ~ G_0 for A's own table unless
        i is already a root, and re-join."""
        i = int(i)
        A = self._part(i)
        if int(self.labels[i]) != i:
            self._ll[:, i] = self.obs.loglik(self.X, self.obs.draw(self._prior, rng))[:, 0]
        self._cut(i, A)
        roots = np.flatnonzero(self._is_root[:i])  # the tables a link to j < i can reach
        fit = np.zeros(self.N)
        fit[roots] = self._ll[np.ix_(A, roots)].sum(0)
        score = np.empty(i + 1)
        score[:i] = self.logp[i, :i] + fit[self.labels[:i]]
        score[i] = self.logp[i, i] + self._ll[A, i].sum()
        j = self._choose(score, rng)
        if j != i:
            self._join(i, A, j)
