"""The sequential distance-dependent CRP's links and what a factorised q(c) expects of them
(Bartunov & Vetrov 2014; the mathematics as re-derived in issue 12, the paper's copy having lost
its equations).

Customers i = 0..N−1 in sequence order link to an earlier customer j with probability
f(d_ij)/Z_i or to themselves with α/Z_i, Z_i = α + Σ_{j<i} f(d_ij). A table is the set of
customers whose link paths end at the same self-linker j.

Under q(c) = Π_i q(c_i) with A_ij = q(c_i = j) for j < i, the matrix L = I − A is unit lower
triangular and R = L⁻¹ holds the path probabilities R_ij = P_q(i's path reaches j) (R_ii = 1):
the paths only go backwards, so R = Σ_n Aⁿ is a finite sum. Customer i sits at table j with
E z_ij = R_ij q(c_j = j), and Σ_j E z_ij = 1. Changing row i of A by δ (entries j < i) changes R
by the rank-one R[:, i] (δᵀ R) (Sherman-Morrison with denominator 1 − δᵀ R[:, i] = 1, since
R_ti = 0 for t < i).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.linalg import solve_triangular

DECAYS = ("none", "window", "exponential", "logistic")


def decay(kind: str, a: float = 1.0) -> Callable[[np.ndarray], np.ndarray]:
    """The decay f(d): none f ≡ 1 (the sequential CRP), window 1[d < a], exponential e^{−d/a},
    logistic e^{−d+a}/(1 + e^{−d+a})."""
    if kind == "none":
        return lambda d: np.ones_like(np.asarray(d, float))
    if not a > 0:
        raise ValueError(f"the {kind} decay's parameter a must be positive, not {a}")
    if kind == "window":
        return lambda d: (np.asarray(d, float) < a).astype(float)
    if kind == "exponential":
        return lambda d: np.exp(-np.asarray(d, float) / a)
    if kind == "logistic":
        return lambda d: 1.0 / (1.0 + np.exp(np.asarray(d, float) - a))
    raise ValueError(f"unknown decay {kind!r}: choose from {', '.join(DECAYS)}")


def log_link_prior(positions: np.ndarray, alpha: float,
                   f: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """log p(c_i = j) as an N × N lower-triangular matrix (−inf above the diagonal): f(d_ij)/Z_i
    for j < i with d_ij = positions_i − positions_j, α/Z_i on the diagonal."""
    x = np.asarray(positions, float)
    N = len(x)
    below = np.tril(np.ones((N, N), bool), -1)
    w = np.where(below, f(x[:, None] - x[None, :]), 0.0)
    w[np.diag_indices(N)] = alpha
    with np.errstate(divide="ignore"):
        return np.log(w) - np.log(w.sum(1, keepdims=True))


def reach(A: np.ndarray) -> np.ndarray:
    """R = (I − A)⁻¹ for a strictly lower-triangular A: path probabilities, by one triangular
    solve (O(N³); ``update_row`` keeps it current after a row changes)."""
    N = len(A)
    return solve_triangular(np.eye(N) - A, np.eye(N), lower=True, unit_diagonal=True)


def update_row(R: np.ndarray, i: int, delta: np.ndarray) -> None:
    """R ← R + R[:, i] (δᵀ R) in place after row i of A changed by δ (entries j < i; the others
    zero): O(N·i), since only R's rows t >= i have R_ti ≠ 0 and δᵀ R is zero beyond column i−1."""
    col = R[i:, i].copy()
    R[i:, :i] += np.outer(col, delta[:i] @ R[:i, :i])


def tables(R: np.ndarray, q_self: np.ndarray) -> np.ndarray:
    """E z_ij = R_ij q(c_j = j): the responsibilities of the N possible tables (rows sum to 1)."""
    return R * q_self[None, :]
