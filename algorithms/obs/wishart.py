"""Wishart identities shared by the Gaussian models, in terms of B = W⁻¹ and its Cholesky factor.

Λ ~ Wishart(ν, W) with B = W⁻¹: log Z(ν, B) = νD/2 log 2 + log Γ_D(ν/2) - ν/2 log|B|
(supplement Eq. 8); E[Λ] = ν B⁻¹ and E[log|Λ|] = ψ_D(ν/2) + D log 2 - log|B| (Eq. 20).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg.blas import dtrsv
from scipy.special import digamma, gammaln

from .base import log_gamma_draw

LOG2PI = np.log(2 * np.pi)
EPS = np.finfo(float).eps


def logdet_from_chol(L: np.ndarray) -> np.ndarray:
    """log|B| from B's Cholesky factors: 2 Σ log diag L."""
    return 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1)


def log_Z(nu: np.ndarray, logdet_B: np.ndarray, D: int) -> np.ndarray:
    """Log normaliser of Wishart(ν, B⁻¹)."""
    nu = np.asarray(nu, dtype=float)
    return 0.5 * nu * D * np.log(2.0) + _multigammaln(0.5 * nu, D) - 0.5 * nu * logdet_B


def E_logdet(nu: np.ndarray, logdet_B: np.ndarray, D: int) -> np.ndarray:
    """E[log|Λ|] = ψ_D(ν/2) + D log 2 - log|B|."""
    nu = np.asarray(nu, dtype=float)
    psi = digamma(0.5 * (nu[..., None] - np.arange(D))).sum(-1)
    return psi + D * np.log(2.0) - logdet_B


def _multigammaln(a: np.ndarray, D: int) -> np.ndarray:
    """log Γ_D(a) = D(D-1)/4 log π + Σ_{d=1..D} log Γ(a + (1-d)/2), vectorised over a."""
    a = np.asarray(a, dtype=float)
    return 0.25 * D * (D - 1) * np.log(np.pi) + gammaln(a[..., None] - 0.5 * np.arange(D)).sum(-1)


def prior_factors(B0: Any, D: int) -> dict[str, np.ndarray]:
    """factorize() of a prior scale matrix, which must be a finite, symmetric, positive-definite
    D x D matrix (ValueError naming B0 otherwise)."""
    B = np.asarray(B0, dtype=float)
    if B.shape != (D, D) or not np.all(np.isfinite(B)) or not np.allclose(B, B.T):
        raise ValueError(f"B0 must be a finite symmetric {D} x {D} matrix")
    try:
        return factorize(B)
    except np.linalg.LinAlgError:
        raise ValueError("B0 must be positive definite") from None


def factorize(B: np.ndarray) -> dict[str, np.ndarray]:
    """B with its inverse Cholesky factors U_k = L_k⁻¹ (so B_k⁻¹ = U_kᵀ U_k) and log|B_k|.

    Quadratic forms and traces then become sums of squares and products with U. U comes from
    numpy's batched LAPACK: mixing in scipy.linalg's separate OpenBLAS thread pool made these
    small solves about 20x slower on 2 cores (measured), as the two pools' threads contend.
    """
    L = np.linalg.cholesky(B)
    return {"B": B, "U": np.linalg.inv(L), "logdet_B": logdet_from_chol(L)}


def trace_inv(U: np.ndarray, M: np.ndarray) -> np.ndarray:
    """tr(B_k⁻¹ M_k) = Σ_ij (U_k M_k)_ij (U_k)_ij for every k."""
    return np.einsum("kij,kij->k", U @ M, U)


def mahalanobis(X: np.ndarray, U: np.ndarray, centers: np.ndarray | None = None) -> np.ndarray:
    """(x_n - c_k)ᵀ B_k⁻¹ (x_n - c_k) = |U_k x_n - U_k c_k|² for all n, k.

    One matrix product [X 1] [U_1ᵀ ... U_Kᵀ; -(U_1 c_1)ᵀ ... -(U_K c_K)ᵀ] covers every item and
    component, centres included (batched BLAS, no loop over items); then squares are summed.
    """
    n, D = X.shape
    K = U.shape[0]
    W = U.transpose(2, 0, 1).reshape(D, K * D)
    if centers is None:
        Z = X @ W
    else:
        offsets = -np.einsum("kij,kj->ki", U, centers).reshape(1, K * D)
        Z = np.concatenate([X, np.ones((n, 1))], axis=1) @ np.concatenate([W, offsets])
    Z = Z.reshape(n, K, D)
    return np.einsum("nkd,nkd->nk", Z, Z)


