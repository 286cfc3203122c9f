"""Dense corpora: the corpus written from chunks of rows (each column's step found from the
values), and ingestion of in-memory numpy arrays. The file readers (``.npy``: storage/npyfile.py,
CSV: storage/csvfile.py) stream their chunks through ``write_dense``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .corpus import DENSE_DTYPES, Manifest, integer_columns
from .errors import DataError
from .writer import new_corpus
from .writer import partition_rows as rows_per_partition

Chunk = tuple[int, np.ndarray, dict[str, np.ndarray]]  # (first row, rows, per-item columns)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_EXACT = 2**53  # float64 holds every integer up to this magnitude exactly


def dense_dtype(dtype: np.dtype) -> str:
    """float32 stays float32; every other real type is stored as float64."""
    return "float32" if np.dtype(dtype) == np.float32 else "float64"


def check_finite(X: np.ndarray, path: str | Path, first_row: int) -> None:
    """Raise a DataError naming the first row (0-based, in the whole source) with NaN or inf,
    and its column (0-based)."""
    bad = ~np.isfinite(X)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise DataError(path, f"non-finite value {X[r, c]} in column {c} (row and column "
                        "0-based; NaN and infinity are not data)", row=first_row + int(r))


def check_exact(X: np.ndarray, path: str | Path, first_row: int) -> None:
    """Integer input must survive the conversion to float64: a DataError names the first row
    (0-based, in the whole source) and column holding an integer beyond 2^53."""
    if X.dtype.kind in "iu" and X.size:
        bad = np.abs(X.astype(np.float64)) > FLOAT_EXACT  # float compare: no int64 overflow
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise DataError(path, f"integer {X[r, c]} in column {c} is beyond 2^53 and would "
                            "lose digits as float64", row=first_row + int(r))


def write_dense(
    out: str | Path,
    source: str | Path,
    dim: int,
    dtype: str,
    columns: tuple[str, ...],
    chunks: Iterator[Chunk],
    overwrite: bool,
    ingest: dict[str, Any] | None = None,
    steps: list[float] | None = None,
) -> Manifest:
    """The corpus from chunks of rows, its manifest recording each column's step (``steps``
    when given, else 1 for a column whose every value is an integer, 0 otherwise)."""
    if dim < 1:
        raise DataError(source, "no feature columns (the data has 0 columns)")
    manifest = Manifest(kind="dense", dim=dim, dtype=dtype, columns=columns, ingest=ingest)
    integer = np.ones(dim, dtype=bool)
    with new_corpus(out, manifest, overwrite=overwrite) as writer:
        for first_row, X, cols in chunks:
            check_exact(X, source, first_row)
            check_finite(X, source, first_row)
            integer &= integer_columns(X)
            writer.add_dense(X, cols)
        if manifest.n_items == 0:
            raise DataError(source, "empty source: no data rows")
        manifest.steps = integer.astype(float).tolist() if steps is None else list(steps)
    return manifest


def ingest_array(
    X: np.ndarray,
    out: str | Path,
    *,
    partition_rows: int | None = None,
    columns: dict[str, np.ndarray] | None = None,
    overwrite: bool = False,
    source: str = "<array>",
    steps: list[float] | None = None,
) -> Manifest:
    """Write an in-memory (N, D) array, with optional per-item columns, as a dense corpus of
    ``partition_rows`` rows a partition (None: storage.partition_rows' default for D).
    ``steps``: the columns' steps to record where they are known from elsewhere (a sample of a
    corpus keeps the corpus's); by default found from the values (1: integers only, else 0).

    With a ``sequence`` column (integers) each sequence's rows must be contiguous, and a
    partition closes at the first sequence boundary at or after ``partition_rows`` rows, so a
    sequence is never split (a longer sequence makes one bigger partition).
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise DataError(source, f"expected a 2-D array, got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or np.iscomplexobj(X):
        raise DataError(source, f"expected a real numeric array, got dtype {X.dtype}")
    columns = dict(columns or {})
    n = X.shape[0]
    partition_rows = rows_per_partition(partition_rows, X.shape[1])
    if "sequence" in columns:
        columns["sequence"] = _sequence_array(columns["sequence"], n, source)
        bounds = _sequence_bounds(columns["sequence"], partition_rows, source)
    else:
        bounds = [*range(0, n, partition_rows), n] if n else [0]

    def chunks() -> Iterator[Chunk]:
        for s, e in itertools.pairwise(bounds):
            yield s, X[s:e], {k: np.asarray(v[s:e]) for k, v in columns.items()}

    if steps is not None and len(steps) != X.shape[1]:
        raise ValueError(f"steps: {len(steps)} values for {X.shape[1]} columns")
    return write_dense(out, source, X.shape[1], dense_dtype(X.dtype), tuple(sorted(columns)),
                        chunks(), overwrite, steps=steps)


GROUPED = "the {what} must be grouped by sequence, each sequence's rows together"


def _sequence_array(values: Any, n: int, source: str | Path) -> np.ndarray:
    """An in-memory sequence column as int64, or a DataError."""
    seq = np.asarray(values)
    if seq.shape != (n,):
        raise DataError(source, f"column 'sequence' has shape {seq.shape}, expected ({n},)")
    if seq.dtype.kind not in "iu":
        raise DataError(source, f"column 'sequence' must hold integers, not {seq.dtype}")
    if seq.dtype == np.uint64 and n and seq.max() > INT64_MAX:
        raise DataError(source, "column 'sequence' holds integers beyond the int64 range")
    return seq.astype(np.int64)


def _sequence_bounds(seq: np.ndarray, partition_rows: int, source: str | Path) -> list[int]:
    """Partition boundaries (0, ..., N) that never split a sequence: each partition closes at
    the first sequence start at or after ``partition_rows`` rows. A sequence id that reappears
    after another sequence started is a DataError naming both rows (0-based)."""
    n = len(seq)
    if n == 0:
        return [0]
    starts = np.flatnonzero(np.r_[True, seq[1:] != seq[:-1]])
    ids = seq[starts]
    order = np.argsort(ids, kind="stable")  # each id's runs stay in file order
    again = np.flatnonzero(ids[order][1:] == ids[order][:-1])
    if again.size:
        k = int(np.argmin(order[again + 1]))  # the first reappearance in file order
        run, previous = int(order[again[k] + 1]), int(order[again[k]])
        raise DataError(source, f"sequence {int(ids[run])} reappears after other sequences "
                        f"(last seen at row {int(starts[previous + 1]) - 1}): "
                        + GROUPED.format(what="rows"), row=int(starts[run]))
    bounds = [0]
    while bounds[-1] < n:
        j = int(np.searchsorted(starts, bounds[-1] + partition_rows, side="left"))
        bounds.append(int(starts[j]) if j < len(starts) else n)
    return bounds


__all__ = ["DENSE_DTYPES", "Chunk", "check_exact", "check_finite", "dense_dtype", "ingest_array",
           "write_dense"]
