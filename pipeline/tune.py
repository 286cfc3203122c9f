"""Hyperparameters of the mixture's prior by held-out predictive likelihood (``bnpmix tune``;
Tank, Foti & Fox 2015, supplement Sec. 4.1).

A sample of the corpus is split at random into training and test items (``test_fraction`` held
out). By default (``sample_size``) a corpus of at most ALL_ITEMS = 5,000 items is tuned on all of
them (a 10 % sample of wine's 142 items was 12 training and 3 test items, on which the grid's
ranking is noise), a larger one on 10 % of its items but at least 5,000, at most ``max_items``;
a ``fraction`` given replaces the rule. For every point of the grid the training
items are fitted and the test items scored by the held-out predictive
log p(x* | fit) = log Σ_{k ≤ K+1} π_k p(x* | λ_k), the last term the mass of a new component; the
best point is written as a job file for ``bnpmix fit --config``. The result's ``warnings`` (also
printed to stderr and written into the job file) say when the best point lies on an edge of the
grid (the optimum may lie beyond it) or fewer than SMALL_TEST = 200 items were held out (the
standard error of a mean per-item score, a few nats over √n, is then as large as the grid's
differences).

ADF and EP (``tune``): the NRM prior's a ∈ {1, 10, 100, 1000} × τ ∈ {0.1, 1, 10, 100, 1000} (the
DP does not depend on τ: a only), one ADF pass absorbing the training items in a random order
(algorithms/nrm_mixture.py), once per distinct β below (points of equal β share the fit). For
Gaussian observations the prior's ``scale`` (E[Σ] as a fraction of the data's covariance) is
searched too, over {0.1, 0.3, 1}, unless given: ADF follows the prior, and its clusters' number
depends on the scale more than on a.

The predictive rule depends on (a, τ) only through β = a τ^σ: with U' = U/c, (a c^σ, τ/c) has
g' = g + const, so Û' + τ' = (Û + τ)/c and w_new' = w_new. Points of the grid with equal β give
the same fit (the table shows β; the paper's 4 × 5 grid has 11 distinct values for σ = 1/2), and
an edge of the grid is an edge in β.

memo (``tune_memo``): the DP concentration α0 ∈ {0.1, 1, 10, 100} × the Gaussian prior's
``scale`` over the same values (bag-of-words: the Dirichlet's λ0 ∈ {0.01, 0.1, 1}), each point a
memo fit with the engine's defaults (K = 1, births and merges, laps until convergence) and the
tune's seed; π_k = E[w_k] under q. The training items are written as a temporary corpus, so the
fit is exactly ``bnpmix fit``'s. A memo fit costs more than an ADF pass, so memo's sample is at
most MEMO_MAX_ITEMS = 5,000 items.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import logsumexp

from bnpmix.algorithms.alloc import NRM
from bnpmix.algorithms.ep import sweep
from bnpmix.algorithms.nrm_mixture import NRMMixture
from bnpmix.algorithms.obs import ObsModel, obs_class
from bnpmix.algorithms.summary import Summary
from bnpmix.storage import BnpmixError, Corpus
from bnpmix.storage.atomic import write_text_atomic
from bnpmix.storage.errors import naming

from .config import JobConfig
from .engines import DEFAULT_ENGINE, DEFAULT_TUNED
from .evaluate.fitted import load
from .fit import fit, job_config
from .runtime.context import check_obs, constant_columns_held, prior_keys
from .runtime.data import BatchSource
from .runtime.engine import engine_class

A_GRID = (1.0, 10.0, 100.0, 1000.0)
TAU_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0)
SCALE_GRID = (0.1, 0.3, 1.0)  # Gaussian priors' E[Σ] as a fraction of the data's covariance
ALPHA_GRID = (0.1, 1.0, 10.0, 100.0)  # memo's DP concentration α0 (its default, 1, included)
LAM0_GRID = (0.01, 0.1, 1.0)  # the bag-of-words Dirichlet's λ0 (its default, 0.1, included)
ALL_ITEMS = 5_000  # corpora up to this size are tuned on all their items (by default)
FRACTION = 0.1  # larger ones on this fraction of their items, at least ALL_ITEMS (by default)
MAX_ITEMS, MEMO_MAX_ITEMS = 20_000, 5_000  # the sample's default caps: adf/ep, memo
SMALL_TEST = 200  # fewer held-out items than this: a warning
SCORE = "heldout_loglik_per_item"


@dataclass(frozen=True)
class Split:
    """The sample's training items (in the order ADF absorbs them) and its test items, and the
    corpus's integer columns as an observation model's ``delta`` (None: none)."""

    train: Any
    test: Any
    delta: np.ndarray | None = None


def sample_split(corpus: Corpus, n: int, test_fraction: float, seed: int) -> Split:
    """About ``n`` items drawn from the corpus, shuffled, the last ``test_fraction`` held out."""
    rng = np.random.default_rng(seed)
    X = BatchSource(corpus).sample(n, rng)
    order = rng.permutation(X.shape[0])
    n_test = round(test_fraction * len(order))
    if n_test < 1 or n_test >= len(order):
        raise BnpmixError(f"{corpus.path}: a sample of {len(order)} items cannot be split "
                          f"{1 - test_fraction:.0%}/{test_fraction:.0%}; raise --fraction")
    return Split(X[order[n_test:]], X[order[:n_test]], corpus.manifest.integer_steps)


def sample_size(n_items: int, fraction: float | None, max_items: int) -> int:
    """Items sampled from a corpus of ``n_items``: with no ``fraction``, all of them up to
    ALL_ITEMS, else max(ALL_ITEMS, ⌈FRACTION n⌉); with one, ⌈fraction n⌉; at most ``max_items``
    and at least 2."""
    if fraction is None:
        n = min(n_items, max(ALL_ITEMS, math.ceil(FRACTION * n_items)))
    else:
        n = math.ceil(fraction * n_items)
    return max(2, min(max_items, n))


def check_fractions(fraction: float | None, test_fraction: float) -> None:
    """The sample's fraction (when given) in (0, 1] and the held-out fraction in (0, 1)."""
    if fraction is not None and not 0 < fraction <= 1:
        raise BnpmixError(f"fraction must lie in (0, 1], not {fraction}")
    if not 0 < test_fraction < 1:
        raise BnpmixError(f"test_fraction must lie in (0, 1), not {test_fraction}")


