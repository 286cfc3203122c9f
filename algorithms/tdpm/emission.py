"""Chain emissions of the temporal DP mixture: what an item's likelihood is at a chain's state.

One interface (``Emission``), bound to the items it scores:
- ``loglik(i, phi)``: log F(x_i | φ) at several candidate states (C, D) -> (C,);
- ``candidates(i, means, variances, rng)``: for C states not yet drawn, whose priors given
  their chains' neighbours (or G_0 for a new chain) are N(means_c, variances_c): log weights for
  the item's conditional and the states to keep if the item goes there. Exact for Gaussians
  (log N(x; m, v + Σ) and a posterior draw); a model without a closed form may use auxiliary
  prior draws (Neal's Algorithm 8), which leave the posterior invariant too;
- ``pseudo_obs(items, phi)``: Gaussian pseudo-observations (y, r) of one (chain, epoch) for
  forward filtering / backward sampling (exact for Gaussians; Eqs. 8.12-8.13 for text);
- ``total_loglik(items, phi)``: Σ log F over items at one state (the log joint of a sample);
- ``exact``: whether Π_i F(x_i | φ) of a group of items is a Gaussian in φ times a constant; if
  so, ``exact_pseudo_obs(items, starts)`` gives each group's (y, r, log c) with
  Π_i F(x_i | φ) = c N(y; φ, r) for every φ, and a chain's marginal likelihood is exact by the
  Kalman filter (what the split-merge moves need).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .dynamics import gauss_logpdf, gauss_product


class Emission(Protocol):
    dim: int

    def loglik(self, i: int, phi: np.ndarray) -> np.ndarray: ...

    def candidates(self, i: int, means: np.ndarray, variances: np.ndarray,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]: ...

    def pseudo_obs(self, items: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def total_loglik(self, items: np.ndarray, phi: np.ndarray) -> float: ...

    exact: bool


class GaussianEmission:
    """x ~ N(φ_t, Σ I) (Sec. 7) over dense rows X (N, D)."""

    exact = True

    def __init__(self, X: np.ndarray, noise_var: float):
        self.X = np.asarray(X, float)
        self.noise_var = float(noise_var)
        self.dim = self.X.shape[1]

    def loglik(self, i: int, phi: np.ndarray) -> np.ndarray:
        return gauss_logpdf(self.X[i], phi, self.noise_var)

    def candidates(self, i: int, means: np.ndarray, variances: np.ndarray,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """log ∫ N(φ; m_c, v_c) N(x; φ, Σ) dφ = log N(x; m_c, v_c + Σ) for means (C, D) and
        variances (C, 1) or (C, D), and a draw of each φ_c from N(m_c, v_c) N(x; φ, Σ)
        normalised."""
        x = self.X[i]
        logw = gauss_logpdf(x, means, variances + self.noise_var)
        m, v = gauss_product(means, variances, x, self.noise_var)
        return logw, m + np.sqrt(v) * rng.standard_normal(m.shape)

    def pseudo_obs(self, items: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The epoch's mean x̄ with variance Σ/n: N(x̄; φ, Σ/n) ∝ Π_i N(x_i; φ, Σ) in φ."""
        return self.X[items].sum(0) / len(items), np.full(self.dim, self.noise_var / len(items))

    def total_loglik(self, items: np.ndarray, phi: np.ndarray) -> float:
        return float(np.sum(gauss_logpdf(self.X[items], phi, self.noise_var)))

    def sq_residuals(self, items: np.ndarray, phi: np.ndarray) -> float:
        """Σ ||x_i − φ||² of items at one state: what Σ's conditional needs."""
        return float(np.sum((self.X[items] - phi) ** 2))

    def exact_pseudo_obs(self, items: np.ndarray,
                         starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the groups of ``items`` beginning at ``starts``: the mean x̄ with variance Σ/n and
        log c, Π_i N(x_i; φ, Σ) = c N(x̄; φ, Σ/n) for every φ:
        log c = −(n − 1)(D/2) log 2πΣ − (D/2) log n − S/(2Σ), S = Σ_i |x_i − x̄|²."""
        x = self.X[items]
        if len(starts) == len(items):  # one item a group
            return x, np.full(x.shape, self.noise_var), np.zeros(len(items))
        n = np.diff(starts, append=len(items))
        mean = np.add.reduceat(x, starts, axis=0) / n[:, None]
        S = np.add.reduceat(np.sum((x - np.repeat(mean, n, axis=0)) ** 2, axis=1), starts)
        D = self.dim
        log_c = (-(n - 1) * D / 2 * np.log(2 * np.pi * self.noise_var) - D / 2 * np.log(n)
                 - S / (2 * self.noise_var))
        return mean, np.repeat(self.noise_var / n[:, None], D, axis=1), log_c
