"""Mixture of factor analysers: variational Bayes over each component's mean and loadings, one
diagonal noise Ψ shared by all components (Ghahramani & Beal 2000; Ghahramani & Hinton 1996).

Component k: x = μ_k + Λ_k y + ε, y ~ N(0, I_q), ε ~ N(0, Ψ), Ψ = diag(ψ) the same for every k,
so no component can make a coordinate's variance smaller than ψ_d (what keeps a few items that
light a rarely lit pixel from a component of their own; docs/theory/dense.rst). The model works
in the columns' standard units, x' = (x - m0) / σ (σ from the data: ``default``), adding the
Jacobian -Σ_d log σ_d per item so the bound is on the density of x itself.

Rows. With λ̃_d = [μ_d, Λ_d,:] ∈ R^{q+1} and ỹ = [1, y], x_d = λ̃_dᵀ ỹ + ε_d. The prior
λ̃_d ~ N(0, P⁻¹), P = diag(1/v0, α_1..α_q) (α: ARD precisions of the loading columns) factorises
over rows, and so does the optimal q(Λ̃) given q(y): q(λ̃_d) = N(m_d, C_d) with
C_d = (P + T/ψ_d)⁻¹, m_d = C_d X̃_d / ψ_d, T = Σ_n r_n E[ỹ ỹᵀ], X̃_d = Σ_n r_n x_nd E[ỹ_n].

Local factors. With E_d = C_d + m_d m_dᵀ, G = Σ_d E_d[y,y]/ψ_d, c = Σ_d E_d[y,μ]/ψ_d,
e = Σ_d E_d[μ,μ]/ψ_d and B = M̄ᵀ Ψ⁻¹ (M̄: the loadings' means), the optimal q(y_n | k) is
N(Γ⁻¹ b_n, Γ⁻¹) with Γ = I + G, b_n = B x_n - c; its value (the data term with the KL of y):
ℓ_n = -D/2 log 2π - ½ log|Ψ| - ½ log|Γ| - ½ (x_nᵀ Ψ⁻¹ x_n - 2 x_nᵀ Ψ⁻¹ μ̄ + e) + ½ b_nᵀ Γ⁻¹ b_n.
E[y_n] = A x_n - a (A = Γ⁻¹ B, a = Γ⁻¹ c) is linear in x_n, so T, X̃ and Σ_n r_n ℓ_n need only
N = Σ r_n, s = Σ r_n x_n and S = Σ r_n x_n x_nᵀ — the statistics ``gauss`` keeps:
Σ r E[y] = A s - N a, Σ r E[y yᵀ] = N Γ⁻¹ + A S Aᵀ - A s aᵀ - a sᵀ Aᵀ + N a aᵀ,
Σ r x E[y]ᵀ = S Aᵀ - s aᵀ. q(y) is therefore never stored: it is the optimum under the current
q(Λ̃) (the bound with q(y) maximised out, L*), and the global update (``post``) is coordinate
ascent on L*: q(y) given q(Λ̃), q(Λ̃) given q(y), the factors' rotation that ARD prefers
(``_rotate``) and α given q(Λ̃) (type-II: α_j = D / Σ_d E[λ_dj²]), each step raising it, from a
spectral start (factor analysis of the component's covariance in Ψ's metric) or from the
previous q (``post_update``), until it gains less than INNER_TOL. The ELBO of a component is
Σ_n r_n ℓ_n + Σ_d (E log N(λ̃_d | 0, P⁻¹) - E log q(λ̃_d)).

Ψ is a hyperparameter learned between laps (``learn_prior``): ψ_d = Σ_k R_kd / Σ_k N_k, with
R_kd = Σ_n r_nk E[(x_nd - λ̃_dᵀ ỹ_n)²], the argmax at fixed q, floored at PSI_FLOOR σ_d².

Integer columns (``delta``: the step Δ_d, 0 for continuous ones) are scored by the centred
dequantisation bound log P(x) ≥ E_u log p(x + u), u ~ U(-Δ/2, Δ/2)^D: ℓ is quadratic in x, so
E_u ℓ(x + u) = ℓ(x) + ½ Σ_d δ_d ∂²ℓ/∂x_d², δ_d = Δ_d²/12, which in the statistics is
S + N diag(δ).

The posterior predictive of a component is taken as the Gaussian with q's first two moments,
N(μ̄, M̄ M̄ᵀ + diag(ψ + v)), v_d = C_d[μ,μ] + tr C_d[y,y] (a proper density; the exact predictive
has no closed form), evaluated through Woodbury in O(D q) per item and component.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Arrays, Data, ObsModel
from .checks import check_component, check_dense, check_weight, dense_item, dense_items
from .dequant import set_steps
from .gauss import Gauss
from .mfa_ascent import Q_KEYS, FactorAscent
from .prior_scale import shrinkage_target

LOG2PI = np.log(2 * np.pi)
# the rounds of a warm start (post_update), between local steps
WARM_ROUNDS = 3
# the shared noise's floor, as a share of each column's variance σ_d² (standard units)
PSI_FLOOR = 1e-3
# the most bytes of one block's products in the E-step
ESTEP_BYTES = 1 << 24


def default_rank(D: int) -> int:
    """The loadings' rank cap q from D: 2 + ⌈√D⌉, at most D - 1 (at least 1)."""
    return max(1, min(D - 1, 2 + int(np.ceil(np.sqrt(D)))))


