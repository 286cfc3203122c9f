"""Held-out evaluation of fitted models (``bnpmix evaluate``) and loading them (``bnpmix.load``).

Held-out partitions are scored where they are read, through an executor, a few at a time: only
per-partition sums, cluster ids and labels come back to the driver.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import logsumexp

from bnpmix.algorithms.metrics import adjusted_rand_index, normalized_mutual_info
from bnpmix.algorithms.obs.mult import log_multinomial_coefficient
from bnpmix.storage import Batch, BnpmixError, Corpus, RunDir

from ..runtime.executors import open_executor
from ..runtime.models import read_model
from .fitted import FittedModel, load


def score_partition(batch: Batch, model: Any, labels_column: str | None
                    ) -> tuple[float, int, np.ndarray, np.ndarray | None, float]:
    """Σ_n log p(x_n | fit), n, the most probable active component id of each item, labels, and
    (bag-of-words) Σ_n of the multinomial coefficient log(n_d! / Π_w x_dw!) that the first
    excludes."""
    try:
        model.obs.check_data(batch.X)
    except ValueError as exc:
        raise BnpmixError(f"held-out partition {batch.index}: does not fit the model's "
                          f"{model.obs.name} observations: {exc}") from None
    logp = model.log_joint_predictive(batch.X)
    total = float(logsumexp(logp, axis=1).sum())
    best = model.uids[logp[:, :-1].argmax(axis=1)]
    labels = None if labels_column is None else batch.columns[labels_column]
    coefficient = float(log_multinomial_coefficient(batch.X).sum()) if model.obs.name == "mult" \
        else 0.0
    return total, len(batch), best, labels, coefficient


def fitted_facts(run_dir: str | Path, model: Any) -> dict[str, Any]:
    """What the run was fitted to (summary.json's ``data``); for runs written before it was
    recorded, the kind and dimension the model's observations imply."""
    summary = RunDir(run_dir).load_summary()
    if isinstance(summary.get("data"), dict):
        return summary["data"]
    obs = model.obs
    return {"kind": "bow" if obs.name == "mult" else "dense",
            "dim": int(getattr(obs, "V", getattr(obs, "D", 0))), "vocab_sha256": None}


def check_heldout(corpus: Corpus, model: Any, fitted: dict[str, Any]) -> None:
    """The held-out corpus must be data of the kind, dimension and vocabulary the model was
    fitted to; else an error naming the corpus and the field."""
    facts = corpus.manifest.facts()
    for key in ("kind", "dim"):
        if facts[key] != fitted.get(key):
            raise BnpmixError(f"{corpus.path}: field {key!r} is {facts[key]!r}, the model was "
                              f"fitted to {key} {fitted.get(key)!r}")
    theirs, ours = fitted.get("vocab_sha256"), facts["vocab_sha256"]
    if theirs and ours and theirs != ours:
        raise BnpmixError(f"{corpus.path}: field 'vocab' differs from the vocabulary the model "
                          "was fitted to (same size, other words or order)")


def evaluate(run_dir: str | Path, heldout: str | Path, labels_column: str | None = None,
             scheduler: str = "threads", wave: int = 8) -> dict[str, Any]:
    """Held-out log-likelihood per item; ARI and NMI against a label column when given."""
    model = read_model(str(run_dir))
    corpus = Corpus(heldout)
    check_heldout(corpus, model, fitted_facts(run_dir, model))
    if labels_column is not None and labels_column not in corpus.manifest.columns:
        raise BnpmixError(f"{heldout}: no column {labels_column!r} "
                          f"(has {list(corpus.manifest.columns)})")
    total, coefficient, n, clusters, labels = 0.0, 0.0, 0, [], []
    with open_executor(corpus, scheduler) as executor:
        for start in range(0, corpus.n_partitions, wave):
            indices = list(range(start, min(corpus.n_partitions, start + wave)))
            for s, m, best, y, c in executor.map(score_partition, indices, model,
                                                 labels_column):
                total += s
                coefficient += c
                n += m
                clusters.append(best)
                if y is not None:
                    labels.append(y)
    out: dict[str, Any] = {"heldout_loglik_per_item": total / n, "K": model.K, "n_items": n}
    if model.obs.name == "mult":  # documents: say which scale, and give the other one too
        out["multinomial_coefficient_included"] = False
        out["heldout_loglik_per_item_with_coefficient"] = (total + coefficient) / n
    if labels_column is not None:
        c, y = np.concatenate(clusters), np.concatenate(labels)
        out["ari"] = adjusted_rand_index(y, c)
        out["nmi"] = normalized_mutual_info(y, c)
    return out


__all__ = ["FittedModel", "evaluate", "load", "score_partition"]
