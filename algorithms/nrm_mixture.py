"""A fitted NRM mixture (ADF or EP, Tank, Foti & Fox 2015): the clusters' summed sites and the
NRM predictive rule, for prediction and held-out scoring.

The held-out predictive (not defined in the paper) is p(x* | fit) = Σ_{k=1}^{K+1} π_k
p(x* | λ_k) with π_k = w_k / (Σ_j w_j + w_new) from the predictive rule at Û for m = the training
items absorbed, the (K+1)-th term under the prior; test items are never absorbed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .alloc.nrm import NRM
from .mixture import PredictiveMixture
from .obs import obs_from_prior
from .obs.base import Arrays, ObsModel
from .summary import Summary

KIND = "nrm_mixture"


@dataclass
class NRMMixture(PredictiveMixture):
    """Clusters ``sums.uids`` with S = sums.N and λ = λ_0 + sums.stats after m items, v = log Û
    (the Newton start). ``info`` is JSON-able bookkeeping saved with the model (the engines
    record the partitions absorbed)."""

    kind: ClassVar[str] = KIND

    obs: ObsModel
    prior: NRM
    sums: Summary
    m: int
    v: float = 0.0
    logP: np.ndarray | None = None  # log P_k when ADF used the exact E[K'] (Eq. 18), else None
    info: dict[str, Any] = field(default_factory=dict)
    post: Arrays = field(init=False)
    uids: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.post = self.obs.post(self.sums.N, self.sums.obs_stats)
        self.uids = self.sums.uids

    def weights(self) -> tuple[np.ndarray, float]:
        """π_k = w_k / (Σ_j w_j + w_new) of the clusters and π_new (main Eq. 23 at Û)."""
        EK = None if self.logP is None else self.K - float(np.exp(self.logP).sum())
        w, w_new, _ = self.prior.predictive(self.sums.N, self.m, EK, v0=self.v)
        total = w.sum() + w_new
        return w / total, w_new / total

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The summed sites as arrays (sum/*) and a JSON description."""
        arrays = {f"sum/{k}": v for k, v in self.sums.to_arrays().items()}
        if self.logP is not None:
            arrays["logP"] = self.logP
        meta = {"kind": KIND, "obs": self.obs.name, "prior": self.obs.prior(),
                "alloc": {"name": self.prior.name, "params": self.prior.params()},
                "m": int(self.m), "v": None if math.isnan(self.v) else float(self.v),
                "info": self.info}
        return arrays, json.loads(json.dumps(meta))

    def heldout_plan(self, config: dict[str, Any], columns: tuple[str, ...], where: str
                     ) -> dict[str, Any]:
        """The NRM predictive rule (PredictiveMixture.heldout_plan)."""
        return {"scoring": "NRM predictive rule: log sum_k pi_k p(x | lambda_k) + pi_new "
                           "p(x | lambda_0)"}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any],
                    obs: ObsModel | None = None) -> NRMMixture:
        obs = obs if obs is not None else obs_from_prior(meta["obs"], meta["prior"])
        sums = Summary.from_arrays({k.removeprefix("sum/"): v for k, v in arrays.items()
                                    if k.startswith("sum/")})
        v = meta.get("v")
        logP = arrays.get("logP")
        return cls(obs, NRM(**meta["alloc"]["params"]), sums, int(meta["m"]),
                   math.nan if v is None else float(v),
                   None if logP is None else np.asarray(logP, float), dict(meta.get("info", {})))


def hellinger_pairs(means: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """Pairs (i, j), i < j, of rows of ``means`` (probability vectors) whose Hellinger distance
    H = sqrt(1 − Σ_w sqrt(p_w q_w)) is below ``threshold``, closest first."""
    root = np.sqrt(np.maximum(means, 0.0))
    H = np.sqrt(np.maximum(1.0 - root @ root.T, 0.0))
    i, j = np.triu_indices(len(means), k=1)
    close = H[i, j] < threshold
    order = np.argsort(H[i, j][close], kind="stable")
    return [(int(a), int(b), float(h)) for a, b, h in
            zip(i[close][order], j[close][order], H[i, j][close][order], strict=True)]