def corpus_sample(corpus_dir: str | Path, obs: str | None, fraction: float | None,
                  max_items: int, test_fraction: float, seed: int) -> tuple[str, Split]:
    """The observation model's name and the split of ``sample_size`` items."""
    corpus = Corpus(corpus_dir)
    obs_name = check_obs(corpus, obs)
    n = sample_size(corpus.n_items, fraction, max_items)
    return obs_name, sample_split(corpus, n, test_fraction, seed)


def edge_warnings(rows: list[dict[str, Any]], axes: dict[str, tuple[str, str]]) -> list[str]:
    """For each searched parameter (row key -> its name and the flags setting its grid) with
    two values or more: a warning when the best row's value is the smallest or the largest
    (rows best first)."""
    found = []
    for key, (name, flag) in axes.items():
        values = sorted({r[key] for r in rows if r.get(key) is not None})
        best = rows[0].get(key)
        if len(values) > 1 and best in (values[0], values[-1]):
            side = "smallest" if best == values[0] else "largest"
            found.append(f"the best {name} ({best:g}) is the grid's {side}: the optimum may "
                         f"lie beyond it (widen {flag})")
    return found


def size_warnings(n_test: int) -> list[str]:
    """A warning when fewer than SMALL_TEST items were held out."""
    if n_test >= SMALL_TEST:
        return []
    return [f"only {n_test} items held out (fewer than {SMALL_TEST}): the grid's differences "
            "may be noise (tune on more items: --fraction, --max-items, --test-fraction)"]


