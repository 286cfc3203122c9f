"""Job files (`bnpmix fit --config job.toml`, `bnpmix schedule run job.toml`).

A job file takes every option of the table in pipeline/config.py as a top-level key (hyphens or
underscores): run options (``corpus``, ``out``, ``seed``, ``scheduler``, ...), model options
(``obs``, ``alpha0``, and the observation prior as a ``[prior]`` table keyed by the model's
parameter names), and the chosen engine's options (``laps``, ``moves``, ``birth_tau``, ...); for
scheduled runs, a ``[schedule]`` table with ``runs`` (the directory of published model
versions). Unknown keys are errors naming the file and the key. Flags given on the command line
override the file; the resolved configuration is saved in the run's job.json and summary.json.
"""

from __future__ import annotations

import contextlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bnpmix.storage import BnpmixError
from bnpmix.storage.objectstore import is_url

from .config import JobConfig, options, resolve, split_prior
from .configfile import read_config_file

PATH_KEYS = ("corpus", "out", "warm_start", "cluster")  # relative to the job file's folder
SCHEDULE_KEYS = ("runs",)


@dataclass(frozen=True)
class Job:
    config: JobConfig
    schedule: dict[str, Any]
    storage: dict[str, Any] = field(default_factory=dict)  # never saved: it may hold secrets

    def storage_config(self) -> Any:
        """The ``[storage]`` table as Dask config ``bnpmix.storage-options`` for this call."""
        if not self.storage:
            return contextlib.nullcontext()
        import dask.config  # here: a job is checked before Dask is imported

        return dask.config.set({"bnpmix.storage-options": self.storage})

    @property
    def corpus(self) -> str | None:
        return self.config.run.corpus

    @property
    def out(self) -> str | None:
        return self.config.run.out


def read_job(path: str | Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The job file's option values (keys with underscores, paths made absolute), its
    ``[schedule]`` table and its ``[storage]`` table (S3FileSystem arguments)."""
    path = Path(path)
    raw = read_config_file(path, tomllib.loads, tomllib.TOMLDecodeError, "TOML job file")
    values = {k.replace("-", "_"): v for k, v in raw.items()}
    schedule = values.pop("schedule", {})
    storage = values.pop("storage", {})
    if not isinstance(storage, dict):
        raise BnpmixError(f"{path}: [storage] is a table of S3FileSystem arguments")
    known = {o.name for o in options()}
    for key in values:
        if key not in known:
            raise BnpmixError(f"{path}: unknown key {key!r} (see `bnpmix fit --help` for the "
                              "options; [schedule], [prior] and [storage] are tables)")
    if not isinstance(schedule, dict) or set(schedule) - set(SCHEDULE_KEYS):
        raise BnpmixError(f"{path}: [schedule] takes only {list(SCHEDULE_KEYS)}")
    for key in PATH_KEYS:
        if isinstance(values.get(key), str) and not Path(values[key]).is_absolute() \
                and not is_url(values[key]):
            values[key] = str((path.parent / values[key]).resolve())
    if isinstance(schedule.get("runs"), str) and not Path(schedule["runs"]).is_absolute() \
            and not is_url(schedule["runs"]):
        schedule["runs"] = str((path.parent / schedule["runs"]).resolve())
    return values, schedule, storage


def load_job(path: str | Path | None, flags: dict[str, Any]) -> Job:
    """Defaults < job file < flags (flags whose value is None were not given)."""
    values, schedule, storage = read_job(path) if path else ({}, {}, {})
    given = {k: v for k, v in flags.items() if v is not None}
    try:  # each source on its own: `--prior ig` must not replace the file's [prior] table
        values, given = split_prior(values), split_prior(given)
    except ValueError as exc:
        raise BnpmixError(f"{path or 'flags'}: {exc}") from None
    origins = {**{k: str(path) for k in values}, **dict.fromkeys(given, "flags")}
    source = f"{path} with the flags given" if path and given else str(path or "flags")
    return Job(resolve({**values, **given}, source, origins), schedule, storage)
