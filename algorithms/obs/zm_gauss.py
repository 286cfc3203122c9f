"""Zero-mean Gaussian likelihood with a Wishart prior (Hughes & Sudderth 2013, supplement Sec. 1).

x ~ N(0, Λ⁻¹), Λ ~ Wishart(ν0, B0⁻¹). Statistics: S_k = Σ_n r_nk x_n x_nᵀ (Eq. 13).
Posterior: ν_k = ν0 + N_k, B_k = B0 + S_k (Eq. 18).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import gammaln

from . import wishart as W
from .base import Arrays, Data, ObsModel, check_dense, weighted_outer


class ZeroMeanGauss(ObsModel):
    """Zero-mean full-covariance Gaussian components."""

    name = "zm-gauss"

    def __init__(self, D: int, nu0: float, B0: np.ndarray) -> None:
        if nu0 <= D - 1:
            raise ValueError(f"nu0 must exceed D - 1 = {D - 1}")
        self.D = D
        self.nu0 = float(nu0)
        self.B0 = np.asarray(B0, dtype=float)
        self._logdet_B0 = W.factorize(self.B0)["logdet_B"]

    @classmethod
    def default(cls, X: Data, nu0: float | None = None, scale: float = 1.0,
                **_: Any) -> ZeroMeanGauss:
        """ν0 = D + 2 and E[Λ⁻¹] = scale · (mean of x_d²) · I: a weak prior at the data's scale."""
        X = np.asarray(X)
        D = X.shape[1]
        nu0 = D + 2.0 if nu0 is None else float(nu0)
        if nu0 <= D + 1:
            raise ValueError(f"nu0 must exceed D + 1 = {D + 1} for a data-scaled B0")
        s2 = float(np.mean(X**2)) if X.size else 1.0
        return cls(D, nu0, (nu0 - D - 1) * scale * max(s2, 1e-12) * np.eye(D))

    def prior(self) -> dict[str, Any]:
        return {"D": self.D, "nu0": self.nu0, "B0": self.B0.tolist()}

    def check_data(self, X: Data) -> None:
        check_dense(X, self.D)

    def stat_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"xxT": (self.D, self.D)}

    def stats(self, X: Data, R: np.ndarray) -> Arrays:
        return {"xxT": weighted_outer(np.asarray(X, dtype=float), R)}

    def post(self, N: np.ndarray, stats: Arrays) -> Arrays:
        return {"nu": self.nu0 + np.asarray(N, dtype=float),
                **W.factorize(self.B0 + stats["xxT"])}

    def E_loglik(self, X: Data, post: Arrays) -> np.ndarray:
        """Supplement Eq. 19: -D/2 log 2π + ½ E[log|Λ|] - ½ ν xᵀ B⁻¹ x."""
        elogdet = W.E_logdet(post["nu"], post["logdet_B"], self.D)
        quad = W.mahalanobis(np.asarray(X, dtype=float), post["U"])
        return -0.5 * self.D * W.LOG2PI + 0.5 * elogdet - 0.5 * post["nu"] * quad

    def elbo(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        D, nu, logdet = self.D, post["nu"], post["logdet_B"]
        elogdet = W.E_logdet(nu, logdet, D)
        # tr(E[Λ] M) = ν tr(B⁻¹ M) for M = S_k + B0 (data term + prior term together)
        M = stats["xxT"] + self.B0
        tr = W.trace_inv(post["U"], M)
        data = N * (-0.5 * D * W.LOG2PI + 0.5 * elogdet)
        prior = -W.log_Z(self.nu0, self._logdet_B0, D) + 0.5 * (self.nu0 - D - 1) * elogdet
        entropy = W.log_Z(nu, logdet, D) - 0.5 * (nu - D - 1) * elogdet + 0.5 * nu * D
        return float(np.sum(data + prior + entropy - 0.5 * nu * tr))

    def log_marginal(self, N: np.ndarray, stats: Arrays) -> np.ndarray:
        post = self.post(N, stats)
        return (-0.5 * np.asarray(N) * self.D * W.LOG2PI
                + W.log_Z(post["nu"], post["logdet_B"], self.D)
                - W.log_Z(self.nu0, self._logdet_B0, self.D))

    def predictive_logpdf(self, X: Data, post: Arrays) -> np.ndarray:
        """Student-t with ν' = ν - D + 1 degrees of freedom and scale B / ν'."""
        D = self.D
        dof = post["nu"] - D + 1.0
        quad = W.mahalanobis(np.asarray(X, dtype=float), post["U"])  # xᵀ B⁻¹ x = xᵀ Σ⁻¹ x / ν'
        logdet_sigma = post["logdet_B"] - D * np.log(dof)
        return (gammaln(0.5 * (dof + D)) - gammaln(0.5 * dof) - 0.5 * D * np.log(dof * np.pi)
                - 0.5 * logdet_sigma - 0.5 * (dof + D) * np.log1p(quad))

    def features(self, X: Data) -> np.ndarray:
        """Sign-free direction of each item: vec(x xᵀ) / |x|² (components differ in covariance)."""
        X = np.asarray(X, dtype=float)
        norm2 = np.maximum((X**2).sum(1), 1e-300)
        return (X[:, :, None] * X[:, None, :]).reshape(len(X), -1) / norm2[:, None]
