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
import logging
import shutil
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bnpmix.algorithms.obs import AUTO_CANDIDATES, ObsModel
from bnpmix.storage import BnpmixError, Corpus, RunDir
from bnpmix.storage.atomic import write_json_atomic
from bnpmix.storage.errors import FitWarning
from bnpmix.storage.objectstore import is_url

from . import auto, stops
from .auto import choose_obs
from .clusters import process_client
from .config import JobConfig, resolve
from .declared import heldout_kind
from .labels import label_order, labels_of
from .remote_run import fit_to_store, resume_from_store
from .runtime import checkpoint, memlimit
from .runtime.context import (
    AUTO,
    FitContext,
    Streams,
    default_obs_name,
    make_context,
)
from .runtime.engine import Best, Engine, Fitted, Step, engine_class, engine_names
from .runtime.executors import DaskExecutor, open_executor
from .runtime.models import read_model, write_model
from .settings import setting

__all__ = ["AUTO_CANDIDATES", "choose_obs", "fit", "job_config", "resume"]

ProgressHook = Callable[[Engine], None]
StepHook = Callable[[Engine, Step], None]  # after every step and its checkpoint (tests)

# notes to whoever runs the fit (a takeover, the executor, memory); the command line shows them
# as `bnpmix: TEXT` (console.py), a program configures logging as it likes
log = logging.getLogger(__name__)


def job_config(**options: Any) -> JobConfig:
    """A configuration from option names as in job files (``K=2, laps=5, moves="birth,merge"``),
    validated by the same table as the command line."""
    return resolve(options, "options")


# local threads unless --threads says otherwise or memory holds fewer visits at once
DEFAULT_THREADS = 2


def fit(corpus_dir: str | Path, out: str | Path, job: JobConfig | None = None, *,
        client: Any = None, progress: ProgressHook | None = None,
        on_step: StepHook | None = None, started: float | None = None) -> dict[str, Any]:
    """Fit a model to a corpus and write the run directory; returns summary.json's content.
    ``started``: the time.perf_counter() the command began at (default: now), from which
    summary.json's wall_seconds count, corpus checks and --obs auto's race included.
    ``client``: a distributed.Client whose cluster runs the partition tasks in place of the
    executor the job names (its workers must reach the corpus); it is neither closed nor
    changed, and job.json records its scheduler's address. The job's scheduler
    ``"distributed"`` asks for this process's current Client the same way."""
    started = time.perf_counter() if started is None else started
    if is_url(out):  # a run directory in object storage: a mirrored local workspace
        return fit_to_store(functools.partial(fit, started=started), corpus_dir, str(out), job,
                            on_step, client=client, progress=progress)
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
        log.info("%s: taking it over from %s, which is gone (it stopped before its first "
                 "checkpoint)", run.path, claimed.replaced)
    begun: list[bool] = []  # set once the engine has started: a failure then leaves a run
    try:
        write_job(run, corpus, job)  # with the claim, before any work: always resumable
        summary = _run(corpus, run, job, None, progress, on_step, client, started, begun)
    except BaseException as exc:
        stopped(run, claimed.created, exc, bool(begun))
        raise
    run.release()
    return summary


