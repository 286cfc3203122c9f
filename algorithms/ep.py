"""Expectation propagation for NRM mixtures (Tank, Foti & Fox 2015, Alg. 2; supplement Sec. 3),
kept per partition so that partitions can be refined in parallel.

Every item i keeps its site r_i, its current responsibilities over the clusters (ADF's q at
first; 0 on clusters born after it). The global state is their sum: S_k = Σ_i r_ik and
λ_k = λ_0 + Σ_i r_ik t(x_i), over the surviving clusters. An EP step on item i: the cavity
removes r_i (S −= r_i, λ −= r_i t(x_i); Eq. 24), the local update computes q from the cavity
predictive with Û at m = N − 1, E[K] = K (Eq. 26 and its new-cluster term; a cluster is created
when q_new > ε), the restore adds q (Eq. 25) and r_i ← q; then every cluster with S_k < ε is
removed, and the other items' entries on it leave with it, so the sums stay exact.

A partition's sites are stored sparse (``Sites``: rows of (component id, r) with r ≥ 1e-10) with
their sum as a Summary (N = Σ r, stats = Σ r t(x)). A pass over one partition (``sweep``) runs on
a worker against the global state; the driver then replaces the partition's old sum by the new
one. One partition visited at a time is exactly the paper's sequential EP; the parallel,
memoized scheme (W partitions against the same state) goes beyond the paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .adf import TINY, Clusters, adf_step, check_epsilon
from .alloc.nrm import NRM
from .obs.base import Data, ObsModel
from .summary import Delete, Pool, Summary


@dataclass
class Sites:
    """Per-item sites of one partition's n items, CSR by item with component ids as columns,
    and their sum over the items (a Summary with H = 0)."""

    indptr: np.ndarray
    uids: np.ndarray
    r: np.ndarray
    summary: Summary

    @property
    def n(self) -> int:
        return len(self.indptr) - 1

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Component ids and r of item i's non-zero site entries."""
        a, b = self.indptr[i], self.indptr[i + 1]
        return self.uids[a:b], self.r[a:b]

    def matrix(self, uids: np.ndarray) -> np.ndarray:
        """The sites as a dense (n, K) matrix over the components ``uids`` (every stored id must
        be among them)."""
        pos = {int(u): j for j, u in enumerate(uids)}
        cols = np.array([pos[int(u)] for u in self.uids], dtype=np.int64)
        rows = np.repeat(np.arange(self.n), np.diff(self.indptr))
        Q = np.zeros((self.n, len(uids)))
        np.add.at(Q, (rows, cols), self.r)
        return Q

    @classmethod
    def from_matrix(cls, Q: np.ndarray, uids: np.ndarray, summary: Summary) -> Sites:
        """Sites from a dense (n, K) matrix over components ``uids`` (entries < TINY dropped)."""
        M = sp.csr_matrix(np.where(Q < TINY, 0.0, Q))
        M.eliminate_zeros()
        return cls(M.indptr.astype(np.int64), np.asarray(uids, np.int64)[M.indices],
                   M.data.astype(float), summary)

    def replay(self, move: Delete | Pool) -> Sites:
        """These sites after a driver move: a deleted component's entries leave; a pooled
        component's entries join its partner's (summed within each item)."""
        summary = move.apply(self.summary)
        if isinstance(move, Delete):
            keep = self.uids != move.uid
            rows = np.repeat(np.arange(self.n), np.diff(self.indptr))
            counts = np.bincount(rows[keep], minlength=self.n)
            indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            return Sites(indptr, self.uids[keep], self.r[keep], summary)
        uids = np.where(self.uids == move.b, move.a, self.uids)
        return Sites.from_matrix(self._with(uids).matrix(summary.uids), summary.uids, summary)

    def named(self, first: int) -> Sites:
        """These sites with the placeholder ids −1, −2, ... of clusters created in a sweep
        replaced by first, first + 1, ... (the ids the driver hands out, in creation order)."""
        def name(u: np.ndarray) -> np.ndarray:
            return np.where(u < 0, first - 1 - u, u)
        s = self.summary
        summary = Summary(name(s.uids), s.N, s.stats, s.H, s.n_items)
        return Sites(self.indptr, name(self.uids), self.r, summary)

    def _with(self, uids: np.ndarray) -> Sites:
        return Sites(self.indptr, uids, self.r, self.summary)

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {"indptr": self.indptr, "site_uids": self.uids, "r": self.r}
        arrays.update({f"sum/{k}": v for k, v in self.summary.to_arrays().items()})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Sites:
        summary = Summary.from_arrays({k.removeprefix("sum/"): v for k, v in arrays.items()
                                       if k.startswith("sum/")})
        return cls(np.asarray(arrays["indptr"], np.int64), np.asarray(arrays["site_uids"],
                   np.int64), np.asarray(arrays["r"], float), summary)