def searched_prior(obs_name: str, obs_prior: dict[str, Any],
                   grids: dict[str, Sequence[float]]) -> tuple[str | None, list[float | None]]:
    """The observation-prior parameter searched, the first of ``grids`` that the model takes and
    ``obs_prior`` does not set, with its values; (None, [None]) when there is none."""
    for key, values in grids.items():
        if key in prior_keys(obs_name) and key not in obs_prior:
            return key, list(values)
    return None, [None]


def with_value(obs_prior: dict[str, Any], key: str | None, value: float | None
               ) -> dict[str, Any]:
    """The observation prior with the searched parameter set (unchanged when none is)."""
    return dict(obs_prior) if key is None else {**obs_prior, key: value}


def heldout_score(obs: ObsModel, prior: NRM, eps: float, split: Split) -> tuple[float, int]:
    """One ADF pass over the training items, then the mean held-out predictive log density of
    the test items, and K."""
    empty = Summary.zeros(np.zeros(0, np.int64), obs.stat_shapes(), obs.shared_shapes())
    res = sweep(split.train, obs, prior, eps, empty, None, 0, 0.0)
    model = NRMMixture(obs, prior, res.sites.named(0).summary, split.train.shape[0], res.v)
    return float(logsumexp(model.log_joint_predictive(split.test), axis=1).mean()), model.K


def grid(config: Any, a_grid: Sequence[float], tau_grid: Sequence[float]) -> list[Any]:
    """The configurations tried, the engine's ``config`` with its NRM prior's a and τ set: a × τ,
    or a alone for the DP (σ = 0 ignores τ)."""
    taus = [1.0] if config.sigma == 0 else list(tau_grid)
    return [dataclasses.replace(config, nrm_a=float(a), nrm_tau=float(t))
            for a in a_grid for t in taus]


def tune(corpus_dir: str | Path, *, prior: str = "ig", sigma: float | None = None,
         epsilon: float | None = None, obs: str | None = None,
         obs_prior: dict[str, Any] | None = None, fraction: float | None = None,
         max_items: int = MAX_ITEMS, test_fraction: float = 0.2, seed: int = 0,
         a_grid: Sequence[float] = A_GRID, tau_grid: Sequence[float] = TAU_GRID,
         scale_grid: Sequence[float] = SCALE_GRID,
         algorithm: str = DEFAULT_TUNED) -> dict[str, Any]:
    """ADF and EP (``algorithm``; their declared tuner): the grid's held-out scores (``rows``,
    best first) and the best point's options (``best``: nrm_prior, nrm_a, nrm_tau, and
    nrm_sigma / epsilon when given; ``prior``: the observation prior, with the best ``scale``
    for Gaussians), ``warnings``."""
    check_fractions(fraction, test_fraction)
    try:
        base = engine_class(algorithm).Config(nrm_prior=prior, nrm_sigma=sigma, epsilon=epsilon)
    except ValueError as exc:
        raise BnpmixError(str(exc)) from None
    obs_name, split = corpus_sample(corpus_dir, obs, fraction, max_items, test_fraction, seed)
    obs_prior = dict(obs_prior or {})
    key, scales = searched_prior(obs_name, obs_prior, {"scale": scale_grid})
    data = {} if split.delta is None else {"delta": split.delta}  # dequantised as in a fit,
    if not obs_class(obs_name).text:  # and constant columns held as a fit holds them
        data = constant_columns_held(split.train, Corpus(corpus_dir), data)
    rows = []
    for scale in scales:
        given = with_value(obs_prior, key, scale)
        try:
            model = obs_class(obs_name).default(split.train, **given, **data)
        except TypeError as exc:
            raise BnpmixError(f"prior: {exc} (the {obs_name} model's prior parameters are "
                              f"{prior_keys(obs_name)})") from None
        fits: dict[float, tuple[float, int]] = {}  # by β: points of equal β share the fit
        for cfg in grid(base, a_grid, tau_grid):
            beta = cfg.nrm_a * cfg.nrm_tau ** cfg.sigma
            key_beta = round(math.log(beta), 9)
            if key_beta not in fits:
                fits[key_beta] = heldout_score(model, cfg.prior(), cfg.eps(), split)
            score, K = fits[key_beta]
            rows.append({"nrm_a": cfg.nrm_a, "nrm_tau": cfg.nrm_tau, "beta": beta,
                         "scale": scale, SCORE: score, "K": K})
    rows.sort(key=lambda r: -r[SCORE])
    top = rows[0]
    best = {"nrm_prior": prior, "nrm_a": top["nrm_a"]}
    if base.sigma > 0:
        best["nrm_tau"] = top["nrm_tau"]
    best.update({k: v for k, v in (("nrm_sigma", sigma), ("epsilon", epsilon)) if v is not None})
    nrm = ("a", "--a-grid") if base.sigma == 0 else ("a tau^sigma", "--a-grid, --tau-grid")
    warnings = edge_warnings(rows, {"beta": nrm, "scale": ("scale", "--scale-grid")})
    return {"rows": rows, "best": best, "n_train": split.train.shape[0],
            "n_test": split.test.shape[0], "obs": obs_name,
            "prior": with_value(obs_prior, key, top["scale"]),
            "warnings": warnings + size_warnings(split.test.shape[0])}


