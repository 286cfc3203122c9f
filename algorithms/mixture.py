"""A fitted mixture: q(weights) from an allocation model and q(phi_k) from an observation model.

Every engine's result is a Mixture(obs, alloc) over components with stable ids. Its exact ELBO
comes from a Summary (N, statistics, entropies; Eq. 8) in O(K · stat), independent of N; its
posterior predictive mixes the components' predictives with the mass left for new components.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
from scipy.special import logsumexp

from . import sparse_stats as ss
from .alloc import StickBreaking, VariationalAllocation, alloc_from_params
from .obs import obs_from_prior
from .obs.base import Arrays, Data, ObsModel
from .summary import Summary
from .vb.local import Globals, hard_assignments

KIND = "mixture"
# kind -> model class: a subclass that sets ``kind`` registers itself where it is defined, and
# a saved model (``to_arrays``' meta["kind"]) is read back by that class's ``from_arrays``
MODEL_KINDS: dict[str, type[PredictiveMixture]] = {}


class PredictiveMixture:
    """What every fitted mixture offers for new data, given its ``weights()``, ``obs``, ``post``
    and ``uids``: the posterior predictive with the new components' mass, and soft assignments."""

    kind: ClassVar[str]  # a concrete model's kind, the ``kind`` of its saved meta

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            taken = MODEL_KINDS.get(cls.kind)
            if taken is not None and taken.__qualname__ != cls.__qualname__:
                raise TypeError(f"model kind {cls.kind!r} is taken by {taken.__qualname__}")
            MODEL_KINDS[cls.kind] = cls

    obs: ObsModel
    post: Arrays
    uids: np.ndarray

    def heldout_plan(self, config: dict[str, Any], columns: tuple[str, ...], where: str
                     ) -> dict[str, Any]:
        """How held-out items are scored (pipeline.evaluate.HeldoutPlan's fields, ``scoring``
        the line that says it) given the run's ``config`` and the held-out corpus's
        ``columns`` (``where``: its name, for errors, which are ValueErrors)."""
        return {"scoring": "posterior predictive: log sum_k E[w_k] p(x | q(phi_k)) + E[w_new] "
                           "p(x | prior)"}

    def heldout_scores(self, X: Data, columns: Mapping[str, Any], plan: Any, start: int = 0
                       ) -> tuple[np.ndarray, np.ndarray]:
        """Held-out items' log p(x_n | fit) and each one's most probable active component id
        (-1 when only a new one can hold it), as ``heldout_plan`` decided (``plan``: its fields
        as attributes; ``columns``: the items' optional columns; ``start``: the first item's row,
        which errors, ValueErrors, name). By default the posterior predictive,
        ``log_joint_predictive``; a model kind scoring otherwise overrides it."""
        logp = self.log_joint_predictive(X)
        active = logp[:, :-1]
        best = np.full(X.shape[0], -1, np.int64)
        if active.shape[1]:
            k = active.argmax(axis=1)
            found = np.isfinite(active[np.arange(len(k)), k])
            best[found] = self.uids[k[found]]
        return logsumexp(logp, axis=1), best

    @property
    def K(self) -> int:
        return len(self.uids)

    def weights(self) -> tuple[np.ndarray, float]:
        """Weights of the active components and the mass left for new ones."""
        raise NotImplementedError

    def log_joint_predictive(self, X: Data) -> np.ndarray:
        """log E[w_k] + log p(x_n | q(phi_k)) for the K active components and, in a last column,
        log E[w_rest] + log p(x_n | prior) for a new one (-inf when no mass is left): (n, K+1)."""
        w, rest = self.weights()
        logp = np.log(np.maximum(w, 1e-300)) + self.obs.predictive_logpdf(X, self.post)
        fresh = self.obs.fresh(self.post, self.obs.prior_post(1))
        new = (np.log(rest) + self.obs.predictive_logpdf(X, fresh)
               if rest > 0 else np.full((X.shape[0], 1), -np.inf))
        return np.concatenate([logp, new], axis=1)

    def score_samples(self, X: Data) -> np.ndarray:
        """Posterior predictive log p(x_n | fit) = log[Σ_k E[w_k] p(x_n | q(phi_k))
        + E[w_rest] p(x_n | prior)], new components' mass included."""
        return logsumexp(self.log_joint_predictive(X), axis=1)

    def predict_proba(self, X: Data) -> np.ndarray:
        """P(item n belongs to active component k | x_n) under the posterior predictive,
        normalised over the K active components: (n, K)."""
        logp = self.log_joint_predictive(X)[:, :-1]
        return np.exp(logp - logsumexp(logp, axis=1, keepdims=True))

    def sample(self, n: int, rng: np.random.Generator,
               n_words: Any = None) -> tuple[Data, np.ndarray]:
        """n items, each from the posterior predictive that ``score_samples`` evaluates:
        k ~ (E[w_1], ..., E[w_K], E[w_rest]), θ ~ q(θ_k) (the prior for a new component),
        x ~ p(x | θ). Returns X and each item's component index (-1: a new one). ``n_words``:
        document lengths (an int or one per item), multinomials only. A parameter the
        components share (tied-gauss's precision) is drawn once for the n items."""
        w, rest = self.weights()
        p = np.append(w, rest)
        ks = rng.choice(len(p), size=n, p=p / p.sum())
        post = self.obs.select(self.obs.concat(self.post, self.obs.prior_post(1)), ks)
        words = None if n_words is None else np.broadcast_to(np.asarray(n_words, np.int64), (n,))
        X = self.obs.sample_items(self.obs.draw(post, rng), rng, words)
        return X, np.where(ks == len(w), -1, ks)

    def assign(self, X: Data) -> tuple[np.ndarray, np.ndarray]:
        """Each item's most probable component id under the predictive and its probability."""
        P = self.predict_proba(X)
        best = P.argmax(axis=1)
        return self.uids[best], P[np.arange(len(best)), best]

    def assign_batch(self, batch: Any) -> tuple[np.ndarray, np.ndarray]:
        """Hard assignments of one corpus partition (a Batch): from its rows by default."""
        return self.assign(batch.X)


