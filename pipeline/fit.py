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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from bnpmix.algorithms.obs import AUTO_CANDIDATES
from bnpmix.storage import BnpmixError, Corpus, RunDir
from bnpmix.storage.atomic import write_json_atomic
from bnpmix.storage.objectstore import is_url

from . import auto, stops
from .auto import choose_obs
from .clusters import process_client
from .config import JobConfig, resolve
from .publish import publish, write_assignments
from .remote_run import fit_to_store, resume_from_store
from .runtime import checkpoint, memlimit
from .runtime.context import (
    AUTO,
    FitContext,
    Streams,
    default_obs_name,
    make_context,
)
from .runtime.engine import Best, Engine, Step, engine_class
from .runtime.executor_base import Executor
from .runtime.executors import DaskExecutor, open_executor
from .runtime.models import read_model
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


def fit(corpus_dir: str | Path | Corpus, out: str | Path, job: JobConfig | None = None, *,
        client: Any = None, progress: ProgressHook | None = None,
        on_step: StepHook | None = None, started: float | None = None) -> dict[str, Any]:
    """Fit a model to a corpus and write the run directory; returns summary.json's content.
    ``corpus_dir``: a corpus's path, or a Corpus (one held in memory, storage.memory: the run
    then records no corpus and cannot be resumed).
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
    corpus = corpus_dir if isinstance(corpus_dir, Corpus) else Corpus(corpus_dir)
    run = RunDir(out)
    # job.json must not depend on the working directory, nor on defaults that follow the data
    absolute = {f"run_{name}": str(Path(value).resolve()) for name in ("warm_start", "cluster")
                if (value := getattr(job.run, name)) and not is_url(value)}
    job = job.replace(run_corpus=corpus.uri if corpus.kept else None,
                      run_out=str(run.path.resolve()),
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
    """job.json: the corpus, its partitions and the configuration, what `resume` reads (a
    corpus held in memory is not kept: no corpus, nothing to resume)."""
    kept = {"corpus": corpus.uri, "partitions": partitions_of(corpus)} if corpus.kept else {}
    write_json_atomic(run.path / "job.json", {**kept, "config": job.to_dict()})


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
    if "corpus" not in job:
        raise BnpmixError(f"{run.path}: fitted to data held in memory, which is not kept: "
                          "nothing to resume")
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


class Hooks(NamedTuple):
    """What a run tells its caller: ``progress`` after every step, ``on_step`` after every step
    and its checkpoint, ``begun`` (appended to) once the first engine has started."""

    progress: ProgressHook | None
    on_step: StepHook | None
    begun: list[bool] | None


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
        note_memory(corpus, job, executor, where, threads)
        job, chosen = _obs_chosen(corpus, job, ckpt, executor)
        ctx = _context(corpus, run, job, chosen, executor, started)
        best = _restarts(ctx, run, job, ckpt, chosen, Hooks(progress, on_step, begun))
        sizes = write_assignments(run, ctx, best.fitted)
        cache = executor.cache_stats()
    if _runs(job) > 1:
        best.fitted.info.update({"restart": f"{best.restart} of {r.restarts}",
                                 "restart_objectives": best.objectives})
    return publish(run, ctx, job, best.fitted, best.trace, best.laps, where, cache, sizes)


def note_memory(corpus: Corpus, job: JobConfig, executor: Executor, where: str,
                threads: int) -> None:
    """Log where the run runs (``where``: a Dask cluster) and, where memory may be short, the
    driver's estimated need (memory_need) and the threads it leaves."""
    r = job.run
    dask = isinstance(executor, DaskExecutor)
    if dask:
        log.info("running on %s", where)
    text, need, limit = memory_need(corpus, job, executor.parallelism, local=not dask)
    fewer = r.threads is None and threads < DEFAULT_THREADS and r.scheduler == "threads"
    if fewer:
        text += (f"; so visits run on {threads} thread, not {DEFAULT_THREADS} (--threads; "
                 "the result is the same)")
    if fewer or 2 * need > limit:  # said where memory may be short, not on every run
        log.info("%s", text)
    if need > limit:
        log.warning("that is more than this process may use; lower the options named, or "
                    "ingest smaller partitions (ingest --partition-rows)")


