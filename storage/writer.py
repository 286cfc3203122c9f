"""Writing corpora: partitions go into a staged directory that is renamed into place at the end."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .atomic import staged_directory, write_json_atomic
from .corpus import MANIFEST, Manifest, bow_table, dense_table, write_partition

DEFAULT_PARTITION_ROWS = 10_000


class CorpusWriter:
    """Appends partitions to a corpus directory and writes its manifest."""

    def __init__(self, directory: Path, manifest: Manifest) -> None:
        self.directory = Path(directory)
        self.manifest = manifest

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
        self.manifest.partitions.append(write_partition(self.directory, index, table, nnz))

    def write_manifest(self) -> None:
        write_json_atomic(self.directory / MANIFEST, self.manifest.to_json())


@contextlib.contextmanager
def new_corpus(out: str | Path, manifest: Manifest, *, overwrite: bool = False) -> Iterator[
    CorpusWriter
]:
    """A writer into a staged directory; the corpus appears at ``out`` only if the block ends
    without an exception."""
    with staged_directory(out, overwrite=overwrite) as tmp:
        writer = CorpusWriter(tmp, manifest)
        yield writer
        writer.write_manifest()
