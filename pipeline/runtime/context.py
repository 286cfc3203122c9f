"""What every engine starts from: the corpus and its executor, the models (priors scaled to a
sample of the data), the seeded random streams, the component-id counter and the clock."""

from __future__ import annotations

import inspect
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bnpmix.algorithms.alloc import VariationalAllocation, alloc_from_params
from bnpmix.algorithms.obs import ObsModel, default_obs, obs_class
from bnpmix.algorithms.obs.base import (
    SHRINKAGE,
    constant_columns,
    prior_variances,
    shrinkage_target,
)
from bnpmix.storage import BnpmixError, Corpus, DataWarning, RunDir
from bnpmix.storage.objectstore import is_url

from .data import BatchSource
from .executors import Executor
from .store import Budget

if TYPE_CHECKING:
    from bnpmix.algorithms.mixture import Mixture

STREAMS = ("init", "order", "birth", "merge")
PARTITION_STREAM = 7  # first spawn-key word of per-partition streams (the run streams use 0-3)


@dataclass
class Streams:
    """Independent random streams, so that e.g. the batch order does not depend on births."""

    init: np.random.Generator
    order: np.random.Generator
    birth: np.random.Generator
    merge: np.random.Generator

    @classmethod
    def from_seed(cls, seed: int) -> Streams:
        return cls(*(np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)))

    def states(self) -> dict[str, Any]:
        """The bit generators' states (JSON-able dicts)."""
        return {name: getattr(self, name).bit_generator.state for name in STREAMS}

    def set_states(self, states: dict[str, Any]) -> None:
        for name in STREAMS:
            getattr(self, name).bit_generator.state = states[name]


def partition_seed(seed: int, partition: int, pass_: int) -> np.random.SeedSequence:
    """The seed of partition ``partition``'s stream in pass ``pass_``: a function of (seed,
    partition, pass) only, so a result never depends on which worker ran what."""
    return np.random.SeedSequence(seed, spawn_key=(PARTITION_STREAM, partition, pass_))


@dataclass
class FitContext:
    corpus: Corpus
    seed: int
    executor: Executor
    source: BatchSource
    obs: ObsModel
    alloc: VariationalAllocation
    rng: Streams
    init_sample: int = 10_000
    wave: int | None = None  # --wave (None: the engine's default_wave)
    summary_bytes: int | None = None  # the StateStore budget (None: Dask config)
    warm_start: str | None = None
    started: float = field(default_factory=time.perf_counter)
    next_uid: int = 0
    restarts: int = 1
    learn_prior: bool = False  # the variational engines learn obs's prior between laps
    prior_base: ObsModel | None = None  # the run's initial prior (bounds of the learned one)
    # --obs auto: what summary.json keeps of the choice (pipeline.auto.Choice.notes: each
    # candidate's bound per item, the race's record)
    obs_auto: dict[str, Any] | None = None
    # one budget that engines on several contexts share (--obs auto's race: its candidates'
    # summaries together within summary_bytes); None: each engine's store has its own
    state_budget: Budget | None = None
    # a model held in memory that the engine starts from (initial_model): --obs auto's winner
    # after a race on a sample of the corpus, for a memo run's first restart
    start_model: Mixture | None = None
    # checkpoint.chunks_dir of the run (None: an engine keeps everything in its checkpoint)
    chunks: Path | None = None

    def new_uids(self, n: int) -> np.ndarray:
        uids = np.arange(self.next_uid, self.next_uid + n, dtype=np.int64)
        self.next_uid += n
        return uids

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def row(self, lap: float, batch: int, K: int, **values: Any) -> dict:
        """A trace row: lap, batch, K, seconds so far and the engine's own values."""
        return {"lap": lap, "batch": batch, "K": K, "seconds": round(self.elapsed(), 6),
                **values}

    def trace_row(self, lap: float, batch: int, elbo: float, K: int, **extra: Any) -> dict:
        return self.row(lap, batch, K, elbo=elbo, **extra)

    def partition_rng(self, partition: int, pass_: int) -> np.random.Generator:
        return np.random.default_rng(partition_seed(self.seed, partition, pass_))


AUTO = "auto"  # --obs auto: the covariance structure chosen by the evidence bound (pipeline.fit)


def default_obs_name(corpus: Corpus, auto: bool = False) -> str:
    """The corpus kind's default model (ObsModel.default_for: mult for bag-of-words, the full
    Gaussian for dense data), but for dense data ``auto`` where the engine can use it."""
    if auto and corpus.kind != "bow":
        return AUTO
    return default_obs(corpus.kind)


def check_obs(corpus: Corpus, obs_name: str | None) -> str:
    """The observation model's name (None: the corpus's default); mult only for bag-of-words,
    auto only for dense data."""
    obs_name = obs_name or default_obs_name(corpus)
    if obs_name == AUTO and corpus.kind == "bow":
        raise BnpmixError(f"{corpus.path}: --obs auto chooses among the Gaussians, for dense "
                          "corpora; a bag-of-words corpus takes mult")
    if obs_name != AUTO and obs_class(obs_name).text != (corpus.kind == "bow"):
        raise BnpmixError(f"{corpus.path}: observation model {obs_name!r} does not fit a "
                          f"{corpus.kind} corpus")
    return obs_name


