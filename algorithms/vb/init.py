"""Initial global parameters and birth proposals: hard partitions of a data sample (k-means++
seeds, 2-means in the sample's own whitened space, a cut along its top principal direction),
turned into summaries."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..obs.base import Data, ObsModel
from ..summary import Summary
from .local import summarize

LLOYD_ITER = 20  # Lloyd iterations of a birth's 2-means proposal
POWER_ITER = 30  # power iterations for the top principal direction
RANK_TOL = 1e-9  # eigenvalues below this fraction of the largest are not whitened


def sq_distances(F: Data, C: np.ndarray) -> np.ndarray:
    """|f_n - c_m|² for rows of F (dense or CSR) and dense centres C: |f|² - 2 f·c + |c|²."""
    f2 = np.asarray(F.multiply(F).sum(1)).ravel() if sp.issparse(F) else (F**2).sum(1)
    cross = np.asarray(F @ C.T)
    return np.maximum(f2[:, None] - 2.0 * cross + (C**2).sum(1)[None, :], 0.0)


def _row(F: Data, i: int) -> np.ndarray:
    return F[i].toarray() if sp.issparse(F) else F[i][None, :]


def kmeanspp(F: Data, K: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of K seeds: the first uniform, each next with probability ∝ squared distance to
    the nearest seed so far (Arthur & Vassilvitskii 2007)."""
    n = F.shape[0]
    seeds = [int(rng.integers(n))]
    d2 = sq_distances(F, _row(F, seeds[0]))[:, 0]
    for _ in range(1, min(K, n)):
        total = d2.sum()
        nxt = int(rng.choice(n, p=d2 / total)) if total > 0 else int(rng.integers(n))
        seeds.append(nxt)
        d2 = np.minimum(d2, sq_distances(F, _row(F, nxt))[:, 0])
    return np.array(seeds)


def _dense_rows(F: Data, idx: np.ndarray) -> np.ndarray:
    return F[idx].toarray() if sp.issparse(F) else F[idx]


def nearest_seed(F: Data, K: int, rng: np.random.Generator) -> np.ndarray:
    """Each row's nearest of K k-means++ seeds (labels 0..K-1)."""
    return sq_distances(F, _dense_rows(F, kmeanspp(F, K, rng))).argmin(1)


def two_means(F: Data, rng: np.random.Generator, iters: int = LLOYD_ITER) -> np.ndarray:
    """2-means (Lloyd's iterations from two k-means++ seeds): labels 0/1 of the rows of F."""
    labels = nearest_seed(F, 2, rng)
    for _ in range(iters):
        if np.bincount(labels, minlength=2).min() == 0:
            break
        C = np.stack([np.asarray(F[labels == k].mean(0)).ravel() for k in range(2)])
        new = sq_distances(F, C).argmin(1)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels


def whitened(F: Data) -> Data:
    """Dense rows whitened by their own covariance, (f - f̄) V Λ^{-1/2} over the eigenpairs
    (Λ, V) of the sample covariance above RANK_TOL of the largest: a split of a sample into
    clusters shows as a direction of bimodality whatever the clusters' common shape. Sparse rows
    (bag-of-words) are returned as they are: their covariance is V x V."""
    if sp.issparse(F):
        return F
    Fc = F - F.mean(0)
    lam, V = np.linalg.eigh(Fc.T @ Fc / max(len(F) - 1, 1))
    keep = lam > RANK_TOL * max(lam[-1], 0.0)
    if not keep.any():
        return Fc
    return Fc @ (V[:, keep] / np.sqrt(lam[keep]))


def top_direction(F: Data, rng: np.random.Generator, iters: int = POWER_ITER) -> np.ndarray:
    """The leading eigenvector of the rows' covariance, by power iteration on (F - 1 f̄ᵀ) with
    the centring kept implicit (F may be sparse)."""
    mean = np.asarray(F.mean(0)).ravel()
    v = rng.standard_normal(F.shape[1])
    for _ in range(iters):
        u = np.asarray(F @ v).ravel() - mean @ v
        w = np.asarray(F.T @ u).ravel() - mean * u.sum()
        norm = np.linalg.norm(w)
        if norm == 0:
            break
        v = w / norm
    return v


def principal_split(F: Data, rng: np.random.Generator) -> np.ndarray:
    """Labels 0/1: the side of the mean on which each row falls along the top principal
    direction."""
    v = top_direction(F, rng)
    proj = np.asarray(F @ v).ravel()
    return (proj > proj.mean()).astype(np.int64)


def hard_summary(X: Data, obs: ObsModel, labels: np.ndarray, uids: np.ndarray) -> Summary:
    """Summary of X with every item wholly in the component of its label (a position in
    ``uids``)."""
    R = np.zeros((X.shape[0], len(uids)))
    R[np.arange(X.shape[0]), labels] = 1.0
    return summarize(X, obs, R, None, uids)


def seeded_summary(X: Data, obs: ObsModel, K: int, uids: np.ndarray,
                   rng: np.random.Generator) -> Summary:
    """Summary of the sample X hard-assigned to the nearest of K k-means++ seeds (in the
    observation model's feature space)."""
    F = obs.features(X)
    return hard_summary(X, obs, nearest_seed(F, K, rng), uids[: min(K, X.shape[0])])
