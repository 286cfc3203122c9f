"""Appending partitions to an existing corpus (for scheduled runs that pick up new data).

The new rows are ingested into a staged corpus first (all checks apply); then its partition files
are renamed into the corpus under the next partition numbers, and the manifest is replaced
atomically last. Readers see the old manifest, or the new one with every new file in place.
Appenders take an exclusive lock on ``CORPUS/.lock`` (flock: the kernel releases it when the
holder dies) from reading the manifest to publishing the new one, so concurrent appends into one
corpus are serialised and none is lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from .atomic import fsync_dir, write_json_atomic
from .corpus import MANIFEST, Corpus, PartitionInfo, partition_name
from .errors import BnpmixError


def check_compatible(corpus: Corpus, new: Corpus) -> None:
    """Same kind, dimension, dtype, optional columns and vocabulary, or a clear error."""
    a, b = corpus.manifest, new.manifest
    for field in ("kind", "dim", "dtype", "columns", "vocab"):
        if getattr(a, field) != getattr(b, field):
            raise BnpmixError(f"{corpus.path}: cannot append: the new data's {field} differs "
                              f"from the corpus's")


LOCK = ".lock"


@contextlib.contextmanager
def corpus_lock(corpus: str | Path, timeout: float = 600.0) -> Iterator[None]:
    """Hold the corpus's exclusive append lock, waiting for another holder at most ``timeout``
    seconds."""
    path = Path(corpus) / LOCK
    with open(path, "a") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise BnpmixError(f"{path}: another append has held the corpus lock for "
                                      f"more than {timeout:g} s") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def append_corpus(target: str | Path, staged: str | Path) -> int:
    """Move the partitions of the staged corpus into ``target`` under its append lock; returns
    how many were added."""
    check_compatible(Corpus(target), Corpus(staged))  # refused before the lock file is made
    with corpus_lock(target):
        return _append_locked(target, staged)


def _append_locked(target: str | Path, staged: str | Path) -> int:
    corpus, new = Corpus(target), Corpus(staged)
    check_compatible(corpus, new)
    start = corpus.n_partitions
    added = []
    for j, info in enumerate(new.manifest.partitions):
        name = partition_name(start + j)
        # a file beyond the manifest is debris of an append killed before its manifest was
        # written (the manifest is what defines the corpus): it is replaced
        os.replace(new.path / info.file, corpus.path / name)
        added.append(PartitionInfo(name, info.rows, info.bytes, info.sha256, info.nnz))
    fsync_dir(corpus.path)
    manifest = json.loads((corpus.path / MANIFEST).read_text(encoding="utf-8"))
    corpus.manifest.partitions.extend(added)
    manifest.update(corpus.manifest.to_json())
    write_json_atomic(corpus.path / MANIFEST, manifest)
    shutil.rmtree(new.path, ignore_errors=True)
    return len(added)
