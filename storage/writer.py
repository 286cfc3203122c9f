"""Writing corpora: partitions go into a staged directory that is renamed into place at the end."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .append import corpus_lock
from .atomic import staged_directory, write_json_atomic, write_text_atomic
from .corpus import (
    MANIFEST,
    VOCAB_FILE,
    Corpus,
    Manifest,
    bow_table,
    dense_table,
    partition_name,
    write_partition,
)
from .errors import BnpmixError, local_path

DOCUMENTS_PER_PARTITION = 10_000  # a bag-of-words partition's documents by default
VALUES_PER_PARTITION = 1_250_000  # a dense partition's rows x D by default (10 MB of float64)


def partition_rows(given: int | None, dim: int | None) -> int:
    """Rows per partition: ``given``, else DOCUMENTS_PER_PARTITION for documents (``dim`` None),
    else VALUES_PER_PARTITION / dim rounded up to a multiple of 1,000 (50,000 rows at D = 25,
    10,000 at D = 128, at least 1,000). A partition is one task's work on a Dask worker, and a
    task costs the driver, the scheduler and the worker a few ms whatever its size: a
    10,000-row, D = 25 full-Gaussian visit computed for 13 ms, less than that overhead."""
    if given is not None:
        return given
    if dim is None:
        return DOCUMENTS_PER_PARTITION
    rows = -(-VALUES_PER_PARTITION // max(dim, 1))  # ceil
    return -(-rows // 1000) * 1000


class CorpusWriter:
    """Appends partitions to a corpus directory and writes its manifest."""

    def __init__(self, directory: Path, manifest: Manifest, shown: Path | None = None) -> None:
        self.directory = Path(directory)
        self.manifest = manifest
        self.shown = Path(shown) if shown is not None else self.directory  # named in errors

    def _check_columns(self, columns: dict[str, np.ndarray], rows: int) -> None:
        if set(columns) != set(self.manifest.columns):
            raise ValueError(f"columns {sorted(columns)} != manifest {list(self.manifest.columns)}")
        for name, values in columns.items():
            if len(values) != rows:
                raise ValueError(f"column {name!r} has {len(values)} values for {rows} rows")

    def add_dense(self, X: np.ndarray, columns: dict[str, np.ndarray] | None = None) -> None:
        """Write the rows of ``X`` (n, D) as the next partition."""
        columns = columns or {}
        self._check_columns(columns, X.shape[0])
        table = dense_table(X.astype(self.manifest.dtype, copy=False), columns)
        self._add(table, None)

    def add_bow(
        self,
        indptr: np.ndarray,
        word_ids: np.ndarray,
        counts: np.ndarray,
        columns: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Write documents given in CSR form (0-based word ids) as the next partition."""
        columns = columns or {}
        self._check_columns(columns, len(indptr) - 1)
        self._add(bow_table(indptr, word_ids, counts, columns), len(word_ids))

    def _add(self, table, nnz: int | None) -> None:
        index = len(self.manifest.partitions)
        try:
            info = write_partition(self.directory, index, table, nnz)
        except OSError as exc:  # disk full, file too large: name the file being written
            raise BnpmixError(f"{self.shown / partition_name(index)}: cannot write "
                              f"({exc.strerror or exc}); nothing was published") from None
        self.manifest.partitions.append(info)

    def write_manifest(self) -> None:
        """The manifest (and, with a vocabulary, ``vocab.txt``: one word per line)."""
        if self.manifest.vocab is not None:
            write_text_atomic(self.directory / VOCAB_FILE, "".join(
                f"{w}\n" for w in self.manifest.vocab))
        write_json_atomic(self.directory / MANIFEST, self.manifest.to_json())


@contextlib.contextmanager
def new_corpus(out: str | Path, manifest: Manifest, *, overwrite: bool = False) -> Iterator[
    CorpusWriter
]:
    """A writer into a staged directory; the corpus appears at ``out`` only if the block ends
    without an exception. ``overwrite`` replaces only a directory that is a corpus."""
    local_path(out)
    if overwrite:
        check_replaceable(Path(out))
    # replacing a corpus waits for an append under way, never moving it away in the middle
    guard = functools.partial(corpus_lock, out) if (Path(out) / MANIFEST).is_file() else None
    with staged_directory(out, overwrite=overwrite, guard=guard) as tmp:
        writer = CorpusWriter(tmp, manifest, shown=Path(out))
        yield writer
        writer.write_manifest()


def check_replaceable(out: Path, source: Path | None = None) -> None:
    """--overwrite may replace an empty directory or a bnpmix corpus (a manifest that reads),
    never any other directory (a run directory, someone's files), nor one holding the source."""
    if not out.is_dir() or not any(out.iterdir()):
        return
    if source is not None and out.resolve() in (source.resolve(), *source.resolve().parents):
        raise BnpmixError(f"{out}: --overwrite would delete the source {source}, which is "
                          "inside it; write the corpus elsewhere")
    try:
        Corpus(out)
    except BnpmixError as exc:
        raise BnpmixError(f"{out}: --overwrite replaces only a bnpmix corpus, and this "
                          f"directory is not one ({exc}); nothing was changed") from None
