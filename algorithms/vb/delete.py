"""Delete moves: a small component's items reassigned to the others, kept only if the exact
full-data ELBO rises (cf. Hughes, Kim & Sudderth 2015, Sec. 4: deletes in memoized VB).

A lap plans the deletion of one component j; every batch visit summarises its items twice, as
usual and with j removed (``local.without``: q(z_n) renormalised over the other components, the
same log-likelihoods). At the lap's end both sums are exact summaries of the same items, so
their optimal ELBOs (Eq. 8 after the global update) compare two complete states: the deletion
is accepted only if the alternative's is higher, and then every stored batch summary becomes
its alternative, so that S^0 stays the sum of the stored summaries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..alloc import VariationalAllocation
from ..mixture import optimal_elbo
from ..obs.base import ObsModel
from ..summary import Summary


@dataclass(frozen=True)
class DeleteConfig:
    """Which components a delete move tries."""

    max_share: float = field(default=0.25, metadata={
        "help": "try deleting components whose mass is at most this fraction of the average "
                "component's (N_j <= max_share N / K); one a lap, the smallest first",
        "range": "(0, inf)"})


def delete_candidates(uids: np.ndarray, N: np.ndarray, cfg: DeleteConfig) -> np.ndarray:
    """Components small enough to try deleting, smallest first (ids); none while K < 2."""
    if len(uids) < 2:
        return np.zeros(0, dtype=np.int64)
    small = np.flatnonzero(N * len(N) <= cfg.max_share * N.sum())
    return uids[small[np.argsort(N[small], kind="stable")]]


def judge(obs: ObsModel, alloc: VariationalAllocation, S: Summary, S_without: Summary) -> bool:
    """Accept the deletion: the optimal ELBO of the alternative summary of every item (the
    component removed) exceeds that of the current one."""
    return optimal_elbo(obs, alloc, S_without) > optimal_elbo(obs, alloc, S)
