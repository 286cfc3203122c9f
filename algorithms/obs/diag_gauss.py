"""Gaussian likelihood with diagonal covariance and an independent Normal-Gamma prior per dimension.

x_d ~ N(μ_d, 1/λ_d), μ_d | λ_d ~ N(m0_d, 1/(κ0 λ_d)), λ_d ~ Gamma(a0_d, b0_d) (rate b).
Statistics: x_k = Σ_n r_nk x_n and x2_k = Σ_n r_nk x_n² (elementwise; Eq. 7).
Posterior (Eq. 10): κ = κ0 + N, m = (κ0 m0 + x) / κ, a_d = a0_d + N/2 (a: K x D),
b = b0 + ½ (x2 + κ0 m0² - κ m²).
Under q: E[λ_d] = a_d / b_d, E[log λ_d] = ψ(a_d) - log b_d, E[λ_d μ_d²] = 1/κ + (a_d/b_d) m_d².
One item x with weight w: κ' = κ + w, m' = (κ m + w x) / κ', a' = a + w/2,
b' = b + ½ (w κ / κ') (x - m)².
Draws (draw): λ_d = G_d / b_d with G_d ~ Gamma(a_d, 1) drawn in log space, then
μ_d = m_d + z_d / √(κ λ_d) with z ~ N(0, I).
Integer-valued columns (``delta``, dequant.py): x2 gains N_k δ, the local step
-½ Σ_d δ_d a_d / b_d, each predictive factor's (x_d - m_d)² also δ_d, and one item's b' also
½ w δ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import digamma, gammaln

from .base import Arrays, Data, ObsModel, log_gamma_draw
from .checks import check_component, check_dense, check_weight, dense_item, dense_items
from .dequant import set_steps
from .prior_learning import FLOOR, KAPPA_MAX, identifiable, widened, wishart_scale_dof
from .prior_scale import SHRINKAGE, prior_variances

LOG2PI = np.log(2 * np.pi)


class DiagGauss(ObsModel):
    """Gaussian components with their own mean and diagonal covariance."""

    name = "diag-gauss"

    @classmethod
    def component_params(cls, D: int) -> int:
        """A mean and D variances."""
        return 2 * D

    def __init__(self, D: int, m0: np.ndarray, kappa0: float, a0: float | np.ndarray,
                 b0: np.ndarray, delta: np.ndarray | None = None) -> None:
        """``a0``: one Gamma shape for every dimension, or one per dimension; ``delta``: each
        column's step Δ_d, 0 for a continuous one (None: all 0); integer columns are
        dequantised (dequant.py)."""
        self.D = D
        self.m0 = np.broadcast_to(np.asarray(m0, dtype=float), (D,)).copy()
        self.kappa0 = float(kappa0)
        self.a0 = np.broadcast_to(np.asarray(a0, dtype=float), (D,)).copy()
        self.b0 = np.broadcast_to(np.asarray(b0, dtype=float), (D,)).copy()
        if not (self.kappa0 > 0 and np.all(self.a0 > 0)):
            raise ValueError("kappa0 and a0 must be positive")
        if np.any(self.b0 <= 0):
            raise ValueError("b0 must be positive")
        self._logZ0 = _log_Z_ng(self.kappa0, self.a0, self.b0).sum()
        set_steps(self, D, delta)

    @classmethod
    def default(cls, X: Data, kappa0: float = 0.01, a0: float = 1.0, scale: float = 0.1,
                m0: np.ndarray | None = None, b0: np.ndarray | None = None,
                shrinkage: float = SHRINKAGE, delta: np.ndarray | None = None,
                floor: np.ndarray | None = None) -> DiagGauss:
        """m0 = data mean and b0_d = a0 · scale · v_d, so 1/E[λ_d] = scale · v_d, with v the
        diagonal of data_scale_matrix: each column's own variance, a floor for constant ones
        (at least ``floor``'s)."""
        X = np.asarray(X, dtype=float)
        D = X.shape[1]
        m0 = (X.mean(0) if len(X) else np.zeros(D)) if m0 is None else m0
        if b0 is None:
            var = X.var(0) if len(X) else np.ones(D)
            b0 = a0 * prior_variances(var, scale, shrinkage, floor)
        return cls(D, m0, kappa0, a0, b0, delta)

    def prior(self) -> dict[str, Any]:
        a0 = self.a0.tolist()
        a0 = a0[0] if len(set(a0)) == 1 else a0  # one shape for all: the scalar
        out = {"D": self.D, "m0": self.m0.tolist(), "kappa0": self.kappa0, "a0": a0,
               "b0": self.b0.tolist()}
        return out if self.dq is None else {**out, **self.dq.saved()}

    def prior_figures(self) -> dict[str, float]:
        """κ0, the range of the shapes a0_d, |m0| and the scale mean_d b0_d / a0_d (1/E[λ_d])."""
        return {"kappa0": self.kappa0, "a0_min": float(self.a0.min(initial=np.inf)),
                "a0_max": float(self.a0.max(initial=-np.inf)),
                "m0_norm": float(np.linalg.norm(self.m0)),
                "scale": float(np.mean(self.b0 / self.a0)) if self.D else 0.0}

    def learn_prior(self, post: Arrays, base: ObsModel) -> DiagGauss:
        """The Normal-Gamma maximising Σ_k Σ_d E_q[ln NG(μ_kd, λ_kd | m0_d, κ0, a0_d, b0_d)] given
        the K posteriors, with e_kd = E[λ_kd] = a_kd/b_kd and l_kd = E ln λ_kd = ψ(a_kd) - ln b_kd:
        m0_d = Σ_k e_kd m_kd / Σ_k e_kd; κ0 = K D / Σ_k [D/κ_k + Σ_d e_kd (m_kd - m0_d)²], at most
        KAPPA_MAX;
        per dimension, ψ(a0) - ln a0 = mean_k l_kd - ln mean_k e_kd and b0 = a0 / mean_k e_kd,
        which is prior_learning.wishart_scale_dof with D = 1 (ν0 = 2 a0, s = 2 b0), within
        1 ≤ a0 ≤ 1 + N/2 and b0/a0 ≥ FLOOR times ``base``'s (1/E[λ_d] no smaller than the
        initial prior's); bounds widened to contain the current values. Unchanged unless three
        components have N_k > 1."""
        N = post["kappa"] - self.kappa0
        if not identifiable(N, 1):
            return self
        kappa, m, a, b = post["kappa"], post["m"], post["a"], post["b"]
        e, elog = a / b, digamma(a) - np.log(b)
        m0 = (e * m).sum(0) / e.sum(0)
        spread = self.D / kappa + (e * (m - m0) ** 2).sum(1)
        n = float(N.sum())
        kappa0 = float(np.clip(len(N) * self.D / spread.sum(),
                               *widened(0.0, KAPPA_MAX, self.kappa0)))
        floor = np.minimum(FLOOR * base.b0 / base.a0, self.b0 / self.a0)
        lo, hi = np.minimum(1.0, self.a0), np.maximum(1.0 + 0.5 * n, self.a0)  # widened
        s, nu = wishart_scale_dof(elog, e, 1, (2 * lo, 2 * hi), floor)
        return DiagGauss(self.D, m0, kappa0, 0.5 * nu, 0.5 * s, self.delta)

    def check_data(self, X: Data) -> None:
        check_dense(X, self.D)

    def stat_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"x": (self.D,), "x2": (self.D,)}

    def stats(self, X: Data, R: np.ndarray) -> Arrays:
        X = np.asarray(X, dtype=float)
        x2 = R.T @ X**2
        if self.dq is not None:
            x2 += self.dq.squares(R.sum(axis=0))
        return {"x": R.T @ X, "x2": x2}

    def post(self, N: np.ndarray, stats: Arrays) -> Arrays:
        N = np.asarray(N, dtype=float)
        kappa = self.kappa0 + N
        m = (self.kappa0 * self.m0 + stats["x"]) / kappa[:, None]
        b = self.b0 + 0.5 * (stats["x2"] + self.kappa0 * self.m0**2 - kappa[:, None] * m**2)
        return {"kappa": kappa, "m": m, "a": self.a0 + 0.5 * N[:, None], "b": b}

    def E_loglik(self, X: Data, post: Arrays) -> np.ndarray:
        """Σ_d [-½ log 2π + ½ (ψ(a_d) - log b_d) - ½ (1/κ + (a_d/b_d)(x_d - m_d)²)].

        The weighted squares expand into matrix products: X² eᵀ - 2 X (e m)ᵀ + Σ_d e m², e = a/b.
        """
        X = np.asarray(X, dtype=float)
        kappa, m, a, b = post["kappa"], post["m"], post["a"], post["b"]
        e = a / b
        quad = (X**2) @ e.T - 2.0 * X @ (e * m).T + (e * m**2).sum(1)
        elog = (digamma(a) - np.log(b)).sum(1)
        out = -0.5 * self.D * LOG2PI + 0.5 * elog - 0.5 * (self.D / kappa + quad)
        return out if self.dq is None else out + self.dq.offset(e)

    def draw(self, post: Arrays, rng: np.random.Generator) -> Arrays:
        """(μ_kd, λ_kd) ~ NG(m_kd, κ_k, a_k, b_kd) as θ = {"mu": μ (K, D), "s": √λ (K, D),
        "logdet": Σ_d log λ_d (K,)}."""
        m, a, b = post["m"], post["a"], post["b"]
        log_lam = log_gamma_draw(a, rng) - np.log(b)
        z = rng.standard_normal(m.shape)
        mu = m + z * np.exp(-0.5 * log_lam) / np.sqrt(post["kappa"])[:, None]
        return {"mu": mu, "s": np.exp(0.5 * log_lam), "logdet": log_lam.sum(-1)}

    def sample_items(self, theta: Arrays, rng: np.random.Generator,
                     n_words: np.ndarray | None = None) -> np.ndarray:
        """x_d = μ_d + z_d / √λ_d, z ~ N(0, I) (n, D)."""
        return theta["mu"] + rng.standard_normal(theta["mu"].shape) / theta["s"]

    def loglik(self, X: Data, theta: Arrays) -> np.ndarray:
        """Σ_d log N(x_d | μ_d, 1/λ_d) = -D/2 log 2π + ½ Σ_d log λ_d - ½ Σ_d (s_d (x_d - μ_d))²,
        s = √λ: (n, K), the differences taken before squaring (no cancellation)."""
        X = np.asarray(X, dtype=float)
        Z = (X[:, None, :] - theta["mu"][None]) * theta["s"][None]
        quad = np.einsum("nkd,nkd->nk", Z, Z)
        out = -0.5 * self.D * LOG2PI + 0.5 * theta["logdet"] - 0.5 * quad
        return out if self.dq is None else out + self.dq.offset(theta["s"] ** 2)

    def elbo(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """Σ_k E[log p(x | μ, λ)] + E[log NG(μ, λ | λ0)] - E[log q(μ, λ)] for any q.

        Per dimension the terms linear in E[λ] collect to (a/b)(½ Q + b0) with
        Q = x2 + κ0 m0² - 2 h m + (N + κ0) m², h = x + κ0 m0.
        """
        D = self.D
        N = np.asarray(N, dtype=float)
        kappa, m, a, b = post["kappa"], post["m"], post["a"], post["b"]
        elog_d = digamma(a) - np.log(b)
        elog = elog_d.sum(1)
        h = stats["x"] + self.kappa0 * self.m0
        Q = (stats["x2"] + self.kappa0 * self.m0**2 - 2.0 * h * m
             + (N + self.kappa0)[:, None] * m**2)
        lin = (a / b * (0.5 * Q + self.b0)).sum(1)
        data = N * (-0.5 * D * LOG2PI + 0.5 * elog)
        if self.dq is not None:
            data += self.dq.cell(N)
        prior = -self._logZ0 + ((self.a0 - 0.5) * elog_d).sum(1)
        entropy = (_log_Z_ng(kappa[:, None], a, b) - (a - 0.5) * elog_d + a + 0.5).sum(1)
        quad = -0.5 * (N + self.kappa0) * D / kappa - lin
        return float(np.sum(data + prior + entropy + quad))

    def log_marginal(self, N: np.ndarray, stats: Arrays) -> np.ndarray:
        """-N D/2 log 2π + Σ_d [log Z_NG(λ_kd) - log Z_NG(λ0_d)] (Eq. 12)."""
        post = self.post(N, stats)
        logZ = _log_Z_ng(post["kappa"][:, None], post["a"], post["b"]).sum(1)
        out = -0.5 * np.asarray(N) * self.D * LOG2PI + logZ - self._logZ0
        return out if self.dq is None else out + self.dq.cell(N)

    def predictive_logpdf(self, X: Data, post: Arrays) -> np.ndarray:
        """Π_d Student-t: 2a_d dof, location m_d, scale² s_d² = b_d (κ + 1) / (a_d κ); with integer
        columns the bound on E_u of it (dequant.py): each (x_d - m_d)² plus δ_d."""
        X = np.asarray(X, dtype=float)
        kappa, m = post["kappa"], post["m"]
        dof, s2, const = _student(post)
        out = np.empty((X.shape[0], len(kappa)))
        for k in range(len(kappa)):
            sq = (X - m[k]) ** 2 if self.dq is None else (X - m[k]) ** 2 + self.dq.var
            z2 = sq / (dof[k] * s2[k])
            out[:, k] = -0.5 * (np.log1p(z2) * (dof[k] + 1)).sum(1)
        return out + const if self.dq is None else out + const + self.dq.log_cell

    def features(self, X: Data) -> np.ndarray:
        """The items standardised by the prior's scale, (x - m0) / √b0: components differ in
        location, each dimension in its own units."""
        return (np.asarray(X, dtype=float) - self.m0) / np.sqrt(self.b0)

    def predictive_state(self, post: Arrays) -> Arrays:
        """κ, m, a, b (copies): everything the one-item path needs, O(K D)."""
        return {key: np.array(post[key], dtype=float) for key in ("kappa", "m", "a", "b")}

    def predictive_logpdf_state(self, state: Arrays, X: Data) -> np.ndarray:
        """The product of Student-t's of predictive_logpdf, for all items and components at
        once: O(K D) per item."""
        X = dense_items(X, self.D)
        dof, s2, const = _student(state)
        sq = (X[:, None, :] - state["m"][None]) ** 2
        if self.dq is not None:
            sq += self.dq.var
            const = const + self.dq.log_cell
        z2 = sq / (dof * s2)[None]
        return -0.5 * (np.log1p(z2) * (dof + 1)[None]).sum(2) + const

    def absorb(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """κ' = κ + w, m' = m + (w / κ') (x - m), a' = a + w/2, b' = b + ½ (w κ / κ') (x - m)²:
        O(D)."""
        k = check_component(k, len(state["kappa"]))
        x, w = dense_item(x, self.D), check_weight(w)
        kappa = state["kappa"][k]
        kappa_new = kappa + w
        d = x - state["m"][k]
        state["b"][k] += (0.5 * w * kappa / kappa_new) * d**2
        if self.dq is not None:
            state["b"][k] += 0.5 * w * self.dq.var
        state["m"][k] += (w / kappa_new) * d
        state["kappa"][k] = kappa_new
        state["a"][k] += 0.5 * w

    def remove(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """Inverse of absorb from the current κ', m': κ = κ' - w, m = m' - (w / κ) (x - m'),
        a = a' - w/2, b = b' - ½ (w κ' / κ) (x - m')² (ValueError unless κ, a, b stay > 0)."""
        k = check_component(k, len(state["kappa"]))
        x, w = dense_item(x, self.D), check_weight(w)
        kappa = state["kappa"][k]
        kappa_new = kappa - w
        a_new = state["a"][k] - 0.5 * w
        if not (kappa_new > 0 and np.all(a_new > 0)):
            raise ValueError(f"removing weight {w} leaves kappa = {kappa_new}, a = "
                             f"{np.min(a_new)}: they must stay positive")
        d = x - state["m"][k]
        b_new = state["b"][k] - (0.5 * w * kappa / kappa_new) * d**2
        if self.dq is not None:
            b_new -= 0.5 * w * self.dq.var
        if not np.all(b_new > 0):
            raise ValueError("the removal would leave a non-positive rate b")
        state["b"][k] = b_new
        state["m"][k] -= (w / kappa_new) * d
        state["kappa"][k] = kappa_new
        state["a"][k] = a_new

    def means(self, post: Arrays) -> np.ndarray:
        """E[μ_k] = m_k (from a posterior or a predictive state)."""
        return np.array(post["m"], dtype=float)

    def covariances(self, post: Arrays) -> np.ndarray:
        """The diagonals E[1/λ_kd] = b_kd / (a_kd - 1) of E[Σ_k] (K, D), scikit-learn's "diag"
        layout; NaN where a_kd ≤ 1 (the mean is infinite)."""
        a = np.asarray(post["a"], dtype=float)
        b = np.asarray(post["b"], dtype=float)
        return np.where(a > 1, b / np.where(a > 1, a - 1, 1.0), np.nan)


def _student(post: Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The predictive's Student-t factors: dof 2a (K, D), scale² b (κ + 1) / (a κ) (K, D), and
    each component's constant Σ_d [ln Γ((dof + 1)/2) - ln Γ(dof/2) - ½ ln(dof π s²)] (K,)."""
    kappa, a, b = post["kappa"], post["a"], post["b"]
    dof = 2.0 * a
    s2 = b / a * ((kappa + 1.0) / kappa)[:, None]
    const = (gammaln(0.5 * (dof + 1)) - gammaln(0.5 * dof)
             - 0.5 * np.log(dof * np.pi) - 0.5 * np.log(s2)).sum(1)
    return dof, s2, const


def _log_Z_ng(kappa: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Normal-Gamma(m, κ, a, b) log normaliser per dimension: ½ log(2π/κ) + log Γ(a) - a log b."""
    return 0.5 * (LOG2PI - np.log(kappa)) + gammaln(a) - a * np.log(b)
