"""Gaussian components with their own means and one shared ("tied") precision matrix.

Λ ~ Wishart(ν0, B0⁻¹), μ_k | Λ ~ N(m0, (κ0 Λ)⁻¹), x | z = k ~ N(μ_k, Λ⁻¹).
Statistics: x_k = Σ_n r_nk x_n per component and two shared ones (no component axis): the
number of items n and their pooled scatter T = Σ_n (x_n - m0)(x_n - m0)ᵀ, which do not depend on
q(z), so every move leaves them unchanged. Every item counts in Λ's posterior whole: where its
responsibilities sum to less than 1 (EP's sites after a cluster with S_k < ε left), the rest of
its scatter is taken about m0, as if held by a component whose mean is m0.
Given q(z) the optimal q(μ_1..K, Λ) is conjugate and structured (no mean field between μ and Λ):
q(Λ) = Wishart(ν, B⁻¹), ν = ν0 + n, B = B0 + T - Σ_k g_k g_kᵀ / κ_k with g_k = x_k - N_k m0, and
q(μ_k | Λ) = N(m_k, (κ_k Λ)⁻¹), κ_k = κ0 + N_k, m_k = m0 + g_k / κ_k. This is
B0 + Σ_k [S_k + κ0 m0 m0ᵀ - κ_k m_k m_kᵀ] with S_k = Σ_n r_nk x_n x_nᵀ, written about m0 so that
data far from the origin lose no digits, and with Σ_k S_k = T it needs no per-component scatter.
E_q[log p(x | z = k)] = -D/2 log 2π + ½ E[log|Λ|] - ½ (D/κ_k + ν (x - m_k)ᵀ B⁻¹ (x - m_k)).
Evidence (the ELBO at the optimal q(μ, Λ); the Wishart terms once, the Normal ones per component):
log M(S) = -n D/2 log 2π + Σ_k D/2 log(κ0/κ_k) + log Z_W(ν, B) - log Z_W(ν0, B0).
A merge of a and b keeps ν and changes B by α δδᵀ - β m̄m̄ᵀ, δ = m_a - m_b, m̄ = (κ_a m_a + κ_b m_b)
/ (κ_a + κ_b) - m0, α = κ_a κ_b / (κ_a + κ_b), β = κ0 (κ_a + κ_b) / κ_ab: rank two (rank one only
as κ0 → 0); the matrix determinant lemma gives its log-determinant in O(D) per pair.
Predictive of component k: Student-t, ν' = ν - D + 1 dof, location m_k, scale
B (κ_k + 1) / (κ_k ν').
One item x with weight w into k: κ' = κ + w, m' = m + (w/κ')(x - m), ν' = ν + w and
B' = B + (w κ/κ')(x - m)(x - m)ᵀ: a rank-one update of the one shared Cholesky factor, after
which every component's whitened mean is re-whitened in O(D) (wishart.rewhiten).
Integer-valued columns (``delta``, dequant.py): T gains n diag(δ), the local step the constant
-½ ν Σ_d δ_d (B⁻¹)_dd (the same for every component: it moves no responsibility), the
predictive's distance Σ_d δ_d (B⁻¹)_dd, and one item's B' also w diag(δ) (L refactored,
Dequant.update_state, and the means re-whitened).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import wishart as W
from .base import Arrays, Data, ObsModel
from .checks import check_component, check_dense, check_weight, dense_item, dense_items
from .dequant import gram_diag, precision_diag
from .gauss import (
    Gauss,
    normal_wishart_default,
    normal_wishart_prior,
    set_normal_wishart,
    student_t_bound,
)
from .prior_learning import KAPPA_MAX, identifiable, widened
from .prior_scale import SHRINKAGE

# ESTEP_BYTES: importable from here by benchmarks/speed/tied_estep.py
from .tied_estep import ESTEP_BYTES, TiedItems, estep, sq_distances  # noqa: F401

# the entries of a posterior or one-item state with a component axis; the others are shared
COMPONENT_KEYS = frozenset({"kappa", "m", "W"})


class TiedGauss(ObsModel):
    """Gaussian components with their own means and one shared full covariance."""

    name = "tied-gauss"
    pairwise_gains = False  # every merge moves the shared precision

    @classmethod
    def component_params(cls, D: int) -> int:
        """A mean (the one covariance is shared by all components)."""
        return D

    def __init__(self, D: int, m0: np.ndarray, kappa0: float, nu0: float, B0: np.ndarray,
                 delta: np.ndarray | None = None) -> None:
        """``delta``: each column's step Δ_d, 0 for a continuous one (None: all 0); integer
        columns are dequantised (dequant.py)."""
        set_normal_wishart(self, D, m0, kappa0, nu0, B0, delta)
        self._logZW0 = float(W.log_Z(self.nu0, self._logdet_B0, D))

    @classmethod
    def default(cls, X: Data, kappa0: float = 0.01, nu0: float | None = None, scale: float = 0.1,
                m0: np.ndarray | None = None, B0: np.ndarray | None = None,
                shrinkage: float = SHRINKAGE, delta: np.ndarray | None = None,
                floor: np.ndarray | None = None) -> TiedGauss:
        """Gauss's data-scaled Normal-Wishart prior (normal_wishart_default), here over the one
        shared precision."""
        return cls(**normal_wishart_default(X, kappa0, nu0, scale, m0, B0, shrinkage, floor),
                   delta=delta)

    def prior(self) -> dict[str, Any]:
        return normal_wishart_prior(self)

    prior_figures = Gauss.prior_figures

    def learn_prior(self, post: Arrays, base: ObsModel) -> TiedGauss:
        """κ0 maximising Σ_k E_q[ln N(μ_k | m0, (κ0 Λ)⁻¹)] = Σ_k [D/2 ln κ0 - κ0/2 E[(μ_k - m0)ᵀ
        Λ (μ_k - m0)]] + const at fixed q, with E[...] = D/κ_k + ν |U (m_k - m0)|² under the
        structured q: κ0 = K D / Σ_k [D/κ_k + ν |U (m_k - m0)|²], at most KAPPA_MAX (widened to
        contain the current κ0). m0 stays: the pooled scatter in every stored summary is taken
        about it. ν0 and B0 stay: Λ is one draw, and a type-II (ν0, s) from one posterior fits
        the prior to that posterior, not to a population (prior_learning.MIN_COMPONENTS): on
        dpmm_shaped's 2,000-item sample at its 79 classes, ν0 = 374 prior items holding Λ to
        the total covariance's shape T, which would charge every split for moving Λ from it.
        Unchanged unless three components have N_k > 1."""
        N = post["kappa"] - self.kappa0
        if not identifiable(N, 1):
            return self
        Z = (post["m"] - self.m0) @ post["U"].T
        spread = self.D / post["kappa"] + float(post["nu"]) * (Z * Z).sum(1)
        kappa0 = float(np.clip(len(N) * self.D / spread.sum(),
                               *widened(0.0, KAPPA_MAX, self.kappa0)))
        return TiedGauss(self.D, self.m0, kappa0, self.nu0, self.B0, self.delta)

    def check_data(self, X: Data) -> None:
        check_dense(X, self.D)

    # statistics and the global update -----------------------------------------------------

    def stat_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"x": (self.D,)}

    def shared_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"n": (), "scatter": (self.D, self.D)}

    def stats(self, X: Data, R: np.ndarray) -> Arrays:
        """x_k = Σ_n r_nk x_n; n and T = Σ_n (x_n - m0)(x_n - m0)ᵀ, whatever R."""
        X = np.asarray(X, dtype=float)
        Y = X - self.m0
        return {"x": R.T @ X, "n": np.asarray(float(len(X))),
                "scatter": self._cells(Y.T @ Y, len(X))}

    def _cells(self, scatter: np.ndarray, n: int) -> np.ndarray:
        """The pooled scatter of n items, with integer columns plus n diag(δ) (dequant.py)."""
        return scatter if self.dq is None else scatter + self.dq.second_moments(float(n))

    def post(self, N: np.ndarray, stats: Arrays) -> Arrays:
        """κ = κ0 + N, m = m0 + g/κ, ν = ν0 + n, B = B0 + T - Σ_k g_k g_kᵀ / κ_k (g = x - N m0)."""
        N = np.asarray(N, dtype=float)
        kappa = self.kappa0 + N
        g = stats["x"] - N[:, None] * self.m0
        B = self.B0 + stats["scatter"] - (g / kappa[:, None]).T @ g
        B = 0.5 * (B + B.T)
        factors = W.factorize(B)
        return {"kappa": kappa, "m": self.m0 + g / kappa[:, None],
                "nu": np.asarray(self.nu0 + float(stats["n"])), "B": factors["B"],
                "U": factors["U"], "logdet_B": np.asarray(factors["logdet_B"])}

    # the local step ------------------------------------------------------------------------

    def _E_loglik_offset(self, post: Arrays) -> np.ndarray:
        """E_loglik's terms free of x: -D/2 log 2π + ½ E[log|Λ|] - ½ D/κ_k (K,), and with integer
        columns Σ log Δ_d - ½ Σ_d δ_d E[Λ]_dd."""
        elogdet = W.E_logdet(post["nu"], post["logdet_B"], self.D)
        offset = -0.5 * self.D * W.LOG2PI + 0.5 * elogdet - 0.5 * self.D / post["kappa"]
        return offset if self.dq is None else offset + self.dq.offset(precision_diag(post))

    def E_loglik(self, X: Data, post: Arrays) -> np.ndarray:
        """-D/2 log 2π + ½ E[log|Λ|] - ½ (D/κ_k + ν |U (x - m_k)|²), B⁻¹ = Uᵀ U: (n, K)."""
        d2 = sq_distances(np.asarray(X, dtype=float), post["U"], post["m"])
        return self._E_loglik_offset(post) - 0.5 * float(post["nu"]) * d2

    def local_step(self, X: Data, post: Arrays,
                   Elogw: np.ndarray) -> tuple[np.ndarray, np.ndarray, Arrays, np.ndarray]:
        """Eq. 9 fused with Eq. 7: (R, N, stats, H). About the items' mean c, -½ ν |U(x - m_k)|²
        = -½ ν |U(x - c)|² + a_k·(x - c) - ½ ν |U(m_k - c)|² with a_k = ν B⁻¹ (m_k - c); the
        first term is the same for every k, so R and H need only the K products a_k·(x - c):
        O(N K D) for the responsibilities, plus O(N D²) once for the pooled scatter."""
        F = X if isinstance(X, TiedItems) else TiedItems(X)
        n = F.X.shape[0]
        nu = float(post["nu"])
        Z = (post["m"] - F.center) @ post["U"].T  # whitened means about c
        A = nu * (Z @ post["U"])
        b = self._E_loglik_offset(post) + Elogw - 0.5 * nu * (Z * Z).sum(1)
        R, N, Sx, H = estep(F, A, b)
        return R, N, {"x": Sx + N[:, None] * F.center, "n": np.asarray(float(n)),
                      "scatter": self._scatter_about_m0(F)}, H

    def _scatter_about_m0(self, F: TiedItems) -> np.ndarray:
        """Σ (x - m0)(x - m0)ᵀ from the scatter about the mean c: + n d dᵀ, d = c - m0."""
        d = F.center - self.m0
        return self._cells(F.scatter + F.X.shape[0] * np.outer(d, d), F.X.shape[0])

    def repeated(self, X: Data) -> TiedItems:
        """X with its mean kept, and its scatter once the first step has made it."""
        return TiedItems(X)

    # the objective ------------------------------------------------------------------------

    def elbo(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """E_q[log p(X | z, μ, Λ) + log p(μ, Λ) - log q(μ, Λ)] for any structured q:
        -n D/2 log 2π + Σ_k [D/2 (log(κ0/κ_k) + 1) - ½ (N_k + κ0) D/κ_k] + log Z_W(ν, B)
        - log Z_W(ν0, B0) + ν D/2 - ½ ν tr(B⁻¹ M) + ½ (n + ν0 - ν) E[log|Λ|], where, about m0,
        M = B0 + T - Σ_k [g_k m̃_kᵀ + m̃_k g_kᵀ - (N_k + κ0) m̃_k m̃_kᵀ], m̃_k = m_k - m0."""
        D = self.D
        N = np.asarray(N, dtype=float)
        n, nu, logdet = float(stats["n"]), float(post["nu"]), float(post["logdet_B"])
        kappa = post["kappa"]
        g = stats["x"] - N[:, None] * self.m0
        mt = post["m"] - self.m0
        gm = g.T @ mt
        M = self.B0 + stats["scatter"] - gm - gm.T + (mt.T * (N + self.kappa0)) @ mt
        tr = float(np.einsum("ij,ij->", post["U"] @ M, post["U"]))
        elogdet = float(W.E_logdet(nu, logdet, D))
        components = (0.5 * D * (np.log(self.kappa0 / kappa) + 1.0)
                      - 0.5 * (N + self.kappa0) * D / kappa)
        wishart = (float(W.log_Z(nu, logdet, D)) - self._logZW0 + 0.5 * nu * (D - tr)
                   + 0.5 * (n + self.nu0 - nu) * elogdet)
        return float(-0.5 * n * D * W.LOG2PI + components.sum() + wishart + self._cell(n))

    def _cell(self, n: float) -> float:
        """n Σ log Δ_d, the bound's cell term (0 without integer columns, or every Δ_d = 1)."""
        return 0.0 if self.dq is None else float(self.dq.cell(n))

    def _evidence(self, n: float, post: Arrays) -> float:
        """log M(S) from the optimal q's parameters (module docstring)."""
        D = self.D
        return float(-0.5 * n * D * W.LOG2PI
                     + 0.5 * D * np.log(self.kappa0 / post["kappa"]).sum()
                     + W.log_Z(post["nu"], post["logdet_B"], D) - self._logZW0 + self._cell(n))

    def elbo_at_optimum(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        return self._evidence(float(stats["n"]), post)

    def log_evidence(self, N: np.ndarray, stats: Arrays) -> float:
        return self._evidence(float(stats["n"]), self.post(N, stats))

    def log_marginal(self, N: np.ndarray, stats: Arrays) -> np.ndarray:
        """The components share Λ: their evidence does not split into per-component factors."""
        raise NotImplementedError("tied-gauss components share one precision: there is no "
                                  "per-component evidence (use log_evidence or merge_gains)")

    def merge_gains(self, N: np.ndarray, stats: Arrays, a: np.ndarray,
                    b: np.ndarray) -> np.ndarray:
        """log M(S with b_i merged into a_i) - log M(S), exactly: D/2 log(κ_a κ_b / (κ0 κ_ab))
        - ν/2 log det(I₂ + C Gᵀ B⁻¹ G), G = [δ, m̄], C = diag(α, -β) (module docstring; the
        matrix determinant lemma), from the means whitened once."""
        if len(a) == 0:
            return np.zeros(0)
        post = self.post(N, stats)
        kappa, k0 = post["kappa"], self.kappa0
        Z = (post["m"] - self.m0) @ post["U"].T
        ka, kb = kappa[a], kappa[b]
        kab = ka + kb - k0
        alpha, beta = ka * kb / (ka + kb), k0 * (ka + kb) / kab
        d = Z[a] - Z[b]
        mbar = (ka[:, None] * Z[a] + kb[:, None] * Z[b]) / (ka + kb)[:, None]
        gdd, gmm, gdm = (d * d).sum(1), (mbar * mbar).sum(1), (d * mbar).sum(1)
        det = (1.0 + alpha * gdd) * (1.0 - beta * gmm) + alpha * beta * gdm**2
        return 0.5 * self.D * np.log(ka * kb / (k0 * kab)) - 0.5 * float(post["nu"]) * np.log(det)

    def predictive_logpdf(self, X: Data, post: Arrays) -> np.ndarray:
        """Student-t: ν - D + 1 dof, location m_k, scale B (κ_k + 1) / (κ_k (ν - D + 1)); with
        integer columns the bound on E_u of it (dequant.py)."""
        d2 = sq_distances(np.asarray(X, dtype=float), post["U"], post["m"])
        return student_t_bound(self.dq, d2, None if self.dq is None else gram_diag(post["U"]),
                               post["kappa"], post["nu"], post["logdet_B"], self.D)

    # components of posteriors and states -------------------------------------------------

    def select(self, d: Arrays, idx: np.ndarray) -> Arrays:
        """Components ``idx``; Λ's entries (ν, B, U, L, log|B|) whole, in arrays of their own."""
        return {k: v[idx] if k in COMPONENT_KEYS else np.array(v, dtype=float)
                for k, v in d.items()}

    def concat(self, d: Arrays, e: Arrays) -> Arrays:
        """d's components, then e's, with d's Λ (e's is not read)."""
        return {k: np.concatenate([v, e[k]]) if k in COMPONENT_KEYS
                else np.array(v, dtype=float) for k, v in d.items()}

    def fresh(self, d: Arrays, new: Arrays) -> Arrays:
        """``new``'s component entries with d's Λ, for reading (shares d's arrays)."""
        return {k: new[k] if k in COMPONENT_KEYS else d[k] for k in d}

    # draws (the uncollapsed samplers' and PredictiveMixture.sample's) -----------------------

    def draw(self, post: Arrays, rng: np.random.Generator) -> Arrays:
        """One Λ ~ Wishart(ν, B⁻¹) for all components (Λ = Pᵀ P, wishart.wishart_draw), then
        μ_k = m_k + P⁻¹ z_k / √κ_k: θ = {"mu": (K, D), "U": P (D, D), "logdet": log|Λ| ()}."""
        P, logdet = W.wishart_draw(np.atleast_1d(post["nu"]), post["U"][None],
                                   np.atleast_1d(post["logdet_B"]), rng)
        z = rng.standard_normal(post["m"].shape)
        dmu = np.linalg.solve(P[0], z.T).T if len(z) else z
        return {"mu": post["m"] + dmu / np.sqrt(post["kappa"])[:, None], "U": P[0],
                "logdet": np.asarray(logdet[0])}

    def sample_items(self, theta: Arrays, rng: np.random.Generator,
                     n_words: np.ndarray | None = None) -> np.ndarray:
        """x_i = μ_i + P⁻¹ z_i, z_i ~ N(0, I): Cov(x_i) = Λ⁻¹ (n, D)."""
        z = rng.standard_normal(theta["mu"].shape)
        return theta["mu"] + (np.linalg.solve(theta["U"], z.T).T if len(z) else z)

    def loglik(self, X: Data, theta: Arrays) -> np.ndarray:
        """log N(x | μ_k, Λ⁻¹) = -D/2 log 2π + ½ log|Λ| - ½ |P (x - μ_k)|²: (n, K)."""
        d2 = sq_distances(np.asarray(X, dtype=float), theta["U"], theta["mu"])
        out = -0.5 * self.D * W.LOG2PI + 0.5 * float(theta["logdet"]) - 0.5 * d2
        return out if self.dq is None else out + self.dq.offset(gram_diag(theta["U"]))

    # the one-item path (ADF, EP) ----------------------------------------------------------

    def predictive_state(self, post: Arrays) -> Arrays:
        """κ, m and the whitened means W_k = L⁻¹ (m_k - m0) per component; ν, the lower Cholesky
        factor L of B and log|B| once, and with integer columns the diagonals of B⁻¹
        (dequant.py)."""
        L = np.linalg.cholesky(post["B"])
        m = np.array(post["m"], dtype=float)
        state = {"kappa": np.array(post["kappa"], dtype=float), "m": m,
                 "W": W.solve_lower(L[None], (m - self.m0)[:, None, :])[:, 0],
                 "nu": np.array(post["nu"], dtype=float), "L": L,
                 "logdet_B": np.array(W.logdet_from_chol(L))}
        return state if self.dq is None else {**state, **self.dq.state_entries(L)}

    def _whiten(self, state: Arrays, X: np.ndarray) -> np.ndarray:
        """L⁻¹ (x - m0) for rows x of X: one triangular solve each, O(D²)."""
        return W.solve_lower(state["L"][None], (X - self.m0)[:, None, :])[:, 0]

    def predictive_logpdf_state(self, state: Arrays, X: Data) -> np.ndarray:
        """The Student-t of predictive_logpdf with (x - m_k)ᵀ B⁻¹ (x - m_k) = |y - W_k|²,
        y = L⁻¹ (x - m0): O(D² + K D) per item."""
        Y = self._whiten(state, dense_items(X, self.D))
        d2 = ((Y[:, None, :] - state["W"][None, :, :]) ** 2).sum(-1)
        return student_t_bound(self.dq, d2, state.get("inv_diag"), state["kappa"], state["nu"],
                               state["logdet_B"], self.D)

    def absorb(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """κ' = κ + w, m' = m + (w/κ') (x - m), ν' = ν + w, B' = B + (w κ/κ') (x - m)(x - m)ᵀ as
        a rank-one update of L with p = L⁻¹ v = √(w κ/κ') (y - W_k); W_k moves by (w/κ')(y - W_k)
        and then every W_j is re-whitened for L'. O(D² + K D); with integer columns B' also
        gains w diag(δ) (_rank1)."""
        k = check_component(k, len(state["kappa"]))
        x, w = dense_item(x, self.D), check_weight(w)
        kappa = state["kappa"][k]
        kappa_new = kappa + w
        self._rank1(state, k, x, np.sqrt(w * kappa / kappa_new), w / kappa_new, +1, w)
        state["m"][k] += (w / kappa_new) * (x - state["m"][k])
        state["kappa"][k] = kappa_new
        state["nu"] += w

    def remove(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """Inverse of absorb from the current κ', m': κ = κ' - w, m = m' - (w/κ)(x - m'),
        ν = ν' - w, B = B' - (w κ'/κ)(x - m')(x - m')ᵀ (a rank-one downdate of L)."""
        k = check_component(k, len(state["kappa"]))
        x, w = dense_item(x, self.D), check_weight(w)
        kappa_new = state["kappa"][k] - w
        nu_new = float(state["nu"]) - w
        if not (kappa_new > 0 and nu_new > self.D - 1):
            raise ValueError(f"removing weight {w} leaves kappa = {kappa_new}, nu = {nu_new}: "
                             f"they must stay above 0 and D - 1")
        self._rank1(state, k, x, np.sqrt(w * state["kappa"][k] / kappa_new), -w / kappa_new, -1,
                    w)
        state["m"][k] -= (w / kappa_new) * (x - state["m"][k])
        state["kappa"][k] = kappa_new
        state["nu"][...] = nu_new

    def _rank1(self, state: Arrays, k: int, x: np.ndarray, scale: float, step: float,
               sign: int, w: float) -> None:
        """L L'ᵀ = L Lᵀ + sign · v vᵀ with v = scale · (x - m_k) and W_k += step · L⁻¹ (x - m_k),
        both in the old whitening; then every W_j is re-whitened for the new L. With integer
        columns B' also gains sign · w diag(δ): L' from Dequant.update_state, O(D³), and the
        means re-whitened as L'⁻¹ (L W_j), O(K D²). L is untouched if a downdate would leave
        B not positive definite (ValueError)."""
        d = self._whiten(state, x[None])[0] - state["W"][k]  # L⁻¹ (x - m_k)
        p = scale * d
        if self.dq is None:
            q = W.chol_rank1(state["L"], None, sign, p=p)
            state["W"][k] += step * d
            W.rewhiten(state["W"], p, q, sign)
        else:
            L = state["L"].copy()
            self.dq.update_state(state, ..., L @ p, w, sign)
            state["W"][k] += step * d
            state["W"][...] = W.solve_lower(state["L"][None], (state["W"] @ L.T)[:, None, :])[:, 0]
        state["logdet_B"][...] = W.logdet_from_chol(state["L"])

    # summaries of the fit -----------------------------------------------------------------

    def means(self, post: Arrays) -> np.ndarray:
        """E[μ_k] = m_k (from a posterior or a predictive state)."""
        return np.array(post["m"], dtype=float)

    def covariances(self, post: Arrays) -> np.ndarray:
        """E[Σ] = E[Λ⁻¹] = B / (ν - D - 1), the same for every component: (K, D, D)."""
        cov = W.expected_inverse(post["B"][None], np.atleast_1d(post["nu"]))
        return np.repeat(cov, len(post["kappa"]), axis=0)

    def features(self, X: Data) -> np.ndarray:
        """The items whitened by the prior's scale, U0 (x - m0) with B0⁻¹ = U0ᵀ U0."""
        return (np.asarray(X, dtype=float) - self.m0) @ self._U0.T