def memo_score(train_corpus: Path, test: Any, job: JobConfig, run_dir: Path) -> dict[str, Any]:
    """One memo fit of the training corpus, then the mean held-out predictive log density of
    the test items, log Σ_k E[w_k] p(x* | λ_k) with the new components' mass; K active
    components, laps and the fit's seconds."""
    summary = fit(train_corpus, run_dir, job)
    model = load(run_dir)
    return {"K": model.n_components_, "laps": int(summary["laps"]),
            "seconds": float(summary["wall_seconds"]), SCORE: model.score(test)}


def tune_memo(corpus_dir: str | Path, *, obs: str | None = None,
              obs_prior: dict[str, Any] | None = None, fraction: float | None = None,
              max_items: int = MEMO_MAX_ITEMS, test_fraction: float = 0.2, seed: int = 0,
              alpha_grid: Sequence[float] = ALPHA_GRID,
              scale_grid: Sequence[float] = SCALE_GRID,
              lam0_grid: Sequence[float] = LAM0_GRID,
              algorithm: str = DEFAULT_ENGINE) -> dict[str, Any]:
    """memo (``algorithm``; memo's declared tuner): the held-out scores of α0 × the
    observation prior's ``scale`` (Gaussians) or ``lam0`` (bag-of-words) unless ``obs_prior``
    sets it (``rows``, best first); ``best``: alpha0; ``prior``: the observation prior with
    the best value; ``warnings``."""
    check_fractions(fraction, test_fraction)
    obs_name, split = corpus_sample(corpus_dir, obs, fraction, max_items, test_fraction, seed)
    obs_prior = dict(obs_prior or {})
    key, values = searched_prior(obs_name, obs_prior, {"scale": scale_grid, "lam0": lam0_grid})
    from .estimator import write_corpus  # here: the estimator imports scikit-learn when present

    rows = []
    with tempfile.TemporaryDirectory(prefix="bnpmix-tune-") as tmp, naming({
            str(Path(tmp) / "train"): f"{corpus_dir} (tune's training sample of it)",
            tmp: f"{tempfile.gettempdir()}/<bnpmix tune's temporary files>"}):
        train = write_corpus(split.train, Path(tmp) / "train")
        for value in values:
            for alpha0 in alpha_grid:
                job = job_config(algorithm=algorithm, seed=seed, obs=obs_name,
                                 scheduler="synchronous", alpha0=float(alpha0),
                                 prior=with_value(obs_prior, key, value))
                point = {"alpha0": float(alpha0), **({} if key is None else {key: value})}
                run = Path(tmp) / f"run-{len(rows)}"
                rows.append({**point, **memo_score(train, split.test, job, run)})
    rows.sort(key=lambda r: -r[SCORE])
    top = rows[0]
    axes = {"alpha0": ("alpha0", "--alpha-grid"), "scale": ("scale", "--scale-grid"),
            "lam0": ("lam0", "--lam0-grid")}
    return {"engine": algorithm, "rows": rows, "best": {"alpha0": top["alpha0"]},
            "n_train": split.train.shape[0], "n_test": split.test.shape[0], "obs": obs_name,
            "prior": with_value(obs_prior, key, top.get(key)), "seed": seed,
            "warnings": edge_warnings(rows, axes) + size_warnings(split.test.shape[0])}


