"""MFA's global update: coordinate ascent on the bound L* with q(y) maximised out
(Ghahramani & Beal 2000; mfa's module docstring, docs/theory/dense.rst): q(y) given q(Λ̃),
each row's q(λ̃_d) = N(m_d, C_d) given q(y), the factors' rotation that ARD prefers, α given
q(Λ̃), and columns switched off where that raises the bound, each step a coordinate maximum."""

from __future__ import annotations

import numpy as np

from .base import Arrays

# the ARD precisions' finite range (standard units); a column whose α passes ALPHA_PRUNE (prior
# deviation 0.01 σ) is tried switched off, α = ∞ (its loadings exactly 0, their terms gone from
# the bound), and switched off where that raises the bound: a finite cap would charge each such
# column ½ Σ_d log(1 + N/(ψ_d α)) for nothing
ALPHA_MIN, ALPHA_MAX, ALPHA_PRUNE = 1e-3, 1e12, 1e4
# the inner coordinate ascent stops when a round raises a component's bound by less than
# INNER_TOL (1 + |L_k|), or after INNER_ITER rounds
INNER_TOL, INNER_ITER = 1e-8, 200
# a component with fewer items than this starts its loadings at 0 (no covariance to factor)
MIN_START_ITEMS = 1e-8

# the arrays of q(Λ̃) and α that an ascent starts from (``post_update``)
Q_KEYS = ("mean", "V", "f", "logdet", "alpha")


def _row_cov_sum(rows: Arrays, weights: np.ndarray | None = None) -> np.ndarray:
    """Σ_d g_d C_d = V diag(Σ_d g_d f_d) Vᵀ per component (g = ``weights``, else 1)."""
    f = rows["f"].sum(1) if weights is None else np.einsum("kdj,d->kj", rows["f"], weights)
    V = rows["V"]
    return (V * f[:, None, :]) @ np.swapaxes(V, -1, -2)


