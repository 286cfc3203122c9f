"""Scheduled runs: `bnpmix schedule run JOB.toml`, safe to call from cron at any rate.

Model versions live in the job's ``[schedule] runs`` directory as ``v0001/``, ``v0002/``, ...
(each a complete run directory) with a ``latest`` file naming the newest. A call:

1. takes an exclusive lock on ``runs/.lock`` (flock: released by the kernel even after kill -9);
   a concurrent call says so and exits 0;
2. compares the corpus's partitions (file name and checksum) with those the latest version saw;
   with nothing new it says so and exits 0;
3. fits the whole corpus warm-started from the latest version's model, in ``runs/.work-vNNNN``;
4. publishes: renames the work directory to ``vNNNN`` and atomically rewrites ``latest``.
   Older versions are never touched.

A call killed at any point is finished by the next: a work directory with a checkpoint over the
same partitions is resumed (over changed partitions it is refitted), a finished but unpublished
one is published, and a version published without its ``latest`` pointer gets the pointer.

A ``runs`` that is an s3:// URL follows the same protocol with a lease for the lock
(pipeline/schedule_store.py).

Crontab:   */30 * * * *  bnpmix schedule run /srv/bnpmix/job.toml >> /var/log/bnpmix.log 2>&1
systemd:   a oneshot service running the same command, and a timer with OnCalendar=*:0/30.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

from bnpmix.storage import BnpmixError, Corpus, RunDir
from bnpmix.storage.atomic import fsync_dir, write_json_atomic, write_text_atomic
from bnpmix.storage.objectstore import is_url
from bnpmix.storage.rundir import SEEN, VERSION

from .fit import fit, partitions_of, resume
from .jobfile import Job, load_job
from .runtime import checkpoint
from .schedule_store import scheduled_run_in_store


def latest_version(runs: Path) -> str | None:
    """The version the ``latest`` pointer names (None before the first); a pointer that is not
    one line ``vNNNN`` naming a published version here is an error naming the file."""
    pointer = runs / "latest"
    if not pointer.exists():
        return None
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise BnpmixError(f"{pointer}: unreadable version pointer ({exc})") from None
    if not VERSION.fullmatch(name) or not (runs / name).is_dir():
        raise BnpmixError(f"{pointer}: line 1: expected the name of a published version "
                          f"(vNNNN, a folder in {runs}), not {name[:40]!r}")
    return name


def _seen(version: Path) -> list:
    """The partitions a published version was fitted to."""
    try:
        seen = json.loads((version / SEEN).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BnpmixError(f"{version / SEEN}: unreadable ({exc})") from None
    if not isinstance(seen, list):
        raise BnpmixError(f"{version / SEEN}: expected a list of [file, sha256] pairs")
    return seen


def scheduled_run(job_path: str | Path) -> str:
    """One scheduled call; returns the line to print."""
    job = load_job(job_path, {})
    runs_dir = job.schedule.get("runs") or job.out
    if job.corpus is None or runs_dir is None:
        raise BnpmixError(f"{job_path}: a scheduled job needs `corpus` and `[schedule] runs`")
    if is_url(runs_dir):  # versions, lock and pointer in object storage
        with job.storage_config():
            return scheduled_run_in_store(job, str(runs_dir))
    runs = Path(runs_dir)
    if not runs.is_absolute():
        runs = Path(job_path).parent / runs
    runs.mkdir(parents=True, exist_ok=True)
    with open(runs / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"{runs}: another scheduled run is in progress; nothing done"
        with job.storage_config():
            return _locked_run(job, runs)


def _versions(runs: Path) -> list[str]:
    return sorted(p.name for p in runs.glob("v[0-9][0-9][0-9][0-9]") if p.is_dir())


def _locked_run(job: Job, runs: Path) -> str:
    corpus = Corpus(job.corpus)
    current = partitions_of(corpus)
    versions = _versions(runs)
    if versions and latest_version(runs) != versions[-1]:
        # a call killed between publishing a version and moving the pointer: finish it
        write_text_atomic(runs / "latest", versions[-1] + "\n")
    latest = latest_version(runs)
    seen = _seen(runs / latest) if latest else []
    new = [p for p in current if p not in seen]
    if latest is not None and not new:
        return f"{runs}: no new partitions since {latest}; nothing to do"
    version = f"v{len(versions) + 1:04d}"
    work = runs / f".work-{version}"
    summary = _fit_or_resume(job, corpus, current, work, runs / latest if latest else None)
    job_json = json.loads((work / "job.json").read_text(encoding="utf-8"))
    write_json_atomic(work / SEEN, job_json["partitions"])
    os.replace(work, runs / version)
    fsync_dir(runs)
    write_text_atomic(runs / "latest", version + "\n")
    return (f"{runs}: published {version} (K={summary['K']}) from {len(current)} partitions, "
            f"{len(new)} new since {latest or 'the start'}")


def _fit_or_resume(job: Job, corpus: Corpus, current: list, work: Path,
                   latest: Path | None) -> dict:
    """The work directory's finished summary, its resumed run (same partitions), or a new fit
    warm-started from the latest version."""
    run = RunDir(work)
    if run.summary_path.exists():  # finished, then killed before it was published
        return run.load_summary()
    if checkpoint.exists(run) and (work / "job.json").exists():
        started = json.loads((work / "job.json").read_text(encoding="utf-8"))["partitions"]
        if started == current:
            return resume(work)
    shutil.rmtree(work, ignore_errors=True)
    config = job.config if latest is None else job.config.replace(run_warm_start=str(latest))
    return fit(corpus.path, work, config)
