"""Ingestion of dense real vectors: numpy arrays, ``.npy`` files (memory-mapped) and CSV.

Every reader streams the source one partition at a time, so memory stays at a few partitions.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .corpus import DENSE_DTYPES, Manifest, integer_columns
from .errors import DataError, DataWarning
from .labels import open_labels, streaming
from .textio import numbered_lines
from .writer import new_corpus
from .writer import partition_rows as rows_per_partition

Chunk = tuple[int, np.ndarray, dict[str, np.ndarray]]
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _dense_dtype(dtype: np.dtype) -> str:
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


FLOAT_EXACT = 2**53  # integers beyond this lose digits as float64


def check_exact(X: np.ndarray, path: str | Path, first_row: int) -> None:
    """Integer input must survive the conversion to float64: a DataError names the first row
    (0-based, in the whole source) and column holding an integer beyond 2^53."""
    if X.dtype.kind in "iu" and X.size:
        bad = np.abs(X.astype(np.float64)) > FLOAT_EXACT  # float compare: no int64 overflow
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise DataError(path, f"integer {X[r, c]} in column {c} is beyond 2^53 and would "
                            "lose digits as float64", row=first_row + int(r))


def _write_dense(
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
    return _write_dense(out, source, X.shape[1], _dense_dtype(X.dtype), tuple(sorted(columns)),
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


def ingest_npy(
    path: str | Path,
    out: str | Path,
    *,
    labels: str | Path | None = None,
    partition_rows: int | None = None,
    overwrite: bool = False,
) -> Manifest:
    """Ingest a 2-D real ``.npy`` array, mapping one partition's rows into memory at a time
    (None for ``partition_rows``: storage.partition_rows' default for its width).
    ``labels``: a text file with one label per row, or a .npy 1-D array of them (see
    storage/labels.py), stored as the ``label`` column."""
    path = Path(path)
    try:
        header = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(path, f"not a readable .npy file ({exc})") from None
    shape, dtype, offset = header.shape, header.dtype, header.offset
    fortran = header.ndim == 2 and not header.flags.c_contiguous
    del header
    if len(shape) != 2:
        raise DataError(path, f"expected a 2-D array, got shape {shape}")
    if dtype.kind not in "fiu":
        raise DataError(path, f"expected a real numeric array, got dtype {dtype}")
    n, d = shape
    partition_rows = rows_per_partition(partition_rows, d)
    label_file = open_labels(labels)
    if label_file is not None:
        label_file.check_count(n, path, "rows")

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        if fortran:
            full = np.load(path, mmap_mode="r")
            for s in range(0, n, partition_rows):
                yield s, np.array(full[s : s + partition_rows])
            return
        for s in range(0, n, partition_rows):
            rows = min(partition_rows, n - s)
            view = np.memmap(
                path, dtype=dtype, mode="r", offset=offset + s * d * dtype.itemsize, shape=(rows, d)
            )
            block = np.array(view)
            del view  # unmap now: resident pages stay bounded by one partition
            yield s, block

    def chunks() -> Iterator[Chunk]:
        with streaming(label_file) as stream:
            for s, block in blocks():
                yield s, block, {} if stream is None else {"label": stream.take(len(block))}

    columns = () if label_file is None else ("label",)
    ingest = None if label_file is None else {"format": "npy", "labels": label_file.meta()}
    return _write_dense(out, path, d, _dense_dtype(dtype), columns, chunks(), overwrite, ingest)


def _parse_float(text: str, path: Path, line: int, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(path, f"not a number: {text!r}", line=line, field=name) from None
    if not math.isfinite(value):
        raise DataError(path, f"non-finite value {text!r}", line=line, field=name)
    return value


def _parse_int(text: str, path: Path, line: int, name: str) -> int:
    """An integer field, exactly: digits parse as an integer (never through float64, which
    keeps 53 bits); a float form (``3.0``, ``1e3``) must be an integer within ±2^53."""
    try:
        value = int(text.strip())
    except ValueError:
        number = _parse_float(text, path, line, name)
        if number != int(number):
            raise DataError(path, f"not an integer: {text!r}", line=line, field=name) from None
        if FLOAT_EXACT < abs(number) <= INT64_MAX:
            raise DataError(path, f"integer {text!r} is written as a float beyond 2^53, where "
                            "digits are lost: write its digits", line=line, field=name) from None
        value = int(number)
    if not INT64_MIN <= value <= INT64_MAX:
        raise DataError(path, f"integer {text!r} out of the int64 range", line=line, field=name)
    return value


FLOAT_EXACT = 2**53  # float64 holds every integer up to this magnitude exactly


INT_ROLES = ("time", "sequence")  # csv columns parsed as int64
# feature columns named like this (any case) that hold integers are probably labels
LABEL_LIKE = ("label", "labels", "class", "target", "y", "category")


def ingest_csv(
    path: str | Path,
    out: str | Path,
    *,
    partition_rows: int | None = None,
    label_column: str | None = None,
    time_column: str | None = None,
    id_column: str | None = None,
    sequence_column: str | None = None,
    delimiter: str = ",",
    overwrite: bool = False,
) -> Manifest:
    """Ingest a CSV file with a header row: numeric feature columns plus optional
    id/label/time/sequence.

    Labels and ids are kept as strings; the time column must hold integers (epochs), and so must
    the sequence column (sequence ids). A sequence is never split between partitions: its rows
    must be contiguous in the file (a DataError names the line where an id reappears after
    another sequence started), they keep their file order, and a partition closes at the first
    sequence boundary at or after ``partition_rows`` rows, so a sequence longer than that makes
    one bigger partition.
    """
    path = Path(path)
    special = {"label": label_column, "time": time_column, "item": id_column,
               "sequence": sequence_column}
    special = {k: v for k, v in special.items() if v is not None}
    if not path.is_file():
        raise DataError(path, "source file not found")
    with contextlib.closing(numbered_lines(path)) as lines:
        reader = csv.reader((text for _, text in lines), delimiter=delimiter)
        header = _next_row(reader, path)
        if header is None:
            raise DataError(path, "empty source: no header line")
        for role, name in special.items():
            if name not in header:
                raise DataError(path, f"no column {name!r} for --{role}-column", line=1)
        position = {name: i for i, name in enumerate(header)}
        feature_idx = [i for i, h in enumerate(header) if h not in special.values()]
        if not feature_idx:
            raise DataError(path, "no numeric feature columns", line=1)
        names = [header[i] for i in feature_idx]
        partition_rows = rows_per_partition(partition_rows, len(names))
        suspects = _suspect_columns(names, label_column, time_column, sequence_column)
        label_like = dict.fromkeys(suspects, True)  # position among the features -> integers

        def chunks() -> Iterator[Chunk]:
            rows: list[list[float]] = []
            cols: dict[str, list] = {k: [] for k in special}
            order = _SequenceOrder(path, sequence_column) if sequence_column else None
            first = 0
            while (row := _next_row(reader, path)) is not None:
                line = reader.line_num
                if len(row) != len(header):
                    raise DataError(
                        path, f"expected {len(header)} fields, found {len(row)}", line=line
                    )
                values = [_parse_float(row[i], path, line, n)
                          for i, n in zip(feature_idx, names, strict=True)]
                for j, integer in label_like.items():
                    if integer and values[j] != int(values[j]):
                        label_like[j] = False
                extra = {role: _parse_int(row[position[name]], path, line, name)
                         if role in INT_ROLES else row[position[name]]
                         for role, name in special.items()}
                boundary = order is None or order.step(extra["sequence"], line)
                if boundary and len(rows) >= partition_rows:
                    yield first, np.array(rows), _column_arrays(cols)
                    first += len(rows)
                    rows = []
                    cols = {k: [] for k in special}
                rows.append(values)
                for role, value in extra.items():
                    cols[role].append(value)
            if rows:
                yield first, np.array(rows), _column_arrays(cols)

        manifest = _write_dense(
            out, path, len(feature_idx), "float64", tuple(sorted(special)), chunks(), overwrite
        )
    for j, integer in label_like.items():
        if integer:
            warnings.warn(f"{path}: column {names[j]!r} holds integers and is named like "
                          f"{SUSPECT_ADVICE[suspects[j]].format(name=names[j])}",
                          DataWarning, stacklevel=2)
    return manifest


POSITION_LIKE = ("t", "pos", "position", "step", "time", "timestep", "index", "idx", "epoch")
SUSPECT_ADVICE = {
    "label": "a label, but it was kept as a feature (one of the data's dimensions); to make it "
             "the items' labels instead, ingest again with --label-column {name} --overwrite "
             "(label_column={name!r} in Python)",
    "position": "a position in time, but it was kept as a feature (one of the data's "
                "dimensions), so clusters would split by it; a sequence's order is its rows' "
                "order in the file and an item's epoch the --time-column: drop the column from "
                "the file (or give it as --time-column {name}) and ingest again with --overwrite",
}


def _suspect_columns(names: list[str], label_column: str | None, time_column: str | None,
                     sequence_column: str | None) -> dict[int, str]:
    """Feature columns named like a label (without --label-column) or, for sequences or epochs
    (--sequence-column, --time-column), like a position in time: by position among the
    features, what each looks like; warned about if they hold only integers."""
    out = {}
    for j, name in enumerate(names):
        key = name.strip().lower()
        if label_column is None and key in LABEL_LIKE:
            out[j] = "label"
        elif (sequence_column or time_column) is not None and key in POSITION_LIKE:
            out[j] = "position"
    return out


class _SequenceOrder:
    """Checks, row by row, that each sequence's rows are contiguous in a file.

    Every finished sequence's id is remembered with its last line: the recent ones in a dict,
    the older ones in a few sorted int64 arrays merged like a binary counter (so 16 bytes a
    sequence, and a look-up per sequence start costs a few binary searches).
    """

    RECENT = 1 << 16  # finished sequences held in the dict before it is compacted

    def __init__(self, path: Path, column: str) -> None:
        self.path, self.column = path, column
        self.current: int | None = None
        self.last_line = 0
        self.recent: dict[int, int] = {}
        self.levels: list[tuple[np.ndarray, np.ndarray]] = []  # (ids sorted, last lines)

    def step(self, seq: int, line: int) -> bool:
        """Record a row of sequence ``seq`` on ``line``; True if it starts a sequence."""
        if seq == self.current:
            self.last_line = line
            return False
        if self.current is not None:
            self.recent[self.current] = self.last_line
            if len(self.recent) >= self.RECENT:
                self._compact()
        seen = self._last_seen(seq)
        if seen is not None:
            raise DataError(self.path, f"sequence {seq} reappears after other sequences (last "
                            f"seen on line {seen}): " + GROUPED.format(what="file")
                            + f" (e.g. sorted stably by {self.column!r})",
                            line=line, field=self.column)
        self.current, self.last_line = seq, line
        return True

    def _last_seen(self, seq: int) -> int | None:
        if seq in self.recent:
            return self.recent[seq]
        for ids, lines in self.levels:
            i = int(np.searchsorted(ids, seq))
            if i < len(ids) and ids[i] == seq:
                return int(lines[i])
        return None

    def _compact(self) -> None:
        ids = np.fromiter(self.recent, dtype=np.int64, count=len(self.recent))
        lines = np.fromiter(self.recent.values(), dtype=np.int64, count=len(self.recent))
        self.recent.clear()
        # merged into every older level at most twice its size: O(log n) levels remain
        while self.levels and len(self.levels[-1][0]) <= 2 * len(ids):
            older_ids, older_lines = self.levels.pop()
            ids, lines = np.concatenate([older_ids, ids]), np.concatenate([older_lines, lines])
        order = np.argsort(ids, kind="stable")
        self.levels.append((ids[order], lines[order]))


def _next_row(reader: Any, path: Path) -> list[str] | None:
    """The next CSV row, or None at the end; a malformed row (e.g. a field over the csv
    module's size limit) is a DataError naming its line."""
    try:
        return next(reader, None)
    except csv.Error as exc:
        raise DataError(path, f"malformed CSV ({exc})", line=reader.line_num) from None


def _column_arrays(cols: dict[str, list]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=np.int64 if k in INT_ROLES else str) for k, v in cols.items()}


__all__ = ["DENSE_DTYPES", "check_finite", "ingest_array", "ingest_csv", "ingest_npy"]
