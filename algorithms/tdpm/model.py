"""A fitted temporal DP mixture (``tdpm`` runs): the final Gibbs sample's chains (labels of the
training items, states over each chain's span, counts per epoch), the hyperparameters, and what
a user asks of it.

For new items without an epoch the model predicts the next epoch, T: chain k's weight is its
pseudo-count m_{k,T} = Σ_h w_h n_{k,T−h} (Eq. 4.4; zero for a chain dead by then) and its
density N(x; E φ_{k,last}, Var φ_{k,last} + (Σ + (T − last)ρ) I) (the transition marginal after
Eq. 5.8); a new chain has weight α and density N(x; 0, (σ + Σ) I). Training items keep their
sampled chain.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp, softmax

from ..alloc.rcrp import pseudo_counts
from ..mixture import PredictiveMixture
from .dynamics import gauss_logpdf
from .text import TextEmission

KIND = "temporal_mixture"


@dataclass
class ChainObs:
    """What evaluation and ``bnpmix.load`` read of a model's observations: the name, the
    dimension, the data check and the component means (each chain's last state: a mean vector,
    or for text its word distribution softmax(φ))."""

    D: int
    text: bool = False  # as ObsModel.text: logistic-normal topic chains over word counts

    @property
    def name(self) -> str:
        return "tdpm-text" if self.text else "tdpm-gauss"

    def covariances(self, post: Any) -> None:
        """None: a chain's emission noise is a fixed hyperparameter, not a posterior."""
        return None

    def check_data(self, X: Any) -> None:
        if X.ndim != 2 or X.shape[1] != self.D:
            raise ValueError(f"expected (n, {self.D}) items, got shape {X.shape}")
        values = X.data if sp.issparse(X) else X
        if self.text != sp.issparse(X):
            raise ValueError("expected " + ("a sparse count matrix" if self.text
                                            else "a dense array"))
        if not np.all(np.isfinite(values)) or (self.text and np.any(values < 0)):
            raise ValueError("values must be finite" + (" non-negative counts" if self.text
                                                        else ""))

    def means(self, post: dict[str, np.ndarray]) -> np.ndarray:
        return softmax(post["last_state"], axis=1) if self.text else post["last_state"]


