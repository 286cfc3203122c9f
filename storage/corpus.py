"""The on-disk corpus: ``manifest.json`` plus ``part-00000.parquet``, ``part-00001.parquet``, ...

Dense corpora store each item as a fixed-size list column ``x`` (float32 or float64, length D).
Bag-of-words corpora store each document as two list columns, ``word_ids`` (int32, 0-based) and
``counts`` (int32), so that pyarrow's list offsets become the CSR ``indptr`` without copying.
Optional per-item columns: ``item`` (string id), ``label``, ``time`` (int64 epoch) and
``sequence`` (int64). Each partition is one memoized batch; reading one never reads another, and
its bytes are checked against the SHA-256 recorded at ingestion.

A corpus with a vocabulary (bag-of-words) also holds it as ``vocab.txt``, one word per line, word
``w`` on line ``w + 1``: the file to pass as ``bnpmix ingest --vocab`` so that held-out text gets
the same columns. The manifest is manifest.py's; the Arrow tables of blocks and the writing of a
partition file are tables.py's.
"""

from __future__ import annotations

import copy
import json
import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import BnpmixError, CorruptPartitionError, is_url, local_path
from .manifest import (  # noqa: F401  (re-exported: the names callers import from here)
    DENSE_DTYPES,
    FORMAT_NAME,
    FORMAT_VERSION,
    KINDS,
    MANIFEST,
    OPTIONAL_COLUMNS,
    VOCAB_FILE,
    Manifest,
    PartitionInfo,
    combined_steps,
    integer_columns,
    partition_name,
    sha256_bytes,
    vocab_sha256,
)
from .tables import bow_table, dense_table, write_partition  # noqa: F401  (re-exported)

if TYPE_CHECKING:  # imported where partitions are read: the manifest needs neither
    import pyarrow as pa
    import pyarrow.parquet as pq
    import scipy.sparse as sp

# values of a dense partition decoded at a time (2 MiB of float64; Arrow's peak while reading
# is about four times a slice's, whatever the partition's size)
READ_VALUES = 1 << 18


@dataclass
class Batch:
    """One partition in memory: the data matrix and its optional per-item columns."""

    X: np.ndarray | sp.csr_matrix
    index: int
    start: int
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.X.shape[0])


def _check_lists(column: Any, name: str) -> None:
    """A list column of a partition: no missing row and no missing value (ValueError)."""
    if column.null_count or column.flatten().null_count:
        raise ValueError(f"column {name!r} has missing values")


def _lengths(column: Any) -> np.ndarray:
    """The lengths of a list column's rows (fixed-size or variable lists)."""
    if hasattr(column.type, "list_size"):
        return np.full(len(column), column.type.list_size)
    return column.value_lengths().to_numpy(zero_copy_only=False)


