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

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .adf import TINY, Clusters, adf_step_at, check_epsilon, prepare
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

    def csr(self, uids: np.ndarray) -> sp.csr_matrix:
        """The sites as a sparse (n, K) matrix over the components ``uids`` (every stored id
        among them)."""
        order = np.argsort(uids, kind="stable")
        cols = order[np.searchsorted(uids[order], self.uids)]
        return sp.csr_matrix((self.r, cols, self.indptr), shape=(self.n, len(uids)))

    def blend(self, new: Sites, eta: float) -> Sites:
        """Damped EP: (1 − η) these sites + η ``new``, item by item, with the same blend of their
        sums (so the sum stays exact); components are these sites' then ``new``'s others."""
        old_ids = self.summary.uids
        uids = np.concatenate([old_ids, new.summary.uids[~np.isin(new.summary.uids, old_ids)]])
        M = ((1 - eta) * self.csr(uids) + eta * new.csr(uids)).tocsr()
        M.sort_indices()
        summary = self.summary.over(uids).scaled(1 - eta) + new.summary.over(uids).scaled(eta)
        return Sites(M.indptr.astype(np.int64), uids[M.indices], M.data.astype(float), summary)

    def replay(self, move: Delete | Pool) -> Sites:
        """These sites after a driver move: a deleted component's entries leave; a pooled
        component's entries join its partner's (summed within each item). A partition swept
        before either pooled cluster existed holds zero sums for it."""
        if isinstance(move, Delete):
            summary = move.apply(self.summary)
            keep = self.uids != move.uid
            rows = np.repeat(np.arange(self.n), np.diff(self.indptr))
            counts = np.bincount(rows[keep], minlength=self.n)
            indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            return Sites(indptr, self.uids[keep], self.r[keep], summary)
        ids = self.summary.uids
        summary = move.apply(self.summary.over(np.concatenate(
            [ids, np.setdiff1d([move.a, move.b], ids)])))
        uids = np.where(self.uids == move.b, move.a, self.uids)
        return Sites.from_matrix(self._with(uids).matrix(summary.uids), summary.uids, summary)

    def named(self, first: int) -> Sites:
        """These sites with the placeholder ids −1, −2, ... of clusters created in a sweep
        replaced by first, first + 1, ... (the ids the driver hands out, in creation order)."""
        def name(u: np.ndarray) -> np.ndarray:
            return np.where(u < 0, first - 1 - u, u)
        s = self.summary
        summary = Summary(name(s.uids), s.N, s.stats, s.H, s.n_items, shared=s.shared)
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
    predictive log density (EP: each item's leave-one-out predictive at the current fit), both
    with the NRM weights normalised and the new cluster's term, as held-out items are scored."""

    sites: Sites
    created: int
    v: float
    loglik: float
    logP: np.ndarray | None = None  # ADF with the exact E[K']: log P_k over the sites' clusters
    # ADF: (items absorbed, K, Σ log density so far) at up to PATH_POINTS evenly spaced items of
    # the partition, the last included (how the pass went item by item; None for EP)
    path: np.ndarray | None = None


PATH_POINTS = 32


def path_points(n: int) -> np.ndarray:
    """The items (1-based counts) after which a sweep of n items records its path."""
    return np.unique(np.linspace(1, n, min(n, PATH_POINTS)).round().astype(np.int64))


def ep_step(cl: Clusters, x: Data, old: np.ndarray, m: float, eps: float, uid: int
            ) -> tuple[np.ndarray, float, np.ndarray]:
    """One EP update of item x whose site over the current clusters is ``old``: cavity, local
    update with Û at m = N − 1 (a created cluster, id ``uid``, is appended), restore. Returns
    the new site over the clusters after the step, the cavity predictive log density, and the
    mask of the clusters that survive (S_k ≥ ε); the caller drops the others."""
    with np.errstate(divide="ignore"):
        return ep_step_at(cl, prepare(cl.obs, x), 0, old, m, eps, uid)


def ep_step_at(cl: Clusters, items: Any, i: int, old: np.ndarray, m: float, eps: float,
               uid: int, new: float | None = None) -> tuple[np.ndarray, float, np.ndarray]:
    """ep_step for item i of prepared ``items`` (``new``: its log density under the prior;
    the caller silences numpy's divide warning, see Clusters.responsibilities_at)."""
    cl.take_at(items, i, old)
    q, loglik = cl.responsibilities_at(items, i, m, eps, uid, new)
    cl.add_at(items, i, q)
    return q, loglik, eps <= cl.S


class _Columns:
    """Where each stored site entry of a partition sits among the current clusters, kept up to
    date as clusters are dropped (created ones are appended and stored sites never name them):
    the columns of the sweep's first clusters, mapped through every drop since."""

    def __init__(self, first: np.ndarray, stored: np.ndarray) -> None:
        order = np.argsort(first, kind="stable")
        at = np.minimum(np.searchsorted(first[order], stored), max(len(first) - 1, 0))
        found = (first[order][at] == stored) if len(first) else np.zeros(len(stored), bool)
        self.entry = np.where(found, order[at] if len(first) else -1, -1)  # -1: not a cluster
        self.now = np.arange(len(first))  # first cluster j is now column now[j], or -1

    def drop(self, keep: np.ndarray) -> None:
        alive = self.now >= 0
        col = np.cumsum(keep) - 1
        self.now[alive] = np.where(keep[self.now[alive]], col[self.now[alive]], -1)

    def site(self, sites: Sites, i: int, K: int) -> np.ndarray:
        """Item i's stored site as a dense vector over the K current clusters."""
        a, b = sites.indptr[i], sites.indptr[i + 1]
        site = np.zeros(K)
        first = self.entry[a:b]
        known = first >= 0
        cols = self.now[first[known]]
        alive = cols >= 0
        site[cols[alive]] = sites.r[a:b][known][alive]  # a row names each component once
        return site


def sweep(X: Data, obs: ObsModel, prior: NRM, eps: float, total: Summary,
          old: Sites | None, m: int, v: float, logP: np.ndarray | None = None) -> SweepResult:
    """One pass over a partition's items in order against the global ``total``: ADF when
    ``old`` is None (items m+1, m+2, ... absorbed), else EP over the partition's stored sites
    (whose sum ``total`` includes) with Û at m = N − 1. The items are prepared once (``prepare``)
    and their log densities under the prior computed together."""
    check_epsilon(eps, prior)
    cl = Clusters.from_summary(obs, prior, total, v, logP)
    items = prepare(obs, X)
    new = cl.new_logliks(items)
    columns = None if old is None else _Columns(cl.uids, old.uids)
    n, created, loglik = items.n, 0, 0.0
    qs: list[np.ndarray] = []  # ADF: q over the first len(q) clusters (no cluster moves)
    ids: list[np.ndarray] = []  # EP: the ids and values of q's non-zero entries
    rs: list[np.ndarray] = []
    marks = path_points(n) if columns is None else np.zeros(0, np.int64)
    path, mark = np.zeros((len(marks), 3)), 0
    with np.errstate(divide="ignore"):
        for i in range(n):
            new_i = None if new is None else new[i]
            if columns is None:
                q, ll = adf_step_at(cl, items, i, m + i, eps, -(created + 1), new_i)
                qs.append(q)
            else:
                site = columns.site(old, i, cl.K)
                q, ll, keep = ep_step_at(cl, items, i, site, m - 1, eps, -(created + 1), new_i)
                nz = q > 0
                ids.append(cl.uids[nz])
                rs.append(q[nz])
                if not keep.all():
                    cl.drop(keep)
                    columns.drop(keep)
            if cl.uids[-1] == -(created + 1):
                created += 1
            loglik += ll
            if mark < len(marks) and marks[mark] == i + 1:
                path[mark] = (i + 1, cl.K, loglik)
                mark += 1
    survivors = cl.uids
    Q = np.zeros((n, len(survivors)))
    if n and columns is None:
        lens = np.fromiter((len(q) for q in qs), np.int64, n)
        row = np.repeat(np.arange(n), lens)
        col = np.arange(len(row)) - np.repeat(np.cumsum(lens) - lens, lens)
        Q[row, col] = np.concatenate(qs)
    elif n:
        counts = np.fromiter((len(u) for u in ids), np.int64, n)
        u, r = np.concatenate(ids), np.concatenate(rs)
        row = np.repeat(np.arange(n), counts)
        order = np.argsort(survivors, kind="stable")
        at = np.minimum(np.searchsorted(survivors[order], u), max(len(survivors) - 1, 0))
        hit = (survivors[order][at] == u) if len(survivors) else np.zeros(len(u), bool)
        Q[row[hit], order[at[hit]]] = r[hit]
    Q = np.where(Q < TINY, 0.0, Q)
    stats, shared = obs.split_stats(obs.stats(X, Q))
    summary = Summary(survivors.copy(), Q.sum(0), stats, np.zeros(len(survivors)), n_items=n,
                      shared=shared)
    return SweepResult(Sites.from_matrix(Q, survivors, summary), created, cl.v, loglik, cl.logP,
                       path if columns is None else None)
