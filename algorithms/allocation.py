"""DP stick-breaking allocation with nested truncation (Hughes & Sudderth 2013, Eqs. 1, 4-5).

q(v_k) = Beta(a1_k, a0_k) for the K active components; q(z_n = k) = 0 for k > K.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betaln, digamma


@dataclass(frozen=True)
class StickBreaking:
    """DP(alpha0) stick-breaking weights: v_k ~ Beta(1, alpha0), w_k = v_k Π_{l<k} (1 - v_l)."""

    alpha0: float = 1.0

    def post(self, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Eq. 10 / supplement Eq. 14: a1_k = 1 + N_k, a0_k = alpha0 + Σ_{l>k} N_l."""
        N = np.asarray(N, dtype=float)
        tail = np.concatenate([np.cumsum(N[::-1])[::-1][1:], [0.0]])
        return 1.0 + N, self.alpha0 + tail

    @staticmethod
    def E_log_v(a1: np.ndarray, a0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Supplement Eq. 15: E[log v_k], E[log(1 - v_k)]."""
        total = digamma(a1 + a0)
        return digamma(a1) - total, digamma(a0) - total

    def E_log_w(self, a1: np.ndarray, a0: np.ndarray) -> np.ndarray:
        """Supplement Eq. 16: E[log w_k] = E[log v_k] + Σ_{l<k} E[log(1 - v_l)]."""
        elog_v, elog_1mv = self.E_log_v(a1, a0)
        return elog_v + np.concatenate([[0.0], np.cumsum(elog_1mv)[:-1]])

    @staticmethod
    def E_w(a1: np.ndarray, a0: np.ndarray) -> tuple[np.ndarray, float]:
        """E[w_k] for the active components and the expected mass left beyond them."""
        ev = a1 / (a1 + a0)
        rest = np.cumprod(1.0 - ev)
        before = np.concatenate([[1.0], rest[:-1]])
        return ev * before, float(rest[-1]) if len(rest) else 1.0

    def elbo(self, N: np.ndarray, a1: np.ndarray, a0: np.ndarray) -> float:
        """Allocation terms of Eq. 8 for any q(v): Σ_k N_k E[log w_k] + E[log Beta(v_k|1, α0)
        - log q(v_k)]. At the optimum (Eq. 10) this equals Σ_k log B(a1_k, a0_k) - log B(1, α0)."""
        elog_v, elog_1mv = self.E_log_v(a1, a0)
        prior = -betaln(1.0, self.alpha0) + (self.alpha0 - 1.0) * elog_1mv
        entropy_q = betaln(a1, a0) - (a1 - 1.0) * elog_v - (a0 - 1.0) * elog_1mv
        return float(N @ self.E_log_w(a1, a0) + np.sum(prior + entropy_q))