def _obs_chosen(corpus: Corpus, job: JobConfig, ckpt: Any,
                executor: Executor) -> tuple[JobConfig, auto.Choice | None]:
    """--obs auto resolved: a warm start's own model (if it fits the corpus), the choice a
    checkpoint recorded, or a race (choose_obs); the job, and the race's Choice if any."""
    if job.model.obs == AUTO and job.run.warm_start:  # the saved model's own, if it fits
        saved = read_model(job.run.warm_start).obs  # (else the engine refuses it)
        return job.replace(model_obs=saved.name if saved.text == (corpus.kind == "bow")
                           else default_obs_name(corpus)), None
    if job.model.obs == AUTO and ckpt is not None:  # chosen before the checkpoint
        return job, auto.from_checkpoint(ckpt.meta)
    if job.model.obs == AUTO:
        return job, choose_obs(corpus, job, executor)
    return job, None


def _context(corpus: Corpus, run: RunDir, job: JobConfig, chosen: auto.Choice | None,
             executor: Executor, started: float) -> FitContext:
    """The run's context: a new one, or the race winner's (continued), with the run's chunks
    directory, clock and --obs auto's notes and prior."""
    model = job.model if chosen is None else job.replace(model_obs=chosen.name).model
    handed = chosen.engine if chosen is not None else None  # the race's winner, continued
    ctx = make_context(corpus, job.run, model, executor) if handed is None else handed.ctx
    ctx.chunks = checkpoint.chunks_dir(run)
    ctx.started = started  # wall_seconds: the whole command, --obs auto's race included
    if chosen is not None:
        ctx.obs_auto = chosen.notes() if chosen.scores else None  # (an older checkpoint)
        if chosen.prior is not None:  # another engine starts from the winner's prior
            ctx.obs = chosen.prior
    return ctx


def _runs(job: JobConfig) -> int:
    """The restarts a run makes (one for an engine that restarts within itself)."""
    return 1 if engine_class(job.algorithm).restarts_within else job.run.restarts


def _restarts(ctx: FitContext, run: RunDir, job: JobConfig, ckpt: Any,
              chosen: auto.Choice | None, hooks: Hooks) -> Best:
    """Each restart from ``ckpt``'s (or the first) on, each from the run's initial prior (the
    race winner's context holds the prior it has learned so far); the best finished one."""
    handed = chosen.engine if chosen is not None else None
    obs = ctx.obs if handed is None else ctx.prior_base
    first, best = (0, None) if ckpt is None else checkpoint.restarts(ckpt, ctx)
    for restart in range(first, _runs(job)):
        save = functools.partial(checkpoint.save, run, restart=restart, best=best,
                                 auto=None if chosen is None else chosen.saved())
        if handed is not None and restart == first:
            engine, laps_done = handed, chosen.laps
        else:
            ctx.obs, ctx.next_uid = obs, 0
            ctx.rng = Streams.from_seed(job.run.seed + restart)
            engine, laps_done = engine_class(job.algorithm)(ctx, job.engine), 0
        try:
            if engine is handed:
                save(engine, laps_done)  # a resume continues it, not the race
            elif ckpt is not None and restart == first:
                laps_done = checkpoint.restore(engine, ckpt)
            else:  # the race's winner on a sample, for the first restart (others start anew)
                ctx.start_model = None if chosen is None or restart else chosen.model
                engine.start()
            laps_done = _drive_started(engine, ctx, run, job, laps_done, save, hooks)
            fitted = engine.result()
        finally:
            engine.close()
        seen = ([] if best is None else best.objectives) + [next(iter(fitted.objective.values()))]
        if best is None or best.better(fitted):
            best = Best(restart, fitted, engine.trace, laps_done, seen)
        best.objectives = seen
    return best


def _drive_started(engine: Engine, ctx: FitContext, run: RunDir, job: JobConfig,
                   laps_done: int, save: Callable[[Engine, int], None], hooks: Hooks) -> int:
    """A started (or restored) engine driven to its end; the driver's samples let go first."""
    ctx.source.release()  # the driver's samples are drawn
    if hooks.begun is not None:
        hooks.begun.append(True)
    return drive(engine, run, laps_done, job.run.checkpoint_every, hooks.progress,
                 hooks.on_step, save)


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
