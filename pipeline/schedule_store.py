"""Scheduled runs whose ``[schedule] runs`` is an ``s3://`` URL: schedule.py's protocol on an
object store, which has no flock and no rename.

1. the lock is a lease on ``RUNS/.lock`` taken by an S3 conditional write (storage.leases), for
   Dask config ``bnpmix.schedule-lease``; a concurrent call says so and exits 0;
2. versions are run directories ``RUNS/vNNNN/`` written as any run at a URL
   (pipeline.remote_run: a mirrored local workspace, summary.json last); a version is finished
   when it has summary.json, and seen partitions are its ``partitions.json``;
3. publishing writes ``vNNNN/partitions.json`` and then the ``latest`` object naming it.

A call killed at any point is finished by the next (once the lease has expired): an unfinished
version with a checkpoint over the same partitions is resumed from the store, otherwise its
objects are deleted and it is fitted again; a finished version without partitions.json or not
yet named by ``latest`` is published.
"""

from __future__ import annotations

import json

from bnpmix.storage import BnpmixError, Corpus
from bnpmix.storage.leases import acquire, release
from bnpmix.storage.objectstore import (
    delete_object,
    exists,
    list_objects,
    read_object,
    write_object,
)
from bnpmix.storage.rundir import SEEN, VERSION

from .fit import fit, partitions_of, resume
from .jobfile import Job
from .settings import setting


def scheduled_run_in_store(job: Job, runs: str) -> str:
    """One scheduled call against ``runs`` (an s3:// URL); the line to print."""
    runs = runs.rstrip("/")
    lease = acquire(runs, ".lock", setting("schedule-lease"))
    if lease is None:
        return f"{runs}: another scheduled run is in progress; nothing done"
    try:
        return _locked_run(job, runs)
    finally:
        release(lease)


def _versions(runs: str) -> dict[str, set[str]]:
    """Each version under ``runs`` and the names of its objects."""
    found: dict[str, set[str]] = {}
    for name in list_objects(runs):
        version, _, rest = name.partition("/")
        if VERSION.fullmatch(version) and rest:
            found.setdefault(version, set()).add(rest)
    return found


def _latest(runs: str) -> str | None:
    """The version the ``latest`` object names (None before the first)."""
    if not exists(runs, "latest"):
        return None
    name = read_object(runs, "latest").decode("utf-8", "replace").strip()
    if not VERSION.fullmatch(name):
        raise BnpmixError(f"{runs}/latest: expected the name of a published version (vNNNN), "
                          f"not {name[:40]!r}")
    return name


def _publish(runs: str, version: str) -> None:
    """partitions.json from the version's job.json, then ``latest``: the version is out."""
    seen = json.loads(read_object(f"{runs}/{version}", "job.json"))["partitions"]
    write_object(f"{runs}/{version}", SEEN, json.dumps(seen).encode())
    write_object(runs, "latest", f"{version}\n".encode())


def _locked_run(job: Job, runs: str) -> str:
    corpus = Corpus(job.corpus)
    current = partitions_of(corpus)
    versions = _versions(runs)
    finished = sorted(v for v, names in versions.items() if "summary.json" in names)
    if finished and (SEEN not in versions[finished[-1]] or _latest(runs) != finished[-1]):
        _publish(runs, finished[-1])  # a call killed after its fit: finish publishing
    latest = _latest(runs)
    seen = json.loads(read_object(f"{runs}/{latest}", SEEN)) if latest else []
    new = [p for p in current if p not in seen]
    if latest is not None and not new:
        return f"{runs}: no new partitions since {latest}; nothing to do"
    pending = sorted(set(versions) - set(finished))
    version = pending[-1] if pending else f"v{len(finished) + 1:04d}"
    summary = _fit_or_resume(job, corpus, current, runs, version,
                             versions.get(version, set()), latest)
    _publish(runs, version)
    return (f"{runs}: published {version} (K={summary['K']}) from {len(current)} partitions, "
            f"{len(new)} new since {latest or 'the start'}")


def _fit_or_resume(job: Job, corpus: Corpus, current: list, runs: str, version: str,
                   names: set[str], latest: str | None) -> dict:
    """The version resumed from its checkpoint (same partitions), or fitted anew, warm-started
    from the latest version's model (read from the store)."""
    target = f"{runs}/{version}"
    if "checkpoint.npz" in names and "job.json" in names:
        started = json.loads(read_object(target, "job.json"))["partitions"]
        if started == current:
            return resume(target)
    for name in names:  # a version killed before a usable checkpoint: start it again
        delete_object(target, name)
    config = job.config
    if latest is not None:
        config = config.replace(run_warm_start=f"{runs}/{latest}")
    return fit(corpus.uri, target, config)
