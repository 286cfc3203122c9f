"""Initial global parameters: K components seeded k-means++-style from a data sample."""

from __future__ import annotations

import numpy as np

from .local import summarize
from .obs.base import Data, ObsModel
from .summary import Summary


def kmeanspp(F: np.ndarray, K: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of K seeds: the first uniform, each next with probability ∝ squared distance to
    the nearest seed so far (Arthur & Vassilvitskii 2007)."""
    n = len(F)
    seeds = [int(rng.integers(n))]
    d2 = ((F - F[seeds[0]]) ** 2).sum(1)
    for _ in range(1, min(K, n)):
        total = d2.sum()
        nxt = int(rng.choice(n, p=d2 / total)) if total > 0 else int(rng.integers(n))
        seeds.append(nxt)
        d2 = np.minimum(d2, ((F - F[nxt]) ** 2).sum(1))
    return np.array(seeds)


def seeded_summary(X: Data, obs: ObsModel, K: int, uids: np.ndarray,
                   rng: np.random.Generator) -> Summary:
    """Summary of the sample X hard-assigned to the nearest of K k-means++ seeds (in the
    observation model's feature space)."""
    F = obs.features(X)
    seeds = kmeanspp(F, K, rng)
    C = F[seeds]
    d2 = (F**2).sum(1)[:, None] - 2.0 * F @ C.T + (C**2).sum(1)[None, :]
    R = np.zeros((X.shape[0], len(seeds)))
    R[np.arange(X.shape[0]), d2.argmin(1)] = 1.0
    return summarize(X, obs, R, None, uids[: len(seeds)])
