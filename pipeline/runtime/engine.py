"""The engine contract: what the runtime (fit, resume, progress, checkpoints, the scheduled run)
needs of an inference algorithm, and the registry that maps ``--algorithm`` names to engines.

An engine steps an explicit state. The runtime owns everything around it: it builds the
FitContext, calls ``start()`` (or ``restore()`` from a checkpoint), calls ``step()`` until
``done``, shows ``status()``, writes checkpoints from ``state()`` when a step ends a lap (and
every M visits when asked), keeps ``trace`` (rows with at least lap, batch, K, seconds and the
objective's column, ``declared.objective``), and finally writes ``result()`` — a fitted model,
the objective and whether it converged — into the run directory.

To add an engine: subclass Engine with a frozen ``Config`` dataclass (its fields become
``bnpmix fit`` flags and job-file keys, see pipeline/config.py) and declare it as an entry point
in the group ``bnpmix.engines`` of its distribution (``NAME = "module:Class"``; bnpmix's own are
in pyproject.toml), so that every process, the command line's included, finds it; inside one
process ``@register`` is enough. It must not need anything else in pipeline/: what the rest of
bnpmix asks of an engine it declares here (``declared``, ``streams``, ``tuner``, ...).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from bnpmix.algorithms.mixture import PredictiveMixture
from bnpmix.storage import BnpmixError
from bnpmix.storage.arrays import ArrayFile

from ..declared import Declared
from ..engines import GROUP
from .context import FitContext

State = tuple[dict[str, Any], Iterator[tuple[str, np.ndarray]]]


@dataclass(frozen=True)
class Step:
    """What one step did: partition visits made, and whether it ended a lap (a pass, a sweep)."""

    visits: int = 0
    lap_end: bool = False


@dataclass
class Fitted:
    """An engine's result: the fitted model, its objective values (e.g. ``{"elbo": ...}``; the
    runtime adds each one per item), notes for summary.json (e.g. ``{"stopped": ...}``) and
    extra tables the run directory keeps as NAME.parquet (e.g. tdpm's samples)."""

    model: PredictiveMixture
    objective: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pa.Table] = field(default_factory=dict)
    # False only when the engine stopped at its iteration limit before its convergence test
    # held (summary.json's ``converged``; engines that run a set number of passes: True)
    converged: bool = True


@dataclass(frozen=True)
class TuneFlag:
    """A ``bnpmix tune`` flag of an engine's search (Engine.tune_flags): the search's keyword
    ``parameter`` it sets, the ``flag``, its help, and whether it takes a grid (positive
    numbers separated by commas, ``metavar``) or one number."""

    parameter: str
    flag: str
    help: str
    grid: bool = True
    metavar: str | None = None


@dataclass
class Best:
    """The best finished restart so far (highest first objective), and every restart's."""

    restart: int
    fitted: Fitted
    trace: list[dict[str, Any]]
    laps: int
    objectives: list[float]

    def better(self, fitted: Fitted) -> bool:
        key = next(iter(fitted.objective))
        return fitted.objective[key] > self.fitted.objective[key]