class MFA(FactorAscent, ObsModel):
    """Factor-analyser components (a mean and rank-q loadings each) over one shared diagonal
    noise; the global update's ascent steps from FactorAscent (mfa_ascent.py)."""

    name = "mfa"
    warm_start = True
    exact_evidence = False

    @classmethod
    def component_params(cls, D: int) -> int:
        """A mean and D x q loadings (q = default_rank(D)); Ψ is shared."""
        return D * (1 + default_rank(D))

    def __init__(self, D: int, m0: np.ndarray, sd: np.ndarray, psi: np.ndarray, q: int,
                 v0: float = 1.0, delta: np.ndarray | None = None) -> None:
        """``sd``: the columns' scales σ; ``psi``: the shared noise variances (data units);
        ``q``: the loadings' rank cap; ``v0``: the means' prior variance in units of σ²;
        ``delta``: each column's integer step Δ_d (0: continuous; None: all continuous)."""
        self.D, self.q, self.v0 = int(D), int(q), float(v0)
        vec = lambda v: np.broadcast_to(np.asarray(v, dtype=float), (self.D,)).copy()  # noqa: E731
        self.m0, self.sd, self.psi = vec(m0), vec(sd), vec(psi)
        set_steps(self, self.D, delta)
        if not (self.q >= 1 and self.v0 > 0):
            raise ValueError("q must be at least 1 and v0 positive")
        if np.any(self.sd <= 0) or np.any(self.psi <= 0):
            raise ValueError("sd and psi must be positive")
        self._w = self.sd**2 / self.psi  # 1/ψ_d in standard units
        steps = np.zeros(self.D) if self.dq is None else self.dq.delta
        self._dq = (steps / self.sd) ** 2 / 12.0  # δ_d in standard units
        # per item: -D/2 log 2π - ½ log|Ψ| (standard units), the Jacobian, the cells' Σ log Δ_d
        self._log_cell = 0.0 if self.dq is None else self.dq.log_cell
        self._const = (-0.5 * self.D * LOG2PI + 0.5 * float(np.log(self._w).sum())
                       - float(np.log(self.sd).sum()) + self._log_cell)

    @classmethod
    def default(cls, X: Data, q: int | None = None, v0: float = 1.0, scale: float = 0.1,
                m0: np.ndarray | None = None, sd: np.ndarray | None = None,
                psi: np.ndarray | None = None, delta: np.ndarray | None = None,
                floor: np.ndarray | None = None) -> MFA:
        """m0 = the data mean, σ_d = each column's deviation (the mean variance's root for a
        constant column, at least ``floor``: shrinkage_target), Ψ = scale · σ² to start
        (learned between laps), q = default_rank(D)."""
        X = np.asarray(X, dtype=float)
        D = X.shape[1]
        m0 = (X.mean(0) if len(X) else np.zeros(D)) if m0 is None else m0
        if sd is None:
            sd = np.sqrt(shrinkage_target(X.var(0) if len(X) > 1 else np.ones(D), floor))
        sd = np.broadcast_to(np.asarray(sd, dtype=float), (D,))
        psi = scale * sd**2 if psi is None else psi
        return cls(D, m0, sd, psi, default_rank(D) if q is None else q, v0, delta)

    def prior(self) -> dict[str, Any]:
        out = {"D": self.D, "m0": self.m0.tolist(), "sd": self.sd.tolist(),
               "psi": self.psi.tolist(), "q": self.q, "v0": self.v0}
        return out if self.dq is None else {**out, **self.dq.saved()}

    def prior_figures(self) -> dict[str, float]:
        """q, and the shared noise as a share of each column's variance (mean, min, max)."""
        share = 1.0 / self._w
        return {"q": float(self.q), "psi_share_mean": float(share.mean()),
                "psi_share_min": float(share.min()), "psi_share_max": float(share.max())}

    def check_data(self, X: Data) -> None:
        check_dense(X, self.D)

    # statistics ----------------------------------------------------------------------------

    # x_k = Σ_n r_nk x_n and S_k = Σ_n r_nk x_n x_nᵀ (Eq. 7; + N_k diag(Δ²/12) for integer
    # columns), the statistics of ``gauss``
    stat_shapes = Gauss.stat_shapes
    stats = Gauss.stats

    def _standard(self, N: np.ndarray, stats: Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(N, s, S) in standard units (S holds the dequantisation's N diag(δ) from ``stats``)."""
        N = np.asarray(N, dtype=float)
        x, S = stats["x"], stats["xxT"]
        sm = x[:, :, None] * self.m0[None, None, :]
        S = (S - sm - np.swapaxes(sm, -1, -2)
             + N[:, None, None] * np.outer(self.m0, self.m0)) / np.outer(self.sd, self.sd)
        S = 0.5 * (S + np.swapaxes(S, -1, -2))
        return N, (x - N[:, None] * self.m0) / self.sd, S

    # the global update: coordinate ascent on L* --------------------------------------------

    def post(self, N: np.ndarray, stats: Arrays) -> Arrays:
        """q(Λ̃_k) and α_k maximising each component's bound from a spectral start (module
        docstring), with the standardised statistics kept for the one-item path."""
        N, s, S = self._standard(N, stats)
        return self._ascend(N, s, S, self._start(N, s, S))

    def post_update(self, post: Arrays, N: np.ndarray, stats: Arrays, changed: Any) -> Arrays:
        """At most WARM_ROUNDS rounds of the same ascent started from ``post``'s q (same
        components): never below the bound of ``post``'s q on the new statistics. Where global
        updates alternate with local steps (memo's laps, a birth's fresh VB) a few rounds each
        reach the same fixed point as full ascents between them, at a fraction of the cost
        (a birth on breast cancer: most of a fit's time went to ascents run to convergence)."""
        N, s, S = self._standard(N, stats)
        return self._ascend(N, s, S, {k: post[k] for k in Q_KEYS}, WARM_ROUNDS)

    # the objective --------------------------------------------------------------------------

    def elbo(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """Σ_k of the component bound (``_elbo``) for these statistics under post's q(Λ̃), α."""
        N, s, S = self._standard(N, stats)
        return float(self._elbo(N, s, S, self._moments(post), post, post["alpha"]).sum())

    def elbo_at_optimum(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """The bound the global update reached on these statistics (kept in ``post``)."""
        return float(post["elbo"].sum())

    def log_marginal(self, N: np.ndarray, stats: Arrays) -> np.ndarray:
        """Each component's bound at its global update: the exact ELBO of its q (there is no
        closed-form evidence), what merges and births are judged on."""
        return self.post(N, stats)["elbo"]

    def learn_prior(self, post: Arrays, base: ObsModel) -> MFA:
        """Ψ = Σ_k R_k / Σ_k N_k (the argmax of the bound's only Ψ terms at fixed q), at least
        PSI_FLOOR σ²; the model itself when no component has items."""
        n = float(np.sum(post["N"]))
        if n <= 0:
            return self
        share = np.maximum(post["resid"].sum(0) / n, PSI_FLOOR)
        return MFA(self.D, self.m0, self.sd, share * self.sd**2, self.q, self.v0, self.delta)

    # the local step ------------------------------------------------------------------------

    def _standard_items(self, X: Data) -> np.ndarray:
        return (np.asarray(X, dtype=float) - self.m0) / self.sd

    def E_loglik(self, X: Data, post: Arrays) -> np.ndarray:
        """ℓ_nk (module docstring) with the dequantisation's -½ Σ_d δ_d (ψ_d⁻¹ - (Bᵀ Γ⁻¹ B)_dd):
        with Γ = L Lᵀ, ½ b_nᵀ Γ⁻¹ b_n = ½ |L⁻¹ B y_n - L⁻¹ c|², so one (n x D)(D x K(q+1))
        product gives every item's K quadratic and linear terms: O(n K D q), in blocks of
        ESTEP_BYTES of products."""
        Y = self._standard_items(X)
        mom = self._moments(post)
        F = mom["Li"] @ mom["B"]  # L⁻¹ B: (K, q, D)
        g = np.einsum("kij,kj->ki", mom["Li"], mom["c"])
        K, q = F.shape[0], self.q
        W = np.concatenate([(post["mean"][:, :, 0] * self._w)[:, None, :], F], axis=1)
        W = np.ascontiguousarray(W.reshape(K * (q + 1), self.D).T)
        deq = -0.5 * ((self._w - (F * F).sum(1)) * self._dq).sum(1)
        const = self._const - 0.5 * mom["logdet_Gamma"] - 0.5 * mom["e"] + deq
        out = np.empty((len(Y), K))
        block = max(1, ESTEP_BYTES // (8 * K * (q + 1)))
        for s in range(0, len(Y), block):
            y = Y[s:s + block]
            Z = (y @ W).reshape(len(y), K, q + 1)
            Z[:, :, 1:] -= g
            out[s:s + block] = (const - 0.5 * (y * y * self._w).sum(1)[:, None] + Z[:, :, 0]
                                + 0.5 * np.einsum("nkq,nkq->nk", Z[:, :, 1:], Z[:, :, 1:]))
        return out

    # predictive, draws --------------------------------------------------------------------

    def _predictive(self, post: Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The moment-matched predictive's mean, loadings and diagonal (standard units)."""
        extra = np.einsum("kdj,kj->kd", post["f"], (post["V"] ** 2).sum(1))  # tr C_d
        return post["mean"][:, :, 0], post["mean"][:, :, 1:], 1.0 / self._w + extra

    def predictive_logpdf(self, X: Data, post: Arrays) -> np.ndarray:
        """log N(x | μ̄, M̄ M̄ᵀ + diag(ψ + v)) per component, dequantised where delta is set
        (E_u of it: -½ Σ_d δ_d (Σ⁻¹)_dd, a bound on the cell's probability): (n, K)."""
        mu, M, dvar = self._predictive(post)
        return (lowrank_logpdf(self._standard_items(X), mu, M, dvar, self._dq)
                - np.log(self.sd).sum() + self._log_cell)

    def draw(self, post: Arrays, rng: np.random.Generator) -> Arrays:
        """λ̃_d ~ q(λ̃_d) per component and row: θ = {"mu": μ (K, D), "Lam": Λ (K, D, q),
        "psi": Ψ (K, D)} in data units."""
        z = rng.standard_normal(post["mean"].shape) * np.sqrt(post["f"])
        lam = post["mean"] + np.einsum("kij,kdj->kdi", post["V"], z)  # C_d = V diag(f_d) Vᵀ
        K = len(lam)
        return {"mu": self.m0 + self.sd * lam[:, :, 0], "Lam": self.sd[None, :, None]
                * lam[:, :, 1:], "psi": np.broadcast_to(self.psi, (K, self.D)).copy()}

    def sample_items(self, theta: Arrays, rng: np.random.Generator,
                     n_words: np.ndarray | None = None) -> np.ndarray:
        """x = μ + Λ y + ε, y ~ N(0, I_q), ε ~ N(0, Ψ): (n, D)."""
        n = len(theta["mu"])
        y = rng.standard_normal((n, theta["Lam"].shape[-1]))
        eps = rng.standard_normal((n, self.D)) * np.sqrt(theta["psi"])
        return theta["mu"] + np.einsum("ndq,nq->nd", theta["Lam"], y) + eps

    def loglik(self, X: Data, theta: Arrays) -> np.ndarray:
        """log N(x | μ_k, Λ_k Λ_kᵀ + Ψ) by Woodbury: (n, K)."""
        return lowrank_logpdf(np.asarray(X, dtype=float), theta["mu"], theta["Lam"],
                              theta["psi"], np.zeros(self.D))

    # the one-item path (ADF, EP): a component's state is its statistics and its q ---------

    def predictive_state(self, post: Arrays) -> Arrays:
        """The posterior's arrays (its standardised statistics among them), copied."""
        return {k: np.array(v, dtype=float) for k, v in post.items()}

    def predictive_logpdf_state(self, state: Arrays, X: Data) -> np.ndarray:
        return self.predictive_logpdf(dense_items(X, self.D), state)

    def absorb(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """Component k's statistics + w t(x), then its global update from its spectral start
        (a function of its statistics alone, so ``remove`` undoes it)."""
        self._shift(state, check_component(k, len(state["N"])), dense_item(x, self.D),
                    check_weight(w))

    def remove(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """The inverse of absorb: component k's statistics - w t(x), refitted; ValueError,
        leaving the state untouched, if that would leave it fewer than 0 items."""
        k = check_component(k, len(state["N"]))
        w = check_weight(w)
        if state["N"][k] - w < -1e-9 * max(1.0, w):
            raise ValueError(f"removing weight {w} leaves {state['N'][k] - w} items")
        self._shift(state, k, dense_item(x, self.D), -w)

    def _shift(self, state: Arrays, k: int, x: np.ndarray, w: float) -> None:
        y = (x - self.m0) / self.sd
        N = np.array([max(state["N"][k] + w, 0.0)])
        s = state["s"][k:k + 1] + w * y
        S = state["S"][k:k + 1] + w * (np.outer(y, y) + np.diag(self._dq))
        fitted = self._ascend(N, s, S, self._start(N, s, S))
        for key, v in fitted.items():
            state[key][k] = v[0]

    # summaries of the fit -------------------------------------------------------------------

    def means(self, post: Arrays) -> np.ndarray:
        """E[μ_k] in data units."""
        return self.m0 + self.sd * post["mean"][:, :, 0]

    def covariances(self, post: Arrays) -> np.ndarray:
        """E[Λ_k Λ_kᵀ] + Ψ, data units: (K, D, D)."""
        M = post["mean"][:, :, 1:]
        C = M @ np.swapaxes(M, -1, -2)
        idx = np.arange(self.D)
        Vy = post["V"][:, 1:, :]
        C[:, idx, idx] += np.einsum("kdj,kj->kd", post["f"], (Vy**2).sum(1)) + 1.0 / self._w
        return C * np.outer(self.sd, self.sd)

    def ranks(self, post: Arrays) -> np.ndarray:
        """Each component's effective rank: loading columns ARD has not switched off."""
        return np.isfinite(post["alpha"]).sum(1)

    def features(self, X: Data) -> np.ndarray:
        """The items in standard units, (x - m0) / σ."""
        return self._standard_items(X)


def lowrank_logpdf(Y: np.ndarray, mu: np.ndarray, M: np.ndarray, dvar: np.ndarray,
                   dq: np.ndarray) -> np.ndarray:
    """log N(y | μ_k, M_k M_kᵀ + diag(d_k)) - ½ Σ_j δ_j (Σ_k⁻¹)_jj for all n, k, by Woodbury:
    Σ⁻¹ = D⁻¹ - D⁻¹ M (I + Mᵀ D⁻¹ M)⁻¹ Mᵀ D⁻¹, log|Σ| = log|D| + log|I + Mᵀ D⁻¹ M|: (n, K).
    ``dvar``: (K, D) or (D,); ``dq``: the dequantisation's δ (D,)."""
    K, D, q = M.shape
    dvar = np.broadcast_to(dvar, (K, D))
    iw = 1.0 / dvar
    core = np.eye(q) + np.swapaxes(M, -1, -2) @ (M * iw[:, :, None])
    L = np.linalg.cholesky(core)
    F = np.linalg.solve(L, np.swapaxes(M * iw[:, :, None], -1, -2))  # L⁻¹ Mᵀ D⁻¹ (K, q, D)
    logdet = np.log(dvar).sum(1) + 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1)
    out = np.empty((len(Y), K))
    for k in range(K):  # O(n D q) each
        R = Y - mu[k]
        out[:, k] = (R * R * iw[k]).sum(1) - ((R @ F[k].T) ** 2).sum(1)
    deq = ((iw - (F * F).sum(1)) * dq).sum(1)
    return -0.5 * (D * LOG2PI + logdet[None, :] + out + deq[None, :])
