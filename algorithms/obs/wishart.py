"""Wishart identities shared by the Gaussian models, in terms of B = W⁻¹ and its Cholesky factor.

Λ ~ Wishart(ν, W) with B = W⁻¹: log Z(ν, B) = νD/2 log 2 + log Γ_D(ν/2) - ν/2 log|B|
(supplement Eq. 8); E[Λ] = ν B⁻¹ and E[log|Λ|] = ψ_D(ν/2) + D log 2 - log|B| (Eq. 20).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from scipy.linalg.blas import dtrsv
from scipy.special import digamma, gammaln

from .base import Data, log_gamma_draw

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


def logdet(B: np.ndarray) -> np.ndarray:
    """log|B_k| alone, from the Cholesky factors (what an evidence needs: no inverse)."""
    return logdet_from_chol(np.linalg.cholesky(B))


def trace_inv(U: np.ndarray, M: np.ndarray) -> np.ndarray:
    """tr(B_k⁻¹ M_k) = Σ_ij (U_k M_k)_ij (U_k)_ij for every k."""
    return np.einsum("kij,kij->k", U @ M, U)


def mahalanobis(X: np.ndarray, U: np.ndarray, centers: np.ndarray | None = None) -> np.ndarray:
    """(x_n - c_k)ᵀ B_k⁻¹ (x_n - c_k) = |U_k x_n - U_k c_k|² for all n, k.

    One matrix product [X 1] [U_1ᵀ ... U_Kᵀ; -(U_1 c_1)ᵀ ... -(U_K c_K)ᵀ] covers every item and
    component, centres included (batched BLAS, no loop over items); then squares are summed.
    The product is n x K D: beyond MAHALANOBIS_BYTES it is taken that much at a time, over
    blocks of consecutive items (whole, it was 512 MiB for a 250,000 x 32 partition at K = 8,
    nine times the partition, in every assignment pass). Below, the one product as ever; a
    block's rows may differ from the whole product's in the last bit on some BLAS kernels.
    """
    n, D = X.shape
    K = U.shape[0]
    W = U.transpose(2, 0, 1).reshape(D, K * D)
    if centers is not None:
        W = np.concatenate([W, -np.einsum("kij,kj->ki", U, centers).reshape(1, K * D)])
    block = max(1, MAHALANOBIS_BYTES // max(1, 8 * K * D))
    if n <= block:
        return _mahalanobis_rows(X, W, K, D, centers is not None)
    out = np.empty((n, K))
    for s in range(0, n, block):
        out[s:s + block] = _mahalanobis_rows(X[s:s + block], W, K, D, centers is not None)
    return out


def _mahalanobis_rows(X: np.ndarray, W: np.ndarray, K: int, D: int, centred: bool) -> np.ndarray:
    n = X.shape[0]
    Z = (np.concatenate([X, np.ones((n, 1))], axis=1) if centred else X) @ W
    Z = Z.reshape(n, K, D)
    return np.einsum("nkd,nkd->nk", Z, Z)


MAHALANOBIS_BYTES = 2**25  # at most this much of mahalanobis's product at a time


FEATURE_BYTES = 2**25  # at most this much of the quadratic features at a time (feature_estep)


def quad_pairs(D: int) -> tuple[np.ndarray, np.ndarray]:
    """The (i, j), i ≤ j, of the quadratic features y_i y_j, diagonal by diagonal: j - i = 0, 1,
    ..., D - 1. Diagonal d is then one product of two contiguous row ranges, y_{0..D-1-d} and
    y_{d..D-1}, without broadcasting (measured 25 % faster than row by row)."""
    rows = np.concatenate([np.arange(D - d) for d in range(D)])
    cols = rows + np.repeat(np.arange(D), np.arange(D, 0, -1))
    return rows, cols


def quad_theta(U: np.ndarray, nu: np.ndarray, centers: np.ndarray | None = None) -> np.ndarray:
    """θ (K, P) with θ_k·φ(y) = -½ ν_k (y - c_k)ᵀ B_k⁻¹ (y - c_k) for the quadratic features
    φ(y) = [y_i y_j ((i, j) in quad_pairs order), y, 1] (no y block and c_k = 0 when ``centers``
    is None). With A = B⁻¹ = Uᵀ U: -½ ν A_ii on the squares, -ν A_ij on the products (i < j),
    ν A c on y and -½ ν |U c|² on 1. The last column is where callers add constants."""
    K, D = U.shape[0], U.shape[-1]
    nu = np.asarray(nu, dtype=float)
    A = np.swapaxes(U, -1, -2) @ U
    rows, cols = quad_pairs(D)
    quad = A[:, rows, cols] * -nu[:, None]
    quad[:, :D] *= 0.5  # the squares
    if centers is None:
        return np.hstack([quad, np.zeros((K, 1))])
    Uc = np.einsum("kij,kj->ki", U, centers)
    lin = np.einsum("kij,kj->ki", A, centers) * nu[:, None]
    return np.hstack([quad, lin, -0.5 * nu[:, None] * np.einsum("ki,ki->k", Uc, Uc)[:, None]])


def feature_block(P: int) -> int:
    """Items per block of feature_estep: as many as FEATURE_BYTES of P features hold (11,950 at
    D = 25). Few blocks mean few matrix products, each a synchronisation of the BLAS threads:
    on 2 cores shared with other processes, many small products stalled for milliseconds each
    (measured)."""
    return max(1, FEATURE_BYTES // (8 * P))


def _feature_blocks(X: np.ndarray, center: np.ndarray | None) -> Iterator[tuple[slice, np.ndarray]]:
    """φ(x_n - c)ᵀ for blocks of consecutive items: (rows, (P, m) array), m ≤ feature_block(P).
    The arrays are reused: each is valid until the next block. Each numpy call runs over whole
    contiguous rows of m items: y - c transposed, then one product per diagonal (quad_pairs)."""
    n, D = X.shape
    Q = D * (D + 1) // 2
    P = Q + (0 if center is None else D) + 1
    block = feature_block(P)
    buffers: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for s in range(0, n, block):
        m = min(block, n - s)
        if m not in buffers:  # at most two sizes: the block's and the last block's
            Phi = np.empty((P, m))
            Phi[-1] = 1.0
            buffers[m] = Phi, np.empty((D, m)) if center is None else Phi[Q:Q + D]
        Phi, Y = buffers[m]
        if center is None:
            np.copyto(Y, X[s:s + m].T)
        else:
            np.subtract(X[s:s + m].T, center[:, None], out=Y)
        np.square(Y, out=Phi[:D])
        row = D
        for d in range(1, D):
            np.multiply(Y[:D - d], Y[d:], out=Phi[row:row + D - d])
            row += D - d
        yield slice(s, s + m), Phi


KEPT_BYTES = 2**26  # the most of the features a QuadFeatures keeps (64 MB: 23,900 items, D = 25)


class QuadFeatures:
    """Items X (n, D), float, and the centre c of their quadratic features φ(x - c): the batch
    mean when ``centred`` (it keeps the expanded quadratic forms accurate), else none (c = 0).
    With ``keep`` the features are made once and kept (if they fit in KEPT_BYTES) for the many
    local steps of a birth's fresh VB on the same items, where making them was a fifth of each
    step's time (toy patches, D = 25); otherwise each pass makes them block by block."""

    def __init__(self, X: Data, centred: bool, keep: bool = False) -> None:
        self.X = np.asarray(X, dtype=float)
        n, D = self.X.shape
        self.center = None if not centred else self.X.mean(axis=0) if n else np.zeros(D)
        P = D * (D + 1) // 2 + (D if centred else 0) + 1
        self._kept = None
        if keep and 8 * n * P <= KEPT_BYTES:
            self._kept = [(rows, Phi.copy()) for rows, Phi in _feature_blocks(self.X, self.center)]

    def blocks(self) -> Iterator[tuple[slice, np.ndarray]]:
        """(rows, φ(x_n - c)ᵀ (P, m)) block by block, as _feature_blocks."""
        return iter(self._kept) if self._kept is not None else _feature_blocks(self.X, self.center)