def make_context(corpus: Corpus, run: Any, model: Any, executor: Executor) -> FitContext:
    """Models with priors scaled to a sample of the data (overridable through ``model.prior``;
    the observation prior is also the base that bounds a learned one, rebuilt alike on resume)
    and, unless ``model.dequantise`` is false, the corpus's integer columns dequantised
    (corpus_steps); ``run`` and ``model`` are the resolved RunConfig and ModelConfig."""
    obs_name = check_obs(corpus, model.obs)
    if run.warm_start:
        check_warm_start(corpus, run.warm_start)
    source = BatchSource(corpus, run.cache_bytes)
    sample = source.sample(model.init_sample, np.random.default_rng(run.seed))
    data = corpus_steps(corpus, model.dequantise)
    if corpus.manifest.kind == "dense":
        data = constant_columns_held(np.asarray(sample), corpus, data)
        check_offsets(np.asarray(sample), corpus, data.get("floor"))
    try:
        obs = obs_class(obs_name).default(sample, **model.prior, **data)
    except TypeError as exc:
        raise BnpmixError(f"prior: {exc} (the {obs_name} model's prior parameters are "
                          f"{prior_keys(obs_name)})") from None
    except (ValueError, np.linalg.LinAlgError) as exc:
        raise BnpmixError(f"prior: {exc}") from None
    alloc = alloc_from_params(model.alloc, {"alpha0": model.alpha0})
    return FitContext(corpus, run.seed, executor, source, obs, alloc, Streams.from_seed(run.seed),
                      model.init_sample, run.wave,
                      run.summary_bytes, run.warm_start,
                      restarts=run.restarts, learn_prior=model.learn_prior, prior_base=obs)


def corpus_steps(corpus: Corpus, dequantise: bool) -> dict[str, Any]:
    """The observation model's ``delta`` argument: the steps the corpus's manifest records for
    its integer-valued columns, when it has any and ``dequantise`` (--dequantise) holds; else
    nothing (every column continuous)."""
    steps = corpus.manifest.integer_steps if dequantise else None
    return {} if steps is None else {"delta": steps}


# a column's (mean / spread)² · items · float64's epsilon beyond which its sums of squares
# cannot be resolved: adf with full covariances on 2,000 items of blobs plus a constant column
# failed ("not positive definite") at 2e-2 (the column at 3e5) and fitted at 2.4e-3 (1e5)
OFFSET_LIMIT = 5e-3
FLOOR_MARGIN = 0.1  # a floored constant column's rounding: this share of OFFSET_LIMIT


def constant_columns_held(sample: np.ndarray, corpus: Corpus,
                          data: dict[str, Any]) -> dict[str, Any]:
    """The observation model's data arguments (``data``: corpus_steps') for the columns constant
    in the sample, with a warning naming them: such a column carries no cluster information, so
    it is fitted as a quantised one (dequant.py) of step Δ, Δ²/12 the prior's diagonal target
    there (the mean variance; an integer column keeps its own step): every component's variance
    there then goes to Δ²/12,
    the same for all, where a continuous column of equal values would have each component's
    shrink with its size and merge the clusters. One at m too far from 0 for the default floor
    (check_offsets) gets a prior floor (shrinkage_target's ``floor``) at which its rounding
    ε N m² is FLOOR_MARGIN of OFFSET_LIMIT. Unchanged when no column is constant."""
    mean, var = sample.mean(0), sample.var(0)
    constant = np.flatnonzero(constant_columns(var)) if len(sample) > 1 else []
    if not len(constant):
        return data
    floor = np.zeros(len(var))
    floor[constant] = (np.finfo(float).eps * corpus.n_items * mean[constant] ** 2
                       / (FLOOR_MARGIN * OFFSET_LIMIT * SHRINKAGE))
    raised = bool(np.any(floor > shrinkage_target(var)))
    delta = np.zeros(len(var)) if data.get("delta") is None else np.array(data["delta"], float)
    delta[constant] = np.where(delta[constant] > 0, delta[constant],
                               np.sqrt(12 * shrinkage_target(var, floor)[constant]))
    warnings.warn(constant_note(corpus, constant, mean, len(sample), raised), DataWarning,
                  stacklevel=2)
    return {**data, "delta": delta, **({"floor": floor} if raised else {})}


