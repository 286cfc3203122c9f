"""memo's ``bnpmix tune`` search (its ``tuner``), on the sample pipeline/tune.py draws and
splits.

memo (``tune_memo``): the DP concentration α0 ∈ {0.1, 1, 10, 100} × the Gaussian prior's
``scale`` over the same values (bag-of-words: the Dirichlet's λ0 ∈ {0.01, 0.1, 1}), each point a
memo fit with the engine's defaults (K = 1, births and merges, laps until convergence) and the
tune's seed; π_k = E[w_k] under q. The training items are held in memory as the corpus
``write_corpus`` would write of them (storage.memory), so the fit is exactly ``bnpmix fit``'s.
A memo fit costs more than an ADF pass, so memo's sample is at most MEMO_MAX_ITEMS = 5,000
items.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bnpmix.storage import Corpus
from bnpmix.storage.errors import naming
from bnpmix.storage.memory import memory_corpus

from ..config import JobConfig
from ..evaluate.fitted import load
from ..fit import fit, job_config
from ..tune import (
    SCALE_GRID,
    SCORE,
    check_fractions,
    corpus_sample,
    edge_warnings,
    searched_prior,
    size_warnings,
    with_value,
)
from . import DEFAULT_ENGINE

ALPHA_GRID = (0.1, 1.0, 10.0, 100.0)  # memo's DP concentration α0 (its default, 1, included)
LAM0_GRID = (0.01, 0.1, 1.0)  # the bag-of-words Dirichlet's λ0 (its default, 0.1, included)
MEMO_MAX_ITEMS = 5_000  # the sample's default cap: a memo fit costs more than an ADF pass


def memo_score(train_corpus: Corpus | Path, test: Any, job: JobConfig, run_dir: Path
               ) -> dict[str, Any]:
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
    # held in memory, named for what it is a sample of (errors and warnings say so)
    train = memory_corpus(split.train, f"{corpus_dir} (tune's training sample of it)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bnpmix-tune-") as tmp, naming({
            tmp: f"{tempfile.gettempdir()}/<bnpmix tune's temporary files>"}):
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
