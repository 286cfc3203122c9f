"""The end of a run: the hard assignments (computed by the executor, written by the driver), the
model, its tables and trace, then summary.json, which marks the run finished; the FitWarnings a
success message would hide."""

from __future__ import annotations

import shutil
import warnings
from collections import Counter
from typing import Any

import numpy as np

from bnpmix.algorithms.obs import ObsModel
from bnpmix.storage import RunDir
from bnpmix.storage.errors import FitWarning

from .config import JobConfig
from .declared import heldout_kind
from .labels import label_order, labels_of
from .runtime import checkpoint
from .runtime.context import FitContext
from .runtime.engine import Fitted, engine_class, engine_names
from .runtime.models import write_model
from .settings import setting


def publish(run: RunDir, ctx: FitContext, job: JobConfig, fitted: Fitted, trace: list[dict],
             laps_done: int, where: str, cache: dict[str, Any],
             sizes: dict[int, int]) -> dict[str, Any]:
    """Write the model, its tables and trace, then summary.json (``cache``: the executor's
    cache_stats() over the run's partition tasks; ``sizes``: items assigned to each component
    id, recorded with the weights so that `bnpmix info` reads summary.json alone)."""
    model = fitted.model
    write_model(run, model)
    for name, table in fitted.tables.items():
        run.write_table(name, table)
    run.write_trace(trace)
    weights, weight_new = model.weights()
    order = label_order(weights, model.uids)  # summary.json lists the clusters by label
    summary = {"algorithm": job.algorithm, "K": model.K,
               "K_effective": int(np.sum(weights > 0.01))}
    summary["objective"] = next(iter(fitted.objective))
    summary["declared"] = engine_class(job.algorithm).declared.to_dict()
    for key, value in fitted.objective.items():
        summary[key] = value
        summary[f"{key}_per_item"] = value / ctx.corpus.n_items
    summary.update(fitted.info)
    summary.update({
        "converged": fitted.converged,
        "laps": laps_done,
        "n_items": ctx.corpus.n_items,
        "wall_seconds": ctx.elapsed(),
        "obs": ctx.obs.name,
        "data": ctx.corpus.manifest.facts(),
        "weights": weights[order].tolist(),
        "weight_new": float(weight_new),
        "component_ids": [int(u) for u in model.uids[order]],
        "sizes": [sizes.get(label, 0) for label in range(model.K)],
        "executor": where,
        "cache": cache,
        "config": job.to_dict(),
    })
    summary["heldout_kind"] = heldout_kind(getattr(model, "obs", None))
    if ctx.obs_auto:  # --obs auto: each candidate's bound, and the race's record
        summary.update(ctx.obs_auto)
    prior = prior_entry(ctx, model)
    if prior is not None:
        summary["prior"] = prior
    if ctx.corpus.manifest.vocab is not None:  # the run names its columns (`bnpmix show`)
        run.write_vocab(ctx.corpus.manifest.vocab)
    run.write_summary(summary)
    warn_k_limits(summary, job)
    checkpoint.checkpoint_path(run).unlink(missing_ok=True)
    shutil.rmtree(checkpoint.chunks_dir(run), ignore_errors=True)
    return summary


def warn_k_limits(summary: dict[str, Any], job: JobConfig) -> None:
    """FitWarnings a success message would hide: the fit ends with one cluster holding the mass
    although the job allowed more (not a truncated engine told K = 1), which on data with
    clusters is a start, truncation or prior that did not fit them; or a truncated engine's
    every component holds mass, so the truncation may have capped the clusters found."""
    cls, K, n = engine_class(job.algorithm), summary["K_effective"], summary["n_items"]
    if K <= 1 < n and not (cls.truncated and job.engine.K == 1):
        truncated = ", ".join(name for name in engine_names() if engine_class(name).truncated)
        warnings.warn(f"{job.algorithm} ended with one cluster holding the mass of all {n:,} "
                      f"items (K = {summary['K']}); if the data should hold more, try another "
                      f"--obs or --alpha0, or ({truncated}) a larger --K", FitWarning,
                      stacklevel=2)
    elif cls.truncated and 1 < K == job.engine.K:
        warnings.warn(f"{job.algorithm}: each of the K = {K} components holds more than 1% of "
                      "the mass: the truncation may have capped the clusters found; a larger "
                      "--K shows whether the data hold more", FitWarning, stacklevel=2)


def prior_entry(ctx: FitContext, model: Any) -> dict[str, Any] | None:
    """summary.json's ``prior``: whether the run learned its observation prior, and the prior's
    figures (ObsModel.prior_figures) at the start and in the returned model; None for models
    whose prior has no figures or no observation model of that interface (tdpm)."""
    obs = getattr(model, "obs", None)
    if not isinstance(obs, ObsModel) or ctx.prior_base is None or not obs.prior_figures():
        return None
    return {"learn": ctx.learn_prior, "initial": ctx.prior_base.prior_figures(),
            "final": obs.prior_figures()}


def assign(batch: Any, model: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Item ids, most probable component ids and their probabilities for one partition."""
    cluster, prob = model.assign_batch(batch)
    items = batch.columns.get("item", batch.start + np.arange(len(batch)))
    return items, cluster, prob


def write_assignments(run: RunDir, ctx: FitContext, fitted: Fitted,
                      wave: int | None = None) -> Counter[int]:
    """Hard assignments per partition, computed by the executor ``wave`` partitions at a time
    (None: Dask config ``bnpmix.assign-wave``) and written by the driver as they arrive (driver
    memory stays at a few partitions' worth). Each item's cluster is its component's label
    (pipeline/labels.py), not the engine's id. Returns the items assigned to each label."""
    sizes: Counter[int] = Counter()
    n, wave = ctx.corpus.n_partitions, setting("assign-wave", wave)
    weights, uids = fitted.model.weights()[0], fitted.model.uids
    for start in range(0, n, wave):
        indices = list(range(start, min(n, start + wave)))
        results = ctx.executor.map(assign, indices, fitted.model)
        for i, (items, ids, prob) in zip(indices, results, strict=True):
            cluster = labels_of(weights, uids, ids)
            run.write_assignments(i, items, cluster, prob)
            ids, counts = np.unique(cluster, return_counts=True)
            sizes.update(dict(zip(ids.tolist(), counts.tolist(), strict=True)))
    return sizes