def feature_estep(F: QuadFeatures, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The E-step of a mixture whose E[log w_k] + E[log p(x|φ_k)] is θ_k·φ(x - c) (quad_theta's
    features), fused with its statistics, one block of items at a time:
    r_nk = exp(L_nk - max_k L_nk) / z_n with z_n = Σ_k exp(L_nk - max_k L_nk);
    H_k = -Σ_n r_nk log r_nk with log r_nk = (L_nk - max_k L_nk) - log z_n (no cancellation: both
    terms are ≤ 0, where L_nk - logsumexp_k L_nk loses the digits |L_nk| takes);
    G = Σ_n r_n φ(x_n - c)ᵀ (K, P), whose columns hold Σ r y yᵀ, Σ r y and N (feature_stats).
    L and G are matrix products with the block's features; R (n, K) is returned column-major."""
    X, center = F.X, F.center
    n, D = X.shape
    K, P = theta.shape
    G, H = np.zeros((K, P)), np.zeros(K)
    if K <= 1:  # a lone component takes every item whole: r_n1 = 1, H = 0, G = Σ_n φ_n
        if K == 1:
            Y = X if center is None else X - center
            rows, cols = quad_pairs(D)
            G[0, :len(rows)] = (Y.T @ Y)[rows, cols]
            if center is not None:
                G[0, len(rows):-1] = Y.sum(axis=0)
            G[0, -1] = n
        return np.ones((n, K)), G, H
    RT = np.empty((K, n))
    Gm = np.empty((K, P))
    buffers: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for rows, Phi in F.blocks():
        m = Phi.shape[1]
        if m not in buffers:
            buffers[m] = np.empty((K, m)), np.empty(m)
        L, t = buffers[m]
        R = RT[:, rows]
        np.matmul(theta, Phi, out=L)
        H += softmax_columns(L, R, t)
        np.matmul(R, Phi.T, out=Gm)
        G += Gm
    return RT.T, G, H


def softmax_columns(L: np.ndarray, R: np.ndarray, t: np.ndarray) -> np.ndarray:
    """R = the softmax of each column of L (K, m) over its K rows, written into R (K, m) with
    the help of t (m,); L becomes log R. Returns -Σ_m r_km log r_km per row k, with log r =
    (L - max_k L) - log z (no cancellation: both terms are ≤ 0)."""
    np.max(L, axis=0, out=t)
    L -= t
    np.exp(L, out=R)
    np.sum(R, axis=0, out=t)
    np.divide(1.0, t, out=t)
    R *= t
    np.log(t, out=t)
    L += t  # log r
    return -np.einsum("km,km->k", L, R)


def feature_stats(G: np.ndarray, D: int,
                  center: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(N, Σ r x xᵀ (K, D, D), Σ r x (K, D) or None) from feature_estep's G over y = x - c:
    Σ r x = Σ r y + N c and Σ r x xᵀ = Σ r y yᵀ + (Σ r y) cᵀ + c (Σ r y)ᵀ + N c cᵀ."""
    Q = D * (D + 1) // 2
    N = G[:, -1].copy()
    rows, cols = quad_pairs(D)
    S = np.empty((len(G), D, D))
    S[:, rows, cols] = G[:, :Q]
    S[:, cols, rows] = G[:, :Q]
    if center is None:
        return N, S, None
    sy = G[:, Q:Q + D]
    yc = sy[:, :, None] * center
    S += yc + np.swapaxes(yc, 1, 2) + N[:, None, None] * np.outer(center, center)
    return N, S, sy + N[:, None] * center


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


def chol_rank1(L: np.ndarray, v: np.ndarray | None, sign: int,
               p: np.ndarray | None = None) -> np.ndarray:
    """Overwrite the lower Cholesky factor L (D, D) of B with that of B + sign · v vᵀ, in O(D²).

    With L p = v, B ± v vᵀ = L (I ± p pᵀ) Lᵀ, and I ± p pᵀ = M Mᵀ has a closed-form factor:
    q_j = 1 ± Σ_{i≤j} p_i², M_jj = √(q_j / q_{j-1}), M_rj = ±p_r p_j / √(q_j q_{j-1}) (r > j).
    So L' = L M column by column: L'_{:j} = M_jj L_{:j} ± p_j / √(q_j q_{j-1}) Σ_{r>j} p_r L_{:r},
    the classic column recurrence (Gill, Golub, Murray & Saunders 1974) as suffix sums over whole
    rows: no Python loop over columns (that loop measured 3-7x slower for D = 10..80, no more
    accurate). Rows stay exactly lower triangular and the diagonal positive. A downdate that
    leaves B not positive definite (q_D = 1 - |p|² ≤ D·eps) raises ValueError, L untouched.
    Per call, LAPACK's O(D³) Cholesky of a D x D matrix is still faster below D ≈ 300
    (measured, benchmarks/speed/obs_one_item.py); this needs no B and wins beyond.
    ``p`` = L⁻¹ v when the caller has it (then v is not read). Returns q (rewhiten's input).
    """
    D = L.shape[0]
    p = dtrsv(L.T, v, lower=0, trans=1) if p is None else p
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
    return q


def rewhiten(Z: np.ndarray, p: np.ndarray, q: np.ndarray, sign: int) -> None:
    """Rows z = L⁻¹ v, whitened by a factor L that chol_rank1 (with p = L⁻¹ v and its returned
    q) then turned into L' = L M, become L'⁻¹ v = M⁻¹ z, in place, in O(D) per row. M's
    structure (M_jj = √(q_j / q_{j-1}), M_rj = ±p_r p_j / √(q_j q_{j-1}) below) makes the
    forward substitution telescope: (M⁻¹ z)_r = √(q_{r-1} / q_r) (z_r ∓ p_r c_r / q_{r-1}) with
    c_r = Σ_{j<r} p_j z_j."""
    if not len(Z):
        return
    q_prev = np.concatenate([[1.0], q[:-1]])
    c = np.zeros_like(Z)
    np.cumsum((Z * p)[:, :-1], axis=1, out=c[:, 1:])
    c *= (p if sign > 0 else -p) / q_prev
    Z -= c
    Z *= np.sqrt(q_prev / q)


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
