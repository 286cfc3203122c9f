"""Fitting and resuming from the Python API: what `bnpmix fit` and `bnpmix resume` call.

The runtime drives any registered engine the same way: claim the run directory and write
``job.json`` with the claim, build the context, start the engine or restore it from its
checkpoint, step it to the end with progress and checkpoints, then write the assignments, the
model, the trace and, last, ``summary.json``: a run directory with a summary is finished; one
with job.json and no summary is resumable (from its checkpoint, else from the beginning).
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.obs import AUTO_CANDIDATES, ObsModel, obs_class
from bnpmix.storage import BnpmixError, Corpus, RunDir, ingest_array
from bnpmix.storage.atomic import write_json_atomic
from bnpmix.storage.objectstore import is_url

from .clusters import process_client
from .config import JobConfig, resolve
from .declared import heldout_kind
from .engines import DEFAULT_ENGINE
from .engines.common import corpus_summary
from .labels import label_order, labels_of
from .remote_run import fit_to_store, resume_from_store
from .runtime import checkpoint
from .runtime.context import (
    AUTO,
    FitContext,
    Streams,
    check_obs,
    default_obs_name,
    make_context,
    prior_keys,
)
from .runtime.data import BatchSource
from .runtime.engine import Best, Engine, Fitted, Step, engine_class
from .runtime.executors import DaskExecutor, Executor, open_executor
from .runtime.models import read_model, write_model
from .settings import setting

# --obs auto's candidates (AUTO_CANDIDATES, beside the models) are each fitted to the
# initialisation sample by memo (DEFAULT_ENGINE)
AUTO_LAPS = 30  # laps of a candidate's fit at most
# items of the initialisation sample the candidates are fitted to: a full covariance's local step
# costs O(n K D²), and at D = 128 the 10,000-item sample kept one fit busy for minutes
AUTO_ITEMS = 2_000
# a candidate's laps fall in proportion to n / p below AUTO_RATIO (n sampled items, p one
# component's free parameters, ObsModel.component_params), to no fewer than AUTO_MIN_LAPS. Its
# lap ends (births: fresh VB and merge rounds, a global update each, O(K p D) for full
# Gaussians) are its cost: at D = 128 the gauss candidate (p = 8,384 against n = 2,000) took
# 423 s, loaded. The rule binds only where p > 2 n: not at any data set benchmarks/real_data.py
# checks the choice on (largest p / n: digits' gauss, 2,144 against 1,437 items, 1.5)
AUTO_RATIO = 0.5
AUTO_MIN_LAPS = 5

ProgressHook = Callable[[Engine], None]
StepHook = Callable[[Engine, Step], None]  # after every step and its checkpoint (tests)


def job_config(**options: Any) -> JobConfig:
    """A configuration from option names as in job files (``K=2, laps=5, moves="birth,merge"``),
    validated by the same table as the command line."""
    return resolve(options, "options")


def fit(corpus_dir: str | Path, out: str | Path, job: JobConfig | None = None, *,
        client: Any = None, progress: ProgressHook | None = None,
        on_step: StepHook | None = None) -> dict[str, Any]:
    """Fit a model to a corpus and write the run directory; returns summary.json's content.
    ``client``: a distributed.Client whose cluster runs the partition tasks in place of the
    executor the job names (its workers must reach the corpus); it is neither closed nor
    changed, and job.json records its scheduler's address. The job's scheduler
    ``"distributed"`` asks for this process's current Client the same way."""
    if is_url(out):  # a run directory in object storage: a mirrored local workspace
        return fit_to_store(fit, corpus_dir, str(out), job, on_step, client=client,
                            progress=progress)
    job, client = on_client(job or JobConfig(), client)
    corpus = Corpus(corpus_dir)
    run = RunDir(out)
    # job.json must not depend on the working directory, nor on defaults that follow the data
    absolute = {f"run_{name}": str(Path(value).resolve()) for name in ("warm_start", "cluster")
                if (value := getattr(job.run, name)) and not is_url(value)}
    job = job.replace(run_corpus=corpus.uri, run_out=str(run.path.resolve()),
                      model_obs=job.model.obs or default_obs_name(corpus, mixes_obs(job)),
                      run_wave=job.run.wave or engine_class(job.algorithm).default_wave,
                      **absolute)
    if job.model.obs == AUTO and not mixes_obs(job):
        raise BnpmixError(f"--obs auto: the {job.algorithm} engine takes an observation model "
                          "named with --obs (gauss, zm-gauss, diag-gauss, tied-gauss)")
    claimed = run.claim()
    if claimed.replaced:
        print(f"bnpmix: {run.path}: taking it over from {claimed.replaced}, which is gone (it "
              "stopped before its first checkpoint)", file=sys.stderr)
    begun: list[bool] = []  # set once the engine has started: a failure then leaves a run
    try:
        write_job(run, corpus, job)  # with the claim, before any work: always resumable
        summary = _run(corpus, run, job, None, progress, on_step, client, begun)
    except BaseException as exc:
        stopped(run, claimed.created, exc, bool(begun))
        raise
    run.release()
    return summary


