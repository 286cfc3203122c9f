"""Normalized random measures (generalized gamma: DP σ = 0, inverse-Gaussian σ = 1/2, NGGP): the
predictive rule that ADF and EP use (Tank, Foti & Fox 2015, main Eq. 23 = supplement Eq. 21).

With soft counts S_k of the K clusters and m items absorbed, the next item joins cluster k with
weight w_k = max(S_k − σ, 0) and a new cluster with w_new = a (Û + τ)^σ (σ = 0: w_new = a, Eq. 19,
no U). Û = exp(v*) is the mode of the density of v = log U,

    g(v) = m v − (m − σ E[K]) log(e^v + τ) − (a/σ) (e^v + τ)^σ,

whose exponent m − σ E[K] corrects the n − 1 − a E[K] printed in the paper's main Eqs. 6, 21 and
supplement Eqs. 17, 34 (its own supplement Eqs. 6 and 20 give σ; at τ = 0 the rule must reduce
to Pitman–Yor(σ, 0), new-cluster weight σK, which only σ does). g is strictly concave when
m ≥ σ E[K], so a safeguarded Newton iteration (bisection inside a bracket) finds v*.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import logsumexp

from .base import Allocation

LOG2 = math.log(2.0)


class NRM(Allocation):
    """A generalized-gamma NRM prior with mass a > 0, tilt τ >= 0 and discount σ in [0, 1)."""

    name = "nrm"

    def __init__(self, a: float = 1.0, tau: float = 1.0, sigma: float = 0.0) -> None:
        if not (math.isfinite(a) and a > 0):
            raise ValueError(f"a must be positive and finite, not {a}")
        if not (math.isfinite(tau) and tau >= 0):
            raise ValueError(f"tau must be >= 0 and finite, not {tau}")
        if not 0 <= sigma < 1:
            raise ValueError(f"sigma must lie in [0, 1), not {sigma}")
        if sigma == 0 and tau != 1.0:
            tau = 1.0  # the DP does not depend on τ: one canonical value
        self.a, self.tau, self.sigma = float(a), float(tau), float(sigma)
        self._log_tau = math.log(self.tau) if self.tau > 0 else -math.inf

    def params(self) -> dict[str, Any]:
        return {"a": self.a, "tau": self.tau, "sigma": self.sigma}

    # the mode of log U ---------------------------------------------------------------------

    def _log_base(self, v: float) -> float:
        """log(e^v + τ), without overflow: numpy's logaddexp(v, log τ) step for step, in
        Python floats (it is called several times per item)."""
        if self.tau <= 0:
            return v
        lt = self._log_tau
        if v == lt:
            return v + LOG2
        d = v - lt
        if d > 0:
            return v + math.log1p(math.exp(-d))
        if d <= 0:
            return lt + math.log1p(math.exp(d))
        return d  # nan

    def log_density(self, v: float, m: float, EK: float) -> float:
        """g(v), the log density of v = log U up to a constant."""
        L = self._log_base(v)
        return m * v - (m - self.sigma * EK) * L - self.a / self.sigma * math.exp(self.sigma * L)

    def _slope(self, v: float, m: float, EK: float) -> tuple[float, float]:
        """g'(v) and g''(v)."""
        s, L = self.sigma, self._log_base(v)
        share = math.exp(v - L)  # e^v / (e^v + τ)
        tail = self.a * math.exp(v + (s - 1) * L)  # a e^v (e^v + τ)^(σ-1)
        d1 = m - (m - s * EK) * share - tail
        d2 = -(m - s * EK) * share * (1 - share) - tail * (s * share + (1 - share))
        return d1, d2

    def log_u_mode(self, m: float, EK: float, v0: float = 0.0, tol: float = 1e-12,
                   max_iter: int = 100) -> float:
        """v* = argmax g (−inf when g increases towards v → −inf, i.e. no item and no cluster
        yet). Newton steps from ``v0`` (the previous item's v*: a few steps suffice), kept
        inside a bracket [lo, hi] with g'(lo) > 0 > g'(hi), bisecting when a step leaves it."""
        if self.sigma == 0:
            raise ValueError("the DP (sigma = 0) needs no U")
        if m < self.sigma * EK:
            raise ValueError(f"g is concave only for m >= sigma E[K] ({m} < {self.sigma * EK})")
        at_v0 = self._slope(v0, m, EK)
        # g' decreases, so g'(v0) > 0 for some v0 >= −745 already says g'(−745) > 0
        if not (at_v0[0] > 0 and v0 >= -745.0) and self._slope(-745.0, m, EK)[0] <= 0:
            return -math.inf  # nothing pulls v up: the mode is at −inf
        lo, hi, step = v0, v0, 1.0
        d1 = at_v0[0]
        while d1 <= 0:
            lo, step = lo - step, 2 * step
            d1 = self._slope(lo, m, EK)[0]
        step = 1.0
        d1 = at_v0[0]
        while d1 >= 0:
            hi, step = hi + step, 2 * step
            d1 = self._slope(hi, m, EK)[0]
        v = v0  # lo <= v0 <= hi
        for it in range(max_iter):
            d1, d2 = at_v0 if it == 0 else self._slope(v, m, EK)
            if d1 > 0:
                lo = v
            else:
                hi = v
            new = v - d1 / d2
            if not lo < new < hi:
                new = 0.5 * (lo + hi)
            if abs(new - v) <= tol * max(1.0, abs(v)):
                return new
            v = new
        return v

    # the predictive rule --------------------------------------------------------------------

    def predictive(self, S: np.ndarray, m: float, EK: float | None = None,
                   v0: float = 0.0) -> tuple[np.ndarray, float, float]:
        """Unnormalised weights w_k = max(S_k − σ, 0), w_new = a (Û + τ)^σ, and v* = log Û
        (nan for the DP). ``EK`` defaults to K, the number of clusters."""
        S = np.asarray(S, dtype=float)
        w = np.maximum(S - self.sigma, 0.0)
        if self.sigma == 0:
            return w, self.a, math.nan
        v = self.log_u_mode(m, len(S) if EK is None else EK, v0)
        w_new = self.a * math.exp(self.sigma * self._log_base(v)) if v > -math.inf else (
            self.a * self.tau ** self.sigma)
        return w, w_new, v

    def predictive_weights(self, counts: np.ndarray) -> tuple[np.ndarray, float]:
        """The interface's rule: m = Σ_k S_k items absorbed, E[K] = K."""
        w, w_new, _ = self.predictive(counts, float(np.sum(counts)))
        return w, w_new

    def log_predictive_probs(self, S: np.ndarray, m: float, EK: float | None = None,
                             v0: float = 0.0) -> np.ndarray:
        """log of (w_1, ..., w_K, w_new) / (Σ_k w_k + w_new): K + 1 entries summing to one."""
        w, w_new, _ = self.predictive(S, m, EK, v0)
        with np.errstate(divide="ignore"):
            logw = np.log(np.append(w, w_new))
        return logw - logsumexp(logw)
