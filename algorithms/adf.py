"""Assumed density filtering for NRM mixtures (Tank, Foti & Fox 2015, Alg. 1; main Eqs. 15, 18):
one pass, each item absorbed once into every cluster with its ADF responsibility.

For item x after m items: log ρ_k = log w_k + log p(x | q(θ_k)) for the K clusters and
log ρ_new = log w_new + log p(x | prior), with (w, w_new) the NRM predictive rule (nrm.py); q is
softmax(ρ). If q_new > ε a cluster is created (S = 0, the prior's posterior); otherwise its mass
is dropped and q renormalised over the K clusters (the printed Alg. 1 misplaces this
renormalisation). Then every cluster absorbs q_k t(x), S_k += q_k and m += 1. The first item
starts cluster 1 with q = (1). Responsibilities below 1e-10 are set to zero before absorbing, so
S_k = Σ_i q_ik and λ_k = λ_0 + Σ_i q_ik t(x_i) hold exactly over what was absorbed.

Each step also gives the item's one-step-ahead predictive log density log p(x_{m+1} | x_1..x_m)
= log Σ_k π_k p(x | q(θ_k)) + π_new p(x | prior), π = (w, w_new) / (Σ_k w_k + w_new): the
held-out predictive of NRMMixture at the clusters so far, so a run's training figure and its
held-out score are on one scale (the first item's is its density under the prior).

``Clusters`` is the state ADF and EP (ep.py) share: component ids, soft counts S and the one-item
predictive states of the observation model, built from a Summary (S = N, λ = λ_0 + stats).
When the components share a parameter (tied-gauss's precision), absorbing an item changes it
for every cluster, and a new cluster's predictive uses it as learnt so far (ObsModel.fresh), so
that term is computed item by item instead of once per partition.

A sweep reads its items by position from a form prepared once (``prepare``): Mult's Docs (each
document's words, counts and length extracted and checked once per partition), other models row
by row through the one-item interface (Rows). Per item, the K clusters are scored in one
vectorised predictive, the new cluster's term (the prior's predictive, fixed within a sweep) is
read from one computation for the whole partition, and q is absorbed into every cluster with
q_k > 0 in one fancy-indexed update.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .alloc.nrm import NRM
from .obs.base import Arrays, Data, ObsModel
from .summary import Summary

TINY = 1e-10  # responsibilities below this are not absorbed


def prepare(obs: ObsModel, X: Data) -> Any:
    """The rows of X as the one-item path reads them, by position (``ObsModel.prepare``)."""
    return obs.prepare(X)


@dataclass
class Clusters:
    """The clusters an item meets: ids, soft counts S_k, the one-item predictive states (first
    axis = cluster) and the last mode v* = log Û (the next Newton start).

    The methods taking ``(items, i)`` read item i of a prepared partition (``prepare``); those
    taking ``x`` (one row) prepare it first."""

    obs: ObsModel
    prior: NRM
    uids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    S: np.ndarray = field(default_factory=lambda: np.zeros(0))
    state: Arrays | None = None
    v: float = 0.0
    logP: np.ndarray | None = None  # log Π_i (1 − q_ik) per cluster: exact E[K'] (None: K)

    def __post_init__(self) -> None:
        self._new = self.obs.predictive_state(self.obs.prior_post(1))
        if self.state is None:
            self.state = self.obs.select(self._new, np.zeros(0, np.int64))

    @classmethod
    def from_summary(cls, obs: ObsModel, prior: NRM, total: Summary, v: float = 0.0,
                     logP: np.ndarray | None = None) -> Clusters:
        """The clusters of a Summary of absorbed items: S = N, λ = λ_0 + stats (and, to use the
        exact E[K'], log P_k of each, in the Summary's order)."""
        state = obs.predictive_state(obs.post(total.N, total.obs_stats))
        return cls(obs, prior, total.uids.copy(), total.N.astype(float), state, v,
                   None if logP is None else np.array(logP, dtype=float))

    @property
    def expected_k(self) -> float | None:
        """E[K'] = K − Σ_k P_k, P_k = Π_i (1 − q_ik) the chance that cluster k holds no item
        (supplement Eq. 18); None when the clusters count as K."""
        return None if self.logP is None else self.K - float(np.exp(self.logP).sum())

    @property
    def K(self) -> int:
        return len(self.S)

    def new_logliks(self, items: Any) -> np.ndarray | None:
        """Every item's predictive log density under the prior (a new cluster's), (n,): it does
        not change during a sweep, so it is computed for the whole partition at once; None
        when the components share a parameter, whose absorbed items change it."""
        if self.obs.shared_shapes():
            return None
        return items.logliks(self._new)[:, 0]

    def log_joint(self, x: Data, m: float) -> np.ndarray:
        """log_joint_at for one row x."""
        with np.errstate(divide="ignore"):
            return self.log_joint_at(prepare(self.obs, x), 0, m)

    def log_joint_at(self, items: Any, i: int, m: float, new: float | None = None
                     ) -> np.ndarray:
        """log ρ_k = log π_k + log p(x_i | λ_k) for the K clusters and, last, log π_new +
        log p(x_i | λ_0) (main Eq. 15) with the weights of the predictive rule at Û from m
        items normalised, π = (w_1, ..., w_K, w_new) / (Σ_k w_k + w_new) (Eq. 23): their
        logsumexp is the item's predictive log density given the clusters, the quantity
        NRMMixture scores held-out items by. ``new`` is the item's log density under the
        prior when known (``new_logliks``). Callers silence numpy's divide warning: w_k = 0
        (S_k ≤ σ) gives log ρ_k = −inf."""
        w, w_new, v = self.prior.predictive(self.S, m, self.expected_k, v0=self.v)
        if v > -math.inf:  # not nan (the DP), not −inf (nothing absorbed yet)
            self.v = v
        log_total = math.log(float(w.sum()) + w_new)
        rho = items.loglik(self.state, i)
        rho += np.log(w) - log_total
        if new is None:
            new = items.loglik(self.obs.fresh(self.state, self._new), i)[0]
        return np.append(rho, math.log(w_new) - log_total + new)

    def responsibilities(self, x: Data, m: float, eps: float, uid: int
                         ) -> tuple[np.ndarray, float]:
        """q over the clusters for item x (creating cluster ``uid`` when q_new > ε, else
        renormalising over the K), entries below TINY zeroed; and the item's predictive log
        density given the clusters, log Σ_k ρ_k over the K + 1 terms (log_joint_at; the
        first item's, with no cluster yet, is its density under the prior)."""
        with np.errstate(divide="ignore"):
            return self.responsibilities_at(prepare(self.obs, x), 0, m, eps, uid)

    def responsibilities_at(self, items: Any, i: int, m: float, eps: float, uid: int,
                            new: float | None = None) -> tuple[np.ndarray, float]:
        """responsibilities of item i of ``items`` (``new`` as in log_joint_at), for callers
        that silence numpy's divide warning (as a sweep does once for all its items)."""
        if self.K == 0:
            if new is None:
                new = items.loglik(self.obs.fresh(self.state, self._new), i)[0]
            self.create(uid)
            return np.ones(1), new
        e = self.log_joint_at(items, i, m, new)
        top = float(e.max())
        e -= top
        np.exp(e, out=e)  # ρ / max ρ, the new cluster's last
        e_new = float(e[-1])
        e = e[:-1]
        kept = float(e.sum())
        mass = kept + e_new
        if e_new > eps * mass:  # q_new > ε: q = (e, e_new) / mass
            self.create(uid)
            e, scale = np.append(e, e_new), mass
        else:  # q_new dropped: q = e / kept, over the K
            scale = kept
        e[e < TINY * scale] = 0.0  # q_k < TINY
        e /= e.sum()
        return e, top + math.log(mass)

    def add(self, x: Data, q: np.ndarray) -> None:
        """Every cluster absorbs q_k t(x); S += q."""
        self.add_at(prepare(self.obs, x), 0, q)

    def add_at(self, items: Any, i: int, q: np.ndarray) -> None:
        """add for item i of ``items``: one update of the clusters with q_k > 0."""
        ks = q.nonzero()[0]
        items.absorb(self.state, i, ks, q[ks])
        self.S += q
        if self.logP is not None:  # q = 1: P = 0 (log −inf; ADF never takes an item back)
            self.logP[ks] += np.log1p(-q[ks])

    def take(self, x: Data, q: np.ndarray) -> None:
        """The inverse of add: every cluster gives back q_k t(x); S -= q."""
        self.take_at(prepare(self.obs, x), 0, q)

    def take_at(self, items: Any, i: int, q: np.ndarray) -> None:
        """take for item i of ``items``."""
        if self.logP is not None:
            raise ValueError("the exact E[K'] is ADF's (items are never taken back); EP uses K")
        ks = q.nonzero()[0]
        items.remove(self.state, i, ks, q[ks])
        self.S -= q

    def create(self, uid: int) -> None:
        """A new cluster with S = 0 and the prior's posterior."""
        self.state = self.obs.concat(self.state, self._new)
        self.S = np.append(self.S, 0.0)
        self.uids = np.append(self.uids, np.int64(uid))
        if self.logP is not None:
            self.logP = np.append(self.logP, 0.0)

    def drop(self, keep: np.ndarray) -> None:
        """Keep only the clusters where the mask ``keep`` is true."""
        self.state = self.obs.select(self.state, keep)
        self.S = self.S[keep]
        self.uids = self.uids[keep]
        if self.logP is not None:
            self.logP = self.logP[keep]


def adf_step(cl: Clusters, x: Data, m: int, eps: float, uid: int) -> tuple[np.ndarray, float]:
    """Absorb item x, the (m+1)-th: its responsibilities over the clusters after the step (a
    created cluster, id ``uid``, is the last) and its one-step-ahead predictive log density."""
    with np.errstate(divide="ignore"):
        return adf_step_at(cl, prepare(cl.obs, x), 0, m, eps, uid)


def adf_step_at(cl: Clusters, items: Any, i: int, m: int, eps: float, uid: int,
                new: float | None = None) -> tuple[np.ndarray, float]:
    """adf_step for item i of prepared ``items`` (``new``: its log density under the prior;
    the caller silences numpy's divide warning, see responsibilities_at)."""
    q, loglik = cl.responsibilities_at(items, i, m, eps, uid, new)
    cl.add_at(items, i, q)
    return q, loglik


def check_epsilon(eps: float, prior: NRM) -> None:
    """ε ≥ σ (Sec. 3.3: a cluster with S < σ has zero predictive weight)."""
    if not (math.isfinite(eps) and 0 < eps < 1):
        raise ValueError(f"epsilon must lie in (0, 1), not {eps}")
    if eps < prior.sigma:
        raise ValueError(f"epsilon must be at least sigma ({eps} < {prior.sigma})")


def adf_pass(obs: ObsModel, prior: NRM, X: Data, eps: float, exact_k: bool = False
             ) -> tuple[Clusters, list[np.ndarray]]:
    """Absorb the rows of X in order from no clusters (ids 0, 1, ... in creation order): the
    clusters and each item's responsibilities (``exact_k``: Û from the exact E[K'])."""
    check_epsilon(eps, prior)
    cl = Clusters(obs, prior, logP=np.zeros(0) if exact_k else None)
    items = prepare(obs, X)
    new = cl.new_logliks(items)
    with np.errstate(divide="ignore"):
        qs = [adf_step_at(cl, items, i, i, eps, cl.K, None if new is None else new[i])[0]
              for i in range(items.n)]
    return cl, qs