@dataclass
class Mixture(PredictiveMixture):
    """q(weights) and q(phi) for components ``uids`` (nested truncation: q(z_n > K) = 0)."""

    kind: ClassVar[str] = KIND

    obs: ObsModel
    alloc: VariationalAllocation
    uids: np.ndarray
    post: Arrays
    alloc_post: Arrays
    # the summary of blocks absorbed by earlier streaming calls (partial_fit) under a one-hot
    # q(z), aligned with uids: part of every later fit's S^0, never revisited
    past: Summary | None = None

    @classmethod
    def from_summary(cls, obs: ObsModel, alloc: VariationalAllocation, S: Summary) -> Mixture:
        """The global update of Eq. 10 from a full-data summary."""
        return cls(obs, alloc, S.uids.copy(), obs.post(S.N, S.obs_stats), alloc.post(S.N))

    def updated(self, S: Summary, changed: Any) -> Mixture:
        """The global update of Eq. 10 from S, which differs from the summary this model was
        built from only where ``changed`` (Summary.changed_pattern; same components): O(K +
        changed entries) for Mult, whose q(θ) arrays are updated in place, so this model must
        not be used afterwards (copy it first to keep it)."""
        if not np.array_equal(S.uids, self.uids):
            raise ValueError("summary and model have different components")
        return Mixture(self.obs, self.alloc, self.uids, self.obs.post_update(
            self.post, S.N, S.obs_stats, changed), self.alloc.post(S.N), self.past)

    def refit(self, S: Summary, obs: ObsModel | None = None) -> Mixture:
        """The global update (Eq. 10) from S, a summary of the same components, under ``obs``
        (this model's by default): from this q where the observation model's update is
        iterative (ObsModel.warm_start: never below this q's bound), else from S alone."""
        obs = self.obs if obs is None else obs
        if obs.warm_start:
            return replace(self, obs=obs).updated(S, None)
        return Mixture.from_summary(obs, self.alloc, S)

    def copy(self) -> Mixture:
        """A model with its own arrays (``updated`` writes into q(θ)'s)."""
        return replace(self, post={k: v.copy() for k, v in self.post.items()})

    def globals(self, cols: np.ndarray | None = None) -> Globals:
        """What a local step needs: ids, q(phi) and E[log w] (Eq. 9); with ``cols``, q(phi)
        only as far as data with those columns reads it (ObsModel.restrict)."""
        return Globals(self.uids, self.obs.restrict(self.post, cols),
                       self.alloc.E_log_w(self.alloc_post))

    def elbo(self, S: Summary, at_optimum: bool = False) -> float:
        """Eq. 8 for this q(w), q(phi) and the q(z) summarised by S. ``at_optimum``: the
        caller knows q(phi) is the global update from S itself (ObsModel.elbo_at_optimum)."""
        if not np.array_equal(S.uids, self.uids):
            raise ValueError("summary and model have different components")
        obs_elbo = self.obs.elbo_at_optimum if at_optimum else self.obs.elbo
        return (self.alloc.elbo(S.N, self.alloc_post)
                + obs_elbo(S.N, S.obs_stats, self.post) + float(S.H.sum()))

    def weights(self) -> tuple[np.ndarray, float]:
        """E[w_k] of the active components and the expected mass beyond them."""
        return self.alloc.E_w(self.alloc_post)

    def assign(self, X: Data) -> tuple[np.ndarray, np.ndarray]:
        """Hard assignments under q(z) (Eq. 9): component id of each item and its probability."""
        return hard_assignments(X, self.obs, self.globals())

    def one_hot_summary(self, X: Data) -> Summary:
        """The summary of X with each item wholly in its most probable component under q(z)
        (Eq. 9): N and statistics of one-hot responsibilities, so every entropy (H, and a
        pair's or group's merge entropy) is exactly 0."""
        ids, _ = self.assign(X)
        R = (ids[:, None] == self.uids[None, :]).astype(float)
        stats, shared = self.obs.split_stats(self.obs.stats(X, R))
        return Summary(self.uids.copy(), R.sum(0), stats, np.zeros(self.K), n_items=X.shape[0],
                       shared=shared)

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays (uids, alloc_*, post_*, past_*) and a JSON description (kind, models, priors)."""
        arrays = {"uids": self.uids}
        arrays.update({f"alloc_{k}": v for k, v in self.alloc_post.items()})
        arrays.update({f"post_{k}": v for k, v in self.obs.saved_post(self.post).items()})
        if self.past is not None:
            arrays.update({f"past_{k}": v for k, v in self.past.to_arrays().items()})
        meta = {"kind": KIND, "obs": self.obs.name, "prior": self.obs.prior(),
                "alloc": {"name": self.alloc.name, "params": self.alloc.params()}}
        return arrays, json.loads(json.dumps(meta))

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any],
                    obs: ObsModel | None = None) -> Mixture:
        """The inverse of to_arrays (``obs`` given: reuse that model instead of rebuilding it).
        Models saved before the allocation interface (no ``kind``) are DP mixtures."""
        obs = obs if obs is not None else obs_from_prior(meta["obs"], meta["prior"])
        post = obs.restored_post({k.removeprefix("post_"): v for k, v in arrays.items()
                                  if k.startswith("post_")})
        if "kind" not in meta:
            return cls(obs, StickBreaking(meta["alpha0"]), arrays["uids"], post,
                       {"a1": arrays["a1"], "a0": arrays["a0"]})
        alloc = alloc_from_params(meta["alloc"]["name"], meta["alloc"]["params"])
        alloc_post = {k.removeprefix("alloc_"): v for k, v in arrays.items()
                      if k.startswith("alloc_")}
        past = {k.removeprefix("past_"): v for k, v in arrays.items() if k.startswith("past_")}
        return cls(obs, alloc, arrays["uids"], post, alloc_post,
                   Summary.from_arrays(past) if past else None)


def optimal_elbo(obs: ObsModel, alloc: VariationalAllocation, S: Summary,
                 log_marginals: np.ndarray | None = None) -> float:
    """The ELBO after the global update from S: the criterion of merges and other moves. At the
    optimal q(phi) the observation terms are the log evidence log M(S) (Eq. 12), so no q(phi)
    is formed: the allocation terms at their update, log M(S) and the entropy.
    ``log_marginals``: S's log M(S_k) per component (``log_marginals``), when the caller keeps
    them; their sum is log M(S)."""
    evidence = (obs.log_evidence(S.N, S.obs_stats) if log_marginals is None
                else float(np.sum(log_marginals)))
    return alloc.elbo(S.N, alloc.post(S.N)) + evidence + float(S.H.sum())


def log_marginals(obs: ObsModel, S: Summary, before: tuple[np.ndarray, np.ndarray] | None = None,
                  fresh: tuple[int, ...] = ()) -> np.ndarray | None:
    """log M(S_k) per component of S (ObsModel.log_marginal), whose sum is the log evidence,
    or None when the model's evidence is not that sum (components sharing a parameter).
    ``before``: (ids, values) of a summary that moves turned into S: a component keeps its
    value unless it is new or listed in ``fresh`` (its row changed), the rest are computed, a
    component's log M depending on its own row alone (the same numbers as the whole S's)."""
    if type(obs).log_evidence is not ObsModel.log_evidence:
        return None
    if before is None:
        return obs.log_marginal(S.N, S.obs_stats)
    known = {int(u): float(v) for u, v in zip(*before, strict=True)}
    for u in fresh:
        known.pop(int(u), None)
    out = np.array([known.get(int(u), np.nan) for u in S.uids])
    todo = np.flatnonzero([int(u) not in known for u in S.uids])
    if len(todo):
        out[todo] = obs.log_marginal(S.N[todo], {**{k: ss.rows(v, todo)
                                                    for k, v in S.stats.items()}, **S.shared})
    return out