@dataclass(frozen=True)
class OnSites:
    """A driver move logged for stored Sites (the StateStore replays it on read)."""

    move: Delete | Pool

    def apply(self, sites: Sites) -> Sites:
        return sites.replay(self.move)


@dataclass
class SweepResult:
    """A partition pass: the partition's new sites (clusters created here carry the ids −1,
    −2, ... in creation order until the driver names them), how many were created, the last
    v*, and the Σ over items of the one-step-ahead predictive log density (ADF) or the cavity
    predictive log density (EP)."""

    sites: Sites
    created: int
    v: float
    loglik: float


def ep_step(cl: Clusters, x: Data, old: np.ndarray, m: float, eps: float, uid: int
            ) -> tuple[np.ndarray, float, np.ndarray]:
    """One EP update of item x whose site over the current clusters is ``old``: cavity, local
    update with Û at m = N − 1 (a created cluster, id ``uid``, is appended), restore. Returns
    the new site over the clusters after the step, the cavity predictive log density, and the
    mask of the clusters that survive (S_k ≥ ε); the caller drops the others."""
    cl.take(x, old)
    q, loglik = cl.responsibilities(x, m, eps, uid)
    cl.add(x, q)
    return q, loglik, eps <= cl.S


def sweep(X: Data, obs: ObsModel, prior: NRM, eps: float, total: Summary,
          old: Sites | None, m: int, v: float) -> SweepResult:
    """One pass over a partition's items in order against the global ``total``: ADF when
    ``old`` is None (items m+1, m+2, ... absorbed), else EP over the partition's stored sites
    (whose sum ``total`` includes) with Û at m = N − 1."""
    check_epsilon(eps, prior)
    cl = Clusters.from_summary(obs, prior, total, v)
    n, created, loglik = X.shape[0], 0, 0.0
    rows: list[tuple[np.ndarray, np.ndarray]] = []
    for i in range(n):
        x = X[i:i + 1]
        if old is None:
            q, ll = adf_step(cl, x, m + i, eps, -(created + 1))
        else:
            ids, r = old.row(i)
            pos = {int(u): j for j, u in enumerate(cl.uids)}
            site = np.zeros(cl.K)
            for u, val in zip(ids.tolist(), r.tolist(), strict=True):
                if u in pos:
                    site[pos[u]] += val
            q, ll, keep = ep_step(cl, x, site, m - 1, eps, -(created + 1))
        if cl.uids[-1] == -(created + 1):
            created += 1
        loglik += 0.0 if math.isnan(ll) else ll
        rows.append((cl.uids[q > 0].copy(), q[q > 0]))
        if old is not None and not keep.all():
            cl.drop(keep)
    survivors = cl.uids
    Q = np.zeros((n, len(survivors)))
    pos = {int(u): j for j, u in enumerate(survivors)}
    for i, (ids, r) in enumerate(rows):
        for u, val in zip(ids.tolist(), r.tolist(), strict=True):
            if u in pos:
                Q[i, pos[u]] = val
    Q = np.where(Q < TINY, 0.0, Q)
    summary = Summary(survivors.copy(), Q.sum(0), obs.stats(X, Q), np.zeros(len(survivors)),
                      n_items=n)
    return SweepResult(Sites.from_matrix(Q, survivors, summary), created, cl.v, loglik)
