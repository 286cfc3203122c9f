"""Coordinate ascent on the links of the sequential ddCRP (issue 12): q(c) = Π_i q(c_i), each
q(c_i) categorical over {0..i}, with the tables' likelihoods given.

With ℓ_sk = E_q log p(x_s | θ_k) (N × N: customer s at table k) the ELBO's link part is

    Σ_i Σ_{j<=i} q_ij (log p_ij − log q_ij) + Σ_s Σ_k Z_sk ℓ_sk,     Z = R diag(q(c_j = j)),

and it is linear in each row q_i· (every link path from s to a customer before i passes through
i at most once). With v = ℓᵀ R[:, i] (v_k = Σ_{s>=i} R_si ℓ_sk) the exact coordinate update is

    log q(c_i = t) = log p_it + Σ_k Z_tk v_k + const (t < i),   log q(c_i = i) = log p_ii + v_i
    + const,

followed by the rank-one update of R (``links.update_row``): O(N·i) for the step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from .links import reach, tables, update_row


@dataclass
class Links:
    """q(c) as an N × N row-stochastic lower-triangular matrix ``q`` (q[i, j] = q(c_i = j)), the
    log prior ``logp`` and the path probabilities ``R`` of q's strictly lower part."""

    logp: np.ndarray
    q: np.ndarray
    R: np.ndarray

    @classmethod
    def from_q(cls, logp: np.ndarray, q: np.ndarray) -> Links:
        q = np.asarray(q, float)
        return cls(np.asarray(logp, float), q.copy(), reach(np.tril(q, -1)))

    @classmethod
    def prior(cls, logp: np.ndarray) -> Links:
        """Start at the prior, q(c_i) = p(c_i)."""
        return cls.from_q(logp, np.exp(logp))

    @property
    def responsibilities(self) -> np.ndarray:
        """Z_sk = E z_sk (rows sum to 1)."""
        return tables(self.R, np.diag(self.q).copy())

    def link_term(self) -> float:
        """Σ_i Σ_{j<=i} q_ij (log p_ij − log q_ij): the links' E log p(c) − E log q(c)."""
        q, logp = self.q, self.logp
        pos = q > 0
        return float(np.sum(q[pos] * (logp[pos] - np.log(q[pos]))))

    def bound(self, ell: np.ndarray) -> float:
        """The links' part of the ELBO given ℓ_sk: link_term + Σ_s Σ_k Z_sk ℓ_sk."""
        return self.link_term() + float(np.sum(self.responsibilities * ell))

    def update(self, i: int, ell: np.ndarray) -> None:
        """Set q(c_i) to its coordinate maximiser given the other rows and ℓ, and R with it."""
        v = ell[i:, :i + 1].T @ self.R[i:, i]
        score = self.logp[i, :i + 1].copy()
        score[:i] += self.R[:i, :i] @ (np.diag(self.q)[:i] * v[:i])  # Σ_k Z_tk v_k
        score[i] += v[i]
        row = np.exp(score - logsumexp(score))
        update_row(self.R, i, row[:i] - self.q[i, :i])
        self.q[i, :i + 1] = row

    def sweep(self, ell: np.ndarray, rng: np.random.Generator) -> None:
        """Every q(c_i) once, in a random order (the paper: far better than a fixed one)."""
        for i in rng.permutation(len(self.q)):
            self.update(int(i), ell)
