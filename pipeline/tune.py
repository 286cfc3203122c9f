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

The searches are the engines' own (their ``tuner``: engines/nrm_tune.py for adf and ep,
engines/memo_tune.py for memo); this module holds what they share: the sample and its split,
the searched observation-prior parameter, the warnings, the table and the job file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bnpmix.storage import BnpmixError, Corpus
from bnpmix.storage.atomic import write_text_atomic

from .runtime.context import check_obs, prior_keys
from .runtime.data import BatchSource

SCALE_GRID = (0.1, 0.3, 1.0)  # Gaussian priors' E[Σ] as a fraction of the data's covariance
ALL_ITEMS = 5_000  # corpora up to this size are tuned on all their items (by default)
FRACTION = 0.1  # larger ones on this fraction of their items, at least ALL_ITEMS (by default)
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
