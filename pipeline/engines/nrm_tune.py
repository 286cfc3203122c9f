"""adf's and ep's ``bnpmix tune`` search (their ``tuner``; Tank, Foti & Fox 2015, supplement
Sec. 4.1), on the sample pipeline/tune.py draws and splits.

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
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
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

from ..runtime.context import constant_columns_held, prior_keys
from ..runtime.engine import engine_class
from ..tune import (
    SCALE_GRID,
    SCORE,
    Split,
    check_fractions,
    corpus_sample,
    edge_warnings,
    searched_prior,
    size_warnings,
    with_value,
)
from . import DEFAULT_TUNED

A_GRID = (1.0, 10.0, 100.0, 1000.0)
TAU_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0)
MAX_ITEMS = 20_000  # the sample's default cap


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