class Engine(ABC):
    """One inference algorithm behind the runtime. Subclasses set ``name`` and ``Config``."""

    name: ClassVar[str]
    Config: ClassVar[type]
    summary: ClassVar[str] = ""  # one line for --help
    random: ClassVar[bool] = True  # its result depends on the seed (else --restarts is pointless)
    # it restarts its own independent sub-problems (``ctx.restarts`` times each) and the
    # runtime runs it once, rather than rerunning the whole engine ``restarts`` times
    restarts_within: ClassVar[bool] = False
    default_restarts: ClassVar[int] = 1  # --restarts when not given
    # a mixture over any observation model's components: on dense data `--obs auto` (the
    # default) chooses the model for it; the others default to the full Gaussian
    mixes_obs: ClassVar[bool] = False
    # --wave when not given: a constant, never the executor's size, so that a run's result is a
    # function of the corpus, the options and the seed only
    default_wave: ClassVar[int] = 1
    # its option K caps the components (a truncation, never grown): a fit told K = 1 can find
    # only one, and fit's one-cluster warning is then not given
    truncated: ClassVar[bool] = False
    # what readers of its runs need (the objective's key and name, what the weights are, ...),
    # recorded in summary.json
    declared: ClassVar[Declared] = Declared()
    # BayesianMixture.partial_fit: each block is one run warm-started from the model so far,
    # prepared by stream_start; stream_join adds the block to the past after its run
    streams: ClassVar[bool] = False
    # `bnpmix tune --algorithm NAME`: "module:function" searching this engine's prior on a
    # sample, called with the corpus, obs, obs_prior, test_fraction, seed and scale_grid, with
    # ``algorithm=NAME`` and the optional flags when its keyword parameters name them ("": the
    # engine is not tuned)
    tuner: ClassVar[str] = ""
    # the flags of its search beyond every search's (--prior, --obs, --fraction, --max-items,
    # --test-fraction, --seed, --scale-grid): `bnpmix tune` offers each, a flag of another
    # engine's search is a usage error; a search taking ``prior`` gets the name ``--prior``
    # gave its prior_alias
    tune_flags: ClassVar[tuple[TuneFlag, ...]] = ()
    # an option of its Config that ``--prior NAME`` (a job file's ``prior = "NAME"``) also
    # sets, NAME one of the option's choices: adf's and ep's nrm_prior, so ``--prior ig`` is
    # ``--nrm-prior ig`` ("": none; config.prior_aliases)
    prior_alias: ClassVar[str] = ""
    # it fits --obs auto's candidates (pipeline/auto.py): a run per candidate model stepped a
    # lap at a time, its lap-end objective a bound on ln p(X) comparable across observation
    # models (memo); a job whose engine does not race is raced by DEFAULT_ENGINE's
    races: ClassVar[bool] = False
    # options (engine or run, as job_config takes them) for a job small enough for a test of a
    # few seconds on a few dozen items (the engine contract's test runs every engine with its
    # own); {}: its defaults are small already
    small_options: ClassVar[dict[str, Any]] = {}

    def __init__(self, ctx: FitContext, cfg: Any) -> None:
        self.ctx = ctx
        self.cfg = cfg
        self.trace: list[dict[str, Any]] = []

    @abstractmethod
    def start(self) -> None:
        """Set up the initial state from the context (initial model, warm start, ...)."""

    @abstractmethod
    def step(self) -> Step:
        """Advance by one unit of work (a wave of visits, a lap end, a pass, a sweep)."""

    @property
    @abstractmethod
    def done(self) -> bool:
        """True when there is nothing left to do."""

    @abstractmethod
    def state(self) -> State:
        """The state for a checkpoint: JSON-able meta and (name, array) pairs, produced lazily so
        that large per-partition state streams to disk."""

    @abstractmethod
    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        """Put a checkpointed state back (the context's streams and counters are restored by
        the runtime)."""

    @abstractmethod
    def result(self) -> Fitted:
        """The fitted model and objective (called once ``done``)."""

    def status(self) -> str:
        """One line for the progress display."""
        row = self.trace[-1] if self.trace else {}
        key, label = self.declared.objective, self.declared.objective_label
        return f"K={row.get('K', '?')}  {label}={row.get(key, float('nan')):.6g}"

    @classmethod
    def lap_limit(cls, cfg: Any) -> int | None:
        """The most laps a run of ``cfg`` makes (None: no cap); --obs auto's race runs no more
        (``races``)."""
        return None

    @classmethod
    def birth_rows(cls, cfg: Any) -> int:
        """The rows a run of ``cfg`` collects on the driver at once for a birth (0: none): a
        term of the memory estimate fit prints."""
        return 0

    def race_model(self) -> PredictiveMixture | None:
        """After winning a race on a sample (``races``), the model a run of this engine on the
        whole corpus starts from (FitContext.start_model; None: it starts anew)."""
        return None

    @classmethod
    def stream_start(cls, model: PredictiveMixture) -> PredictiveMixture:
        """The model so far, as the warm start of the next block's run (``streams``)."""
        return model

    @classmethod
    def stream_join(cls, model: PredictiveMixture, blocks: Iterable[Any]) -> None:
        """After a block's run: what of the block (its rows, in memory one piece of
        ``blocks`` at a time) ``model`` keeps for the next (``streams``)."""
        return None

    def close(self) -> None:
        """Release what the engine holds (spill directories)."""
        return None


ENGINES: dict[str, type[Engine]] = {}


def register(cls: type[Engine]) -> type[Engine]:
    """Class decorator: make an engine available as ``--algorithm cls.name``."""
    if not isinstance(getattr(cls, "name", None), str) or not cls.name:
        raise TypeError(f"{cls.__name__} needs a class attribute `name`")
    existing = ENGINES.get(cls.name)
    if existing is not None and existing is not cls:
        raise ValueError(f"an engine called {cls.name!r} is already registered "
                         f"({existing.__module__}.{existing.__qualname__})")
    ENGINES[cls.name] = cls
    return cls




@functools.cache
def load_entry_points() -> None:
    """Import every engine an installed distribution declares in GROUP (registering it: by its
    own ``@register`` on import, else here under the entry point's name)."""
    for point in importlib.metadata.entry_points(group=GROUP):
        where = f"entry point {point.name} = {point.value!r} in group {GROUP}"
        try:
            cls = point.load()
        except Exception as exc:  # any failure of a third-party import: name the entry point
            raise BnpmixError(f"{where}: cannot be imported ({type(exc).__name__}: {exc})"
                              ) from exc
        if not (isinstance(cls, type) and issubclass(cls, Engine)) or cls.name != point.name:
            raise BnpmixError(f"{where}: not an Engine subclass with name = {point.name!r}")
        if ENGINES.get(cls.name) is not cls:
            register(cls)


def engine_class(name: str) -> type[Engine]:
    """The engine registered as ``name`` (the declared ones are loaded on first use)."""
    load_entry_points()
    if name not in ENGINES:
        hint = ("" if ENGINES else f" (no engine is declared in the entry-point group {GROUP}: "
                "is bnpmix installed? `pip install -e .` again after updating a checkout)")
        raise ValueError(f"unknown algorithm {name!r}; choose from {sorted(ENGINES)}{hint}")
    return ENGINES[name]


def engine_names() -> list[str]:
    """The names ``--algorithm`` accepts."""
    load_entry_points()
    return sorted(ENGINES)


def tuner_of(name: str) -> Callable[..., dict[str, Any]]:
    """The search ``bnpmix tune --algorithm name`` runs: the engine's ``tuner``, imported."""
    cls = engine_class(name)
    module, _, function = cls.tuner.partition(":")
    if not function:
        raise ValueError(f"the {name} engine declares no tuner")
    return getattr(importlib.import_module(module), function)
