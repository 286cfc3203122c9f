"""The tied Gaussians' local step as products with the items' centred block (Eq. 9 fused with
Eq. 7): TiedItems keeps the items' mean and, after the first step, their centred scatter, so a
birth's repeated steps skip the O(N D²) product; estep turns the log-weights a_k·(x - c) + b_k
into R, N, Σ r (x - c) and H block by block; sq_distances, |U (x - c_k)|² for E_loglik and the
draws' log density (docs/theory/dense.rst)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from . import wishart as W
from .base import Data


class TiedItems:
    """Items X (n, D) as the tied local step reads them: X, its mean c (the centre that keeps
    the expanded distances accurate) and, once a step has computed it, the centred scatter
    Σ_n (x_n - c)(x_n - c)ᵀ, which no later step on the same items recomputes (a birth's
    fresh VB, ObsModel.repeated)."""

    def __init__(self, X: Data) -> None:
        self.X = np.asarray(X, dtype=float)
        n, D = self.X.shape
        self.center = self.X.mean(axis=0) if n else np.zeros(D)
        self.scatter: np.ndarray | None = None

    def blocks(self, block: int) -> Iterator[tuple[slice, np.ndarray]]:
        """(rows, x - c for those rows) for runs of ``block`` items; the array is reused."""
        n, D = self.X.shape
        buf = np.empty((min(block, n), D))
        for s in range(0, n, block):
            m = min(block, n - s)
            yield slice(s, s + m), np.subtract(self.X[s:s + m], self.center, out=buf[:m])


ESTEP_BYTES = 2**24  # the most of one block's temporaries (x - c and the K x m log-weights)


def estep(F: TiedItems, A: np.ndarray, b: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """R, N, Σ_n r_n (x_n - c) (K, D) and H for log-weights L_nk = a_k·(x_n - c) + b_k, block by
    block: two products with each block's centred items (L and the statistics) and the
    softmax (wishart.softmax_columns); the centred scatter is accumulated on the first pass
    over F (one more product per block) and kept on F. R is returned column-major."""
    n, D = F.X.shape
    K = len(b)
    RT, Sx, H = np.empty((K, n)), np.zeros((K, D)), np.zeros(K)
    T = np.zeros((D, D)) if F.scatter is None else None
    block = max(64, ESTEP_BYTES // (8 * (D + K)))
    L, t = np.empty((K, min(block, n))), np.empty(min(block, n))
    for rows, Y in F.blocks(block):
        m = len(Y)
        if K:
            R = RT[:, rows]
            np.matmul(A, Y.T, out=L[:, :m])
            L[:, :m] += b[:, None]
            H += W.softmax_columns(L[:, :m], R, t[:m])
            Sx += R @ Y
        if T is not None:
            T += Y.T @ Y  # numpy's matmul runs AᵀA as one BLAS syrk
    if T is not None:
        F.scatter = T
    return RT.T, RT.sum(axis=1), Sx, H


def sq_distances(X: np.ndarray, U: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """|U (x_n - c_k)|² for all n, k: one product with U for the items and one for the
    centres, both taken about the items' mean o (so the expansion |y|² - 2 y·z + |z|² keeps
    its digits), clipped at 0: (n, K)."""
    o = X.mean(axis=0) if len(X) else np.zeros(X.shape[1])
    Y = (X - o) @ U.T
    Z = (centers - o) @ U.T
    d2 = (Y * Y).sum(1)[:, None] - 2.0 * (Y @ Z.T) + (Z * Z).sum(1)[None, :]
    return np.maximum(d2, 0.0)
