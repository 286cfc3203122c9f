"""The value a memoized run carries (MemoState) and the records inside it: a birth in
progress, where a lap stands, the best lap-end state. Frozen: every kernel returns a new
value (``dataclasses.replace``), so what a checkpoint writes is exactly the state."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.summary import Summary
from bnpmix.algorithms.vb.birth import BirthConfig
from bnpmix.algorithms.vb.delete import DeleteConfig
from bnpmix.algorithms.vb.merge import MergeConfig

# a lap without moves that changes the ELBO by less than this per item has settled: the next lap
# tries births on birth.settled_per_lap targets, so that a run with many components (each must
# fail a birth before the run converges) does not spend a lap per component
SETTLED = 1e-3
# lap ends whose figures summary.json keeps (``last_laps``: ELBO change per item, K, moves
# accepted), so that a run stopped at its lap cap says what was still moving
RECENT_LAPS = 5


class Options(Protocol):
    """What the kernels read of the engine's configuration (MemoConfig)."""

    laps: int
    moves: tuple[str, ...]
    tol: float
    birth: BirthConfig
    merge: MergeConfig
    delete: DeleteConfig


@dataclass(frozen=True)
class Birth:
    """A birth in progress: its target, the rows collected for it (``chunks``: their keys in
    the engine's store of collected rows; n of the ``seen`` that qualified, fewer once the cap
    N' is reached), and later its S' with the target's mass when S' was created."""

    target: int
    chunks: tuple[int, ...] = ()
    n: int = 0
    S_new: Summary | None = None
    seen: int = 0
    mass: float = 0.0


@dataclass(frozen=True)
class Lap:
    """Where a lap stands: its order, planned pairs and their summed entropies, birth targets,
    S' with the families being adopted (origin, newborns), their planned groups and summed
    entropies and each origin's mass before the adoption, the next position and the
    components whose deletion the lap tries."""

    lap: int
    order: np.ndarray
    pairs: np.ndarray | None
    Hpair: np.ndarray
    S_prime: Summary | None
    targets: tuple[int, ...]
    pos: int = 0
    groups: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    Hgroup: np.ndarray = field(default_factory=lambda: np.zeros(0))
    origin_N: np.ndarray = field(default_factory=lambda: np.zeros(0))
    deletes: tuple[int, ...] = ()

    @property
    def families(self) -> list[tuple[int, tuple[int, ...]]]:
        return [(int(row[0]), tuple(int(u) for u in row[1:] if u >= 0)) for row in self.groups]

    @property
    def last(self) -> bool:
        return self.pos == len(self.order)


@dataclass(frozen=True)
class Best:
    """The best lap-end state: its ELBO, lap, q and the past blocks then (Mixture.past)."""

    elbo: float
    lap: int
    model: Mixture
    past: Summary | None = None

    def fitted(self) -> Mixture:
        """The model with the past blocks of its lap end."""
        return self.model if self.model.past is self.past else replace(self.model, past=self.past)


@dataclass(frozen=True)
class MemoState:
    """A memoized run between steps: q (``model``) and S^0, the past blocks of a warm start,
    the lap in progress, birth and deletion bookkeeping, the lap-end record and the schedule
    (W visits a wave, ``ahead`` waves computed ahead). ``model_is_S0`` / ``model_is_prime``:
    q is the global update (Eq. 10) of S^0 itself / of S^0 + S', so a visit may update it
    only where the batch moved S^0."""

    model: Mixture
    S0: Summary
    past: Summary | None = None
    lap: Lap | None = None
    next_lap: int = 0
    hold_globals: bool = False
    births: tuple[Birth, ...] = ()
    # component id -> laps since a birth last targeted it (suppl. Eq. 22's L_k)
    laps_since: dict[int, int] = field(default_factory=dict)
    # origin id -> (its N when its birth failed, the lap at whose end it failed, failures in a
    # row at about that N)
    failed: dict[int, tuple[float, int, int]] = field(default_factory=dict)
    kept: dict[int, float] = field(default_factory=dict)  # id -> its N when a deletion was refused
    best: Best | None = None
    last_elbo: float | None = None  # the previous lap end's
    settled: bool = False  # the last lap moved nothing and changed the ELBO < SETTLED
    births_kept: int = 0  # birth families the last verification kept
    recent: tuple[dict[str, Any], ...] = ()  # the last RECENT_LAPS lap ends (lapend.record)
    stopped: str = ""
    model_is_S0: bool = False
    model_is_prime: bool = False
    W: int = 4
    ahead: int = 0

    def mass(self, uid: int) -> float:
        """A component's N in S^0 (0 if it is not there)."""
        return float(self.S0.N[self.S0.index(uid)]) if uid in self.S0.uids else 0.0

    def forget(self, gone: int, into: int | None = None) -> MemoState:
        """The bookkeeping of a component merged into ``into`` (births targeting it target
        ``into``) or deleted (None: births targeting it are dropped)."""
        if into is None:
            births = tuple(b for b in self.births if b.target != gone)
        else:
            births = tuple(replace(b, target=into) if b.target == gone else b
                           for b in self.births)
        return replace(self, births=births, laps_since=without(self.laps_since, gone),
                       failed=without(self.failed, gone), kept=without(self.kept, gone))


def without(d: dict[int, Any], key: int) -> dict[int, Any]:
    """``d`` without ``key`` (a new dict; the state's are never changed in place)."""
    return {k: v for k, v in d.items() if k != key}
