"""Global parameters of a DP mixture and its exact ELBO from summaries (Eq. 8).

The ELBO is Σ_k [allocation terms + observation terms] + Σ_k H_k: everything comes from a
Summary (N, statistics, entropies), so evaluating it costs O(K · stat), independent of N.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from .allocation import StickBreaking
from .local import Globals
from .obs.base import Arrays, ObsModel
from .summary import Summary


@dataclass
class DPMixture:
    """q(v) and q(phi) for components ``uids`` (nested truncation: q(z_n > K) = 0)."""

    obs: ObsModel
    alloc: StickBreaking
    uids: np.ndarray
    post: Arrays
    a1: np.ndarray
    a0: np.ndarray

    @classmethod
    def from_summary(cls, obs: ObsModel, alloc: StickBreaking, S: Summary) -> DPMixture:
        """The global update of Eq. 10 from a full-data summary."""
        a1, a0 = alloc.post(S.N)
        return cls(obs, alloc, S.uids.copy(), obs.post(S.N, S.stats), a1, a0)

    @property
    def K(self) -> int:
        return len(self.uids)

    def globals(self) -> Globals:
        return Globals(self.uids, self.post, self.alloc.E_log_w(self.a1, self.a0))

    def elbo(self, S: Summary) -> float:
        """Eq. 8 for this q(v), q(phi) and the q(z) summarised by S."""
        if not np.array_equal(S.uids, self.uids):
            raise ValueError("summary and model have different components")
        return (self.alloc.elbo(S.N, self.a1, self.a0)
                + self.obs.elbo(S.N, S.stats, self.post) + float(S.H.sum()))

    def weights(self) -> tuple[np.ndarray, float]:
        """E[w_k] of the active components and the expected mass beyond them."""
        return self.alloc.E_w(self.a1, self.a0)

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Arrays (uids, a1, a0, post_*) and a JSON description (model, prior) for saving."""
        arrays = {"uids": self.uids, "a1": self.a1, "a0": self.a0}
        arrays.update({f"post_{k}": v for k, v in self.post.items()})
        meta = {"obs": self.obs.name, "prior": self.obs.prior(), "alpha0": self.alloc.alpha0}
        return arrays, json.loads(json.dumps(meta))


def optimal_elbo(obs: ObsModel, alloc: StickBreaking, S: Summary) -> float:
    """The ELBO after the global update from S: the criterion of merges and other moves."""
    return DPMixture.from_summary(obs, alloc, S).elbo(S)
