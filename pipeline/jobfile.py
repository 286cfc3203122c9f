"""Job files (`bnpmix fit --config job.toml`, `bnpmix schedule run job.toml`).

A job file takes every `bnpmix fit` option as a top-level key (hyphens or underscores):
``corpus``, ``out``, ``algorithm``, ``obs``, ``K``, ``laps``, ``moves`` (list or "birth,merge"),
``seed``, ``alpha0``, ``births_per_lap``, ``sovb_schedule``, ``warm_start``, ``scheduler``,
``cluster``, ``threads``, ``wave``, ``checkpoint_every``, ``cache_bytes``; and, for scheduled
runs, a ``[schedule]`` table with ``runs`` (the directory of published model versions). Flags
given on the command line override the file; the resolved configuration is saved in the run's
summary.json.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bnpmix.algorithms.birth import BirthConfig
from bnpmix.storage import BnpmixError

from .config import SOVB_SCHEDULES, FitConfig

FIT_KEYS = {"corpus", "out", "algorithm", "obs", "K", "laps", "moves", "seed", "alpha0",
            "births_per_lap", "sovb_schedule", "warm_start", "scheduler", "cluster", "threads",
            "wave", "checkpoint_every", "cache_bytes"}


@dataclass
class Job:
    corpus: str | None
    out: str | None
    cfg: FitConfig
    schedule: dict[str, Any]


def read_config_file(path: Path, parse: Callable[[str], Any],
                     errors: type[Exception] | tuple[type[Exception], ...], what: str) -> Any:
    """Parse a configuration file; unreadable or malformed files raise a BnpmixError naming it."""
    try:
        return parse(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BnpmixError(f"{path}: cannot read {what} ({exc})") from None
    except errors as exc:
        raise BnpmixError(f"{path}: not a valid {what} ({exc})") from None


def read_job(path: str | Path) -> dict[str, Any]:
    """The job file's keys (normalised to underscores), checked against the known ones."""
    path = Path(path)
    raw = read_config_file(path, tomllib.loads, tomllib.TOMLDecodeError, "TOML job file")
    job = {k.replace("-", "_"): v for k, v in raw.items()}
    unknown = set(job) - FIT_KEYS - {"schedule"}
    if unknown:
        raise BnpmixError(f"{path}: unknown keys {sorted(unknown)} (known: {sorted(FIT_KEYS)})")
    if "cluster" in job and not Path(job["cluster"]).is_absolute():
        job["cluster"] = str(path.parent / job["cluster"])
    for key in ("corpus", "out", "warm_start"):
        if key in job and not Path(job[key]).is_absolute():
            job[key] = str((path.parent / job[key]).resolve())
    return job


def resolve(file_keys: dict[str, Any], flags: dict[str, Any], source: str = "flags") -> Job:
    """Defaults < job file < flags (flags whose value is None were not given)."""
    merged = {**file_keys, **{k: v for k, v in flags.items() if v is not None}}
    moves = merged.get("moves", ())
    if isinstance(moves, str):
        moves = tuple(m for m in moves.split(",") if m)
    schedule = merged.get("sovb_schedule", "a")
    if schedule not in SOVB_SCHEDULES:
        raise BnpmixError(f"{source}: sovb_schedule must be one of {sorted(SOVB_SCHEDULES)}")
    kappa, delay = SOVB_SCHEDULES[schedule]
    fields = {k: merged[k] for k in ("algorithm", "obs", "K", "laps", "seed", "alpha0",
                                     "warm_start", "scheduler", "cluster", "threads", "wave",
                                     "checkpoint_every", "cache_bytes") if k in merged}
    try:
        cfg = FitConfig(**fields, moves=tuple(moves), sovb_kappa=kappa, sovb_delay=delay,
                        birth=BirthConfig(per_lap=int(merged.get("births_per_lap", 1))))
    except (TypeError, ValueError) as exc:
        raise BnpmixError(f"{source}: {exc}") from None
    return Job(merged.get("corpus"), merged.get("out"), cfg, dict(merged.get("schedule", {})))
