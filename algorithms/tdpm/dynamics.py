"""The chains' dynamics in the temporal DP mixture (Ahmed & Xing 2008, Sec. 7 and 8): a chain is
born with φ ~ N(0, σI) and walks φ_t = φ_{t−1} + N(0, ρI). Every chain model shares it; only the
emission differs. Variances may be scalars or per-dimension arrays (the text model's diagonal
Laplace pseudo-observations), so everything here is elementwise over dimensions.

Gaussian helpers: log N(x; μ, v), the product of two Gaussians in φ (its normaliser and its
normalised form), Brownian bridges between two states, and forward filtering / backward sampling
(and RTS smoothing) of one chain's states over its span from per-epoch Gaussian
pseudo-observations (y_t, r_t): exact for Gaussian emissions, Eqs. 8.12-8.13 for text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LOG_2PI = float(np.log(2 * np.pi))


def gauss_logpdf(x: np.ndarray, mean: np.ndarray, var) -> np.ndarray:
    """log N(x; mean, diag(var)) summed over the last axis (broadcasting over leading ones)."""
    d = np.subtract(x, mean, dtype=float)
    D = d.shape[-1]
    if np.ndim(var) == 0:  # one variance: one log, no broadcast of it
        var = float(var)
        return -0.5 * (D * (LOG_2PI + math.log(var)) + (d * d).sum(-1) / var)
    var = np.asarray(var, float)
    # var's last axis is 1 or D: log det = (D / its length) Σ log var
    logdet = np.log(var).sum(-1) * (D // var.shape[-1])
    return -0.5 * (D * LOG_2PI + logdet + (d * d / var).sum(-1))


def gauss_product(m1: np.ndarray, v1, m2: np.ndarray, v2) -> tuple[np.ndarray, np.ndarray]:
    """N(φ; m1, v1) N(φ; m2, v2) = N(m1; m2, v1 + v2) N(φ; m, v): returns (m, v)."""
    v1, v2 = np.asarray(v1, float), np.asarray(v2, float)
    v = 1.0 / (1.0 / v1 + 1.0 / v2)
    return v * (np.asarray(m1) / v1 + np.asarray(m2) / v2), v


@dataclass(frozen=True)
class RandomWalk:
    """Birth variance σ and drift variance ρ (per epoch) of every chain."""

    birth_var: float
    drift_var: float

    def step_var(self, gap: int) -> float:
        """The variance of φ_{t+gap} − φ_t."""
        return gap * self.drift_var

    def bridge(self, a: np.ndarray, b: np.ndarray, gap: int,
               rng: np.random.Generator) -> np.ndarray:
        """The states at 1..gap−1 between φ_0 = a and φ_gap = b, drawn from the walk's
        conditional (a Brownian bridge): φ_u | φ_{u−1}, b ~ N(φ_{u−1} + (b − φ_{u−1})/(gap − u + 1),
        ρ (gap − u)/(gap − u + 1)). Shape (gap − 1, D)."""
        out = np.empty((max(gap - 1, 0), *np.shape(a)))
        prev = np.asarray(a, float)
        for u in range(1, gap):
            left = gap - u + 1
            mean = prev + (b - prev) / left
            var = self.drift_var * (left - 1) / left
            prev = mean + np.sqrt(var) * rng.standard_normal(np.shape(a))
            out[u - 1] = prev
        return out

    def forward(self, y: np.ndarray, r: np.ndarray,
                observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Kalman filter over a span of L epochs from the birth N(0, σ): y, r (L, D)
        pseudo-observations and their variances where ``observed`` (L,) is true. Returns the
        filtered means and variances (L, D)."""
        L, D = y.shape
        means, variances = np.empty((L, D)), np.empty((L, D))
        pm, pv = np.zeros(D), np.full(D, self.birth_var)
        for t in range(L):
            if observed[t]:
                pm, pv = gauss_product(pm, pv, y[t], r[t])
            means[t], variances[t] = pm, pv
            pv = pv + self.drift_var
        return means, variances

    def ffbs(self, y: np.ndarray, r: np.ndarray, observed: np.ndarray,
             rng: np.random.Generator) -> np.ndarray:
        """One joint draw of the span's states from their Gaussian posterior given the
        pseudo-observations: forward filtering, then backward sampling
        φ_t | φ_{t+1} ~ N(m_t + P_t/(P_t + ρ) (φ_{t+1} − m_t), P_t ρ/(P_t + ρ))."""
        means, variances = self.forward(y, r, observed)
        L = len(means)
        out = np.empty_like(means)
        out[-1] = means[-1] + np.sqrt(variances[-1]) * rng.standard_normal(means.shape[1])
        for t in range(L - 2, -1, -1):
            gain = variances[t] / (variances[t] + self.drift_var)
            mean = means[t] + gain * (out[t + 1] - means[t])
            var = variances[t] * self.drift_var / (variances[t] + self.drift_var)
            out[t] = mean + np.sqrt(var) * rng.standard_normal(means.shape[1])
        return out

    def smooth(self, y: np.ndarray, r: np.ndarray,
               observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The RTS smoother: the states' posterior means and variances (L, D)."""
        means, variances = self.forward(y, r, observed)
        sm, sv = means.copy(), variances.copy()
        for t in range(len(means) - 2, -1, -1):
            pv = variances[t] + self.drift_var
            gain = variances[t] / pv
            sm[t] = means[t] + gain * (sm[t + 1] - means[t])
            sv[t] = variances[t] + gain ** 2 * (sv[t + 1] - pv)
        return sm, sv

    def log_evidence(self, y: np.ndarray, r: np.ndarray, epochs: np.ndarray) -> float:
        """log p(y_1..y_G) of pseudo-observations y_g ~ N(φ_{t_g}, r_g) (G, D) at increasing
        epochs t_g of one chain born at t_1, its states integrated out: the Kalman filter's
        predictives N(y_g; m_g, v_g + r_g) summed."""
        pm, pv = np.zeros(y.shape[1]), np.full(y.shape[1], self.birth_var)
        total = 0.0
        for g in range(len(y)):
            if g:
                pv = pv + self.drift_var * float(epochs[g] - epochs[g - 1])
            total += float(gauss_logpdf(y[g], pm, pv + r[g]))
            pm, pv = gauss_product(pm, pv, y[g], r[g])
        return total

    def log_density(self, phi: np.ndarray) -> float:
        """log p(φ_{first..last}) of one chain's states over its span (birth, then steps)."""
        phi = np.atleast_2d(phi)
        value = float(gauss_logpdf(phi[0], 0.0, self.birth_var))
        if len(phi) > 1:
            value += float(np.sum(gauss_logpdf(phi[1:], phi[:-1], self.drift_var)))
        return value
