"""Assumed density filtering for NRM mixtures (Tank, Foti & Fox 2015, Alg. 1; main Eqs. 15, 18):
one pass, each item absorbed once into every cluster with its ADF responsibility.

For item x after m items: log ρ_k = log w_k + log p(x | q(θ_k)) for the K clusters and
log ρ_new = log w_new + log p(x | prior), with (w, w_new) the NRM predictive rule (nrm.py); q is
softmax(ρ). If q_new > ε a cluster is created (S = 0, the prior's posterior); otherwise its mass
is dropped and q renormalised over the K clusters (the printed Alg. 1 misplaces this
renormalisation). Then every cluster absorbs q_k t(x), S_k += q_k and m += 1. The first item
starts cluster 1 with q = (1). Responsibilities below 1e-10 are set to zero before absorbing, so
S_k = Σ_i q_ik and λ_k = λ_0 + Σ_i q_ik t(x_i) hold exactly over what was absorbed.

``Clusters`` is the state ADF and EP (ep.py) share: component ids, soft counts S and the one-item
predictive states of the observation model, built from a Summary (S = N, λ = λ_0 + stats).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from .alloc.nrm import NRM
from .obs.base import Arrays, Data, ObsModel
from .summary import Summary

TINY = 1e-10  # responsibilities below this are not absorbed


@dataclass
class Clusters:
    """The clusters an item meets: ids, soft counts S_k, the one-item predictive states (first
    axis = cluster) and the last mode v* = log Û (the next Newton start)."""

    obs: ObsModel
    prior: NRM
    uids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    S: np.ndarray = field(default_factory=lambda: np.zeros(0))
    state: Arrays | None = None
    v: float = 0.0

    def __post_init__(self) -> None:
        self._new = self.obs.predictive_state(self.obs.prior_post(1))
        if self.state is None:
            self.state = {k: a[:0].copy() for k, a in self._new.items()}

    @classmethod
    def from_summary(cls, obs: ObsModel, prior: NRM, total: Summary, v: float = 0.0
                     ) -> Clusters:
        """The clusters of a Summary of absorbed items: S = N, λ = λ_0 + stats."""
        state = obs.predictive_state(obs.post(total.N, total.stats))
        return cls(obs, prior, total.uids.copy(), total.N.astype(float), state, v)

    @property
    def K(self) -> int:
        return len(self.S)

    def log_rho(self, x: Data, m: float) -> np.ndarray:
        """log ρ of the K clusters and, last, of a new one (main Eq. 15), Û from m items."""
        w, w_new, v = self.prior.predictive(self.S, m, v0=self.v)
        if not math.isnan(v) and v > -math.inf:
            self.v = v
        with np.errstate(divide="ignore"):
            logw = np.log(np.append(w, w_new))
        loglik = np.concatenate([self.obs.predictive_logpdf_state(self.state, x)[0],
                                 self.obs.predictive_logpdf_state(self._new, x)[0]])
        return logw + loglik

    def responsibilities(self, x: Data, m: float, eps: float, uid: int
                         ) -> tuple[np.ndarray, float]:
        """q over the clusters for item x (creating cluster ``uid`` when q_new > ε, else
        renormalising over the K), entries below TINY zeroed; and log Σ_k ρ_k, the item's
        one-step-ahead predictive log density."""
        if self.K == 0:
            self.create(uid)
            return np.ones(1), math.nan
        log_rho = self.log_rho(x, m)
        total = float(logsumexp(log_rho))
        q = np.exp(log_rho - total)
        if q[-1] > eps:
            self.create(uid)
        else:
            q = q[:-1] / q[:-1].sum()
        q = np.where(q < TINY, 0.0, q)
        return q / q.sum(), total

    def add(self, x: Data, q: np.ndarray) -> None:
        """Every cluster absorbs q_k t(x); S += q."""
        for k in np.flatnonzero(q):
            self.obs.absorb(self.state, int(k), x, float(q[k]))
        self.S = self.S + q

    def take(self, x: Data, q: np.ndarray) -> None:
        """The inverse of add: every cluster gives back q_k t(x); S -= q."""
        for k in np.flatnonzero(q):
            self.obs.remove(self.state, int(k), x, float(q[k]))
        self.S = self.S - q

    def create(self, uid: int) -> None:
        """A new cluster with S = 0 and the prior's posterior."""
        self.state = {k: np.concatenate([self.state[k], self._new[k]]) for k in self.state}
        self.S = np.append(self.S, 0.0)
        self.uids = np.append(self.uids, np.int64(uid))

    def drop(self, keep: np.ndarray) -> None:
        """Keep only the clusters where the mask ``keep`` is true."""
        self.state = {k: a[keep] for k, a in self.state.items()}
        self.S = self.S[keep]
        self.uids = self.uids[keep]


def adf_step(cl: Clusters, x: Data, m: int, eps: float, uid: int) -> tuple[np.ndarray, float]:
    """Absorb item x, the (m+1)-th: its responsibilities over the clusters after the step (a
    created cluster, id ``uid``, is the last) and its one-step-ahead predictive log density."""
    q, loglik = cl.responsibilities(x, m, eps, uid)
    cl.add(x, q)
    return q, loglik


def check_epsilon(eps: float, prior: NRM) -> None:
    """ε ≥ σ (Sec. 3.3: a cluster with S < σ has zero predictive weight)."""
    if not (math.isfinite(eps) and 0 < eps < 1):
        raise ValueError(f"epsilon must lie in (0, 1), not {eps}")
    if eps < prior.sigma:
        raise ValueError(f"epsilon must be at least sigma ({eps} < {prior.sigma})")


def adf_pass(obs: ObsModel, prior: NRM, X: Data, eps: float) -> tuple[Clusters, list[np.ndarray]]:
    """Absorb the rows of X in order from no clusters (ids 0, 1, ... in creation order): the
    clusters and each item's responsibilities."""
    check_epsilon(eps, prior)
    cl = Clusters(obs, prior)
    qs = [adf_step(cl, X[i:i + 1], i, eps, cl.K)[0] for i in range(X.shape[0])]
    return cl, qs
