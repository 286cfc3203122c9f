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
- ``total_loglik(items, phi)``: Σ log F over items at one state (the log joint of a sample).
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


class GaussianEmission:
    """x ~ N(φ_t, Σ I) (Sec. 7) over dense rows X (N, D)."""

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
        return self.X[items].mean(0), np.full(self.dim, self.noise_var / len(items))

    def total_loglik(self, items: np.ndarray, phi: np.ndarray) -> float:
        return float(np.sum(gauss_logpdf(self.X[items], phi, self.noise_var)))

    def sq_residuals(self, items: np.ndarray, phi: np.ndarray) -> float:
        """Σ ||x_i − φ||² of items at one state: what Σ's conditional needs."""
        return float(np.sum((self.X[items] - phi) ** 2))
