"""The configuration of a fit: one dataclass, saved resolved in summary.json."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from bnpmix.algorithms.birth import BirthConfig
from bnpmix.algorithms.merge import MergeConfig

ALGORITHMS = ("memo", "vb", "sovb")
OBS_NAMES = ("gauss", "zm-gauss", "diag-gauss", "mult")
MOVES = ("birth", "merge")
# learning-rate schedules rho_t = (t + delay)^-kappa of Hughes & Sudderth (2013), Sec. 4
SOVB_SCHEDULES = {"a": (0.5, 10.0), "b": (0.5, 100.0), "c": (0.9, 10.0)}


@dataclass
class FitConfig:
    """Everything that determines a fit; with the same corpus and seed, the same result."""

    algorithm: str = "memo"
    obs: str | None = None  # default: gauss for dense corpora, mult for bag-of-words
    K: int = 1
    laps: int = 20
    moves: tuple[str, ...] = ()
    seed: int = 0
    alpha0: float = 1.0
    prior: dict[str, Any] = field(default_factory=dict)
    init_sample: int = 10_000
    warm_start: str | None = None
    sovb_kappa: float = 0.5
    sovb_delay: float = 10.0
    birth: BirthConfig = field(default_factory=BirthConfig)
    merge: MergeConfig = field(default_factory=MergeConfig)
    cache_bytes: int = 2 << 30
    summary_bytes: int = 1 << 30
    scheduler: str = "threads"  # threads | synchronous | tcp://HOST:PORT
    cluster: str | None = None  # cluster-configs/NAME.yaml
    threads: int = 2
    wave: int = 1
    checkpoint_every: int = 0  # batch visits between mid-lap checkpoints (0: after laps only)

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, not {self.algorithm!r}")
        if self.obs is not None and self.obs not in OBS_NAMES:
            raise ValueError(f"obs must be one of {OBS_NAMES}, not {self.obs!r}")
        self.moves = tuple(self.moves)
        bad = set(self.moves) - set(MOVES)
        if bad:
            raise ValueError(f"unknown moves {sorted(bad)}; choose from {MOVES}")
        if self.moves and self.algorithm != "memo":
            raise ValueError("births and merges need --algorithm memo")
        if self.K < 1 or self.laps < 1 or self.wave < 1 or self.threads < 1:
            raise ValueError("K, laps, wave and threads must be positive")
        if not (self.scheduler in ("threads", "synchronous")
                or self.scheduler.startswith("tcp://")):
            raise ValueError(f"scheduler must be threads, synchronous or tcp://HOST:PORT, "
                             f"not {self.scheduler!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FitConfig:
        """The inverse of to_dict (nested birth and merge settings included)."""
        d = dict(d)
        d["birth"] = BirthConfig(**d.get("birth", {}))
        d["merge"] = MergeConfig(**d.get("merge", {}))
        d["moves"] = tuple(d.get("moves", ()))
        return cls(**d)
