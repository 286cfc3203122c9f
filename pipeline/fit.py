"""Fitting, resuming and evaluating from the Python API: what `bnpmix fit`, `bnpmix resume`
and `bnpmix evaluate` call.

A fit writes ``job.json`` (the corpus and the resolved configuration) first, checkpoints while it
runs (memo), and writes ``summary.json`` last: a run directory with a summary is finished.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import logsumexp

from bnpmix.algorithms.local import Globals, hard_assignments
from bnpmix.algorithms.metrics import adjusted_rand_index, normalized_mutual_info
from bnpmix.algorithms.mixture import DPMixture
from bnpmix.algorithms.obs.base import ObsModel
from bnpmix.storage import Batch, BnpmixError, Corpus, RunDir
from bnpmix.storage.atomic import write_json_atomic

from . import checkpoint
from .config import FitConfig
from .context import FitContext, initial_model, load_model, make_context
from .executors import DaskExecutor, Executor, LocalExecutor
from .memo import MemoRun, VisitHook, run_memo
from .vb import run_sovb, run_vb

Progress = Callable[[MemoRun], None]


@contextlib.contextmanager
def open_executor(cfg: FitConfig, corpus: Corpus) -> Iterator[Executor]:
    """The executor the configuration names: local threads / synchronous, or Dask."""
    if cfg.cluster is None and not cfg.scheduler.startswith("tcp://"):
        ex = LocalExecutor(corpus.path, cfg.scheduler, cfg.threads, cfg.cache_bytes)
        try:
            yield ex
        finally:
            ex.close()
        return
    from .clusters import open_client

    with open_client(cfg.scheduler, cfg.cluster) as client:
        yield DaskExecutor(client, corpus.path, cfg.cache_bytes)


def fit(corpus_dir: str | Path, out: str | Path, cfg: FitConfig | None = None,
        on_visit: VisitHook | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Fit a DP mixture to a corpus and write the run directory; returns summary.json's content."""
    cfg = cfg or FitConfig()
    for name in ("warm_start", "cluster"):  # job.json must not depend on the working directory
        if getattr(cfg, name):
            setattr(cfg, name, str(Path(getattr(cfg, name)).resolve()))
    corpus = Corpus(corpus_dir)
    run = RunDir(out)
    if run.path.exists() and any(run.path.iterdir()):
        what = "holds a run (use `bnpmix resume`)" if (run.path / "job.json").exists() else (
            "is not empty")
        raise BnpmixError(f"{run.path}: the output directory {what}; choose another --out")
    return _run(corpus, run, cfg, None, on_visit, progress)


def partitions_of(corpus: Corpus) -> list[list[str]]:
    """The corpus's partitions as [file, sha256] pairs (what a run was fitted to)."""
    return [[p.file, p.sha256] for p in corpus.manifest.partitions]


def resume(run_dir: str | Path, progress: Progress | None = None) -> dict[str, Any] | None:
    """Continue a run from its last checkpoint; None if it had already finished. A run whose
    corpus has changed since it started (appended partitions) is refused: resuming it would
    mix summaries of two different data sets."""
    run = RunDir(run_dir)
    if run.summary_path.exists():
        return None
    try:
        job = json.loads((run.path / "job.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BnpmixError(f"{run.path}: not a resumable run directory ({exc})") from None
    corpus = Corpus(job["corpus"])
    if partitions_of(corpus) != job["partitions"]:
        raise BnpmixError(f"{corpus.path}: the corpus changed since {run.path} started "
                          f"({len(job['partitions'])} partitions then, {corpus.n_partitions} "
                          "now); start a new fit")
    return _run(corpus, run, FitConfig.from_dict(job["config"]), checkpoint.load(run), None,
                progress)


def _run(corpus: Corpus, run: RunDir, cfg: FitConfig, state: dict | None,
         on_visit: VisitHook | None, progress: Progress | None) -> dict[str, Any]:
    """Set up (validating the configuration against the corpus before anything is written),
    run the engine, write the run directory."""
    with open_executor(cfg, corpus) as executor:
        where = executor.describe()
        if isinstance(executor, DaskExecutor):
            print(f"bnpmix: running on {where}", file=sys.stderr)
        ctx = make_context(corpus, cfg, executor)
        model = initial_model(ctx) if state is None else state["run"]["model"]
        run.create()
        if state is None:
            write_json_atomic(run.path / "job.json", {"corpus": str(corpus.path.resolve()),
                                                      "partitions": partitions_of(corpus),
                                                      "config": cfg.to_dict()})
        if cfg.algorithm == "memo":
            memo = MemoRun(ctx, model, on_visit, hold_globals=bool(cfg.warm_start))
            if state is not None:
                checkpoint.restore(ctx, state, memo)
            try:
                run_memo(ctx, memo, lambda r: checkpoint.save(run, r), progress)
            finally:
                memo.store.close()
            model, elbo, trace = memo.model, memo.model.elbo(memo.S0), memo.trace
        else:
            engine = run_vb if cfg.algorithm == "vb" else run_sovb
            model, S, trace = engine(ctx, model)
            elbo = model.elbo(S)
        write_assignments(run, ctx, model)
    return _publish(run, ctx, model, elbo, trace, where)


def _publish(run: RunDir, ctx: FitContext, model: DPMixture, elbo: float,
             trace: list[dict], where: str) -> dict[str, Any]:
    arrays, meta = model.to_arrays()
    run.write_model(arrays, meta)
    run.write_trace(trace)
    weights, _ = model.weights()
    summary = {
        "algorithm": ctx.cfg.algorithm,
        "K": model.K,
        "K_effective": int(np.sum(weights > 0.01)),
        "elbo": elbo,
        "elbo_per_item": elbo / ctx.corpus.n_items,
        "laps": ctx.cfg.laps,
        "n_items": ctx.corpus.n_items,
        "wall_seconds": ctx.elapsed(),
        "obs": ctx.obs.name,
        "weights": weights.tolist(),
        "executor": where,
        "config": ctx.cfg.to_dict(),
    }
    run.write_summary(summary)
    checkpoint.checkpoint_path(run).unlink(missing_ok=True)
    return summary


def assign(batch: Batch, obs: ObsModel, g: Globals) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Item ids, most probable component ids and their probabilities for one partition."""
    cluster, prob = hard_assignments(batch.X, obs, g)
    items = batch.columns.get("item", batch.start + np.arange(len(batch)))
    return items, cluster, prob


def write_assignments(run: RunDir, ctx: FitContext, model: DPMixture, wave: int = 8) -> None:
    """Hard assignments per partition, computed by the executor a few partitions at a time and
    written by the driver as they arrive (driver memory stays at a few partitions' worth)."""
    g = model.globals()
    n = ctx.corpus.n_partitions
    for start in range(0, n, wave):
        indices = list(range(start, min(n, start + wave)))
        results = ctx.executor.map(assign, indices, model.obs, g)
        for i, (items, cluster, prob) in zip(indices, results, strict=True):
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
