"""Ingestion of a CSV file with a header row: numeric feature columns plus optional
id/label/time/sequence columns, streamed one partition at a time; a feature column named like a
label or a position in time that holds only integers is warned about."""

from __future__ import annotations

import contextlib
import csv
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .corpus import Manifest
from .csvfields import CsvHeader, column_arrays, next_row
from .dense import GROUPED, Chunk, write_dense
from .errors import DataError, DataWarning
from .textio import numbered_lines
from .writer import partition_rows as rows_per_partition

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
        head = CsvHeader.read(reader, path, special)
        names = head.names
        partition_rows = rows_per_partition(partition_rows, len(names))
        suspects = _suspect_columns(names, label_column, time_column, sequence_column)
        label_like = dict.fromkeys(suspects, True)  # position among the features -> integers
        chunks = _chunks(reader, head, partition_rows, label_like)
        manifest = write_dense(
            out, path, len(head.feature_idx), "float64", tuple(sorted(special)), chunks, overwrite
        )
    for j, integer in label_like.items():
        if integer:
            warnings.warn(f"{path}: column {names[j]!r} holds integers and is named like "
                          f"{SUSPECT_ADVICE[suspects[j]].format(name=names[j])}",
                          DataWarning, stacklevel=2)
    return manifest


def _chunks(reader: Any, head: CsvHeader, partition_rows: int,
            label_like: dict[int, bool]) -> Iterator[Chunk]:
    """The data rows in chunks of ``partition_rows`` (closing only where a sequence starts),
    clearing ``label_like[j]`` when feature j holds a value that is not an integer."""
    path, special = head.path, head.special
    sequence_column = special.get("sequence")
    rows: list[list[float]] = []
    cols: dict[str, list] = {k: [] for k in special}
    order = _SequenceOrder(path, sequence_column) if sequence_column else None
    first = 0
    while (row := next_row(reader, path)) is not None:
        line = reader.line_num
        values, extra = head.parse(row, line)
        for j, integer in label_like.items():
            if integer and values[j] != int(values[j]):
                label_like[j] = False
        boundary = order is None or order.step(extra["sequence"], line)
        if boundary and len(rows) >= partition_rows:
            yield first, np.array(rows), column_arrays(cols)
            first += len(rows)
            rows = []
            cols = {k: [] for k in special}
        rows.append(values)
        for role, value in extra.items():
            cols[role].append(value)
    if rows:
        yield first, np.array(rows), column_arrays(cols)


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


__all__ = ["ingest_csv"]
