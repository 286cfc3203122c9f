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
- ``group_pseudo_obs(items, starts)``: each group's (y, r, log c) with
  Π_i F(x_i | φ) ≈ c N(y; φ, r), so that a chain's marginal likelihood, its states integrated
  out, is the Kalman filter's (what the split-merge moves need); ``exact`` says whether that
  holds for every φ (Gaussians) or is a second-order expansion (text: the split-merge moves then
  target the posterior with those marginals);
- ``pieces(items, anchors, walk)``: the predictives a split's sequential allocation
  draws from (``splitmerge``): ``log_predictive(k, u, t)`` of item u for piece k given what it
  has absorbed (``absorb(k, u, t)``); any computable choice keeps the moves exact, a good one
  makes splits that are accepted.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from .dynamics import RandomWalk, gauss_logpdf, gauss_product


class Emission(Protocol):
    dim: int

    def loglik(self, i: int, phi: np.ndarray) -> np.ndarray: ...

    def candidates(self, i: int, means: np.ndarray, variances: np.ndarray,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]: ...

    def pseudo_obs(self, items: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def total_loglik(self, items: np.ndarray, phi: np.ndarray) -> float: ...

    def group_pseudo_obs(self, items: np.ndarray, starts: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def pieces(self, items: np.ndarray, anchors: tuple[int, int],
               walk: RandomWalk) -> Pieces: ...

    exact: bool


class Pieces(Protocol):
    def log_predictive(self, k: int, u: int, t: int) -> float: ...

    def absorb(self, k: int, u: int, t: int) -> None: ...


class KalmanPieces:
    """Two pieces' states under the random walk, each from G_0 = N(0, σ) and updated by its
    members' pseudo-observations (y, r) in turn: the predictive of item u at epoch t is
    N(y_u; mean, var + ρ (t − t_last) + r_u) up to 2π (which cancels between the pieces).
    Python floats, one item at a time: faster than numpy at a few dimensions."""

    def __init__(self, y: np.ndarray, r: np.ndarray, walk: RandomWalk):
        self.y, self.r = y.tolist(), r.tolist()
        D = len(self.y[0])
        self.rho = walk.drift_var
        self.mean = [[0.0] * D, [0.0] * D]
        self.var = [[walk.birth_var] * D, [walk.birth_var] * D]
        self.last, self.seen = [0, 0], [False, False]

    def _gap(self, k: int, t: int) -> float:
        return self.rho * (t - self.last[k]) if self.seen[k] else 0.0

    def log_predictive(self, k: int, u: int, t: int) -> float:
        gap, yu, ru, m, v = self._gap(k, t), self.y[u], self.r[u], self.mean[k], self.var[k]
        lp = 0.0
        for d in range(len(yu)):
            s = v[d] + gap + ru[d]
            lp -= 0.5 * (math.log(s) + (yu[d] - m[d]) ** 2 / s)
        return lp

    def absorb(self, k: int, u: int, t: int) -> None:
        gap, yu, ru, m, v = self._gap(k, t), self.y[u], self.r[u], self.mean[k], self.var[k]
        for d in range(len(yu)):
            prior_v = v[d] + gap
            v[d] = 1.0 / (1.0 / prior_v + 1.0 / ru[d])
            m[d] = v[d] * (m[d] / prior_v + yu[d] / ru[d])
        self.last[k], self.seen[k] = t, True


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

    def group_pseudo_obs(self, items: np.ndarray,
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

    def pieces(self, items: np.ndarray, anchors: tuple[int, int],
               walk: RandomWalk) -> KalmanPieces:
        """Kalman predictives over the items' own pseudo-observations (x_i, Σ)."""
        y, r, _ = self.group_pseudo_obs(items, np.arange(len(items)))
        return KalmanPieces(y, r, walk)
