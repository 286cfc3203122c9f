"""Assumed density filtering for NRM mixtures (Tank, Foti & Fox 2015, Alg. 1; main Eqs. 15, 18):
one pass, each item absorbed once into every cluster with its ADF responsibility.

For item x after m items: log ρ_k = log w_k + log p(x | q(θ_k)) for the K clusters and
log ρ_new = log w_new + log p(x | prior), with (w, w_new) the NRM predictive rule (nrm.py); q is
softmax(ρ). If q_new > ε a cluster is created (S = 0, the prior's posterior); otherwise its mass
is dropped and q renormalised over the K clusters (the printed Alg. 1 misplaces this
renormalisation). Then every cluster absorbs q_k t(x), S_k += q_k and m += 1. The first item
starts cluster 1 with q = (1). Responsibilities below 1e-10 are set to zero before absorbing, so
S_k = Σ_i q_ik and λ_k = λ_0 + Σ_i q_ik t(x_i) hold exactly over what was absorbed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from .alloc.nrm import NRM
from .obs.base import Arrays, Data, ObsModel

TINY = 1e-10  # responsibilities below this are not absorbed


@dataclass
class ADFState:
    """What ADF carries from item to item: soft counts S_k, the clusters' one-item predictive
    states (first axis = cluster), items absorbed m, and the last mode v* = log Û."""

    obs: ObsModel
    prior: NRM
    S: np.ndarray = field(default_factory=lambda: np.zeros(0))
    state: Arrays | None = None
    m: int = 0
    v: float = 0.0

    def __post_init__(self) -> None:
        self._new = self.obs.predictive_state(self.obs.prior_post(1))
        if self.state is None:
            self.state = {k: a[:0].copy() for k, a in self._new.items()}

    @property
    def K(self) -> int:
        return len(self.S)

    def log_rho(self, x: Data) -> np.ndarray:
        """log ρ of the K clusters and, last, of a new one (main Eq. 15)."""
        w, w_new, v = self.prior.predictive(self.S, self.m, v0=self.v)
        if not math.isnan(v) and v > -math.inf:
            self.v = v
        with np.errstate(divide="ignore"):
            logw = np.log(np.append(w, w_new))
        loglik = np.concatenate([self.obs.predictive_logpdf_state(self.state, x)[0],
                                 self.obs.predictive_logpdf_state(self._new, x)[0]])
        return logw + loglik

    def absorb(self, x: Data, eps: float) -> np.ndarray:
        """One ADF step for item x; returns its responsibilities over the clusters after the
        step (a created cluster is the last one)."""
        if self.K == 0:
            q = np.ones(1)
            self._create()
        else:
            log_rho = self.log_rho(x)
            q = np.exp(log_rho - logsumexp(log_rho))
            if q[-1] > eps:
                self._create()
            else:
                q = q[:-1] / q[:-1].sum()
        q = np.where(q < TINY, 0.0, q)
        q /= q.sum()
        for k in np.flatnonzero(q):
            self.obs.absorb(self.state, int(k), x, float(q[k]))
        self.S = self.S + q
        self.m += 1
        return q

    def _create(self) -> None:
        self.state = {k: np.concatenate([self.state[k], self._new[k]]) for k in self.state}
        self.S = np.append(self.S, 0.0)


def adf_pass(obs: ObsModel, prior: NRM, X: Data, eps: float,
             start: ADFState | None = None) -> tuple[ADFState, list[np.ndarray]]:
    """Absorb the rows of X in order (from ``start`` to continue a stream); the state and each
    item's responsibilities."""
    if eps < prior.sigma:
        raise ValueError(f"epsilon must be at least sigma ({eps} < {prior.sigma})")
    st = start if start is not None else ADFState(obs, prior)
    return st, [st.absorb(X[i:i + 1], eps) for i in range(X.shape[0])]