class FactorAscent:
    """The ascent's steps, one method per update (a mixin of ``MFA``: it reads D, the rank cap q,
    the means' prior variance v0, 1/ψ in standard units ``_w`` and the per-item constant)."""

    D: int
    q: int
    v0: float
    _w: np.ndarray
    _const: float

    def _start(self, N: np.ndarray, s: np.ndarray, S: np.ndarray) -> Arrays:
        """Means from the rows' update with no loadings; loadings from the top q eigenpairs
        (λ_j, u_j) of the covariance in Ψ's metric, Ψ^½ u_j √max(λ_j - 1, 0.01) (factor
        analysis given Ψ); row covariances 0 (the first round sets them); α from them."""
        K, D, q, w = len(N), self.D, self.q, self._w
        mean = np.zeros((K, D, q + 1))
        mean[:, :, 0] = w * s / (1.0 / self.v0 + w * N[:, None])
        seen = N > MIN_START_ITEMS
        if np.any(seen):
            n = N[seen]
            mu = s[seen] / n[:, None]
            C = S[seen] / n[:, None, None] - mu[:, :, None] * mu[:, None, :]
            rw = np.sqrt(w)
            eig = [np.linalg.eigh(c) for c in C * np.outer(rw, rw)]  # one by one: faster
            lam, U = np.array([e[0] for e in eig]), np.array([e[1] for e in eig])
            lam, U = lam[:, ::-1][:, :q], U[:, :, ::-1][:, :, :q]
            mean[seen, :, 1:] = U / rw[None, :, None] * np.sqrt(np.maximum(lam - 1.0, 0.01))[
                :, None, :]
        rows = {"mean": mean, "V": np.broadcast_to(np.eye(q + 1), (K, q + 1, q + 1)).copy(),
                "f": np.zeros((K, D, q + 1)), "logdet": np.full(K, -np.inf)}
        return {**rows, "alpha": self._start_alpha(rows)}

    def _ascend(self, N: np.ndarray, s: np.ndarray, S: np.ndarray, start: Arrays,
                rounds: int = INNER_ITER) -> Arrays:
        """Rounds of (q(y), q(Λ̃), rotation and α) updates per component until each gains
        less than INNER_TOL (1 + |L_k|); a converged component is left alone, so each one's
        result depends on its own statistics only. Every step is a coordinate maximum, so no
        round lowers the bound."""
        K = len(N)
        out = {k: np.array(start[k], dtype=float) for k in Q_KEYS}
        mom = self._moments(out)
        out["elbo"] = self._elbo(N, s, S, mom, out, out["alpha"])  # -inf from a spectral start
        active = np.arange(K)
        for _ in range(rounds):
            if not len(active):
                break
            a = active
            T, Xt = self._factor_stats(N[a], s[a], S[a], {k: v[a] for k, v in mom.items()})
            rows, alpha = self._rotate(self._rows(T, Xt, out["alpha"][a]), out["alpha"][a])
            mom_a = self._moments(rows)
            elbo = self._elbo(N[a], s[a], S[a], mom_a, rows, alpha)
            rows, alpha, elbo, mom_a = self._prune(N[a], s[a], S[a], T, Xt, rows, alpha, elbo,
                                                   mom_a)
            done = elbo - out["elbo"][a] <= INNER_TOL * (1.0 + np.abs(elbo))
            for k, v in {**rows, "alpha": alpha, "elbo": elbo}.items():
                out[k][a] = v
            for k, v in mom_a.items():
                mom[k][a] = v
            active = a[~done]
        T, Xt = self._factor_stats(N, s, S, mom)
        out["resid"] = self._residuals(S, out, T, Xt)
        return {**out, "N": N, "s": s, "S": S}

    def _rotate(self, rows: Arrays, alpha: np.ndarray) -> tuple[Arrays, np.ndarray]:
        """The factors' rotation that ARD prefers, and α at its argmax (the EM step). An
        orthogonal R (Λ → Λ R, y → Rᵀ y) leaves p(x) and p(y) unchanged, so only the ARD terms
        move, and with α at its argmax α_j = D / (Rᵀ E R)_jj they are -D/2 Σ_j log (Rᵀ E R)_jj
        + const, E = Σ_d E[λ_d λ_dᵀ]: by Hadamard's inequality E's eigenvectors maximise them
        (Luttinen & Ilin 2010 speed up VB factor analysis by such rotations; without one the
        ascent drifted along the rotations, 10 nats in 20,000 rounds on 1,797 digits). Columns
        switched off stay off, and last."""
        on = np.isfinite(alpha)
        mean = rows["mean"]
        E = (_row_cov_sum(rows)[:, 1:, 1:]
             + np.einsum("kdi,kdj->kij", mean[:, :, 1:], mean[:, :, 1:]))
        E = np.where(on[:, :, None] & on[:, None, :], E, 0.0)
        idx = np.arange(self.q)
        E[:, idx, idx] = np.where(on, E[:, idx, idx], -1.0)  # off columns: eigenvalue -1
        lam, U = np.linalg.eigh(E)
        lam, U = lam[:, ::-1], U[:, :, ::-1]  # the largest first, the off columns last
        rows = {**rows, "mean": np.concatenate([mean[:, :, :1], mean[:, :, 1:] @ U], axis=-1),
                "V": np.concatenate([rows["V"][:, :1], np.swapaxes(U, -1, -2)
                                     @ rows["V"][:, 1:]], axis=1)}
        with np.errstate(divide="ignore"):
            alpha = np.where(lam < 0, np.inf, np.clip(self.D / lam, ALPHA_MIN, ALPHA_MAX))
        return rows, alpha

    def _prune(self, N: np.ndarray, s: np.ndarray, S: np.ndarray, T: np.ndarray,
               Xt: np.ndarray, rows: Arrays, alpha: np.ndarray, elbo: np.ndarray, mom: Arrays
               ) -> tuple[Arrays, np.ndarray, np.ndarray, Arrays]:
        """Components with a column past ALPHA_PRUNE: the rows' update with those columns off
        (α = ∞) from the same q(y), kept where its bound is higher."""
        try_ = np.flatnonzero(((alpha > ALPHA_PRUNE) & np.isfinite(alpha)).any(1))
        if not len(try_):
            return rows, alpha, elbo, mom
        cand_alpha = np.where(alpha[try_] > ALPHA_PRUNE, np.inf, alpha[try_])
        cand = self._rows(T[try_], Xt[try_], cand_alpha)
        cand_mom = self._moments(cand)
        cand_elbo = self._elbo(N[try_], s[try_], S[try_], cand_mom, cand, cand_alpha)
        better = cand_elbo > elbo[try_]
        keep = try_[better]
        rows, mom = {k: v.copy() for k, v in rows.items()}, {k: v.copy() for k, v in mom.items()}
        for new, old in ((cand, rows), (cand_mom, mom)):
            for k in old:
                old[k][keep] = new[k][better]
        alpha, elbo = alpha.copy(), elbo.copy()
        alpha[keep], elbo[keep] = cand_alpha[better], cand_elbo[better]
        return rows, alpha, elbo, mom

    def _moments(self, rows: Arrays) -> Arrays:
        """The sums over rows that q(y) reads, Σ_d E_d/ψ_d (E_d = C_d + m_d m_dᵀ) split into
        G, c and e; Γ's Cholesky factor and log|Γ|; B = M̄ᵀ Ψ⁻¹."""
        w, mean = self._w, rows["mean"]
        Ew = _row_cov_sum(rows, w) + np.einsum("kdi,kdj,d->kij", mean, mean, w)
        L = np.linalg.cholesky(Ew[:, 1:, 1:] + np.eye(self.q))
        Li = np.linalg.inv(L)
        return {"c": Ew[:, 1:, 0], "e": Ew[:, 0, 0], "Li": Li,
                "Gi": np.swapaxes(Li, -1, -2) @ Li,  # Γ⁻¹
                "logdet_Gamma": 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1),
                "B": np.swapaxes(mean[:, :, 1:] * w[None, :, None], -1, -2)}

    def _factor_stats(self, N: np.ndarray, s: np.ndarray, S: np.ndarray,
                      mom: Arrays) -> tuple[np.ndarray, np.ndarray]:
        """T = Σ r E[ỹ ỹᵀ] (K, q+1, q+1) and X̃ = Σ r x E[ỹ]ᵀ (K, D, q+1) under the optimal q(y)
        (module docstring: A = Γ⁻¹ B, a = Γ⁻¹ c)."""
        V = mom["Gi"]
        A = V @ mom["B"]  # (K, q, D)
        a = np.einsum("kij,kj->ki", V, mom["c"])
        As = np.einsum("kqd,kd->kq", A, s)
        SA = S @ np.swapaxes(A, -1, -2)  # (K, D, q)
        ASA = A @ SA
        Nc = N[:, None, None]
        Syy = (Nc * V + ASA - As[:, :, None] * a[:, None, :] - a[:, :, None] * As[:, None, :]
               + Nc * a[:, :, None] * a[:, None, :])
        Sy = As - N[:, None] * a
        T = np.empty((len(N), self.q + 1, self.q + 1))
        T[:, 0, 0], T[:, 0, 1:], T[:, 1:, 0], T[:, 1:, 1:] = N, Sy, Sy, Syy
        Xt = np.concatenate([s[:, :, None], SA - s[:, :, None] * a[:, None, :]], axis=-1)
        return T, Xt

    def _prior_precision(self, alpha: np.ndarray) -> np.ndarray:
        """diag(P) = (1/v0, α_1..α_q) per component (∞ for a column switched off): (K, q+1)."""
        return np.concatenate([np.full((len(alpha), 1), 1.0 / self.v0), alpha], axis=1)

    def _rows(self, T: np.ndarray, Xt: np.ndarray, alpha: np.ndarray) -> Arrays:
        """q(λ̃_d) = N(m_d, C_d), C_d = (P + T/ψ_d)⁻¹, m_d = C_d X̃_d/ψ_d, for all rows from one
        eigendecomposition per component: P^-½ T P^-½ = U diag(λ) Uᵀ gives C_d = V diag(f_d) Vᵀ
        with V = P^-½ U, f_dj = 1 / (1 + λ_j/ψ_d), so Σ_d log|C_d| = -D log|P| + Σ_dj log f_dj. A
        column switched off (P_j = ∞) has a zero row in V: its loadings are exactly 0, and the
        determinants are over the columns switched on."""
        w = self._w
        P = self._prior_precision(alpha)
        ip = 1.0 / np.sqrt(P)
        lam, U = np.linalg.eigh(T * ip[:, :, None] * ip[:, None, :])
        V = U * ip[:, :, None]
        f = 1.0 / (1.0 + w[None, :, None] * np.maximum(lam, 0.0)[:, None, :])
        proj = np.einsum("kij,kdi->kdj", V, Xt * w[None, :, None])  # Vᵀ X̃_d / ψ_d
        mean = np.einsum("kij,kdj->kdi", V, f * proj)
        logP = np.where(np.isfinite(P), np.log(P), 0.0).sum(1)
        return {"mean": mean, "V": V, "f": f,
                "logdet": -self.D * logP + np.log(f).sum((1, 2))}

    def _start_alpha(self, rows: Arrays) -> np.ndarray:
        """α_j = D / Σ_d E[λ_dj²] for the start's loadings (the argmax at fixed q(Λ̃))."""
        second = (np.diagonal(_row_cov_sum(rows), axis1=-2, axis2=-1)[:, 1:]
                  + (rows["mean"][:, :, 1:] ** 2).sum(1))
        return np.clip(self.D / np.maximum(second, 1e-300), ALPHA_MIN, ALPHA_MAX)

    def _elbo(self, N: np.ndarray, s: np.ndarray, S: np.ndarray, mom: Arrays, rows: Arrays,
              alpha: np.ndarray) -> np.ndarray:
        """Each component's bound: Σ_n r_n ℓ_n from (N, s, S), plus Σ_d (E log p(λ̃_d) -
        E log q(λ̃_d)) = Σ_d [½ log|P| - ½ tr(P E_d) + ½ log|C_d| + (q+1)/2], over the columns
        switched on (one switched off is exactly 0 under q and the prior: it adds 0)."""
        w, mean = self._w, rows["mean"]
        B, c = mom["B"], mom["c"]
        Bs = np.einsum("kqd,kd->kq", B, s)
        Q = (B @ S @ np.swapaxes(B, -1, -2) - Bs[:, :, None] * c[:, None, :]
             - c[:, :, None] * Bs[:, None, :] + N[:, None, None] * c[:, :, None] * c[:, None, :])
        trQ = np.einsum("kij,kij->k", mom["Gi"], Q)
        diagS = np.diagonal(S, axis1=-2, axis2=-1)
        data = (N * (self._const - 0.5 * mom["logdet_Gamma"])
                - 0.5 * ((diagS * w).sum(1) - 2.0 * (s * mean[:, :, 0] * w).sum(1) + N * mom["e"])
                + 0.5 * trQ)
        P = self._prior_precision(alpha)
        on = np.isfinite(P)
        second = np.diagonal(_row_cov_sum(rows), axis1=-2, axis2=-1) + (mean**2).sum(1)
        logP = np.where(on, np.log(P), 0.0).sum(1)
        prior = (0.5 * self.D * logP - 0.5 * (np.where(on, P, 0.0) * second).sum(1)
                 + 0.5 * rows["logdet"] + 0.5 * self.D * on.sum(1))
        return data + prior

    def _residuals(self, S: np.ndarray, rows: Arrays, T: np.ndarray,
                   Xt: np.ndarray) -> np.ndarray:
        """R_kd = Σ_n r E[(x_d - λ̃_dᵀ ỹ)²] = S_dd - 2 m_dᵀ X̃_d + tr(C_d T) + m_dᵀ T m_d
        (standard units), tr(C_d T) = Σ_j f_dj (Vᵀ T V)_jj."""
        mean, V = rows["mean"], rows["V"]
        VTV = np.diagonal(np.swapaxes(V, -1, -2) @ T @ V, axis1=-2, axis2=-1)
        return (np.diagonal(S, axis1=-2, axis2=-1) - 2.0 * np.einsum("kdi,kdi->kd", mean, Xt)
                + np.einsum("kdj,kj->kd", rows["f"], VTV)
                + np.einsum("kdi,kij,kdj->kd", mean, T, mean))
