"""Full-mean, full-covariance Gaussian likelihood with a Normal-Wishart prior.

x ~ N(μ, Λ⁻¹), μ | Λ ~ N(m0, (κ0 Λ)⁻¹), Λ ~ Wishart(ν0, B0⁻¹).
Statistics: x_k = Σ_n r_nk x_n and S_k = Σ_n r_nk x_n x_nᵀ (Eq. 7).
Posterior (Eq. 10): κ = κ0 + N, m = (κ0 m0 + x) / κ, ν = ν0 + N,
B = B0 + S + κ0 m0 m0ᵀ - κ m mᵀ.
Under q: E[Λ] = ν B⁻¹, E[Λμ] = ν B⁻¹ m, E[μᵀΛμ] = D/κ + ν mᵀB⁻¹m.
One item x with weight w: κ' = κ + w, m' = (κ m + w x) / κ', ν' = ν + w,
B' = B + (w κ / κ') (x - m)(x - m)ᵀ, a rank-one update of B's Cholesky factor.
Draws (draw): Λ = Pᵀ P by Bartlett's decomposition (P = Aᵀ U, wishart.wishart_draw), then
μ = m + P⁻¹ z / √κ with z ~ N(0, I), so Cov(μ | Λ) = P⁻¹ P⁻ᵀ / κ = (κ Λ)⁻¹.
Integer-valued columns (``delta``, dequant.py): S_k gains N_k diag(δ), the local step
-½ Σ_d δ_d E[Λ_k]_dd = -½ ν_k Σ_d δ_d (B_k⁻¹)_dd, the predictive's Mahalanobis distance
Σ_d δ_d (B_k⁻¹)_dd, and one item's B' also w diag(δ) (L_k refactored: Dequant.update_state).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import gammaln

from . import wishart as W
from .base import Arrays, Data, ObsModel, weighted_outer
from .checks import check_component, check_dense, check_weight, dense_item, dense_items
from .dequant import Dequant, gram_diag, precision_diag, set_steps
from .prior_learning import KAPPA_MAX, identifiable, learn_wishart, widened
from .prior_scale import SHRINKAGE, data_scale_matrix


class Gauss(ObsModel):
    """Gaussian components with their own mean and full covariance."""

    name = "gauss"
    default_for = "dense"

    @classmethod
    def component_params(cls, D: int) -> int:
        """A mean and a covariance: D + D (D + 1) / 2."""
        return D * (D + 3) // 2

    def __init__(self, D: int, m0: np.ndarray, kappa0: float, nu0: float, B0: np.ndarray,
                 delta: np.ndarray | None = None) -> None:
        """``delta``: each column's step Δ_d, 0 for a continuous one (None: all 0); integer
        columns are dequantised (dequant.py)."""
        set_normal_wishart(self, D, m0, kappa0, nu0, B0, delta)
        self._logZ0 = _log_Z_nw(self.kappa0, self.nu0, self._logdet_B0, D)

    @classmethod
    def default(cls, X: Data, kappa0: float = 0.01, nu0: float | None = None, scale: float = 0.1,
                m0: np.ndarray | None = None, B0: np.ndarray | None = None,
                shrinkage: float = SHRINKAGE, delta: np.ndarray | None = None,
                floor: np.ndarray | None = None) -> Gauss:
        """The data-scaled Normal-Wishart prior (normal_wishart_default)."""
        return cls(**normal_wishart_default(X, kappa0, nu0, scale, m0, B0, shrinkage, floor),
                   delta=delta)

    def prior(self) -> dict[str, Any]:
        return normal_wishart_prior(self)

    def prior_figures(self) -> dict[str, float]:
        """κ0, ν0, |m0| and the scale tr(B0) / (D ν0): the mean eigenvalue of E[Λ]⁻¹."""
        return {"kappa0": self.kappa0, "nu0": self.nu0, "m0_norm": float(np.linalg.norm(self.m0)),
                "scale": float(np.trace(self.B0)) / (self.D * self.nu0)}

    def learn_prior(self, post: Arrays, base: ObsModel) -> Gauss:
        """The Normal-Wishart maximising Σ_k E_q[ln NW(μ_k, Λ_k | m0, κ0, ν0, B0 = s T)] given the
        K posteriors (prior_learning), T = B0 D / tr B0 (this prior's shape) fixed. The terms
        separate into (m0, κ0) and (s, ν0), so one sweep is the joint argmax:
        m0 = (Σ_k E[Λ_k])⁻¹ Σ_k E[Λ_k] m_k for any κ0, from -κ0/2 Σ_k (m_k - m0)ᵀ E[Λ_k] (m_k - m0);
        κ0 = K D / Σ_k [D/κ_k + ν_k (m_k - m0)ᵀ B_k⁻¹ (m_k - m0)], from K D/2 ln κ0
        - κ0/2 Σ_k E[(μ_k - m0)ᵀ Λ_k (μ_k - m0)], κ0 ≤ KAPPA_MAX (worth at most one item);
        (ν0, s) by prior_learning.learn_wishart. Bounds are widened to contain the current
        values. Unchanged unless the components are ``identifiable`` (N_k > D for three).
        ``base``: the run's initial prior, whose E[Λ] the learned prior's never exceeds."""
        D = self.D
        N = post["kappa"] - self.kappa0
        if not identifiable(N, D):
            return self
        nu, U, m = post["nu"], post["U"], post["m"]
        E_lam = nu[:, None, None] * (np.swapaxes(U, -1, -2) @ U)
        m0 = np.linalg.solve(E_lam.sum(0), np.einsum("kij,kj->i", E_lam, m))
        Ud = np.einsum("kij,kj->ki", U, m - m0)
        spread = D / post["kappa"] + nu * np.einsum("ki,ki->k", Ud, Ud)
        n = float(N.sum())
        kappa0 = float(np.clip(len(N) * D / spread.sum(), *widened(0.0, KAPPA_MAX, self.kappa0)))
        nu0, B0 = learn_wishart(post, self.nu0, self.B0, base.nu0, base.B0, n)
        return Gauss(D, m0, kappa0, nu0, B0, self.delta)

    def check_data(self, X: Data) -> None:
        check_dense(X, self.D)

    def stat_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"x": (self.D,), "xxT": (self.D, self.D)}

    def stats(self, X: Data, R: np.ndarray) -> Arrays:
        X = np.asarray(X, dtype=float)
        xxT = weighted_outer(X, R)
        if self.dq is not None:
            xxT += self.dq.second_moments(R.sum(axis=0))
        return {"x": R.T @ X, "xxT": xxT}

    def post(self, N: np.ndarray, stats: Arrays) -> Arrays:
        kappa, m, B = self._update(N, stats)
        return {"kappa": kappa, "m": m, "nu": self.nu0 + np.asarray(N, dtype=float),
                **W.factorize(B)}

    def _update(self, N: np.ndarray, stats: Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """κ = κ0 + N, m = (κ0 m0 + Σ r x) / κ, B = B0 + Σ r x xᵀ + κ0 m0 m0ᵀ - κ m mᵀ."""
        N = np.asarray(N, dtype=float)
        kappa = self.kappa0 + N
        m = (self.kappa0 * self.m0 + stats["x"]) / kappa[:, None]
        B = (self.B0 + stats["xxT"] + self.kappa0 * np.outer(self.m0, self.m0)
             - kappa[:, None, None] * m[:, :, None] * m[:, None, :])
        return kappa, m, 0.5 * (B + np.swapaxes(B, -1, -2))

    def E_loglik(self, X: Data, post: Arrays) -> np.ndarray:
        """-D/2 log 2π + ½ E[log|Λ|] - ½ (D/κ + ν (x - m)ᵀ B⁻¹ (x - m))."""
        quad = W.mahalanobis(np.asarray(X, dtype=float), post["U"], post["m"])
        return self._E_loglik_offset(post) - 0.5 * post["nu"] * quad

    def _E_loglik_offset(self, post: Arrays) -> np.ndarray:
        """E_loglik's terms free of x: -D/2 log 2π + ½ E[log|Λ|] - ½ D/κ (K,), and with integer
        columns Σ log Δ_d - ½ Σ_d δ_d E[Λ]_dd."""
        D = self.D
        elogdet = W.E_logdet(post["nu"], post["logdet_B"], D)
        offset = -0.5 * D * W.LOG2PI + 0.5 * elogdet - 0.5 * D / post["kappa"]
        return offset if self.dq is None else offset + self.dq.offset(precision_diag(post))

    def local_step(self, X: Data, post: Arrays,
                   Elogw: np.ndarray) -> tuple[np.ndarray, np.ndarray, Arrays, np.ndarray]:
        """Eq. 9 fused with the statistics of Eq. 7: (R, N, stats, H), equal to responsibilities
        followed by N = Σ_n r_n, stats and the entropies. E[log w_k] + E_loglik is linear in the
        quadratic features of y = x - c, c the batch mean (wishart.quad_theta), so both the
        log-likelihoods and the statistics are matrix products with those features
        (wishart.feature_estep); the centring keeps the expanded quadratic forms accurate."""
        F = X if isinstance(X, W.QuadFeatures) else W.QuadFeatures(X, centred=True)
        theta = W.quad_theta(post["U"], post["nu"], post["m"] - F.center)
        theta[:, -1] += self._E_loglik_offset(post) + Elogw
        R, G, H = W.feature_estep(F, theta)
        N, xxT, x = W.feature_stats(G, self.D, F.center)
        if self.dq is not None:
            xxT += self.dq.second_moments(N)
        return R, N, {"x": x, "xxT": xxT}, H

    def repeated(self, X: Data) -> W.QuadFeatures:
        """X with its quadratic features kept for repeated local steps."""
        return W.QuadFeatures(X, centred=True, keep=True)

    def draw(self, post: Arrays, rng: np.random.Generator) -> Arrays:
        """(μ_k, Λ_k) ~ NW(m_k, κ_k, ν_k, B_k⁻¹) as θ = {"mu": μ (K, D), "U": P (K, D, D) with
        Λ = Pᵀ P, "logdet": log|Λ| (K,)}; μ - m = P⁻¹ z / √κ by one LU solve per component."""
        P, logdet = W.wishart_draw(post["nu"], post["U"], post["logdet_B"], rng)
        z = rng.standard_normal(post["m"].shape)
        dmu = np.linalg.solve(P, z[..., None])[..., 0] if len(z) else z
        return {"mu": post["m"] + dmu / np.sqrt(post["kappa"])[:, None], "U": P,
                "logdet": logdet}

    def sample_items(self, theta: Arrays, rng: np.random.Generator,
                     n_words: np.ndarray | None = None) -> np.ndarray:
        """x = μ + P⁻¹ z, z ~ N(0, I): Cov(x) = (Pᵀ P)⁻¹ = Λ⁻¹ (n, D)."""
        z = rng.standard_normal(theta["mu"].shape)
        return theta["mu"] + (np.linalg.solve(theta["U"], z[..., None])[..., 0] if len(z) else z)

    def loglik(self, X: Data, theta: Arrays) -> np.ndarray:
        """log N(x | μ, Λ⁻¹) = -D/2 log 2π + ½ log|Λ| - ½ |P (x - μ)|²: (n, K); with integer
        columns E_u log N(x + u | μ, Λ⁻¹) + Σ log Δ_d (dequant.py)."""
        quad = W.mahalanobis(np.asarray(X, dtype=float), theta["U"], theta["mu"])
        out = -0.5 * self.D * W.LOG2PI + 0.5 * theta["logdet"] - 0.5 * quad
        return out if self.dq is None else out + self.dq.offset(gram_diag(theta["U"]))

    def elbo(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """Σ_k E[log p(x | μ, Λ)] + E[log NW(μ, Λ | λ0)] - E[log q(μ, Λ)] for any q.

        The quadratic forms of data and prior combine into ν tr(B_q⁻¹ M) with
        M = S + B0 + κ0 m0 m0ᵀ - h mᵀ - m hᵀ + (N + κ0) m mᵀ, h = x + κ0 m0.
        """
        D = self.D
        N = np.asarray(N, dtype=float)
        kappa, m, nu, logdet = post["kappa"], post["m"], post["nu"], post["logdet_B"]
        elogdet = W.E_logdet(nu, logdet, D)
        h = stats["x"] + self.kappa0 * self.m0
        hm = h[:, :, None] * m[:, None, :]
        M = (stats["xxT"] + self.B0 + self.kappa0 * np.outer(self.m0, self.m0)
             - hm - np.swapaxes(hm, -1, -2)
             + (N + self.kappa0)[:, None, None] * m[:, :, None] * m[:, None, :])
        tr = W.trace_inv(post["U"], M)
        data = N * (-0.5 * D * W.LOG2PI + 0.5 * elogdet)
        prior = -self._logZ0 + 0.5 * (self.nu0 - D) * elogdet
        entropy = (_log_Z_nw(kappa, nu, logdet, D) - 0.5 * (nu - D) * elogdet
                   + 0.5 * D * (1.0 + nu))
        quad = -0.5 * (N + self.kappa0) * D / kappa - 0.5 * nu * tr
        if self.dq is not None:
            data += self.dq.cell(N)
        return float(np.sum(data + prior + entropy + quad))

    def log_marginal(self, N: np.ndarray, stats: Arrays) -> np.ndarray:
        """-N D/2 log 2π + log Z_NW(λ_k) - log Z_NW(λ0) (Eq. 12) (+ N Σ log Δ_d)."""
        kappa, _, B = self._update(N, stats)
        nu = self.nu0 + np.asarray(N, dtype=float)
        out = (-0.5 * np.asarray(N) * self.D * W.LOG2PI
               + _log_Z_nw(kappa, nu, W.logdet(B), self.D) - self._logZ0)
        return out if self.dq is None else out + self.dq.cell(N)

    def predictive_logpdf(self, X: Data, post: Arrays) -> np.ndarray:
        """Student-t: ν' = ν - D + 1 dof, location m, scale Σ = B (κ + 1) / (κ ν'); with integer
        columns the bound on E_u of it (dequant.py): the distance plus Σ_d δ_d (B⁻¹)_dd."""
        mahal = W.mahalanobis(np.asarray(X, dtype=float), post["U"], post["m"])
        return student_t_bound(self.dq, mahal, None if self.dq is None else gram_diag(post["U"]),
                               post["kappa"], post["nu"], post["logdet_B"], self.D)

    def features(self, X: Data) -> np.ndarray:
        """The items whitened by the prior's scale, U0 (x - m0) with B0⁻¹ = U0ᵀ U0: components
        differ in location, measured in the data's own units and directions."""
        return (np.asarray(X, dtype=float) - self.m0) @ self._U0.T

    def predictive_state(self, post: Arrays) -> Arrays:
        """κ, m, ν, the lower Cholesky factor L of B (B = L Lᵀ) and log|B| = 2 Σ log diag L;
        with integer columns the diagonals of B⁻¹ (dequant.py)."""
        L = np.linalg.cholesky(post["B"])
        state = {"kappa": np.array(post["kappa"], dtype=float),
                 "m": np.array(post["m"], dtype=float), "nu": np.array(post["nu"], dtype=float),
                 "L": L, "logdet_B": W.logdet_from_chol(L)}
        return state if self.dq is None else {**state, **self.dq.state_entries(L)}

    def predictive_logpdf_state(self, state: Arrays, X: Data) -> np.ndarray:
        """The Student-t of predictive_logpdf with (x - m)ᵀ B⁻¹ (x - m) = |z|², L z = x - m:
        one triangular solve per item and component, O(K D²) per item."""
        X = dense_items(X, self.D)
        Z = W.solve_lower(state["L"], X[:, None, :] - state["m"][None, :, :])
        mahal = np.einsum("nkd,nkd->nk", Z, Z)
        return student_t_bound(self.dq, mahal, state.get("inv_diag"), state["kappa"],
                               state["nu"], state["logdet_B"], self.D)

    def absorb(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """κ' = κ + w, m' = m + (w / κ') (x - m), ν' = ν + w and B' = B + (w κ / κ') (x - m)(x - m)ᵀ
        as a rank-one update of L_k, O(D²) (with integer columns B' also gains w diag(δ):
        L_k refactored, O(D³), Dequant.update_state); log|B_k| from the new diagonal."""
        k = check_component(k, len(state["kappa"]))
        x, w = dense_item(x, self.D), check_weight(w)
        kappa = state["kappa"][k]
        kappa_new = kappa + w
        d = x - state["m"][k]
        if self.dq is None:
            W.chol_rank1(state["L"][k], np.sqrt(w * kappa / kappa_new) * d, +1)
        else:
            self.dq.update_state(state, k, np.sqrt(w * kappa / kappa_new) * d, w, +1)
        state["m"][k] += (w / kappa_new) * d
        state["kappa"][k] = kappa_new
        state["nu"][k] += w
        state["logdet_B"][k] = W.logdet_from_chol(state["L"][k])

    def remove(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """Inverse of absorb from the current κ', m': κ = κ' - w, m = m' - (w / κ) (x - m'),
        ν = ν' - w and B = B' - (w κ' / κ) (x - m')(x - m')ᵀ, a rank-one downdate of L_k."""
        k = check_component(k, len(state["kappa"]))
        x, w = dense_item(x, self.D), check_weight(w)
        kappa_new = state["kappa"][k] - w
        nu_new = state["nu"][k] - w
        if not (kappa_new > 0 and nu_new > self.D - 1):
            raise ValueError(f"removing weight {w} leaves kappa = {kappa_new}, nu = {nu_new}: "
                             f"they must stay above 0 and D - 1")
        d = x - state["m"][k]
        v = np.sqrt(w * state["kappa"][k] / kappa_new) * d
        if self.dq is None:
            W.chol_rank1(state["L"][k], v, -1)
        else:  # and - w diag(δ)
            self.dq.update_state(state, k, v, w, -1)
        state["m"][k] -= (w / kappa_new) * d
        state["kappa"][k] = kappa_new
        state["nu"][k] = nu_new
        state["logdet_B"][k] = W.logdet_from_chol(state["L"][k])

    def means(self, post: Arrays) -> np.ndarray:
        """E[μ_k] = m_k (from a posterior or a predictive state)."""
        return np.array(post["m"], dtype=float)

    def covariances(self, post: Arrays) -> np.ndarray:
        """E[Σ_k] = E[Λ_k⁻¹] (see ``wishart.expected_inverse``): (K, D, D)."""
        return W.expected_inverse(post["B"], post["nu"])


def set_normal_wishart(model: Any, D: int, m0: np.ndarray, kappa0: float, nu0: float,
                       B0: np.ndarray, delta: np.ndarray | None) -> None:
    """Check a Normal-Wishart prior (ν0 > D - 1, κ0 > 0, B0 symmetric positive definite) and
    set it on ``model``: D, m0, kappa0, nu0, B0, B0's inverse Cholesky factor _U0 and
    log-determinant _logdet_B0, and the columns' steps (set_steps)."""
    if nu0 <= D - 1:
        raise ValueError(f"nu0 must exceed D - 1 = {D - 1}")
    if kappa0 <= 0:
        raise ValueError("kappa0 must be positive")
    model.D = D
    model.m0 = np.broadcast_to(np.asarray(m0, dtype=float), (D,)).copy()
    model.kappa0 = float(kappa0)
    model.nu0 = float(nu0)
    prior = W.prior_factors(B0, D)
    model.B0, model._U0, model._logdet_B0 = prior["B"], prior["U"], prior["logdet_B"]
    set_steps(model, D, delta)


def normal_wishart_prior(model: Any) -> dict[str, Any]:
    """``prior()`` of a Normal-Wishart model (gauss, tied-gauss): its constructor's arguments,
    ``delta`` only where a column is integer-valued."""
    out = {"D": model.D, "m0": model.m0.tolist(), "kappa0": model.kappa0, "nu0": model.nu0,
           "B0": model.B0.tolist()}
    return out if model.dq is None else {**out, **model.dq.saved()}


def normal_wishart_default(X: Data, kappa0: float, nu0: float | None, scale: float,
                           m0: np.ndarray | None, B0: np.ndarray | None,
                           shrinkage: float, floor: np.ndarray | None = None) -> dict[str, Any]:
    """The data-scaled Normal-Wishart prior (D, m0, kappa0, nu0, B0): ν0 = D + 2, m0 = the data
    mean and E[Λ⁻¹] = scale · C, C the sample's covariance with its correlations shrunk
    (data_scale_matrix; ``floor``: its constant columns' least target): a cluster is expected
    to spread like a tenth of the data, in the data's own directions and units."""
    X = np.asarray(X, dtype=float)
    D = X.shape[1]
    nu0 = D + 2.0 if nu0 is None else float(nu0)
    m0 = (X.mean(0) if len(X) else np.zeros(D)) if m0 is None else m0
    if B0 is None:
        if nu0 <= D + 1:
            raise ValueError(f"the default B0 needs nu0 > D + 1 = {D + 1}; pass B0")
        C = np.atleast_2d(np.cov(X, rowvar=False, bias=True)) if len(X) > 1 else np.eye(D)
        B0 = (nu0 - D - 1) * data_scale_matrix(C, scale, shrinkage, floor)
    return {"D": D, "m0": m0, "kappa0": kappa0, "nu0": nu0, "B0": B0}


def student_t_bound(dq: Dequant | None, mahal: np.ndarray, inverse_diag: np.ndarray | None,
                    kappa: np.ndarray, nu: np.ndarray, logdet_B: np.ndarray,
                    D: int) -> np.ndarray:
    """student_t_logpdf, or with integer columns (``dq``) its bound on E_u log t(x + u) +
    Σ log Δ_d: the distance mahal + Σ_d δ_d (B⁻¹)_dd (``inverse_diag``: the diagonals of
    B_k⁻¹, (K, D) or (D,) for one shared B; dequant.py)."""
    if dq is None:
        return student_t_logpdf(mahal, kappa, nu, logdet_B, D)
    return dq.log_cell + student_t_logpdf(mahal + dq.spread(inverse_diag), kappa, nu,
                                          logdet_B, D)


def student_t_logpdf(mahal: np.ndarray, kappa: np.ndarray, nu: np.ndarray,
                     logdet_B: np.ndarray, D: int) -> np.ndarray:
    """The Normal-Wishart posterior predictive, a Student-t with ν' = ν - D + 1 dof, location m
    and scale Σ = B (κ + 1) / (κ ν'), from mahal = (x - m)ᵀ B⁻¹ (x - m) (n, K): with
    c = κ / (κ + 1), (x - m)ᵀ Σ⁻¹ (x - m) / ν' = c · mahal and log|Σ| = log|B| - D log(c ν')."""
    dof = nu - D + 1.0
    c = kappa / (kappa + 1.0)
    logdet_sigma = logdet_B - D * np.log(c * dof)
    return (gammaln(0.5 * (dof + D)) - gammaln(0.5 * dof) - 0.5 * D * np.log(dof * np.pi)
            - 0.5 * logdet_sigma - 0.5 * (dof + D) * np.log1p(c * mahal))


def _log_Z_nw(kappa: np.ndarray, nu: np.ndarray, logdet_B: np.ndarray, D: int) -> np.ndarray:
    """Log normaliser of Normal-Wishart(m, κ, ν, B⁻¹): D/2 log(2π/κ) + log Z_W(ν, B)."""
    return 0.5 * D * (W.LOG2PI - np.log(kappa)) + W.log_Z(nu, logdet_B, D)
