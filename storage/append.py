"""Appending partitions to an existing corpus (for scheduled runs that pick up new data).

The new rows are ingested into a staged corpus first (all checks apply); then its partition files
are renamed into the corpus under the next partition numbers, and the manifest is replaced
atomically last. Readers see the old manifest, or the new one with every new file in place.
Appenders take an exclusive lock on ``CORPUS/.lock`` (flock: the kernel releases it when the
holder dies) from reading the manifest to publishing the new one, so concurrent appends into one
corpus are serialised and none is lost.

A sequence (the optional ``sequence`` column) is kept whole in one partition, so new rows may only
start new sequences: an append whose sequence ids are already in the corpus is refused.
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
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .atomic import fsync_dir, write_json_atomic
from .corpus import (
    MANIFEST,
    Corpus,
    Manifest,
    PartitionInfo,
    combined_steps,
    partition_name,
)
from .errors import BnpmixError, CorruptPartitionError, DataError


def check_compatible(corpus: Corpus, new: Corpus) -> None:
    """Same kind, dimension, dtype, optional columns and vocabulary, or a clear error."""
    a, b = corpus.manifest, new.manifest
    for field in ("kind", "dim", "dtype", "columns", "vocab"):
        if getattr(a, field) != getattr(b, field):
            shown = "" if field == "vocab" else f" ({_shown(b, field)} vs {_shown(a, field)})"
            raise BnpmixError(f"{corpus.path}: cannot append: the new data's {field} differs "
                              f"from the corpus's{shown}")


def _shown(manifest: Manifest, field: str) -> str:
    value = getattr(manifest, field)
    return (", ".join(value) or "none") if field == "columns" else str(value)


def partition_sequences(corpus: Corpus, index: int) -> np.ndarray:
    """The ``sequence`` column of one partition (int64). Reads only that column, not the whole
    file, so the partition's checksum is not verified here (every read of its data does)."""
    path = corpus.partition_file(index)
    try:
        column = pq.read_table(path, columns=["sequence"]).column(0)
    except (OSError, KeyError, pa.ArrowException) as exc:
        raise CorruptPartitionError(f"{path}: cannot read its sequence column ({exc})") from None
    return column.to_numpy().astype(np.int64, copy=False)


def sequence_ids(corpus: Corpus) -> np.ndarray:
    """The distinct sequence ids of a corpus with a ``sequence`` column, in order of first
    appearance (reads the whole column: meant for the new, staged data)."""
    parts = [partition_sequences(corpus, i) for i in range(corpus.n_partitions)]
    ids = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    unique, first = np.unique(ids, return_index=True)
    return unique[np.argsort(first, kind="stable")]


def check_new_sequences(corpus: Corpus, new: Corpus, source: str | Path | None = None) -> None:
    """With a ``sequence`` column, every sequence of the new data must be new to the corpus
    (a sequence is kept whole in one partition): else a DataError naming the source (the staged
    corpus when not given) and the clashing ids, in the new data's order. The corpus is read
    one partition's sequence column at a time."""
    if "sequence" not in corpus.manifest.columns or "sequence" not in new.manifest.columns:
        return
    new_ids = sequence_ids(new)
    known = np.zeros(len(new_ids), dtype=bool)
    for i in range(corpus.n_partitions):
        known |= np.isin(new_ids, partition_sequences(corpus, i))
    clash = new_ids[known]
    if clash.size:
        listed = ", ".join(str(int(i)) for i in clash[:5])
        more = f" and {clash.size - 5} more" if clash.size > 5 else ""
        raise DataError(source if source is not None else new.path,
                        f"cannot append to {corpus.path}: sequence id{'s' * (clash.size > 1)} "
                        f"{listed}{more} already in the corpus; a sequence is kept whole in "
                        "one partition, so appended rows must start new sequences (or "
                        "re-ingest the whole data into a new corpus); nothing was changed")


LOCK = ".lock"


@contextlib.contextmanager
def corpus_lock(corpus: str | Path, timeout: float = 600.0) -> Iterator[None]:
    """Hold the corpus's exclusive append lock, waiting for another holder at most ``timeout``
    seconds."""
    path = Path(corpus) / LOCK
    deadline = time.monotonic() + timeout
    while True:
        with open(path, "a") as fh:
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise BnpmixError(f"{path}: another writer has held the corpus lock "
                                          f"for more than {timeout:g} s") from None
                    time.sleep(0.05)
            if not _same_file(fh, path):  # the corpus was replaced (--overwrite) meanwhile:
                continue  # lock the new one's
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
            return


def _same_file(fh: Any, path: Path) -> bool:
    """Whether the open file ``fh`` is still the file at ``path``."""
    try:
        return os.fstat(fh.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def append_corpus(target: str | Path, staged: str | Path, source: str | Path | None = None) -> int:
    """Move the partitions of the staged corpus into ``target`` under its append lock; returns
    how many were added. ``source`` (the file the staged corpus came from) is named in errors."""
    check_compatible(Corpus(target), Corpus(staged))  # refused before the lock file is made
    with corpus_lock(target):
        return _append_locked(target, staged, source)


def _append_locked(target: str | Path, staged: str | Path, source: str | Path | None) -> int:
    corpus, new = Corpus(target), Corpus(staged)
    check_compatible(corpus, new)
    check_new_sequences(corpus, new, source)  # under the lock: no concurrent append can race it
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
    corpus.manifest.steps = combined_steps(corpus.manifest.steps, new.manifest.steps)
    if corpus.manifest.steps is None:  # an older corpus's manifest: still without the field
        manifest.pop("steps", None)
    manifest.update(corpus.manifest.to_json())
    write_json_atomic(corpus.path / MANIFEST, manifest)
    shutil.rmtree(new.path, ignore_errors=True)
    return len(added)
