"""Chain emissions of the temporal DP mixture: what an item's likelihood is at a chain's state.

One interface (``Emission``), bound to the items it scores:
- ``loglik(i, phi)``: log F(x_i | φ) at several candidate states (C, D) -> (C,);
- ``candidate(i, mean, var, rng)``: for a state not yet drawn, whose prior given the chain's
  neighbours (or G_0 for a new chain) is N(mean, var): a log weight for the item's conditional
  and the state to keep if the item goes there. Exact for Gaussians (log N(x; mean, var + Σ) and
  a posterior draw); a model without a closed form may use an auxiliary prior draw (Neal's
  Algorithm 8 with one auxiliary state), which leaves the posterior invariant too;
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

    def candidate(self, i: int, mean: np.ndarray, var, rng: np.random.Generator
                  ) -> tuple[float, np.ndarray]: ...

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

    def candidate(self, i: int, mean: np.ndarray, var, rng: np.random.Generator
                  ) -> tuple[float, np.ndarray]:
        """log ∫ N(φ; mean, var) N(x; φ, Σ) dφ = log N(x; mean, var + Σ), and a draw of φ from
        N(mean, var) N(x; φ, Σ) normalised."""
        x = self.X[i]
        logw = float(gauss_logpdf(x, mean, np.asarray(var) + self.noise_var))
        m, v = gauss_product(mean, var, x, self.noise_var)
        return logw, m + np.sqrt(v) * rng.standard_normal(self.dim)

    def pseudo_obs(self, items: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The epoch's mean x̄ with variance Σ/n: N(x̄; φ, Σ/n) ∝ Π_i N(x_i; φ, Σ) in φ."""
        return self.X[items].mean(0), np.full(self.dim, self.noise_var / len(items))

    def total_loglik(self, items: np.ndarray, phi: np.ndarray) -> float:
        return float(np.sum(gauss_logpdf(self.X[items], phi, self.noise_var)))