def _map(path: Path) -> bytes | mmap.mmap:
    """A file's bytes, memory-mapped read-only (an empty file as b"": mmap refuses it)."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return b""
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def check_values(X: np.ndarray | sp.csr_matrix, path: Path) -> None:
    """Every value finite (and every word count non-negative): else an error naming the file,
    the row within it and the column. One vectorised pass; cheap next to the read itself."""
    import scipy.sparse as sp

    if sp.issparse(X):
        bad = ~np.isfinite(X.data) | (X.data < 0)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            row = int(np.searchsorted(X.indptr, k, side="right") - 1)
            raise CorruptPartitionError(f"{path}, row {row}: word {int(X.indices[k])} has count "
                                        f"{X.data[k]} (counts are finite and >= 0)")
        return
    if not np.isfinite(X).all():
        row, col = np.argwhere(~np.isfinite(X))[0]
        raise CorruptPartitionError(f"{path}, row {int(row)}: non-finite value "
                                    f"{X[row, col]} in column {int(col)}")


class Corpus:
    """Read access to a corpus directory, one partition at a time."""

    kept = True  # a run records it (job.json) as its training corpus, and can resume from it

    def __init__(self, path: str | Path) -> None:
        # a URL (s3://bucket/corpus) is read through storage.objectstore; self.path stays the
        # URL string, so messages and tasks name it as given
        self.path: Path | str = path.rstrip("/") if is_url(path) else local_path(path)
        manifest_path = f"{self.path}/{MANIFEST}" if self.remote else self.path / MANIFEST
        try:
            obj = json.loads(self._read(MANIFEST).decode("utf-8"))
        except FileNotFoundError:
            raise BnpmixError(f"{self.path}: not a corpus directory (no {MANIFEST})") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BnpmixError(f"{manifest_path}: unreadable manifest ({exc})") from None
        self.manifest = Manifest.from_json(obj, manifest_path)
        # partition i here is partition origin[i] of the corpus directory (Corpus.subset)
        self.origin: list[int] = list(range(len(self.manifest.partitions)))
        self._starts = np.concatenate(
            [[0], np.cumsum([p.rows for p in self.manifest.partitions])]
        ).astype(np.int64)

    def subset(self, indices: Sequence[int]) -> Corpus:
        """A view of some of this corpus's partitions, in the order given: its partition i is
        partition ``indices[i]`` here, read from the same file; tasks name it by ``origin``,
        and its batches' ``start`` is their first row's in the corpus directory."""
        view = copy.copy(self)
        view.manifest = replace(self.manifest,
                                partitions=[self.manifest.partitions[i] for i in indices])
        view.origin = [self.origin[i] for i in indices]
        view._starts = self._starts[list(indices)]  # a batch's start: its first row's there
        return view

    @property
    def kind(self) -> str:
        return self.manifest.kind

    @property
    def dim(self) -> int:
        return self.manifest.dim

    @property
    def n_items(self) -> int:
        return self.manifest.n_items

    @property
    def n_partitions(self) -> int:
        return len(self.manifest.partitions)

    def __len__(self) -> int:
        return self.n_partitions

    @property
    def remote(self) -> bool:
        """Whether the corpus lives in an object store (its path is a URL)."""
        return isinstance(self.path, str)

    @property
    def uri(self) -> str:
        """What tasks and run directories record: the URL, or the absolute local path."""
        return self.path if isinstance(self.path, str) else str(self.path.resolve())

    def _read(self, name: str) -> bytes:
        """A file of the corpus by its name in the directory (or under the URL's prefix)."""
        if isinstance(self.path, str):
            from .objectstore import read_object

            return read_object(self.path, name)
        return (self.path / name).read_bytes()

    def partition_file(self, index: int) -> Path | str:
        name = self.manifest.partitions[index].file
        return f"{self.path}/{name}" if isinstance(self.path, str) else self.path / name

    def read_bytes(self, index: int) -> bytes | mmap.mmap:
        """The partition's bytes, verified against its recorded size and checksum: a local file
        memory-mapped read-only (its pages are the page cache's, which the kernel can reclaim,
        not a copy in the process beside the decoded values; a file replaced by rename keeps
        the mapped inode), an object's bytes as fetched."""
        info = self.manifest.partitions[index]
        path = self.partition_file(index)
        try:
            data = self._read(info.file) if self.remote else _map(Path(path))
        except OSError as exc:
            raise CorruptPartitionError(f"{path}: partition {index} unreadable ({exc})") from None
        if len(data) != info.bytes or sha256_bytes(data) != info.sha256:
            raise CorruptPartitionError(
                f"{path}: partition {index} is corrupt or truncated "
                f"({len(data)} bytes, manifest says {info.bytes}; checksum mismatch)"
            )
        return data

    def read(self, index: int) -> Batch:
        """Partition ``index`` as a Batch: a dense (n, D) array or an (n, V) CSR matrix."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not 0 <= index < self.n_partitions:
            raise IndexError(f"{self.path}: no partition {index} (has {self.n_partitions})")
        data = self.read_bytes(index)
        path = self.partition_file(index)
        expected = self.manifest.partitions[index].rows
        dense = self.kind == "dense"
        try:
            if dense:  # x streamed into X: no whole decoded table beside it
                file = pq.ParquetFile(pa.BufferReader(data))
                rows = file.metadata.num_rows
            else:
                table = pq.read_table(pa.BufferReader(data))
                rows = table.num_rows
        except (pa.ArrowException, OSError) as exc:
            raise CorruptPartitionError(f"{path}: not a readable Parquet file ({exc})") from None
        if rows != expected:
            raise CorruptPartitionError(f"{path}: {rows} rows, the manifest says {expected}")
        try:
            if dense:
                X = self._dense_matrix(file, rows)
                table = file.read(columns=list(self.manifest.columns), use_threads=False)
            else:
                X = self._matrix(table)
            cols = {c: table.column(c).to_numpy() for c in self.manifest.columns}
        except (KeyError, ValueError, TypeError, OSError, pa.ArrowException) as exc:
            raise CorruptPartitionError(f"{path}: does not hold a {self.kind} partition of "
                                        f"dimension {self.dim} ({exc})") from None
        check_values(X, path)
        return Batch(X=X, index=index, start=int(self._starts[index]), columns=cols)

    def _dense_matrix(self, file: pq.ParquetFile, n: int) -> np.ndarray:
        """Column ``x`` of a dense partition as an (n, D) array of its stored type, decoded
        READ_VALUES values at a time straight into the array. Reading the whole table first
        held the decoded column, its combined chunks and the parser's buffers at once: 3.4
        times the partition's values beside the file's bytes (268 MiB for a 250,000 x 32
        float64 partition of 61 MiB; 152 MiB read this way)."""
        names = file.schema_arrow.names
        if "x" not in names:
            raise KeyError("x")
        kind = file.schema_arrow.field("x").type
        if not hasattr(kind, "value_type"):
            raise ValueError(f"column 'x' is {kind}, not a list of values")
        X = np.empty((n, self.dim), dtype=kind.value_type.to_pandas_dtype())
        start = 0
        for batch in file.iter_batches(batch_size=max(1, READ_VALUES // self.dim),
                                       columns=["x"], use_threads=False):
            rows = batch.column(0)
            _check_lists(rows, "x")
            if np.any(_lengths(rows) != self.dim):
                raise ValueError(f"column 'x' has a row that is not {self.dim} values long")
            X[start:start + len(rows)] = rows.flatten().to_numpy(
                zero_copy_only=False).reshape(len(rows), self.dim)
            start += len(rows)
        if start != n:
            raise ValueError(f"column 'x' has {start} rows of {n}")
        return X

    def _matrix(self, table: pa.Table) -> np.ndarray | sp.csr_matrix:
        import scipy.sparse as sp

        n = table.num_rows
        if self.kind == "dense":
            rows = table.column("x").combine_chunks()
            _check_lists(rows, "x")
            if np.any(_lengths(rows) != self.dim):
                raise ValueError(f"column 'x' has a row that is not {self.dim} values long")
            return rows.flatten().to_numpy(zero_copy_only=False).reshape(n, self.dim)
        words = table.column("word_ids").combine_chunks()
        counts = table.column("counts").combine_chunks()
        _check_lists(words, "word_ids")
        _check_lists(counts, "counts")
        indptr = np.concatenate([[0], np.cumsum(_lengths(words))])
        if not np.array_equal(_lengths(words), _lengths(counts)):
            raise ValueError("a document's word_ids and counts have different lengths")
        indices = words.flatten().to_numpy(zero_copy_only=False)
        values = counts.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
        if len(indices) and (indices.min() < 0 or indices.max() >= self.dim):
            raise ValueError(f"a word id outside 0..{self.dim - 1}")
        return sp.csr_matrix((values, indices, indptr), shape=(n, self.dim))

    def __iter__(self) -> Iterator[Batch]:
        for i in range(self.n_partitions):
            yield self.read(i)

    def read_all(self, indices: Sequence[int] | None = None) -> Batch:
        """Concatenate partitions (for small corpora and tests only: reads them all)."""
        import scipy.sparse as sp

        idx = range(self.n_partitions) if indices is None else indices
        batches = [self.read(i) for i in idx]
        if self.kind == "dense":
            X: Any = np.concatenate([b.X for b in batches]) if batches else np.zeros((0, self.dim))
        else:
            X = sp.vstack([b.X for b in batches], format="csr") if batches else sp.csr_matrix(
                (0, self.dim)
            )
        cols = {
            c: np.concatenate([b.columns[c] for b in batches]) for c in self.manifest.columns
        } if batches else {}
        return Batch(X=X, index=-1, start=0, columns=cols)

    def info(self) -> dict[str, Any]:
        """The numbers `bnpmix info` prints."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "n_items": self.n_items,
            "dim": self.dim,
            "n_partitions": self.n_partitions,
            "bytes": self.manifest.n_bytes,
            "dtype": self.manifest.dtype,
            "columns": list(self.manifest.columns),
        }
        if self.kind == "bow":
            out["nnz"] = self.manifest.nnz
        if self.manifest.vocab is not None:
            vocab_file = self.vocab_file
            out["vocab_file"] = None if vocab_file is None else str(vocab_file.resolve())
        if self.manifest.ingest is not None:
            out["ingest"] = self.manifest.ingest
        if self.manifest.steps is not None:
            out["integer_columns"] = int(np.count_nonzero(self.manifest.steps))
        return out

    @property
    def vocab_file(self) -> Path | None:
        """``vocab.txt`` of a corpus with a vocabulary (None for corpora ingested before it was
        written: pass the corpus directory itself as ``--vocab`` then)."""
        if isinstance(self.path, str):  # a remote corpus's words are in its manifest
            return None
        path = self.path / VOCAB_FILE
        return path if self.manifest.vocab is not None and path.is_file() else None
