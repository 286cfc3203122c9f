"""Delete moves: a small component's items reassigned to the others, kept only if the exact
full-data ELBO rises (cf. Hughes, Kim & Sudderth 2015, Sec. 4: deletes in memoized VB).

A lap plans the deletion of a few components; every batch visit summarises its items as usual
and, for each planned j, with j removed (``local.without``: q(z_n) renormalised over the other
components, the same log-likelihoods). At the lap's end each alternative sum and S^0 are exact
summaries of the same items, so their optimal ELBOs (Eq. 8 after the global update) compare
complete states: the deletion that raises the ELBO most is accepted, if any does, and then
every stored batch summary becomes its alternative, so that S^0 stays the sum of the stored
summaries. (Two alternatives do not compose: each was computed with the other component
present.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..alloc import VariationalAllocation
from ..mixture import optimal_elbo
from ..obs.base import ObsModel
from ..summary import Summary


@dataclass(frozen=True)
class DeleteConfig:
    """Which components delete moves try, and how many a lap."""

    max_share: float = field(default=0.25, metadata={
        "help": "try deleting components whose mass is at most this fraction of the average "
                "component's (N_j <= max_share N / K), the smallest first",
        "range": "(0, inf)"})
    # 50 rather than 5: a run converges only once every candidate has been tried, and 1,200
    # docstrings from the one-pass start had 20 candidates, 4 laps of 5 (each batch keeps only
    # the change of its summary per deletion: the items of a small component)
    per_lap: int = field(default=50, metadata={
        "help": "deletions tried in one lap (each batch summarised without each; only the "
                "items a component holds are summarised again)",
        "range": "[1, inf)"})


def delete_candidates(uids: np.ndarray, N: np.ndarray, cfg: DeleteConfig) -> np.ndarray:
    """Components small enough to try deleting, smallest first (ids); none while K < 2."""
    if len(uids) < 2:
        return np.zeros(0, dtype=np.int64)
    small = np.flatnonzero(N * len(N) <= cfg.max_share * N.sum())
    return uids[small[np.argsort(N[small], kind="stable")]]


def judge(obs: ObsModel, alloc: VariationalAllocation, S: Summary,
          alternatives: Iterable[tuple[int, Summary]]
          ) -> tuple[int | None, Summary | None, list[int]]:
    """The deletion to accept, the one whose alternative summary of every item (the component
    removed) has the highest optimal ELBO if that exceeds S's (else None), with that summary,
    and the deletions refused: those whose ELBO does not exceed S's. The alternatives are read
    one at a time; only the best so far is kept."""
    base = optimal_elbo(obs, alloc, S)
    best, best_gain, best_S, refused = None, 0.0, None, []
    for uid, alt in alternatives:
        gain = optimal_elbo(obs, alloc, alt) - base
        if gain <= 0:
            refused.append(uid)
        elif gain > best_gain:
            best, best_gain, best_S = uid, gain, alt
    return best, best_S, refused
