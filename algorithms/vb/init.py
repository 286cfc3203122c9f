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
LLOYD_STARTS = 4  # its starts from new seeds
AXES = 16  # principal directions a birth's target is whitened on
POWER_ITER = 1  # subspace iterations finding them
AXES_SAMPLE = 1000  # rows they are estimated from
RANK_TOL = 1e-9  # variances below this fraction of the largest are dropped


def sq_norms(F: Data) -> np.ndarray:
    """|f_n|² for the rows of F (dense or CSR)."""
    return np.asarray(F.multiply(F).sum(1)).ravel() if sp.issparse(F) else (F**2).sum(1)


def sq_distances(F: Data, C: np.ndarray, f2: np.ndarray | None = None) -> np.ndarray:
    """|f_n - c_m|² for rows of F (dense or CSR) and dense centres C: |f|² - 2 f·c + |c|²
    (``f2``: F's sq_norms, when the caller keeps them for many calls)."""
    f2 = sq_norms(F) if f2 is None else f2
    cross = np.asarray(F @ C.T)
    return np.maximum(f2[:, None] - 2.0 * cross + (C**2).sum(1)[None, :], 0.0)


def _row(F: Data, i: int) -> np.ndarray:
    """Row i of F as a dense (1, d) array (of a canonical CSR matrix, from its stored
    entries)."""
    if not sp.issparse(F):
        return F[i][None, :]
    if not (sp.isspmatrix_csr(F) and F.has_canonical_format):
        return F[i].toarray()
    row = np.zeros((1, F.shape[1]))
    a, b = F.indptr[i], F.indptr[i + 1]
    row[0, F.indices[a:b]] = F.data[a:b]
    return row


def kmeanspp(F: Data, K: int, rng: np.random.Generator,
             f2: np.ndarray | None = None) -> np.ndarray:
    """Indices of K seeds: the first uniform, each next with probability ∝ squared distance to
    the nearest seed so far (Arthur & Vassilvitskii 2007). ``f2``: F's sq_norms, if known."""
    n = F.shape[0]
    f2 = sq_norms(F) if f2 is None else f2
    seeds = [int(rng.integers(n))]
    d2 = sq_distances(F, _row(F, seeds[0]), f2)[:, 0]
    for _ in range(1, min(K, n)):
        total = d2.sum()
        nxt = int(rng.choice(n, p=d2 / total)) if total > 0 else int(rng.integers(n))
        seeds.append(nxt)
        d2 = np.minimum(d2, sq_distances(F, _row(F, nxt), f2)[:, 0])
    return np.array(seeds)


def _dense_rows(F: Data, idx: np.ndarray) -> np.ndarray:
    return F[idx].toarray() if sp.issparse(F) else F[idx]


def nearest_seed(F: Data, K: int, rng: np.random.Generator,
                 f2: np.ndarray | None = None) -> np.ndarray:
    """Each row's nearest of K k-means++ seeds (labels 0..K-1). ``f2``: F's sq_norms, if
    known."""
    f2 = sq_norms(F) if f2 is None else f2
    return sq_distances(F, _dense_rows(F, kmeanspp(F, K, rng, f2)), f2).argmin(1)


def _centres(F: Data, labels: np.ndarray, K: int) -> np.ndarray:
    """Each label's mean row (zeros for an empty label)."""
    return np.stack([np.asarray(F[labels == k].mean(0)).ravel() if (labels == k).any()
                     else np.zeros(F.shape[1]) for k in range(K)])


def two_means(F: Data, rng: np.random.Generator, iters: int = LLOYD_ITER,
              starts: int = LLOYD_STARTS) -> np.ndarray:
    """2-means: Lloyd's iterations from two k-means++ seeds, ``starts`` times; the labels 0/1 of
    the rows of F with the least within-cluster sum of squares (a cut along a unimodal
    direction is a fixed point of Lloyd's iterations too)."""
    best, best_ss = None, np.inf
    f2 = sq_norms(F)
    for _ in range(starts):
        labels = nearest_seed(F, 2, rng, f2)
        for _ in range(iters):
            new = sq_distances(F, _centres(F, labels, 2), f2).argmin(1)
            if np.array_equal(new, labels):
                break
            labels = new
        ss = sq_distances(F, _centres(F, labels, 2), f2)[np.arange(len(labels)), labels].sum()
        if ss < best_ss:
            best, best_ss = labels, ss
    return best


