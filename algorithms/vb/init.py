"""Initial global parameters: K components seeded k-means++-style from a data sample."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..obs.base import Data, ObsModel
from ..summary import Summary
from .local import summarize


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


def seeded_summary(X: Data, obs: ObsModel, K: int, uids: np.ndarray,
                   rng: np.random.Generator) -> Summary:
    """Summary of the sample X hard-assigned to the nearest of K k-means++ seeds (in the
    observation model's feature space)."""
    F = obs.features(X)
    seeds = kmeanspp(F, K, rng)
    C = F[seeds].toarray() if sp.issparse(F) else F[seeds]
    d2 = sq_distances(F, C)
    R = np.zeros((X.shape[0], len(seeds)))
    R[np.arange(X.shape[0]), d2.argmin(1)] = 1.0
    return summarize(X, obs, R, None, uids[: len(seeds)])
