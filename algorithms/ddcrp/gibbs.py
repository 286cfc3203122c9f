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

The samplers are kernels over an explicit state (as numpyro's ``init`` / ``sample``): a sampler
holds the problem only (X, the link prior, the observation model), ``init`` gives the starting
state (a frozen ``ChainState``: links, tables, the sampler's caches) and ``sample`` one sweep's
new state. ``sample`` rebuilds the caches into arrays of a new state first, so the state given is
left as it was; within the sweep each ``step`` writes the state's arrays in place (a copy per
step would cost O(N²), the step's own order).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

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


@dataclass(frozen=True, eq=False)
class ChainState:
    """The links c (each customer's link: an earlier customer or itself), each customer's table
    (``labels``, its root) and which customers are roots."""

    links: np.ndarray
    labels: np.ndarray
    is_root: np.ndarray


@dataclass(frozen=True, eq=False)
class CollapsedState(ChainState):
    """With every table's count ``n``, statistics ``stats`` and log marginal ``lm``, stored at
    the table's root (entries at non-roots are unused)."""

    n: np.ndarray
    stats: Arrays
    lm: np.ndarray


@dataclass(frozen=True, eq=False)
class ThetaState(ChainState):
    """With ``ll``: column r is log p(x_s | θ_r) of root r's θ (columns of non-roots unused)."""

    ll: np.ndarray


def _chain(links: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """links, labels and is_root of the links (labels = ``tables_of``)."""
    return links, tables_of(links), links == np.arange(len(links))


def _part(s: ChainState, i: int) -> np.ndarray:
    """A: i and the later customers whose link paths pass through i (sorted)."""
    root = int(s.labels[i])
    members = np.flatnonzero(s.labels == root)
    if root == i:
        return members
    links = s.links
    inside = {i}
    for k in members[members > i].tolist():
        if int(links[k]) in inside:
            inside.add(k)
    return np.fromiter(sorted(inside), dtype=np.intp, count=len(inside))


def _cut(s: ChainState, i: int, A: np.ndarray) -> None:
    """c_i = i: A becomes a table rooted at i (in place)."""
    s.links[i] = i
    s.is_root[i] = True
    s.labels[A] = i


def _join(s: ChainState, i: int, A: np.ndarray, j: int) -> int:
    """c_i = j < i: A joins j's table (in place); returns that table's root."""
    r = int(s.labels[j])
    s.links[i] = j
    s.is_root[i] = False
    s.labels[A] = r
    return r


class _Kernel(ABC):
    """What both samplers share: data X (n rows), the link prior ``logp``
    (``links.log_link_prior``: N × N, log p(c_i = j)) and an observation model; the starting
    state, the sweep and the categorical draw.

    The default start is every customer linked to itself (N singleton tables): a state that
    always has positive probability (α > 0), whatever the decay's support.
    """

    def __init__(self, X: Data, logp: np.ndarray, obs: ObsModel) -> None:
        self.logp = np.asarray(logp, dtype=float)
        N = self.logp.shape[0]
        if self.logp.shape != (N, N):
            raise ValueError(f"logp must be square, not {self.logp.shape}")
        if X.shape[0] != N:
            raise ValueError(f"X has {X.shape[0]} rows for {N} customers")
        self.X, self.obs, self.N = X, obs, N

    def _start(self, links: np.ndarray | None) -> np.ndarray:
        """The starting links (a copy), checked."""
        N = self.N
        links = (np.arange(N, dtype=np.intp) if links is None
                 else _check_links(np.array(links, copy=True)))
        if len(links) != N:
            raise ValueError(f"{len(links)} links for {N} customers")
        if not np.all(np.isfinite(self.logp[np.arange(N), links])):
            raise ValueError("the starting links have zero prior probability")
        return links

    @staticmethod
    def _choose(score: np.ndarray, rng: np.random.Generator) -> int:
        """A draw from the categorical with log weights ``score`` (the last one finite)."""
        # the max shift is logsumexp's own; scipy's wrapper alone took half of a step's time
        cdf = np.cumsum(np.exp(score - score.max()))
        return min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")),
                   len(score) - 1)

    @abstractmethod
    def _refresh(self, s: ChainState, rng: np.random.Generator) -> ChainState:
        """A new state: the tables' caches rebuilt from the links of ``s`` (a sweep's start)."""

    @abstractmethod
    def step(self, s: ChainState, i: int, rng: np.random.Generator) -> ChainState:
        """Customer i's link drawn given everything else, in place; returns ``s``."""

    def sample(self, s: ChainState, rng: np.random.Generator) -> ChainState:
        """One sweep: the tables' caches rebuilt into a new state (the uncollapsed sampler: θ
        drawn given the tables), then every customer's link once, in a random order."""
        s = self._refresh(s, rng)
        for i in rng.permutation(self.N).tolist():
            s = self.step(s, i, rng)
        return s


class LinkSampler(_Kernel):
    """Collapsed Gibbs sampling of the links (the module docstring's first scores)."""

    def __init__(self, X: Data, logp: np.ndarray, obs: ObsModel) -> None:
        super().__init__(X, logp, obs)
        self._items = item_stats(X, obs)

    def init(self, links: np.ndarray | None = None) -> CollapsedState:
        """The state at ``links`` (default: every customer its own table)."""
        links = self._start(links)
        return self._refresh(ChainState(*_chain(links)), None)

    def _refresh(self, s: ChainState, rng: np.random.Generator | None) -> CollapsedState:
        """Labels, counts, statistics and log marginals of every table from scratch."""
        N = self.N
        links, labels, is_root = _chain(s.links.copy())
        onehot = np.zeros((N, N))
        onehot[np.arange(N), labels] = 1.0
        n = onehot.sum(0)
        stats = {k: (onehot.T @ v.reshape(N, -1)).reshape(v.shape)
                 for k, v in self._items.items()}
        lm = np.zeros(N)
        roots = np.flatnonzero(is_root)
        if len(roots):
            lm[roots] = self.obs.log_marginal(n[roots], {k: v[roots] for k, v in stats.items()})
        return CollapsedState(links, labels, is_root, n, stats, lm)

    def step(self, s: CollapsedState, i: int, rng: np.random.Generator) -> CollapsedState:
        """Draw c_i from p(c_i | c_−i, X) (the module docstring's scores) and re-join."""
        i = int(i)
        old_root = int(s.labels[i])
        A = _part(s, i)
        S_A = {k: v[A].sum(0) for k, v in self._items.items()}
        n_A = float(len(A))
        rest = old_root != i
        if rest:  # cut i's link: the old table keeps its root and loses A
            s.n[old_root] -= n_A
            for k, v in s.stats.items():
                v[old_root] -= S_A[k]
        _cut(s, i, A)
        s.n[i] = n_A
        for k, v in s.stats.items():
            v[i] = S_A[k]

        roots = np.flatnonzero(s.is_root[:i])  # the tables a link to j < i can reach
        K = len(roots)
        batch = {k: np.concatenate([v[roots] + S_A[k], S_A[k][None],
                                    v[old_root][None]]) for k, v in s.stats.items()}
        counts = np.concatenate([s.n[roots] + n_A, [n_A, s.n[old_root]]])
        lm = self.obs.log_marginal(counts, batch)
        s.lm[i] = lm[K]
        if rest:
            s.lm[old_root] = lm[K + 1]
        gain = np.zeros(self.N)
        gain[roots] = lm[:K] - s.lm[roots] - lm[K]

        score = np.empty(i + 1)
        score[:i] = self.logp[i, :i] + gain[s.labels[:i]]
        score[i] = self.logp[i, i]  # finite: α > 0
        j = self._choose(score, rng)
        if j == i:
            return s
        r = _join(s, i, A, j)
        s.n[r] += n_A
        for k, v in s.stats.items():
            v[r] += S_A[k]
        s.lm[r] = lm[int(np.searchsorted(roots, r))]
        return s

    def log_joint(self, s: CollapsedState) -> float:
        """log p(c, X) of the state's links (``log_joint``, from the cached tables)."""
        N = self.N
        prior = float(self.logp[np.arange(N), s.links].sum())
        return prior + float(s.lm[s.is_root].sum())


class ThetaSampler(_Kernel):
    """Uncollapsed Gibbs sampling of the links and the tables' parameters θ (the module
    docstring's Algorithm-8 scores), as in the paper's Sec. 5.3. Needs ``obs.draw`` and
    ``obs.loglik``. θ is first drawn at the first sweep's start."""

    def __init__(self, X: Data, logp: np.ndarray, obs: ObsModel) -> None:
        super().__init__(X, logp, obs)
        self._prior = obs.prior_post(1)

    def init(self, links: np.ndarray | None = None) -> ThetaState:
        """The state at ``links`` (default: every customer its own table), no θ drawn yet."""
        return ThetaState(*_chain(self._start(links)), np.zeros((self.N, self.N)))

    def _refresh(self, s: ThetaState, rng: np.random.Generator) -> ThetaState:
        """θ_r ~ p(θ | the members of r's table) for every table, and their columns of log
        p(x_s | θ_r)."""
        links, labels, is_root = _chain(s.links.copy())
        roots, which = np.unique(labels, return_inverse=True)
        onehot = np.zeros((self.N, len(roots)))
        onehot[np.arange(self.N), which] = 1.0
        post = self.obs.post(onehot.sum(0), self.obs.stats(self.X, onehot))
        ll = s.ll.copy()
        ll[:, roots] = self.obs.loglik(self.X, self.obs.draw(post, rng))
        return ThetaState(links, labels, is_root, ll)

    def step(self, s: ThetaState, i: int, rng: np.random.Generator) -> ThetaState:
        """Draw c_i given the links, θ and X, with a fresh θ_i ~ G_0 for A's own table unless
        i is already a root, and re-join."""
        i = int(i)
        A = _part(s, i)
        if int(s.labels[i]) != i:
            s.ll[:, i] = self.obs.loglik(self.X, self.obs.draw(self._prior, rng))[:, 0]
        _cut(s, i, A)
        roots = np.flatnonzero(s.is_root[:i])  # the tables a link to j < i can reach
        fit = np.zeros(self.N)
        fit[roots] = s.ll[np.ix_(A, roots)].sum(0)
        score = np.empty(i + 1)
        score[:i] = self.logp[i, :i] + fit[s.labels[:i]]
        score[i] = self.logp[i, i] + s.ll[A, i].sum()
        j = self._choose(score, rng)
        if j != i:
            _join(s, i, A, j)
        return s
