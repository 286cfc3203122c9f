"""Where the ddcrp engine's sequences come from (Bartunov & Vetrov 2014: each sequence an
independent ddCRP): the corpus's sequence column (ingestion keeps a sequence whole in one
partition; a sequence id in two partitions is refused, naming both) or, without one, the whole
corpus as one sequence in stored order; positions (d_ij = position_i − position_j) checked finite
and non-decreasing in the stored order, an error naming the row otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bnpmix.algorithms.obs.base import Data
from bnpmix.storage import BnpmixError
from bnpmix.storage.corpus import Batch


def sequence_tasks(corpus: Any, executor: Any, sequence_column: str | None,
                   position_column: str | None) -> tuple[str | None, list[tuple[int, int, int]]]:
    """The sequence column (``sequence_column``, else ``sequence`` if the corpus has it, else
    None: one sequence) and a task (partition, id, ordinal) per sequence, positions checked."""
    columns = corpus.manifest.columns
    for option, name in (("sequence_column", sequence_column),
                         ("position_column", position_column)):
        if name is not None and name not in columns:
            raise BnpmixError(f"{corpus.path}: {option} {name!r}: the corpus has "
                              f"{list(columns) or 'no optional columns'}")
    column = sequence_column or ("sequence" if "sequence" in columns else None)
    tasks: list[tuple[int, int, int]] = []
    if column is None:
        check_one_sequence(corpus, executor, position_column)
        return column, tasks
    layouts = executor.map(sequence_layout, range(corpus.n_partitions), column, position_column)
    home: dict[int, int] = {}
    for p, (ids, _) in enumerate(layouts):
        for s in ids.tolist():
            if s in home:
                raise BnpmixError(
                    f"{corpus.path}: sequence {s} lies in partitions {home[s]} and {p}; a "
                    "sequence must be whole in one partition (ingest --sequence-column "
                    "keeps it so)")
            home[s] = p
            tasks.append((p, s, len(tasks)))
    return column, tasks


def check_one_sequence(corpus: Any, executor: Any, column: str | None) -> None:
    """Positions of a corpus that is one sequence: finite and non-decreasing across the
    partitions too."""
    if column is None:
        return
    ends = executor.map(position_ends, range(corpus.n_partitions), column)
    row, last = 0, -np.inf
    for p, (lo, hi) in enumerate(ends):
        if lo < last:
            raise BnpmixError(f"the corpus: {column!r} goes back from {last:g} (row "
                              f"{row - 1}) to {lo:g} (row {row}, the first of partition "
                              f"{p}): positions must not decrease in the stored order")
        row += corpus.manifest.partitions[p].rows
        last = max(last, hi)


def sequence_layout(batch: Batch, column: str, position_column: str | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The sequence ids of one partition in order of first appearance, and their sizes; each
    sequence's positions checked (``checked_positions``)."""
    values = batch.columns[column]
    ids, first, counts = np.unique(values, return_index=True, return_counts=True)
    order = np.argsort(first)
    if position_column is not None:
        for s in ids[order].tolist():
            rows = np.flatnonzero(values == s)
            checked_positions(batch.columns[position_column][rows], batch.start + rows,
                              position_column, s)
    return ids[order], counts[order]


def position_ends(batch: Batch, position_column: str) -> tuple[float, float]:
    """A partition's first and last positions, its own positions checked (a corpus that is one
    sequence; the driver checks that partitions follow one another)."""
    pos = checked_positions(batch.columns[position_column],
                            batch.start + np.arange(len(batch)), position_column, None)
    return (float(pos[0]), float(pos[-1])) if len(pos) else (np.inf, -np.inf)


def checked_positions(values: np.ndarray, rows: np.ndarray, column: str,
                      sequence: int | None) -> np.ndarray:
    """A sequence's positions as floats: finite and non-decreasing (a customer links back in
    the stored order, d_ij = position_i − position_j >= 0), else an error naming the row."""
    pos = np.asarray(values, float)
    where = "the corpus" if sequence is None else f"sequence {sequence}"
    bad = np.flatnonzero(~np.isfinite(pos))
    if len(bad):
        raise BnpmixError(f"{where}: {column!r} is {pos[bad[0]]} at row {int(rows[bad[0]])}: "
                          "positions must be finite numbers")
    back = np.flatnonzero(np.diff(pos) < 0)
    if len(back):
        r = back[0] + 1
        raise BnpmixError(f"{where}: {column!r} goes back from {pos[r - 1]:g} (row "
                          f"{int(rows[r - 1])}) to {pos[r]:g} (row {int(rows[r])}): positions "
                          "must not decrease in the stored order of a sequence")
    return pos


def gather(batch: Batch, position_column: str | None) -> tuple[Data, np.ndarray | None]:
    """One partition's rows and positions, for a corpus that is one sequence."""
    return batch.X, (None if position_column is None
                     else np.asarray(batch.columns[position_column], float))