def solve_lower(L: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Z with L_k z_nk = y_nk for lower-triangular L (K, D, D) and Y (n, K, D): O(D²) per pair.

    One level-2 BLAS dtrsv per item and component, on L_kᵀ (Fortran-ordered, so not copied).
    dtrsv runs on one thread of scipy's OpenBLAS (measured), so it does not contend with numpy's
    pool the way dtrsm with 100 right-hand sides did (17x slower next to numpy matmuls, D = 40,
    2 cores); a numpy forward substitution, vectorised over k, was 6x slower (D = 160, K = 25).
    """
    Z = np.array(Y, dtype=float, order="C")  # solved in place, one contiguous row at a time
    Lt = np.swapaxes(L, 1, 2)
    for Zn in Z:
        for k, z in enumerate(Zn):
            dtrsv(Lt[k], z, lower=0, trans=1, overwrite_x=1)
    return Z


def chol_rank1(L: np.ndarray, v: np.ndarray, sign: int) -> None:
    """Overwrite the lower Cholesky factor L (D, D) of B with that of B + sign · v vᵀ, in O(D²).

    With L p = v, B ± v vᵀ = L (I ± p pᵀ) Lᵀ, and I ± p pᵀ = M Mᵀ has a closed-form factor:
    q_j = 1 ± Σ_{i≤j} p_i², M_jj = √(q_j / q_{j-1}), M_rj = ±p_r p_j / √(q_j q_{j-1}) (r > j).
    So L' = L M column by column: L'_{:j} = M_jj L_{:j} ± p_j / √(q_j q_{j-1}) Σ_{r>j} p_r L_{:r},
    the classic column recurrence (Gill, Golub, Murray & Saunders 1974) as suffix sums over whole
    rows: no Python loop over columns (that loop measured 3-7x slower for D = 10..80, no more
    accurate). Rows stay exactly lower triangular and the diagonal positive. A downdate that
    leaves B not positive definite (q_D = 1 - |p|² ≤ D·eps) raises ValueError, L untouched.
    Per call, LAPACK's O(D³) Cholesky of a D x D matrix is still faster below D ≈ 300
    (measured, benchmarks/obs_one_item.py); this needs no B and wins beyond.
    """
    D = L.shape[0]
    p = dtrsv(L.T, v, lower=0, trans=1)
    q = np.cumsum(p * p)
    q = 1.0 + q if sign > 0 else 1.0 - q
    if not q[-1] > D * EPS:  # also catches NaN
        raise ValueError("the downdate would leave B not positive definite")
    q_prev = np.empty(D)
    q_prev[0] = 1.0
    q_prev[1:] = q[:-1]
    tail = np.empty_like(L)  # tail[:, j] = Σ_{r>j} p_r L[:, r]
    np.cumsum((L * p)[:, :0:-1], axis=1, out=tail[:, -2::-1])
    tail[:, -1] = 0.0
    tail *= (p if sign > 0 else -p) / np.sqrt(q * q_prev)
    L *= np.sqrt(q / q_prev)
    L += tail


def wishart_draw(nu: np.ndarray, U: np.ndarray, logdet_B: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Λ_k ~ Wishart(ν_k, B_k⁻¹) with B_k⁻¹ = U_kᵀ U_k, for all k at once, by Bartlett's
    decomposition: Λ = Uᵀ A Aᵀ U with A lower triangular, A_ii² ~ χ²(ν - i) (i = 0..D-1) and
    A_ij ~ N(0, 1) below the diagonal. Returns P = Aᵀ U (K, D, D), so that Λ = Pᵀ P and
    xᵀ Λ x = |P x|², and log|Λ| = Σ_i log A_ii² - log|B| (K,), the χ² drawn in log space."""
    nu = np.asarray(nu, dtype=float)
    K, D = U.shape[0], U.shape[-1]
    log_chi2 = np.log(2.0) + log_gamma_draw(0.5 * (nu[:, None] - np.arange(D)), rng)
    A = np.zeros((K, D, D))
    rows, cols = np.tril_indices(D, -1)
    A[:, rows, cols] = rng.standard_normal((K, len(rows)))
    diag = np.arange(D)
    A[:, diag, diag] = np.exp(0.5 * log_chi2)
    return np.swapaxes(A, -1, -2) @ U, log_chi2.sum(-1) - logdet_B


def expected_inverse(B: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """E[Λ⁻¹] = B / (ν - D - 1) for Λ ~ Wishart(ν, B⁻¹) (Λ⁻¹ is inverse-Wishart(ν, B)), per
    component (K, D, D); NaN where ν ≤ D + 1 (the mean is infinite)."""
    B, nu = np.asarray(B, dtype=float), np.asarray(nu, dtype=float)
    D = B.shape[-1]
    ok = nu > D + 1
    return np.where(ok[:, None, None], B / np.where(ok, nu - D - 1, 1.0)[:, None, None], np.nan)
