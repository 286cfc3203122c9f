"""Scheduled runs: `bnpmix schedule run JOB.toml`, safe to call from cron at any rate.

Model versions live in the job's ``[schedule] runs`` directory as ``v0001/``, ``v0002/``, ...
(each a complete run directory) with a ``latest`` file naming the newest. A call:

1. takes an exclusive lock on ``runs/.lock`` (flock: released by the kernel even after kill -9);
   a concurrent call says so and exits 0;
2. compares the corpus's partitions (file name and checksum) with those the latest version saw;
   with nothing new it says so and exits 0;
3. fits the whole corpus warm-started from the latest version's model, in ``runs/.work-vNNNN``
   (a call that was killed mid-fit is resumed from its checkpoint by the next call);
4. publishes: renames the work directory to ``vNNNN`` and atomically rewrites ``latest``.
   Older versions are never touched.

Crontab:   */30 * * * *  bnpmix schedule run /srv/bnpmix/job.toml >> /var/log/bnpmix.log 2>&1
systemd:   a oneshot service running the same command, and a timer with OnCalendar=*:0/30.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path

from bnpmix.storage import BnpmixError, Corpus
from bnpmix.storage.atomic import fsync_dir, write_json_atomic, write_text_atomic

from .checkpoint import checkpoint_path
from .fit import fit, resume
from .jobfile import read_job, resolve

SEEN = "partitions.json"


def latest_version(runs: Path) -> str | None:
    pointer = runs / "latest"
    return pointer.read_text(encoding="utf-8").strip() if pointer.exists() else None


def scheduled_run(job_path: str | Path) -> str:
    """One scheduled call; returns the line to print."""
    job = resolve(read_job(job_path), {}, str(job_path))
    runs_dir = job.schedule.get("runs") or job.out
    if job.corpus is None or runs_dir is None:
        raise BnpmixError(f"{job_path}: a scheduled job needs `corpus` and `[schedule] runs`")
    runs = Path(runs_dir)
    if not runs.is_absolute():
        runs = Path(job_path).parent / runs
    runs.mkdir(parents=True, exist_ok=True)
    with open(runs / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"{runs}: another scheduled run is in progress; nothing done"
        return _locked_run(job, runs)


def _locked_run(job, runs: Path) -> str:
    corpus = Corpus(job.corpus)
    current = [[p.file, p.sha256] for p in corpus.manifest.partitions]
    latest = latest_version(runs)
    seen: list = []
    if latest is not None:
        seen = json.loads((runs / latest / SEEN).read_text(encoding="utf-8"))
        new = [p for p in current if p not in seen]
        if not new:
            return f"{runs}: no new partitions since {latest}; nothing to do"
    else:
        new = current
    number = 1 + max([int(p.name[1:]) for p in runs.glob("v[0-9]*") if p.is_dir()], default=0)
    version = f"v{number:04d}"
    work = runs / f".work-{version}"
    if work.exists() and checkpoint_path_exists(work):
        summary = resume(work)
    else:
        shutil.rmtree(work, ignore_errors=True)
        cfg = job.cfg
        if latest is not None:
            cfg.warm_start = str(runs / latest)
        summary = fit(corpus.path, work, cfg)
    write_json_atomic(work / SEEN, current)
    os.replace(work, runs / version)
    fsync_dir(runs)
    write_text_atomic(runs / "latest", version + "\n")
    K = summary["K"] if summary else "?"
    return (f"{runs}: published {version} (K={K}) from {len(current)} partitions, "
            f"{len(new)} new since {latest or 'the start'}")


def checkpoint_path_exists(work: Path) -> bool:
    from bnpmix.storage import RunDir

    return checkpoint_path(RunDir(work)).exists() and (work / "job.json").exists()
