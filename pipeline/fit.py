"""Fitting and evaluating from the Python API: what `bnpmix fit` and `bnpmix evaluate` call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import logsumexp

from bnpmix.algorithms.local import hard_assignments
from bnpmix.algorithms.metrics import adjusted_rand_index, normalized_mutual_info
from bnpmix.algorithms.mixture import DPMixture
from bnpmix.storage import BnpmixError, Corpus, RunDir

from .config import FitConfig
from .context import FitContext, initial_model, load_model, make_context
from .memo import VisitHook, run_memo
from .vb import run_sovb, run_vb


def run_engine(ctx: FitContext, on_visit: VisitHook | None = None) -> tuple[DPMixture, float,
                                                                          list[dict]]:
    """Run the configured engine; returns the final model, its exact ELBO and the trace."""
    model = initial_model(ctx)
    algorithm = ctx.cfg.algorithm
    if algorithm == "memo":
        run = run_memo(ctx, model, on_visit)
        return run.model, run.model.elbo(run.S0), run.trace
    engine = run_vb if algorithm == "vb" else run_sovb
    model, S, trace = engine(ctx, model)
    return model, model.elbo(S), trace


def fit(corpus_dir: str | Path, out: str | Path, cfg: FitConfig | None = None,
        on_visit: VisitHook | None = None) -> dict[str, Any]:
    """Fit a DP mixture to a corpus and write the run directory; returns summary.json's content."""
    cfg = cfg or FitConfig()
    corpus = Corpus(corpus_dir)
    ctx = make_context(corpus, cfg)
    model, elbo, trace = run_engine(ctx, on_visit)
    run = RunDir(out).create()
    write_assignments(run, corpus, model)
    arrays, meta = model.to_arrays()
    run.write_model(arrays, meta)
    run.write_trace(trace)
    weights, _ = model.weights()
    summary = {
        "algorithm": cfg.algorithm,
        "K": model.K,
        "K_effective": int(np.sum(weights > 0.01)),
        "elbo": elbo,
        "elbo_per_item": elbo / corpus.n_items,
        "laps": cfg.laps,
        "n_items": corpus.n_items,
        "wall_seconds": ctx.elapsed(),
        "obs": ctx.obs.name,
        "weights": weights.tolist(),
        "config": cfg.to_dict(),
    }
    run.write_summary(summary)
    return summary


def write_assignments(run: RunDir, corpus: Corpus, model: DPMixture) -> None:
    """Hard assignments (most probable component id and its probability) per partition."""
    g = model.globals()
    for i in range(corpus.n_partitions):
        batch = corpus.read(i)
        cluster, prob = hard_assignments(batch.X.astype(np.float64), model.obs, g)
        items = batch.columns.get("item", batch.start + np.arange(len(batch)))
        run.write_assignments(i, items, cluster, prob)


def predictive(model: DPMixture, X) -> tuple[np.ndarray, np.ndarray]:
    """log p(x_n | fit) = log[Σ_k E[w_k] p(x_n | q(phi_k)) + E[w_rest] p(x_n | prior)] and the
    most probable active component of each item."""
    w, rest = model.weights()
    logp = np.log(np.maximum(w, 1e-300)) + model.obs.predictive_logpdf(X, model.post)
    best = model.uids[logp.argmax(axis=1)]
    if rest > 0:
        prior = model.obs.predictive_logpdf(X, model.obs.prior_post(1))
        logp = np.concatenate([logp, np.log(rest) + prior], axis=1)
    return logsumexp(logp, axis=1), best


def evaluate(run_dir: str | Path, heldout: str | Path,
             labels_column: str | None = None) -> dict[str, Any]:
    """Held-out log-likelihood per item; ARI and NMI against a label column when given."""
    model = load_model(str(run_dir))
    corpus = Corpus(heldout)
    if labels_column is not None and labels_column not in corpus.manifest.columns:
        raise BnpmixError(f"{heldout}: no column {labels_column!r} "
                          f"(has {list(corpus.manifest.columns)})")
    total, n, clusters, labels = 0.0, 0, [], []
    for batch in corpus:
        logp, best = predictive(model, batch.X.astype(np.float64))
        total += float(logp.sum())
        n += len(batch)
        clusters.append(best)
        if labels_column is not None:
            labels.append(batch.columns[labels_column])
    out: dict[str, Any] = {"heldout_loglik_per_item": total / n, "K": model.K, "n_items": n}
    if labels_column is not None:
        c, y = np.concatenate(clusters), np.concatenate(labels)
        out["ari"] = adjusted_rand_index(y, c)
        out["nmi"] = normalized_mutual_info(y, c)
    return out
