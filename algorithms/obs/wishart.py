"""Wishart identities shared by the Gaussian models, in terms of B = W⁻¹ and its Cholesky factor.

Λ ~ Wishart(ν, W) with B = W⁻¹: log Z(ν, B) = νD/2 log 2 + log Γ_D(ν/2) - ν/2 log|B|
(supplement Eq. 8); E[Λ] = ν B⁻¹ and E[log|Λ|] = ψ_D(ν/2) + D log 2 - log|B| (Eq. 20).
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

LOG2PI = np.log(2 * np.pi)


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