@dataclass
class TemporalMixture(PredictiveMixture):
    """Chains ``uids`` with spans [first, last] (epoch indices), states and their variances
    (posterior means and variances given the final labels, concatenated spans, (Σ spans, D)),
    counts (T, K); ``labels``/``stability`` per training item in corpus order
    (stability: the fraction of kept samples whose chain for the item maps onto its final one);
    ``times`` the time value of each epoch; ``hyper`` alpha, window, decay, birth_var,
    drift_var, noise_var, fixed_k; ``stays`` (membership stability only) whether each training
    item stayed in its previous chain in the final sample."""

    kind: ClassVar[str] = KIND

    uids: np.ndarray
    first: np.ndarray
    last: np.ndarray
    states: np.ndarray
    state_vars: np.ndarray
    counts: np.ndarray
    times: np.ndarray
    labels: np.ndarray
    stability: np.ndarray
    hyper: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)
    stays: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.obs = ChainObs(self.states.shape[1], self.hyper.get("emission") == "text")
        self.offsets = np.concatenate([[0], np.cumsum(self.last - self.first + 1)])
        self.post = {"last_state": self.states[self.offsets[1:] - 1] if self.K else
                     np.zeros((0, self.obs.D))}

    def spans(self) -> np.ndarray:
        """Each chain's first and last epoch as the corpus's time values, (K, 2): ``means``
        gives the state at the last one (bnpmix show names both)."""
        return np.column_stack([self.times[self.first], self.times[self.last]])

    def chain_states(self, j: int) -> np.ndarray:
        """The states of the j-th chain over its span (L, D)."""
        return self.states[self.offsets[j]:self.offsets[j + 1]]

    def _next_epoch(self) -> tuple[np.ndarray, float]:
        h = self.hyper
        T = len(self.times)
        m = pseudo_counts(np.vstack([self.counts, np.zeros((1, self.K))]), T, h["window"],
                          h["decay"]) if self.K else np.zeros(0)
        return m, float(h["alpha"])

    def weights(self) -> tuple[np.ndarray, float]:
        """The next epoch's chain probabilities (0 for chains dead by then) and a new one's."""
        m, alpha = self._next_epoch()
        total = m.sum() + alpha
        return m / total, alpha / total

    def log_joint_predictive(self, X: Any) -> np.ndarray:
        """log weight + log density for every chain at the next epoch, and a new chain last.
        Text: a chain's density at the posterior mean of its last state (plug-in), a new
        chain's by the Laplace estimate of ∫ F(x | φ) N(φ; 0, σ I) dφ; multinomial
        coefficients left out."""
        h = self.hyper
        w, rest = self.weights()
        T = len(self.times)
        out = np.full((X.shape[0], self.K + 1), -np.inf)
        alive = np.flatnonzero(w > 0)
        ends = self.offsets[alive + 1] - 1
        if self.obs.text:
            phi = self.states[ends]
            out[:, alive] = np.log(w[alive]) + (
                np.asarray(X @ phi.T) - np.asarray(X.sum(1)) * logsumexp(phi, axis=1))
            emission = TextEmission(X)
            zero = np.zeros((1, X.shape[1]))
            out[:, -1] = np.log(rest) + np.array([emission.laplace(i, zero, h["birth_var"])[0][0]
                                                  for i in range(X.shape[0])])
            return out
        for j, end in zip(alive, ends, strict=True):
            var = self.state_vars[end] + h["noise_var"] + (T - self.last[j]) * h["drift_var"]
            out[:, j] = np.log(w[j]) + gauss_logpdf(X, self.states[end], var)
        out[:, -1] = np.log(rest) + gauss_logpdf(X, 0.0, h["birth_var"] + h["noise_var"])
        return out

    def heldout_scores(self, X: Any, columns: Mapping[str, Any], plan: Any, start: int = 0
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The next epoch's predictive (PredictiveMixture.heldout_scores), refusing items of
        another time when the corpus has the run's time column (``plan.time_column``): the
        chains' weights and states at other epochs are not part of the model."""
        if plan.time_column is not None:
            times = np.asarray(columns[plan.time_column])
            off = np.flatnonzero(times != plan.next_time)
            if len(off):
                raise ValueError(
                    f"{plan.time_column!r} is {times[off[0]]} at row {start + int(off[0])} "
                    f"({len(off)} of the partition's {len(times)} rows are not of time "
                    f"{plan.next_time}): a tdpm model predicts only the epoch after its "
                    f"last, time {plan.next_time}; the chains' weights and states at "
                    "another epoch given the training items are not part of the fitted "
                    f"model, so these items cannot be scored (hold out items of time "
                    f"{plan.next_time})")
        return super().heldout_scores(X, columns, plan, start)

    def assign_batch(self, batch: Any) -> tuple[np.ndarray, np.ndarray]:
        """The training items' sampled chains and their stability across kept samples."""
        rows = slice(batch.start, batch.start + len(batch))
        return self.uids[self.labels[rows]], self.stability[rows]

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {"uids": self.uids, "first": self.first, "last": self.last,
                  "states": self.states, "state_vars": self.state_vars,
                  "counts": self.counts, "times": self.times,
                  "labels": self.labels, "stability": self.stability}
        if self.stays is not None:
            arrays["stays"] = self.stays
        meta = {"kind": KIND, "obs": self.obs.name, "hyper": self.hyper, "info": self.info}
        return arrays, json.loads(json.dumps(meta))

    def heldout_plan(self, config: dict[str, Any], columns: tuple[str, ...], where: str
                     ) -> dict[str, Any]:
        """The next epoch's chains (PredictiveMixture.heldout_plan); with the run's time column
        in the corpus, every held-out item must be of that epoch."""
        column = config.get("engine", {}).get("time_column", "time")
        next_time = int(self.times[-1]) + 1 if len(self.times) else 0
        scoring = (f"tdpm next epoch (time {next_time}): chains alive then, weighted by their "
                   "pseudo-counts, and a new chain")
        if self.obs.text:
            scoring += " (topic chains at their last state's posterior mean, plug-in)"
        if column in columns:
            return {"scoring": scoring, "time_column": column, "next_time": next_time}
        return {"scoring": scoring + f" (the corpus has no {column!r} column: every item taken "
                                     "as of the next epoch)"}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]
                    ) -> TemporalMixture:
        a = {k: np.asarray(arrays[k]) for k in ("uids", "first", "last", "counts", "times",
                                                 "labels")}
        return cls(a["uids"].astype(np.int64), a["first"].astype(np.int64),
                   a["last"].astype(np.int64), np.asarray(arrays["states"], float),
                   np.asarray(arrays["state_vars"], float),
                   a["counts"].astype(np.int64), a["times"].astype(np.int64),
                   a["labels"].astype(np.int64), np.asarray(arrays["stability"], float),
                   dict(meta["hyper"]), dict(meta.get("info", {})),
                   np.asarray(arrays["stays"], bool) if "stays" in arrays else None)
