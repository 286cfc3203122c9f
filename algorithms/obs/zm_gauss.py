"""Zero-mean Gaussian likelihood with a Wishart prior (Hughes & Sudderth 2013, supplement Sec. 1).

x ~ N(0, Λ⁻¹), Λ ~ Wishart(ν0, B0⁻¹). Statistics: S_k = Σ_n r_nk x_n x_nᵀ (Eq. 13).
Posterior: ν_k = ν0 + N_k, B_k = B0 + S_k (Eq. 18).
One item x with weight w: ν' = ν + w, B' = B + w x xᵀ (a rank-one update of B's Cholesky factor).
Draws (draw): Λ = Pᵀ P by Bartlett's decomposition (P = Aᵀ U, wishart.wishart_draw).
Integer-valued columns (``delta``, dequant.py): S_k gains N_k diag(δ), the local step
-½ ν_k Σ_d δ_d (B_k⁻¹)_dd, the predictive's xᵀ B⁻¹ x also Σ_d δ_d (B_k⁻¹)_dd, and one item's B'
also w diag(δ) (L_k refactored: Dequant.update_state).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import gammaln

from . import wishart as W
from .base import Arrays, Data, ObsModel, weighted_outer
from .checks import check_component, check_dense, check_weight, dense_item, dense_items
from .dequant import gram_diag, precision_diag, set_steps
from .prior_learning import identifiable, learn_wishart
from .prior_scale import SHRINKAGE, data_scale_matrix


class ZeroMeanGauss(ObsModel):
    """Zero-mean full-covariance Gaussian components."""

    name = "zm-gauss"
    means_note = "zero-mean components: every mean is 0 by construction"

    def __init__(self, D: int, nu0: float, B0: np.ndarray,
                 delta: np.ndarray | None = None) -> None:
        """``delta``: each column's step Δ_d, 0 for a continuous one (None: all 0); integer
        columns are dequantised (dequant.py)."""
        if nu0 <= D - 1:
            raise ValueError(f"nu0 must exceed D - 1 = {D - 1}")
        self.D = D
        self.nu0 = float(nu0)
        prior = W.prior_factors(B0, D)
        self.B0 = prior["B"]
        self._logdet_B0 = prior["logdet_B"]
        self._U0 = prior["U"]
        set_steps(self, D, delta)

    @classmethod
    def default(cls, X: Data, nu0: float | None = None, scale: float = 1.0,
                B0: np.ndarray | None = None, shrinkage: float = SHRINKAGE,
                delta: np.ndarray | None = None,
                floor: np.ndarray | None = None) -> ZeroMeanGauss:
        """ν0 = D + 2 and E[Λ⁻¹] = scale · C, C the sample's second-moment matrix E[x xᵀ]
        with its correlations shrunk (data_scale_matrix); an explicit B0 replaces it."""
        X = np.asarray(X, dtype=float)
        D = X.shape[1]
        nu0 = D + 2.0 if nu0 is None else float(nu0)
        if B0 is None:
            if nu0 <= D + 1:
                raise ValueError(f"nu0 must exceed D + 1 = {D + 1} for a data-scaled B0; pass B0")
            M = X.T @ X / len(X) if len(X) else np.eye(D)
            B0 = (nu0 - D - 1) * data_scale_matrix(M, scale, shrinkage, floor)
        return cls(D, nu0, B0, delta)

    def prior(self) -> dict[str, Any]:
        out = {"D": self.D, "nu0": self.nu0, "B0": self.B0.tolist()}
        return out if self.dq is None else {**out, **self.dq.saved()}

    def prior_figures(self) -> dict[str, float]:
        """ν0 and the scale tr(B0) / (D ν0): the mean eigenvalue of E[Λ]⁻¹."""
        return {"nu0": self.nu0, "scale": float(np.trace(self.B0)) / (self.D * self.nu0)}

    def learn_prior(self, post: Arrays, base: ObsModel) -> ZeroMeanGauss:
        """The Wishart maximising Σ_k E_q[ln Wishart(Λ_k | ν0, B0⁻¹)] with B0's shape fixed
        (prior_learning.learn_wishart); unchanged unless three components have N_k > D."""
        N = post["nu"] - self.nu0
        if not identifiable(N, self.D):
            return self
        nu0, B0 = learn_wishart(post, self.nu0, self.B0, base.nu0, base.B0, float(N.sum()))
        return ZeroMeanGauss(self.D, nu0, B0, self.delta)

    def check_data(self, X: Data) -> None:
        check_dense(X, self.D)

    def stat_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"xxT": (self.D, self.D)}

    def stats(self, X: Data, R: np.ndarray) -> Arrays:
        xxT = weighted_outer(np.asarray(X, dtype=float), R)
        if self.dq is not None:
            xxT += self.dq.second_moments(R.sum(axis=0))
        return {"xxT": xxT}

    def post(self, N: np.ndarray, stats: Arrays) -> Arrays:
        return {"nu": self.nu0 + np.asarray(N, dtype=float),
                **W.factorize(self.B0 + stats["xxT"])}

    def E_loglik(self, X: Data, post: Arrays) -> np.ndarray:
        """Supplement Eq. 19: -D/2 log 2π + ½ E[log|Λ|] - ½ ν xᵀ B⁻¹ x."""
        quad = W.mahalanobis(np.asarray(X, dtype=float), post["U"])
        return self._E_loglik_offset(post) - 0.5 * post["nu"] * quad

    def _E_loglik_offset(self, post: Arrays) -> np.ndarray:
        """E_loglik's terms free of x: -D/2 log 2π + ½ E[log|Λ|] (K,), and with integer columns
        Σ log Δ_d - ½ Σ_d δ_d E[Λ]_dd."""
        offset = -0.5 * self.D * W.LOG2PI + 0.5 * W.E_logdet(post["nu"], post["logdet_B"], self.D)
        return offset if self.dq is None else offset + self.dq.offset(precision_diag(post))

    def local_step(self, X: Data, post: Arrays,
                   Elogw: np.ndarray) -> tuple[np.ndarray, np.ndarray, Arrays, np.ndarray]:
        """Eq. 9 fused with the statistics (Eq. 13): (R, N, stats, H), equal to responsibilities
        followed by N = Σ_n r_n, stats and the entropies; E[log w_k] + E_loglik is linear in the
        products x_i x_j (i ≤ j), so the log-likelihoods and the statistics are both matrix
        products with those features (wishart.quad_theta, wishart.feature_estep)."""
        F = X if isinstance(X, W.QuadFeatures) else W.QuadFeatures(X, centred=False)
        theta = W.quad_theta(post["U"], post["nu"])
        theta[:, -1] += self._E_loglik_offset(post) + Elogw
        R, G, H = W.feature_estep(F, theta)
        N, xxT, _ = W.feature_stats(G, self.D, None)
        if self.dq is not None:
            xxT += self.dq.second_moments(N)
        return R, N, {"xxT": xxT}, H

    def repeated(self, X: Data) -> W.QuadFeatures:
        """X with its quadratic features kept for repeated local steps."""
        return W.QuadFeatures(X, centred=False, keep=True)

    def draw(self, post: Arrays, rng: np.random.Generator) -> Arrays:
        """Λ_k ~ Wishart(ν_k, B_k⁻¹) as θ = {"U": P (K, D, D) with Λ = Pᵀ P, "logdet": log|Λ|
        (K,)}."""
        P, logdet = W.wishart_draw(post["nu"], post["U"], post["logdet_B"], rng)
        return {"U": P, "logdet": logdet}

    def sample_items(self, theta: Arrays, rng: np.random.Generator,
                     n_words: np.ndarray | None = None) -> np.ndarray:
        """x = P⁻¹ z, z ~ N(0, I): Cov(x) = (Pᵀ P)⁻¹ = Λ⁻¹ (n, D)."""
        z = rng.standard_normal(theta["U"].shape[:2])
        return np.linalg.solve(theta["U"], z[..., None])[..., 0] if len(z) else z

    def loglik(self, X: Data, theta: Arrays) -> np.ndarray:
        """log N(x | 0, Λ⁻¹) = -D/2 log 2π + ½ log|Λ| - ½ |P x|²: (n, K)."""
        quad = W.mahalanobis(np.asarray(X, dtype=float), theta["U"])
        out = -0.5 * self.D * W.LOG2PI + 0.5 * theta["logdet"] - 0.5 * quad
        return out if self.dq is None else out + self.dq.offset(gram_diag(theta["U"]))

    def elbo(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        D, nu, logdet = self.D, post["nu"], post["logdet_B"]
        elogdet = W.E_logdet(nu, logdet, D)
        # tr(E[Λ] M) = ν tr(B⁻¹ M) for M = S_k + B0 (data term + prior term together)
        M = stats["xxT"] + self.B0
        tr = W.trace_inv(post["U"], M)
        data = N * (-0.5 * D * W.LOG2PI + 0.5 * elogdet)
        if self.dq is not None:
            data += self.dq.cell(N)
        prior = -W.log_Z(self.nu0, self._logdet_B0, D) + 0.5 * (self.nu0 - D - 1) * elogdet
        entropy = W.log_Z(nu, logdet, D) - 0.5 * (nu - D - 1) * elogdet + 0.5 * nu * D
        return float(np.sum(data + prior + entropy - 0.5 * nu * tr))

    def log_marginal(self, N: np.ndarray, stats: Arrays) -> np.ndarray:
        nu = self.nu0 + np.asarray(N, dtype=float)
        out = (-0.5 * np.asarray(N) * self.D * W.LOG2PI
               + W.log_Z(nu, W.logdet(self.B0 + stats["xxT"]), self.D)
               - W.log_Z(self.nu0, self._logdet_B0, self.D))
        return out if self.dq is None else out + self.dq.cell(N)

    def predictive_logpdf(self, X: Data, post: Arrays) -> np.ndarray:
        """Student-t with ν' = ν - D + 1 degrees of freedom and scale B / ν'; with integer
        columns the bound on E_u of it (dequant.py)."""
        quad = W.mahalanobis(np.asarray(X, dtype=float), post["U"])  # xᵀ B⁻¹ x = xᵀ Σ⁻¹ x / ν'
        return self._student_t(quad, post["nu"], post["logdet_B"],
                               None if self.dq is None else gram_diag(post["U"]))

    def _student_t(self, quad: np.ndarray, nu: np.ndarray, logdet_B: np.ndarray,
                   inverse_diag: np.ndarray | None) -> np.ndarray:
        """The predictive Student-t from quad = xᵀ B⁻¹ x (n, K); with integer columns its bound,
        quad + Σ_d δ_d (B⁻¹)_dd (``inverse_diag``: B_k⁻¹'s diagonals) and + Σ log Δ_d."""
        D = self.D
        dof = nu - D + 1.0
        if self.dq is not None:
            quad = quad + self.dq.spread(inverse_diag)
        logdet_sigma = logdet_B - D * np.log(dof)
        out = (gammaln(0.5 * (dof + D)) - gammaln(0.5 * dof) - 0.5 * D * np.log(dof * np.pi)
               - 0.5 * logdet_sigma - 0.5 * (dof + D) * np.log1p(quad))
        return out if self.dq is None else out + self.dq.log_cell

    def features(self, X: Data) -> np.ndarray:
        """Sign-free direction of each item whitened by the prior's scale (y = U0 x):
        vec(y yᵀ) / |y|² (components differ in covariance)."""
        X = np.asarray(X, dtype=float) @ self._U0.T
        norm2 = np.maximum((X**2).sum(1), 1e-300)
        return (X[:, :, None] * X[:, None, :]).reshape(len(X), -1) / norm2[:, None]

    def predictive_state(self, post: Arrays) -> Arrays:
        """ν, the lower Cholesky factor L of B (B = L Lᵀ) and log|B| = 2 Σ log diag L; with
        integer columns the diagonals of B⁻¹ (dequant.py)."""
        L = np.linalg.cholesky(post["B"])
        state = {"nu": np.array(post["nu"], dtype=float), "L": L,
                 "logdet_B": W.logdet_from_chol(L)}
        return state if self.dq is None else {**state, **self.dq.state_entries(L)}

    def predictive_logpdf_state(self, state: Arrays, X: Data) -> np.ndarray:
        """The Student-t of predictive_logpdf with xᵀ B⁻¹ x = |z|², L z = x: one triangular
        solve per item and component, O(K D²) per item."""
        X = dense_items(X, self.D)
        L = state["L"]
        Z = W.solve_lower(L, np.broadcast_to(X[:, None, :], (len(X), L.shape[0], self.D)))
        quad = np.einsum("nkd,nkd->nk", Z, Z)
        return self._student_t(quad, state["nu"], state["logdet_B"], state.get("inv_diag"))

    def absorb(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """ν' = ν + w and B' = B + w x xᵀ as a rank-one update of L_k, O(D²) (with integer
        columns B' also gains w diag(δ): L_k refactored, O(D³), Dequant.update_state); log|B_k|
        from the new diagonal."""
        k = check_component(k, len(state["nu"]))
        x, w = dense_item(x, self.D), check_weight(w)
        if self.dq is None:
            W.chol_rank1(state["L"][k], np.sqrt(w) * x, +1)
        else:
            self.dq.update_state(state, k, np.sqrt(w) * x, w, +1)
        state["nu"][k] += w
        state["logdet_B"][k] = W.logdet_from_chol(state["L"][k])

    def remove(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """ν = ν' - w and B = B' - w x xᵀ, a rank-one downdate of L_k (ValueError if B would not
        be positive definite or ν would not exceed D - 1)."""
        k = check_component(k, len(state["nu"]))
        x, w = dense_item(x, self.D), check_weight(w)
        nu_new = state["nu"][k] - w
        if not nu_new > self.D - 1:
            raise ValueError(f"removing weight {w} leaves nu = {nu_new}: it must exceed D - 1")
        if self.dq is None:
            W.chol_rank1(state["L"][k], np.sqrt(w) * x, -1)
        else:  # and - w diag(δ)
            self.dq.update_state(state, k, np.sqrt(w) * x, w, -1)
        state["nu"][k] = nu_new
        state["logdet_B"][k] = W.logdet_from_chol(state["L"][k])

    def means(self, post: Arrays) -> np.ndarray:
        """E[μ_k] = 0: zeros (K, D)."""
        return np.zeros((len(post["nu"]), self.D))

    def covariances(self, post: Arrays) -> np.ndarray:
        """E[Σ_k] = E[Λ_k⁻¹] (see ``wishart.expected_inverse``): (K, D, D)."""
        return W.expected_inverse(post["B"], post["nu"])