def mixes_obs(job: JobConfig) -> bool:
    return engine_class(job.algorithm).mixes_obs


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
    (job.json keeps the address the run started with; summary.json names this one's). The
    wall seconds add this command's whole time to the time the run had taken by its
    checkpoint."""
    started = time.perf_counter()
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
        log.info("%s: no checkpoint (the run stopped before its first one); starting it "
                 "from the beginning", run.path)
    try:
        summary = _run(corpus, run, config, ckpt, progress, on_step, client, started)
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
         client: Any, started: float, begun: list[bool] | None = None) -> dict[str, Any]:
    """Restart r runs with the streams of seed + r over the same context and prior; each is
    driven to its end with checkpoints (which carry the best finished restart so far). The
    run's clock counts from ``started``.
    ``begun`` is told (appended to) once the first engine has started."""
    r = job.run
    threads = r.threads or memlimit.fitting_threads(
        DEFAULT_THREADS, lambda t: memory_need(corpus, job, t, local=True)[1])
    with open_executor(corpus, r.scheduler, r.cluster, threads, r.cache_bytes,
                       r.worker_wait, client) as executor:
        where = executor.describe()
        if isinstance(executor, DaskExecutor):
            log.info("running on %s", where)
        text, need, limit = memory_need(corpus, job, executor.parallelism,
                                        local=not isinstance(executor, DaskExecutor))
        fewer = r.threads is None and threads < DEFAULT_THREADS and r.scheduler == "threads"
        if fewer:
            text += (f"; so visits run on {threads} thread, not {DEFAULT_THREADS} (--threads; "
                     "the result is the same)")
        if fewer or 2 * need > limit:  # said where memory may be short, not on every run
            log.info("%s", text)
        if need > limit:
            log.warning("that is more than this process may use; lower the options named, or "
                        "ingest smaller partitions (ingest --partition-rows)")
        chosen: auto.Choice | None = None
        if job.model.obs == AUTO and job.run.warm_start:  # the saved model's own, if it fits
            saved = read_model(job.run.warm_start).obs  # (else the engine refuses it)
            job = job.replace(model_obs=saved.name if saved.text == (corpus.kind == "bow")
                              else default_obs_name(corpus))
        elif job.model.obs == AUTO and ckpt is not None:  # chosen before the checkpoint
            chosen = auto.from_checkpoint(ckpt.meta)
        elif job.model.obs == AUTO:
            chosen = choose_obs(corpus, job, executor)
        model = job.model if chosen is None else job.replace(model_obs=chosen.name).model
        handed = chosen.engine if chosen is not None else None  # the race's winner, continued
        ctx = make_context(corpus, job.run, model, executor) if handed is None else handed.ctx
        ctx.chunks = checkpoint.chunks_dir(run)
        ctx.started = started  # wall_seconds: the whole command, --obs auto's race included
        if chosen is not None:
            ctx.obs_auto = chosen.notes() if chosen.scores else None  # (an older checkpoint)
            if chosen.prior is not None:  # another engine starts from the winner's prior
                ctx.obs = chosen.prior
        # each restart starts from the run's initial prior (the handed engine's context holds
        # the prior it has learned so far)
        obs = ctx.obs if handed is None else ctx.prior_base
        first, best = (0, None) if ckpt is None else checkpoint.restarts(ckpt, ctx)
        runs = 1 if engine_class(job.algorithm).restarts_within else r.restarts
        for restart in range(first, runs):
            save = functools.partial(checkpoint.save, run, restart=restart, best=best,
                                     auto=None if chosen is None else chosen.saved())
            if handed is not None and restart == first:
                engine, laps_done = handed, chosen.laps
            else:
                ctx.obs, ctx.next_uid = obs, 0
                ctx.rng = Streams.from_seed(r.seed + restart)
                engine = engine_class(job.algorithm)(ctx, job.engine)
            try:
                if engine is handed:
                    save(engine, laps_done)  # a resume continues it, not the race
                elif ckpt is not None and restart == first:
                    laps_done = checkpoint.restore(engine, ckpt)
                else:
                    laps_done = 0
                    # the race's winner on a sample, for the first restart (others start anew)
                    ctx.start_model = None if chosen is None or restart else chosen.model
                    engine.start()
                ctx.source.release()  # the driver's samples are drawn
                if begun is not None:
                    begun.append(True)
                laps_done = drive(engine, run, laps_done, r.checkpoint_every, progress, on_step,
                                  save)
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


def memory_need(corpus: Corpus, job: JobConfig, threads: int, local: bool
                ) -> tuple[str, int, int]:
    """memlimit.estimate for this job's driver, with ``threads`` visits at once if ``local``."""
    r = job.run
    return memlimit.estimate(corpus, threads, setting("cache-bytes", r.cache_bytes),
                             setting("summary-bytes", r.summary_bytes), local=local,
                             birth_rows=birth_rows(job), wave=r.wave or 1)


def birth_rows(job: JobConfig) -> int:
    """The rows of one birth's collection (Engine.birth_rows; 0 without births): the job's
    engine's, or under --obs auto the defaults of the engine that races (auto.racer) when the
    job's does not race."""
    cls = engine_class(job.algorithm)
    if cls.races or job.model.obs != AUTO:
        return cls.birth_rows(job.engine)
    racing = auto.racer(job)
    return racing.birth_rows(racing.Config())


def drive(engine: Engine, run: RunDir, laps_done: int, every: int,
          progress: ProgressHook | None, on_step: StepHook | None,
          save: Callable[[Engine, int], None]) -> int:
    """Step the engine to the end; ``save`` a checkpoint after a lap end once the Dask setting
    bnpmix.checkpoint-interval has passed since the last, and when ``every`` = M > 0 after
    every lap end and every M partition visits. Returns the laps done."""
    visits = saved = 0
    interval, last = setting("checkpoint-interval"), time.monotonic()
    while not engine.done:
        step = engine.step()
        visits += step.visits
        laps_done += int(step.lap_end)
        if progress is not None:
            progress(engine)
        due = step.lap_end and (every or time.monotonic() - last >= interval)
        if due or (every and visits - saved >= every):
            save(engine, laps_done)
            saved, last = visits, time.monotonic()
        if on_step is not None:
            on_step(engine, step)
        stops.raise_pending()  # a signal's stop that code it landed in swallowed
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