# the table's columns by row key: heading, width and format (None: "-"); the score comes last
COLUMNS = {"nrm_a": ("a", 8, "g"), "nrm_tau": ("tau", 8, "g"), "beta": ("a tau^sigma", 12, ".4g"),
           "alpha0": ("alpha0", 8, "g"), "scale": ("scale", 6, "g"), "lam0": ("lam0", 6, "g"),
           "K": ("K", 6, "d"), "laps": ("laps", 5, "d"), "seconds": ("seconds", 8, ".2f")}


def format_table(result: dict[str, Any]) -> str:
    """The grid, best first (the columns its rows have), and the choice."""
    keys = [k for k in result["rows"][0] if k in COLUMNS]
    fitted = "ADF" if "engine" not in result else (  # ADF results keep their original keys
        f"{result['engine']} (seed {result['seed']}, its other options at their defaults)")
    lines = [f"{fitted} on {result['n_train']} items, scored on {result['n_test']} held out "
             f"({result['obs']} observations)",
             " ".join(f"{COLUMNS[k][0]:>{COLUMNS[k][1]}}" for k in keys) + "  held-out per item"]
    lines += [" ".join(f"{'-' if r[k] is None else format(r[k], COLUMNS[k][2]):>{COLUMNS[k][1]}}"
                       for k in keys) + f"  {r[SCORE]:.4f}" for r in result["rows"]]
    chosen = {**result["best"], **{f"prior.{k}": v for k, v in result["prior"].items()}}
    lines.append("best: " + ", ".join(f"{k} = {v}" for k, v in chosen.items()))
    return "\n".join(lines)


def toml_value(value: Any) -> str:
    """A TOML literal of a string, number, boolean or (nested) list of numbers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML literal for {value!r}")


def job_text(corpus_dir: str | Path, result: dict[str, Any], algorithm: str) -> str:
    """A job file fitting the corpus with the best point (the table and warnings as comments)."""
    lines = [f"# bnpmix tune: the best of {len(result['rows'])} points by held-out predictive "
             "log-likelihood", *("# " + line for line in format_table(result).splitlines()),
             *(f"# warning: {w}" for w in result.get("warnings", ())),
             f"algorithm = {toml_value(algorithm)}",
             f"corpus = {toml_value(str(Path(corpus_dir).resolve()))}",
             f"obs = {toml_value(result['obs'])}"]
    lines += [f"{k} = {toml_value(v)}" for k, v in result["best"].items()]
    if result["prior"]:
        lines += ["[prior]", *(f"{k} = {toml_value(v)}" for k, v in result["prior"].items())]
    return "\n".join(lines) + "\n"


def write_job(path: str | Path, corpus_dir: str | Path, result: dict[str, Any],
              algorithm: str) -> Path:
    """Write the job file atomically; an existing file is never replaced."""
    path = Path(path)
    if path.exists():
        raise BnpmixError(f"{path}: exists; choose another path (nothing was written)")
    return write_text_atomic(path, job_text(corpus_dir, result, algorithm))
