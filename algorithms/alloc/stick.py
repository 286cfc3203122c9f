"""DP stick-breaking allocation with nested truncation (Hughes & Sudderth 2013, Eqs. 1, 4-5).

q(v_k) = Beta(a1_k, a0_k) for the K active components; q(z_n = k) = 0 for k > K.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.special import betaln, digamma

from .base import Arrays, VariationalAllocation


@dataclass(frozen=True)
class StickBreaking(VariationalAllocation):
    """DP(alpha0) stick-breaking weights: v_k ~ Beta(1, alpha0), w_k = v_k Π_{l<k} (1 - v_l)."""

    alpha0: float = 1.0
    name: ClassVar[str] = "dp"

    def __post_init__(self) -> None:
        if not (np.isfinite(self.alpha0) and self.alpha0 > 0):
            raise ValueError(f"alpha0 must be positive and finite, not {self.alpha0}")

    def params(self) -> dict[str, Any]:
        return {"alpha0": float(self.alpha0)}

    def predictive_weights(self, counts: np.ndarray) -> tuple[np.ndarray, float]:
        """The Chinese restaurant process: N_k for component k, alpha0 for a new one."""
        return np.asarray(counts, dtype=float), float(self.alpha0)

    def post(self, N: np.ndarray) -> Arrays:
        """Eq. 10 / supplement Eq. 14: a1_k = 1 + N_k, a0_k = alpha0 + Σ_{l>k} N_l."""
        N = np.asarray(N, dtype=float)
        tail = np.concatenate([np.cumsum(N[::-1])[::-1][1:], [0.0]])
        return {"a1": 1.0 + N, "a0": self.alpha0 + tail}

    @staticmethod
    def E_log_v(post: Arrays) -> tuple[np.ndarray, np.ndarray]:
        """Supplement Eq. 15: E[log v_k], E[log(1 - v_k)]."""
        a1, a0 = post["a1"], post["a0"]
        total = digamma(a1 + a0)
        return digamma(a1) - total, digamma(a0) - total

    def E_log_w(self, post: Arrays) -> np.ndarray:
        """Supplement Eq. 16: E[log w_k] = E[log v_k] + Σ_{l<k} E[log(1 - v_l)]."""
        elog_v, elog_1mv = self.E_log_v(post)
        return elog_v + np.concatenate([[0.0], np.cumsum(elog_1mv)[:-1]])

    def E_w(self, post: Arrays) -> tuple[np.ndarray, float]:
        """E[w_k] = E[v_k] Π_{l<k} (1 - E[v_l]) and the expected mass beyond the active ones."""
        a1, a0 = post["a1"], post["a0"]
        ev = a1 / (a1 + a0)
        rest = np.cumprod(1.0 - ev)
        before = np.concatenate([[1.0], rest[:-1]])
        return ev * before, float(rest[-1]) if len(rest) else 1.0

    def optimal_terms(self, N: np.ndarray) -> np.ndarray:
        """``elbo(n, post(n))`` for every row n of N (M, K) at once, with the same arithmetic
        row by row (cumulative sums along the rows, each row's dot product and sum alone)."""
        N = np.asarray(N, dtype=float)
        tail = np.zeros_like(N)
        tail[:, :-1] = np.cumsum(N[:, ::-1], axis=1)[:, ::-1][:, 1:]
        a1, a0 = 1.0 + N, self.alpha0 + tail
        elog_v, elog_1mv = self.E_log_v({"a1": a1, "a0": a0})
        elog_w = elog_v.copy()
        elog_w[:, 1:] += np.cumsum(elog_1mv, axis=1)[:, :-1]
        prior = -betaln(1.0, self.alpha0) + (self.alpha0 - 1.0) * elog_1mv
        entropy_q = betaln(a1, a0) - (a1 - 1.0) * elog_v - (a0 - 1.0) * elog_1mv
        return (N[:, None, :] @ elog_w[:, :, None])[:, 0, 0] + np.sum(prior + entropy_q, axis=1)

    def elbo(self, N: np.ndarray, post: Arrays) -> float:
        """Allocation terms of Eq. 8 for any q(v): Σ_k N_k E[log w_k] + E[log Beta(v_k|1, α0)
        - log q(v_k)]. At the optimum (Eq. 10) this equals Σ_k log B(a1_k, a0_k) - log B(1, α0)."""
        a1, a0 = post["a1"], post["a0"]
        elog_v, elog_1mv = self.E_log_v(post)
        prior = -betaln(1.0, self.alpha0) + (self.alpha0 - 1.0) * elog_1mv
        entropy_q = betaln(a1, a0) - (a1 - 1.0) * elog_v - (a0 - 1.0) * elog_1mv
        return float(N @ self.E_log_w(post) + np.sum(prior + entropy_q))
