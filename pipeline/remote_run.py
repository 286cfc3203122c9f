"""Run directories in object storage (``bnpmix fit CORPUS --out s3://bucket/runs/r1``).

An object store has no rename and no append, so a run works in a local directory (under the
system's temporary directory) that is mirrored to the URL: job.json, trace.csv and
checkpoint.npz after every checkpoint the engine writes, so that a driver that dies can be
resumed from the store by any machine (``bnpmix resume URL`` downloads them and continues);
and at the end every file of the finished run with summary.json last, the commit: a reader
that finds summary.json finds the whole run. The recorded ``out`` is the URL. A fit into a URL
that holds a run is refused, and on s3:// with boto3 installed a ``.claim`` object created by a
conditional write lets only one of two fits started at the same moment run.
Readers (evaluate, info, show, report, ``bnpmix.load``) work on a downloaded copy.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bnpmix.storage import BnpmixError
from bnpmix.storage.errors import naming
from bnpmix.storage.leases import claim
from bnpmix.storage.objectstore import delete_object, download, exists, is_url, write_object

SUMMARY, JOB, CHECKPOINT, TRACE = "summary.json", "job.json", "checkpoint.npz", "trace.csv"
CHUNKS = "chunks"  # checkpoint.chunks_dir's name
CLAIM = ".claim"  # created once, by the fit that owns the URL


class Mirror:
    """Uploads a local run directory's resumable state to ``url`` whenever its checkpoint
    changes (an ``on_step`` hook), and the finished run at the end."""

    def __init__(self, local: Path, url: str, then: Callable | None = None) -> None:
        self.local, self.url, self.then = local, url.rstrip("/"), then
        self._seen: int | None = None
        # chunk files in the store (written once: never uploaded again); a resumed run's
        # were downloaded from it
        self._chunks = {p.relative_to(local).as_posix() for p in (local / CHUNKS).glob("*")}

    def _put(self, name: str) -> None:
        data = (self.local / name).read_bytes()
        if name in (JOB, SUMMARY):  # the run lives at the URL, not in the local copy
            data = _with_out(json.loads(data), self.url)
        write_object(self.url, name, data)

    def __call__(self, engine: Any, step: Any) -> None:
        ckpt = self.local / CHECKPOINT
        stamp = ckpt.stat().st_mtime_ns if ckpt.exists() else None
        if stamp is not None and stamp != self._seen:
            self._seen = stamp
            chunks = {p.relative_to(self.local).as_posix()
                      for p in (self.local / CHUNKS).glob("*")} - self._chunks
            for name in (JOB, TRACE, *sorted(chunks), CHECKPOINT):  # the checkpoint last: it
                if (self.local / name).exists():                   # names the others
                    self._put(name)
            self._chunks |= chunks
        if self.then is not None:
            self.then(engine, step)

    def publish(self) -> None:
        """Every file of the finished run, summary.json last; then the store's checkpoint and
        chunks leave (the local run removed its own when it published)."""
        files = sorted(p.relative_to(self.local).as_posix() for p in self.local.rglob("*")
                       if p.is_file())
        for name in [f for f in files if f != SUMMARY]:
            self._put(name)
        self._put(SUMMARY)
        for name in (CHECKPOINT, *sorted(self._chunks)):
            delete_object(self.url, name)


def _with_out(obj: dict[str, Any], url: str) -> bytes:
    """job.json or summary.json with the run's place (config.run.out) set to the URL."""
    run = obj.get("config", {}).get("run")
    if isinstance(run, dict):
        run["out"] = url
    return json.dumps(obj, indent=2).encode("utf-8")


def _claim(url: str) -> bool:
    """The run's URL for this fit alone: ``.claim`` created by an S3 conditional write, so of
    two fits started into one s3:// URL at once only one runs. Without boto3, or on another
    store, the check for job.json stands alone (two fits starting at the same moment are then
    not prevented)."""
    if not url.startswith("s3://"):
        return True
    try:
        import boto3  # noqa: F401
    except ImportError:
        return True
    return claim(url, CLAIM)


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    """A local directory for a mirrored run, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bnpmix-run-") as tmp:
        yield Path(tmp) / "run"


def in_store(local: Path, url: str) -> Any:
    """Errors and warnings naming the workspace ``local`` name the run ``url`` (a full disk:
    the workspace's, in the temporary directory); `bnpmix resume` notes name the URL."""
    return naming({str(local): f"{tempfile.gettempdir()}/<the local workspace of {url}>"},
                  notes={str(local): url})


def fit_to_store(fit: Callable[..., dict[str, Any]], corpus_dir: Any, url: str, job: Any,
                 on_step: Callable | None = None, **options: Any) -> dict[str, Any]:
    """``fit`` (pipeline.fit.fit, which calls this for a URL) into a local workspace mirrored
    to ``url``."""
    if exists(url, JOB) or exists(url, SUMMARY) or not _claim(url):
        raise BnpmixError(f"{url}: a run directory exists there (job.json); `bnpmix resume "
                          f"{url}` continues it, or choose another URL")
    with workspace() as local, in_store(local, url):
        mirror = Mirror(local, url, on_step)
        summary = fit(corpus_dir, local, job, on_step=mirror, **options)
        mirror.publish()
    return {**summary, "config": json.loads(_with_out({"config": summary["config"]}, url)
                                            )["config"]}


def resume_from_store(resume: Callable[..., dict[str, Any] | None], url: str,
                      on_step: Callable | None = None, **options: Any) -> dict[str, Any] | None:
    """Download the run at ``url`` and continue it with ``resume`` (pipeline.fit.resume, which
    calls this for a URL), mirrored; None if it had finished."""
    if exists(url, SUMMARY):
        return None
    with workspace() as local, in_store(local, url):
        if JOB not in download(url, local):
            raise BnpmixError(f"{url}: not a run directory (no job.json)")
        mirror = Mirror(local, url, on_step)
        summary = resume(local, on_step=mirror, **options)
        mirror.publish()
    return summary


@contextlib.contextmanager
def local_copy(run_dir: str | Path, names: tuple[str, ...] | None = None
               ) -> Iterator[str | Path]:
    """``run_dir`` itself, or for a URL a downloaded copy of the finished run (only ``names``
    when given: a model needs two files, not the assignments)."""
    if not is_url(run_dir):
        yield run_dir
        return
    if not exists(run_dir, SUMMARY):
        raise BnpmixError(f"{run_dir}: not a finished run directory (no summary.json)")
    with workspace() as local:
        download(run_dir, local, names)
        yield local