def constant_note(corpus: Corpus, columns: np.ndarray, mean: np.ndarray, n: int,
                  raised: bool) -> str:
    """The warning of constant columns: which (0-based; the first few, with their values)."""
    many = len(columns) > 1
    more = f" and {len(columns) - 5} more" if len(columns) > 5 else ""
    seen = f" in a sample of {n} of its {corpus.n_items} items" if n < corpus.n_items else ""
    return (f"{corpus.path}: column{'s' * many} {', '.join(map(str, columns[:5]))}{more} "
            f"(0-based, of {len(mean)}) {'are' if many else 'is'} constant{seen} (= "
            f"{', '.join(f'{mean[j]:.6g}' for j in columns[:5])}): a constant column carries no "
            "cluster information, so it is fitted as a quantised one, its likelihood the same "
            "in every component" + (" (its prior variance floored so that float64 resolves it)"
                                    if raised else ""))


def check_offsets(sample: np.ndarray, corpus: Corpus, floor: np.ndarray | None = None) -> None:
    """The Gaussian models sum x xᵀ over the items, so a column about m with spread s (its
    standard deviation in the sample; for a constant column the default prior's floor
    √(λ/D · Σ_j var_j), data_scale_matrix, or ``floor``'s) carries a rounding error near
    ε · N · m² in its scatter, which the data and prior no longer outweigh when ε N (m/s)²
    passes OFFSET_LIMIT: the components' covariances stop being positive definite. An error
    naming the column instead."""
    if len(sample) < 2:
        return
    mean, var = sample.mean(0), sample.var(0)
    ratio = np.abs(mean) / np.sqrt(prior_variances(var, 1.0, floor=floor) + 1e-300)
    loss = np.finfo(float).eps * corpus.n_items * ratio**2
    bad = np.flatnonzero(loss > OFFSET_LIMIT)
    if len(bad):
        j = int(bad[0])
        what = "constant" if var[j] == 0 else f"spread {np.sqrt(var[j]):.3g}"
        raise BnpmixError(f"{corpus.path}: column {j} (0-based, of {len(mean)}) is about "
                          f"{mean[j]:.6g} ({what}): {ratio[j]:.3g} times its spread, too far "
                          f"from 0 for float64 sums of squares over {corpus.n_items} items; "
                          "subtract a constant from it (e.g. its mean) or drop it, and ingest "
                          f"again ({len(bad)} column{'s' * (len(bad) != 1)} like it)")


def check_heldout(corpus: Corpus, fitted: dict[str, Any], run_dir: str | Path) -> None:
    """The corpus (held out, or fitted from the run's model as a warm start) must be data of
    the kind, dimension and vocabulary the run was fitted to (``fitted``: fitted_facts); else an
    error naming the corpus and the field (for text, how to ingest it with the run's
    vocabulary)."""
    facts = corpus.manifest.facts()
    if facts["kind"] != fitted.get("kind"):
        raise BnpmixError(f"{corpus.path}: field 'kind' is {facts['kind']!r}, the model was "
                          f"fitted to kind {fitted.get('kind')!r}")
    ingest = corpus.manifest.ingest or {}
    hint = (f": ingest the text with the run's vocabulary, bnpmix ingest "
            f"{ingest.get('source', 'SRC')} {corpus.path} --vocab {RunDir(run_dir).vocab_path} "
            "--overwrite" if ingest.get("format") == "text" else "")
    if facts["dim"] != fitted.get("dim"):
        raise BnpmixError(f"{corpus.path}: field 'dim' is {facts['dim']!r}, the model was "
                          f"fitted to dim {fitted.get('dim')!r}{hint}")
    theirs, ours = fitted.get("vocab_sha256"), facts["vocab_sha256"]
    if theirs and ours and theirs != ours:
        raise BnpmixError(f"{corpus.path}: field 'vocab' differs from the vocabulary the model "
                          f"was fitted to (same size, other words or order){hint}")


def check_warm_start(corpus: Corpus, warm_start: str) -> None:
    """A warm start's run must have been fitted to data of the corpus's dimension and
    vocabulary (a vocabulary of the same size but other words would silently give its
    components' word probabilities to other words); a model without its run's summary.json (the
    estimator's partial_fit) is checked by the engines alone."""
    if is_url(warm_start):  # read through a local copy by the engines
        return
    run = RunDir(warm_start)
    if not run.summary_path.is_file():
        return
    facts = run.load_summary().get("data")
    if isinstance(facts, dict) and facts.get("kind") == corpus.manifest.kind:  # else the
        try:  # engines refuse it, naming the observation models
            check_heldout(corpus, facts, warm_start)
        except BnpmixError as exc:
            raise BnpmixError(f"{warm_start}: cannot warm-start this fit: {exc}") from None


def prior_keys(obs_name: str) -> list[str]:
    """The names a ``[prior]`` table may set for an observation model: its default()'s
    keyword parameters (the prior's own parameters, plus ``scale``)."""
    params = inspect.signature(obs_class(obs_name).default).parameters
    return [n for n, p in params.items()  # delta and floor come from the data (corpus_steps,
            if n not in ("X", "delta", "floor")  # constant_columns_held)
            and p.kind is p.POSITIONAL_OR_KEYWORD]
