"""Labels from a file beside any source: one label per line, item ``n`` on line ``n + 1``.

A label is the line's text without surrounding white space. When every label is an integer
(``3``, ``-1``, ``+07``) the labels are integers and are stored in their canonical decimal form
(``7``); otherwise they are strings, mapped to the integers 0..k-1 in sorted order, and the mapping
is recorded in the corpus's manifest (``ingest.labels.mapping``). Either way the corpus's ``label``
column holds the labels as strings, exactly as ``ingest_csv`` stores a ``--label-column``, so
``bnpmix evaluate --labels-column label`` treats both alike.

The file is read twice: once to count and check it before anything is written (a count that
differs from the source's items is an error naming both), then streamed beside the data, so
memory stays at one partition's labels.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DataError
from .textio import numbered_lines

INTEGER = re.compile(r"[+-]?\d+")
MAX_RECORDED_CLASSES = 10_000  # a mapping beyond this is not written into the manifest


def _canonical(text: str, integer: bool) -> str:
    return str(int(text)) if integer else text


class LabelFile:
    """A checked labels file: its count, its classes, and a stream of its labels."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(self.path, "labels file not found")
        self.count = 0
        classes: set[str] = set()
        for lineno, line in numbered_lines(self.path):
            label = line.strip()
            if not label:
                raise DataError(self.path, "empty label (one label per line, one line per item)",
                                line=lineno)
            self.count += 1
            classes.add(label)
        if self.count == 0:
            raise DataError(self.path, "empty labels file: no labels")
        self.integer = all(INTEGER.fullmatch(c) for c in classes)
        if self.integer:
            self.classes = sorted({int(c) for c in classes})
        else:
            self.classes = sorted(classes)

    def check_count(self, n: int, source: str | Path, what: str) -> None:
        """A DataError naming this file, the source and both counts unless they agree."""
        if n != self.count:
            raise DataError(self.path, f"has {self.count} labels but {source} has {n} {what} "
                            "(one label per line for each, in order); nothing was written")

    def meta(self) -> dict[str, Any]:
        """What the manifest records: the file, the class count and, for strings, the mapping
        label -> integer (sorted order)."""
        out: dict[str, Any] = {"file": str(self.path.resolve()), "n_labels": self.count,
                               "n_classes": len(self.classes), "integer": self.integer}
        if not self.integer:
            out["mapping"] = ({c: i for i, c in enumerate(self.classes)}
                              if len(self.classes) <= MAX_RECORDED_CLASSES else None)
        return out

    def stream(self) -> LabelStream:
        """The labels in file order, handed out a block at a time."""
        return LabelStream(self)


class LabelStream:
    """Labels of consecutive items: ``take(n)`` returns the next ``n`` as a string array."""

    def __init__(self, labels: LabelFile) -> None:
        self.labels = labels
        self._lines: Iterator[tuple[int, str]] = numbered_lines(labels.path)
        self.taken = 0

    def next_label(self) -> str:
        """The next item's label."""
        item = next(self._lines, None)
        if item is None:  # the file changed since it was counted
            raise DataError(self.labels.path, f"ended after {self.taken} labels; it had "
                            f"{self.labels.count} when counted")
        self.taken += 1
        return _canonical(item[1].strip(), self.labels.integer)

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` items' labels."""
        return np.asarray([self.next_label() for _ in range(n)], dtype=str)

    def close(self) -> None:
        close = getattr(self._lines, "close", None)
        if close is not None:
            close()


def open_labels(path: str | Path | None) -> LabelFile | None:
    """The checked labels file, or None without one."""
    return None if path is None else LabelFile(path)


@contextlib.contextmanager
def streaming(labels: LabelFile | None) -> Iterator[LabelStream | None]:
    """A stream of the labels (None without a labels file), closed at the end of the block."""
    if labels is None:
        yield None
        return
    stream = labels.stream()
    try:
        yield stream
    finally:
        stream.close()


__all__ = ["LabelFile", "LabelStream", "open_labels", "streaming"]