def mixes_obs(job: JobConfig) -> bool:
    return engine_class(job.algorithm).mixes_obs


def candidate_laps(name: str, n: int, D: int) -> int:
    """AUTO_LAPS, cut in proportion to n / p where that is below AUTO_RATIO (p: the
    candidate's ObsModel.component_params): ⌊AUTO_LAPS (n / p) / AUTO_RATIO⌋, at least
    AUTO_MIN_LAPS. Fewer laps stop that candidate's bound earlier on its way up (memo's lap-end
    ELBO rises: moves and learned priors are kept only when they raise it), so the cut can move
    the choice only away from a model with more than 1 / AUTO_RATIO parameters per component
    per sampled item, which the sample hardly informs beyond the prior. Stopping a candidate once
    its bound cannot beat the best so far would need an upper bound on its later ELBO, and none
    is computable (a birth may raise it by any amount). Deterministic: n, D and the name only."""
    share = n / obs_class(name).component_params(D)
    if share >= AUTO_RATIO:
        return AUTO_LAPS
    return max(AUTO_MIN_LAPS, int(AUTO_LAPS * share / AUTO_RATIO))


def choose_obs(corpus: Corpus, job: JobConfig,
               executor: Executor) -> tuple[str, dict[str, float], ObsModel]:
    """``--obs auto``: fit AUTO_ITEMS of the initialisation sample (the items make_context
    scales the prior to) with memo (its default moves, candidate_laps laps; the run's seed and
    prior options) under each candidate covariance structure; then take one VB step of each
    fit over the whole corpus (local steps on every partition under its q, the global update of
    Eq. 10) and keep the structure whose ELBO per item is highest there: a bound on the
    corpus's log evidence, ln p(X) ≥ L(q), compared across models (with a learned prior,
    type-II maximised). On the sample alone a structure with more parameters per component
    pays more evidence per item than on the corpus (right_k's gauss16: tied led the full
    covariance by 0.26 per item on 2,000 items; one step over the 100,000 puts the full one
    3.4 ahead). Candidates are the models that take every parameter of the job's [prior]
    table. Returns its name, every candidate's corpus bound per item and the prior its fit
    ended with, which the run starts from. Deterministic: the fits run synchronously and the
    corpus summaries are summed in partition order."""
    check_obs(corpus, AUTO)
    m = job.model
    names = [n for n in AUTO_CANDIDATES if set(m.prior) <= set(prior_keys(n))]
    if not names:
        raise BnpmixError(f"--obs auto: no candidate model takes the prior parameters "
                          f"{sorted(m.prior)}; name the model with --obs")
    rng = np.random.default_rng(job.run.seed)
    sample = BatchSource(corpus, job.run.cache_bytes).sample(m.init_sample, rng)
    if sample.shape[0] > AUTO_ITEMS:  # uniformly among the sample's rows
        sample = sample[np.sort(rng.choice(sample.shape[0], AUTO_ITEMS, replace=False))]
    scores, priors = {}, {}
    with tempfile.TemporaryDirectory(prefix="bnpmix-auto-") as tmp:
        ingest_array(np.asarray(sample), Path(tmp) / "sample", partition_rows=len(sample),
                     steps=corpus.manifest.steps or [0.0] * corpus.dim)  # the corpus's columns
        for name in names:
            started = time.perf_counter()
            options = {"algorithm": DEFAULT_ENGINE, "obs": name, "seed": job.run.seed,
                       "scheduler": "synchronous", "alpha0": m.alpha0,
                       "laps": candidate_laps(name, len(sample), sample.shape[1]),
                       "alloc": m.alloc, "learn_prior": m.learn_prior,
                       "dequantise": m.dequantise,
                       "prior": dict(m.prior)}
            summary = fit(Path(tmp) / "sample", Path(tmp) / name, job_config(**options))
            model = read_model(str(Path(tmp) / name))
            scores[name] = corpus_bound(executor, corpus, model)
            priors[name] = model.obs
            print(f"bnpmix: --obs auto: {name} on {len(sample):,} sampled items: K = "
                  f"{summary['K']}, ELBO {summary['elbo_per_item']:.4f} per item; one step over "
                  f"the corpus: {scores[name]:.4f} per item "
                  f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    best = max(names, key=scores.__getitem__)
    print(f"bnpmix: --obs auto chose {best}", file=sys.stderr)
    return best, scores, priors[best]


def corpus_bound(executor: Executor, corpus: Corpus, model: Mixture) -> float:
    """ELBO per item after one VB step of ``model`` over the corpus: q(z) from local steps
    under its globals (Eq. 9), then q(φ) and q(w) from their summed statistics (Eq. 10)."""
    S = corpus_summary(executor, corpus.n_partitions, model.obs, model)
    return Mixture.from_summary(model.obs, model.alloc, S).elbo(S) / corpus.n_items


def write_job(run: RunDir, corpus: Corpus, job: JobConfig) -> None:
    """job.json: the corpus, its partitions and the configuration, what `resume` reads."""
    write_json_atomic(run.path / "job.json", {"corpus": corpus.uri,
                                              "partitions": partitions_of(corpus),
                                              "config": job.to_dict()})


def stopped(run: RunDir, created: bool, exc: BaseException, begun: bool) -> None:
    """A fit that ends early. An error before its engine started (a refused option, prior or
    warm start) leaves no trace; anything else (an interruption, a failure later) leaves the
    run resumable, its claim naming a process that is gone, and the exception says how to
    continue it."""
    if isinstance(exc, Exception) and not begun and not checkpoint.exists(run):
        (run.path / "job.json").unlink(missing_ok=True)
        run.release(created)
    else:
        exc.add_note(f"continue the run with `bnpmix resume {run.path}`")


def on_client(job: JobConfig, client: Any) -> tuple[JobConfig, Any]:
    """The Dask client a run uses (``client``, or this process's current one when the job's
    scheduler is "distributed"; None: the executor the job names) and the job as job.json
    records it: the client's scheduler address in place of the job's scheduler and cluster."""
    client = process_client(job.run.scheduler) if client is None else client
    if client is None:
        return job, None
    return job.replace(run_scheduler=client.scheduler.address, run_cluster=None), client


def partitions_of(corpus: Corpus) -> list[list[str]]:
    """The corpus's partitions as [file, sha256] pairs (what a run was fitted to)."""
    return [[p.file, p.sha256] for p in corpus.manifest.partitions]


def read_job(run: RunDir) -> dict[str, Any]:
    if run.claim_path.exists() and not (run.path / "job.json").exists():
        raise BnpmixError(f"{run.path}: a fit claimed it and stopped before it wrote job.json: "
                          f"nothing to resume (`bnpmix fit ... --out {run.path}` starts again)")
    try:
        job = json.loads((run.path / "job.json").read_text(encoding="utf-8"))
        JobConfig.from_dict(job["config"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise BnpmixError(f"{run.path / 'job.json'}: not a resumable run's job "
                          f"({type(exc).__name__}: {exc})") from None
    return job


def resume(run_dir: str | Path, progress: ProgressHook | None = None,
           on_step: StepHook | None = None, *, client: Any = None) -> dict[str, Any] | None:
    """Continue a run from its last checkpoint (from the start if it has none); None if it had
    already finished. A run whose corpus has changed since it started (appended partitions) is
    refused: resuming it would mix summaries of two different data sets. ``client`` as fit's
    (job.json keeps the address the run started with; summary.json names this one's)."""
    if is_url(run_dir):
        return resume_from_store(resume, str(run_dir), on_step, progress=progress, client=client)
    run = RunDir(run_dir)
    if run.summary_path.exists():
        return None
    job = read_job(run)
    run.reclaim()
    config, client = on_client(JobConfig.from_dict(job["config"]), client)
    corpus = Corpus(job["corpus"])
    if partitions_of(corpus) != job["partitions"]:
        raise BnpmixError(f"{corpus.path}: the corpus changed since {run.path} started "
                          f"({len(job['partitions'])} partitions then, {corpus.n_partitions} "
                          "now); start a new fit")
    ckpt = checkpoint.open_checkpoint(run, config.algorithm)
    if ckpt is None:
        print(f"bnpmix: {run.path}: no checkpoint (the run stopped before its first one); "
              "starting it from the beginning", file=sys.stderr)
    try:
        summary = _run(corpus, run, config, ckpt, progress, on_step, client)
    except BaseException as exc:
        exc.add_note(f"continue the run with `bnpmix resume {run.path}`")
        raise
    finally:
        if ckpt is not None:
            ckpt.close()
    run.release()
    return summary


def _run(corpus: Corpus, run: RunDir, job: JobConfig, ckpt: Any,
         progress: ProgressHook | None, on_step: StepHook | None,
         client: Any, begun: list[bool] | None = None) -> dict[str, Any]:
    """Restart r runs with the streams of seed + r over the same context and prior; each is
    driven to its end with checkpoints (which carry the best finished restart so far).
    ``begun`` is told (appended to) once the first engine has started."""
    r = job.run
    with open_executor(corpus, r.scheduler, r.cluster, r.threads, r.cache_bytes,
                       r.worker_wait, client) as executor:
        where = executor.describe()
        if isinstance(executor, DaskExecutor):
            print(f"bnpmix: running on {where}", file=sys.stderr)
        chosen = None
        if job.model.obs == AUTO and job.run.warm_start:  # the saved model's own, if it fits
            saved = read_model(job.run.warm_start).obs  # (else the engine refuses it)
            job = job.replace(model_obs=saved.name if saved.text == (corpus.kind == "bow")
                              else default_obs_name(corpus))
        elif job.model.obs == AUTO:
            chosen = choose_obs(corpus, job, executor)
        model = job.model if chosen is None else job.replace(model_obs=chosen[0]).model
        ctx = make_context(corpus, job.run, model, executor)
        if chosen is not None:  # the run starts from the prior the chosen model's fit ended at
            ctx.obs, ctx.obs_candidates = chosen[2], chosen[1]
        obs = ctx.obs
        first, best = (0, None) if ckpt is None else checkpoint.restarts(ckpt, ctx)
        runs = 1 if engine_class(job.algorithm).restarts_within else r.restarts
        for restart in range(first, runs):
            ctx.obs, ctx.next_uid = obs, 0
            ctx.rng = Streams.from_seed(r.seed + restart)
            engine = engine_class(job.algorithm)(ctx, job.engine)
            try:
                laps_done = 0
                if ckpt is not None and restart == first:
                    laps_done = checkpoint.restore(engine, ckpt)
                else:
                    engine.start()
                if begun is not None:
                    begun.append(True)
                laps_done = drive(engine, run, laps_done, r.checkpoint_every, progress, on_step,
                                  functools.partial(checkpoint.save, run, restart=restart,
                                                    best=best))
                fitted = engine.result()
            finally:
                engine.close()
            key = next(iter(fitted.objective))
            seen = ([] if best is None else best.objectives) + [fitted.objective[key]]
            if best is None or best.better(fitted):
                best = Best(restart, fitted, engine.trace, laps_done, seen)
            best.objectives = seen
        sizes = write_assignments(run, ctx, best.fitted)
        cache = executor.cache_stats()
    if runs > 1:
        best.fitted.info.update({"restart": f"{best.restart} of {r.restarts}",
                                 "restart_objectives": best.objectives})
    return _publish(run, ctx, job, best.fitted, best.trace, best.laps, where, cache, sizes)


def drive(engine: Engine, run: RunDir, laps_done: int, every: int,
          progress: ProgressHook | None, on_step: StepHook | None,
          save: Callable[[Engine, int], None]) -> int:
    """Step the engine to the end; ``save`` a checkpoint after every lap end and, when
    ``every`` = M > 0, after every M partition visits. Returns the laps done."""
    visits = saved = 0
    while not engine.done:
        step = engine.step()
        visits += step.visits
        laps_done += int(step.lap_end)
        if progress is not None:
            progress(engine)
        if step.lap_end or (every and visits - saved >= every):
            save(engine, laps_done)
            saved = visits
        if on_step is not None:
            on_step(engine, step)
    return laps_done


def _publish(run: RunDir, ctx: FitContext, job: JobConfig, fitted: Fitted, trace: list[dict],
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
    if ctx.obs_candidates:
        summary["obs_candidates"] = ctx.obs_candidates
    prior = prior_entry(ctx, model)
    if prior is not None:
        summary["prior"] = prior
    if ctx.corpus.manifest.vocab is not None:  # the run names its columns (`bnpmix show`)
        run.write_vocab(ctx.corpus.manifest.vocab)
    run.write_summary(summary)
    checkpoint.checkpoint_path(run).unlink(missing_ok=True)
    return summary


def prior_entry(ctx: FitContext, model: Any) -> dict[str, Any] | None:
    """summary.json's ``prior``: whether the run learned its observation prior, and the prior's
    figures (ObsModel.prior_figures) at the start and in the returned model; None for models
    whose prior has no figures (mult) or no observation model of that interface (tdpm)."""
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
