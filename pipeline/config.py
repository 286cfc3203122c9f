"""The configuration of a fit: run, model and engine options, and the one table that drives them.

Each option is a field of a frozen dataclass — ``RunConfig`` (where and how the run executes),
``ModelConfig`` (observation model, its prior, the allocation prior) or an engine's own
``Config`` (registered with the engine) — with its help text in the field's metadata. The table
(``options()``) is derived from those fields: it builds the ``bnpmix fit`` flags, checks and
parses job-file keys, and ``JobConfig.to_dict()`` is what job.json and summary.json record.
Nested engine settings flatten with their field's name as a prefix (``birth.tau`` is
``birth_tau``, flag ``--birth-tau``). Configurations are resolved once (defaults < job file <
flags) and never mutated afterwards. The rows' type and making: option_rows.py; the range
check and the errors naming an option: ranges.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from bnpmix.algorithms.alloc import ALLOCATIONS
from bnpmix.algorithms.obs import OBS_NAMES
from bnpmix.storage import BnpmixError

from .addresses import CURRENT_CLIENT, is_address
from .engines import DEFAULT_ENGINE
from .option_rows import Option, field_default, rows_of, shared_row
from .options import integer, meta, number, opt, optional, string, table
from .ranges import OptionError, RangeError, check_ranges
from .runtime.context import AUTO
from .runtime.engine import ENGINES, engine_class, engine_names
from .sizes import EXAMPLES, parse_size

OBS_CHOICES = (*OBS_NAMES, AUTO)  # --obs
SCHEDULERS = ("threads, synchronous, a Dask scheduler's address (tcp://HOST:PORT), or "
              "distributed: the Python process's current distributed.Client (job.json records "
              "its scheduler's address)")


def prior_aliases() -> dict[str, Option]:
    """The names ``prior`` also takes, each with the engine option it sets: the choices of the
    option an engine names as its ``prior_alias`` (adf and ep: ``--prior ig`` is
    ``--nrm-prior ig``)."""
    rows = {o.name: o for o in options()}
    keys = dict.fromkeys(ENGINES[n].prior_alias for n in engine_names())
    return {choice: rows[key] for key in keys if key for choice in rows[key].choices or ()}


def prior_value(value: Any) -> dict[str, Any] | str:
    """``prior``: a table of observation-prior parameters, or a name an engine's option takes
    through ``--prior`` (``prior_aliases``), which ``split_prior`` moves to that option."""
    aliases = prior_aliases()
    if isinstance(value, str) and value.strip() in aliases:
        return value.strip()
    try:
        return table(value)
    except ValueError as exc:
        engines = sorted({e for row in aliases.values() for e in row.engines})
        raise ValueError(f"{exc}, or one of {list(aliases)} ({', '.join(engines)})") from None


def split_prior(values: dict[str, Any]) -> dict[str, Any]:
    """Option values with a ``prior`` that names an alias moved to its option (so that ``--prior
    ig`` on the command line does not replace a job file's [prior] table), and a prior table's
    ``learn`` moved to ``learn_prior`` (``[prior] learn = false``)."""
    prior = values.get("prior")
    if isinstance(prior, dict) and "learn" in prior:
        if "learn_prior" in values:
            raise ValueError(f"prior's learn {prior['learn']!r} and learn_prior "
                             f"{values['learn_prior']!r} both say whether the prior is learned; "
                             "give one")
        values = {**values, "prior": {k: v for k, v in prior.items() if k != "learn"},
                  "learn_prior": prior["learn"]}
    row = prior_aliases().get(prior.strip()) if isinstance(prior, str) else None
    if row is None:
        return values
    if row.name in values:
        raise ValueError(f"prior {prior!r} and {row.name} {values[row.name]!r} both set "
                         f"{row.name}; give one")
    out = {k: v for k, v in values.items() if k != "prior"}
    out[row.name] = prior.strip()
    return out


def prior_flags(given: list[dict[str, Any] | str]) -> dict[str, Any]:
    """Repeated ``--prior`` flags as option values: the tables merged in order into ``prior``,
    and an alias as its option (``--prior ig --prior '{"lam0": 0.5}'``: nrm_prior ig)."""
    tables = [g for g in given if isinstance(g, dict)]
    named = [g for g in given if isinstance(g, str)]
    if len(set(named)) > 1:
        raise ValueError(f"--prior names more than one value of the same option: {named}")
    out: dict[str, Any] = {"prior": {k: v for t in tables for k, v in t.items()}} if tables else {}
    return {**out, prior_aliases()[named[0]].name: named[0]} if named else out


@dataclass(frozen=True)
class RunConfig:
    """Where the run reads and writes, how it executes, and how it checkpoints."""

    corpus: str | None = opt(None, "corpus directory", parse=string)
    out: str | None = opt(None, "run directory to write", parse=string)
    seed: int = opt(0, "random seed", within="[0, inf)")
    scheduler: str = opt("threads", SCHEDULERS)
    cluster: str | None = opt(None, "start or reach a Dask cluster from a profile in "
                              "cluster-configs/ (PROFILE.yaml)", parse=string)
    # unset (None): the most up to DEFAULT_THREADS whose visits fit in the memory this
    # process may use (a result never depends on it: visits of a wave are applied in order)
    threads: int | None = opt(None, "local threads (default: 2, or 1 where the memory this "
                              "process may use does not hold two visits at once)",
                              parse=optional(integer), within="[1, inf)")
    # unset (None): the Dask config key named in the help, read when the run uses it
    worker_wait: float | None = opt(None, "seconds to wait for a first Dask worker before "
                                    "failing (default: Dask config bnpmix.worker-wait, 60 s)",
                                    parse=optional(number), within="(0, inf)")
    wave: int | None = opt(None, "batches computed in parallel against the same globals "
                           "(default: the engine's own, whatever the executor: memo 4, ep 1)",
                           parse=optional(integer), within="[1, inf)")
    cache_bytes: int | None = opt(None, "bytes of partitions kept in memory per worker (or "
                                  f"locally) across laps ({EXAMPLES}; default: Dask config "
                                  "bnpmix.cache-bytes, 10% of the memory each process may "
                                  "use)", parse=optional(parse_size), within="[0, inf)")
    summary_bytes: int | None = opt(None, "bytes of per-partition state the driver keeps in "
                                    f"memory before spilling it to disk ({EXAMPLES}; default: "
                                    "Dask config bnpmix.summary-bytes, 5% of the driver's "
                                    "memory)", parse=optional(parse_size), within="[0, inf)")
    checkpoint_every: int = opt(0, "also checkpoint every M batch visits (0: after each lap)",
                                within="[0, inf)")
    warm_start: str | None = opt(None, "start from a previous run's model (RUN_DIR)", parse=string)
    restarts: int | None = opt(None, "independent starts, the best objective kept: of the "
                               "whole run (streams from seed, seed + 1, ...; the same prior; "
                               "default 1), or for ddcrp of each sequence (default 10)",
                               parse=optional(integer),
                               within="[1, inf)")

    def __post_init__(self) -> None:
        if not (self.scheduler in ("threads", "synchronous", CURRENT_CLIENT)
                or is_address(self.scheduler)):
            raise ValueError(f"scheduler must be threads, synchronous, {CURRENT_CLIENT} or a "
                             f"scheduler address (tcp://HOST:PORT), not {self.scheduler!r}")


@dataclass(frozen=True)
class ModelConfig:
    """The observation model and its prior, and the allocation prior."""

    obs: str | None = opt(None, "observation model (default: mult for bag-of-words; for dense "
                          "corpora auto, the Gaussian covariance structure (full, tied or "
                          "diagonal) whose memo run on the corpus has the highest ELBO per item "
                          "in a race of laps (a candidate leaves once it cannot catch up; memo "
                          "continues the winner), for memo, vb, sovb, adf and ep; gauss for "
                          "the others)",
                          parse=string, choices=OBS_CHOICES)
    prior: dict[str, Any] = field(default_factory=dict, metadata=meta(
        "observation prior parameters, keyed by the model's names (mult: lam0; gauss and "
        "tied-gauss: m0, kappa0, nu0, B0, scale; ...); a [prior] table in a job file, a JSON "
        "object on the command line; for adf and ep also dp, ig or nggp, the NRM prior (as "
        "--nrm-prior)",
        prior_value))
    learn_prior: bool = opt(True, "learn the observation prior's hyperparameters from the "
                            "components between laps (empirical Bayes: memo, vb, sovb; gauss, "
                            "zm-gauss, diag-gauss, tied-gauss's kappa0, and mult's lam0 scale); "
                            "also [prior] learn = false in a job file")
    dequantise: bool = opt(True, "score the corpus's integer-valued columns (recorded at ingest) "
                           "by the probability of their unit cells, the variational "
                           "dequantisation bound, in the Gaussian observation models (false: "
                           "as continuous values)")
    alloc: str = opt("dp", "allocation prior over the mixture weights",
                     choices=lambda: sorted(ALLOCATIONS))
    alpha0: float = opt(1.0, "DP concentration", within="(0, inf)")
    init_sample: int = opt(10_000, "items sampled to scale the default prior, seed K > 1 and "
                           "make memo's one-pass start", within="[1, inf)")

    def __post_init__(self) -> None:
        if self.obs is not None and self.obs not in OBS_CHOICES:
            raise ValueError(f"obs must be one of {OBS_CHOICES}, not {self.obs!r}")
        if self.alloc not in ALLOCATIONS:
            raise ValueError(f"alloc must be one of {sorted(ALLOCATIONS)}, not {self.alloc!r}")


SECTIONS: dict[str, type] = {"run": RunConfig, "model": ModelConfig}


def options() -> list[Option]:
    """The whole table: run and model options, then every registered engine's options (an
    option several engines share, e.g. ``laps``, is one row naming all of them)."""
    algorithm = Option("algorithm", "job", ("algorithm",), string, DEFAULT_ENGINE,
                       "the engine: " + "; ".join(f"{n}: {ENGINES[n].summary}"
                                                  for n in engine_names()),
                       tuple(engine_names()))
    rows = [algorithm, *(r for section, cls in SECTIONS.items() for r in rows_of(cls, section))]
    engine_rows: dict[str, Option] = {}
    for name in engine_names():
        for r in rows_of(ENGINES[name].Config, "engine"):
            seen = engine_rows.get(r.name)
            engine_rows[r.name] = (dataclasses.replace(r, engines=(name,)) if seen is None
                                   else shared_row(seen, r, name))
    clash = {r.name for r in rows} & set(engine_rows)
    if clash:
        raise TypeError(f"engine options {sorted(clash)} clash with run or model options")
    return rows + list(engine_rows.values())


@dataclass(frozen=True)
class JobConfig:
    """The resolved configuration of one fit."""

    algorithm: str = DEFAULT_ENGINE
    run: RunConfig = field(default_factory=RunConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    engine: Any = None  # the engine's Config; None: its defaults

    def __post_init__(self) -> None:
        cls = engine_class(self.algorithm).Config
        if self.engine is None:
            object.__setattr__(self, "engine", cls())
        elif not isinstance(self.engine, cls):
            raise ValueError(f"{self.algorithm} takes a {cls.__name__}, "
                             f"not a {type(self.engine).__name__}")
        for cfg in (self.run, self.model, self.engine):
            check_ranges(cfg)
        if self.run.restarts is None:
            object.__setattr__(self, "run", dataclasses.replace(
                self.run, restarts=engine_class(self.algorithm).default_restarts))
        if self.run.restarts > 1 and not engine_class(self.algorithm).random:
            raise RangeError("restarts", f"{self.algorithm} does not depend on the "
                             "seed, so every restart would be the same run")

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "run": dataclasses.asdict(self.run),
                "model": dataclasses.asdict(self.model),
                "engine": dataclasses.asdict(self.engine)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobConfig:
        """The inverse of to_dict (what job.json holds)."""
        config = engine_class(d["algorithm"]).Config
        # a run from before learning kept its prior, one from before dequantisation its data
        model = {"learn_prior": False, "dequantise": False, **d["model"]}
        return cls(d["algorithm"], RunConfig(**d["run"]), ModelConfig(**model),
                   _build(config, d["engine"]))

    def replace(self, **changes: Any) -> JobConfig:
        """A copy with some run or model fields changed (``run_out=...``, ``model_obs=...``)."""
        run = {k[4:]: v for k, v in changes.items() if k.startswith("run_")}
        model = {k[6:]: v for k, v in changes.items() if k.startswith("model_")}
        if len(run) + len(model) != len(changes):
            raise TypeError(f"replace takes run_* and model_* fields, not {sorted(changes)}")
        return dataclasses.replace(self, run=dataclasses.replace(self.run, **run),
                                   model=dataclasses.replace(self.model, **model))


def _build(cls: type, values: dict[str, Any]) -> Any:
    """A config dataclass from a (possibly nested) dict, nested dataclasses rebuilt."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        default = field_default(f)
        value = values[f.name]
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            value = _build(type(default), value)
        elif isinstance(value, list):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def resolve(values: dict[str, Any], source: str,
            origins: dict[str, str] | None = None) -> JobConfig:
    """The configuration from flat option values (defaults < job file < flags, already merged;
    keys as in the table). Unknown keys, options of another engine and bad values are errors
    naming the key and where it came from: ``origins[key]`` (the job file, "flags"), else
    ``source``."""
    origins = origins or {}
    try:
        values = split_prior(values)
    except ValueError as exc:
        raise BnpmixError(f"{source}: {exc}") from None
    moved = {row.name for row in prior_aliases().values()} & set(values) - set(origins)
    if moved and "prior" in origins:  # an alias given as prior: named where prior was given
        origins = {**origins, **dict.fromkeys(moved, origins["prior"])}
    algorithm = values.get("algorithm", DEFAULT_ENGINE)
    if not isinstance(algorithm, str) or algorithm not in engine_names():
        raise BnpmixError(f"{source}: algorithm: unknown {algorithm!r}; choose from "
                          f"{engine_names()}")
    table_ = {o.name: o for o in options()}
    nested: dict[str, dict[str, Any]] = {"run": {}, "model": {}, "engine": {}}
    for key, value in values.items():
        if key == "algorithm":
            continue
        where = origins.get(key, source)
        if key not in table_:
            raise BnpmixError(f"{where}: unknown option {key!r}")
        row = table_[key]
        if row.section == "engine" and algorithm not in row.engines:
            raise OptionError(where, key, f"does not apply to --algorithm {algorithm} (it is "
                              f"an option of {', '.join(row.engines)})")
        row = row.for_engine(algorithm)
        try:
            parsed = row.parse(value)
        except (TypeError, ValueError) as exc:
            raise OptionError(where, key, str(exc)) from None
        if row.choices is not None and parsed not in row.choices:
            raise OptionError(where, key, f"{parsed!r} is not one of {list(row.choices)}")
        target = nested[row.section]
        for part in row.path[:-1]:
            target = target.setdefault(part, {})
        target[row.path[-1]] = parsed
    try:
        return JobConfig(algorithm, RunConfig(**nested["run"]), ModelConfig(**nested["model"]),
                         _build(engine_class(algorithm).Config, nested["engine"]))
    except RangeError as exc:
        raise OptionError(origins.get(exc.key, source), exc.key, exc.reason) from None
    except (TypeError, ValueError) as exc:
        raise BnpmixError(f"{source}: {exc}") from None