def orthonormal(Y: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the column space of Y (d, r), r small: Y U G^{-1/2} from the
    eigenpairs (G, U) of the Gram matrix YᵀY, done twice so that rounding leaves QᵀQ = I (the
    idea of CholQR2); directions with G ≤ RANK_TOL G_max are dropped. Only r x r matrices go to
    LAPACK: a QR of the tall Y took 0.1 s (2,000 x 16) on a loaded two-core machine, where
    multithreaded LAPACK waits for a descheduled thread."""
    for _ in range(2):
        gram, U = np.linalg.eigh(Y.T @ Y)
        if not len(gram) or gram[-1] <= 0:
            return Y[:, :0]
        keep = gram > RANK_TOL * gram[-1]
        Y = Y @ (U[:, keep] / np.sqrt(gram[keep]))
    return Y


def principal_axes(F: Data, rng: np.random.Generator, rank: int = AXES,
                   iters: int = POWER_ITER, sample: int = AXES_SAMPLE
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The rows' coordinates on the top ``rank`` principal directions of their covariance C,
    Z = (F - 1 f̄ᵀ) V (n, r), and the variances λ along them (descending). f̄, V and λ come from
    at most ``sample`` rows drawn without replacement (all rows when there are fewer), by
    randomised subspace iteration (Halko, Martinsson & Tropp 2011, Alg. 4.4 and 5.1: Q spans
    C^(1+iters) Ω, then the eigenpairs of Qᵀ C Q) with the centring kept implicit, so F may be
    sparse: exact when rank covers F's dimension and the sample is all rows. Directions with
    λ ≤ RANK_TOL λ_max are dropped."""
    n, d = F.shape
    rows = np.sort(rng.choice(n, size=sample, replace=False)) if n > sample else np.arange(n)
    S = F[rows] if n > sample else F
    mean = np.asarray(S.mean(0)).ravel()

    def times(M: np.ndarray, A: Data = S) -> np.ndarray:  # (A - 1 f̄ᵀ) M
        return np.asarray(A @ M) - mean @ M

    def cov_times(M: np.ndarray) -> np.ndarray:  # (S - 1 f̄ᵀ)ᵀ (S - 1 f̄ᵀ) M
        T = times(M)
        return np.asarray(S.T @ T) - np.outer(mean, T.sum(0))

    Q = orthonormal(cov_times(rng.standard_normal((d, max(1, min(rank, d, len(rows)))))))
    for _ in range(iters):
        Q = orthonormal(cov_times(Q))
    T = times(Q)
    lam, U = np.linalg.eigh(T.T @ T / max(len(rows) - 1, 1))
    lam, U = lam[::-1], U[:, ::-1]
    keep = lam > RANK_TOL * lam[0] if len(lam) and lam[0] > 0 else np.zeros(len(lam), bool)
    return times(Q @ U[:, keep], F), lam[keep]


def proposal_splits(F: Data, rng: np.random.Generator) -> list[np.ndarray]:
    """Two 2-way partitions of the rows of F from their principal axes: 2-means in the rows' own
    whitened space Z Λ^{-1/2} (there a split into clusters is a direction of bimodality whatever
    their shared long axes, and k-means's sum of squares falls most along it), and the sides of
    the mean along the top principal direction."""
    Z, lam = principal_axes(F, rng)
    if not len(lam):  # identical rows
        return [np.zeros(F.shape[0], dtype=np.int64)] * 2
    return [two_means(Z / np.sqrt(lam), rng), (Z[:, 0] > 0).astype(np.int64)]


def hard_summary(X: Data, obs: ObsModel, labels: np.ndarray, uids: np.ndarray,
                 dense: bool = False) -> Summary:
    """Summary of X with every item wholly in the component of its label (a position in
    ``uids``); ``dense``: as ``summarize``."""
    R = np.zeros((X.shape[0], len(uids)))
    R[np.arange(X.shape[0]), labels] = 1.0
    return summarize(X, obs, R, None, uids, dense=dense)


def seeded_summary(X: Data, obs: ObsModel, K: int, uids: np.ndarray,
                   rng: np.random.Generator) -> Summary:
    """Summary of the sample X hard-assigned to the nearest of K k-means++ seeds (in the
    observation model's feature space)."""
    F = obs.features(X)
    return hard_summary(X, obs, nearest_seed(F, K, rng), uids[: min(K, X.shape[0])])
