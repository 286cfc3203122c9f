"""Labels from a file beside any source: item ``n``'s label on line ``n + 1`` of a text file, or
at index ``n`` of a 1-D ``.npy`` array of integers or strings (told apart by the file's first
bytes, NumPy's magic string, which UTF-8 text cannot start with).

A label is the line's (or string's) text without surrounding white space. When every label is an
integer (``3``, ``-1``, ``+07``) the labels are integers and are stored in their canonical decimal
form (``7``); otherwise they are strings, mapped to the integers 0..k-1 in sorted order, and the
mapping is recorded in the corpus's manifest (``ingest.labels.mapping``). Either way the corpus's
``label`` column holds the labels as strings, exactly as ``ingest_csv`` stores a
``--label-column``, so ``bnpmix evaluate --label-column label`` treats both alike.

The file is read twice: once to count and check it before anything is written (a count that
differs from the source's items is an error naming both), then streamed beside the data, so
memory stays at one partition's labels (an array is memory-mapped, read with
``allow_pickle=False``: an array of Python objects is refused, never unpickled).
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DataError
from .textio import numbered_lines

INTEGER = re.compile(r"[+-]?\d+")
MAX_RECORDED_CLASSES = 10_000  # a mapping beyond this is not written into the manifest
NPY_MAGIC = b"\x93NUMPY"  # the first bytes of a .npy file (0x93 never starts UTF-8 text)


def _canonical(text: str, integer: bool) -> str:
    return str(int(text)) if integer else text


class LabelFile:
    """A checked labels file: its count, its classes, and a stream of its labels."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(self.path, "labels file not found")
        self.array = _npy_labels(self.path) if _is_npy(self.path) else None
        self.count = 0
        classes: set[str] = set()
        for label in self.labels():
            self.count += 1
            classes.add(label)
        if self.count == 0:
            raise DataError(self.path, "empty labels file: no labels")
        self.integer = all(INTEGER.fullmatch(c) for c in classes)
        if self.integer:
            self.classes = sorted({int(c) for c in classes})
        else:
            self.classes = sorted(classes)

    def labels(self) -> Iterator[str]:
        """Each item's label text, in order: the array's entries, else the file's lines."""
        if self.array is not None:
            return _array_labels(self.path, self.array)
        return _line_labels(self.path)

    def check_count(self, n: int, source: str | Path, what: str) -> None:
        """A DataError naming this file, the source and both counts unless they agree."""
        if n != self.count:
            raise DataError(self.path, f"has {self.count} labels but {source} has {n} {what} "
                            "(one label for each, in order); nothing was written")

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
        self._items = labels.labels()
        self.taken = 0

    def next_label(self) -> str:
        """The next item's label."""
        return str(self.take(1)[0])

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` items' labels."""
        block = [_canonical(label, self.labels.integer)
                 for label in itertools.islice(self._items, n)]
        self.taken += len(block)
        if len(block) < n:  # the file changed since it was counted
            raise DataError(self.labels.path, f"ended after {self.taken} labels; it had "
                            f"{self.labels.count} when counted")
        return np.asarray(block, dtype=str)

    def close(self) -> None:
        close = getattr(self._items, "close", None)
        if close is not None:
            close()


def _is_npy(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(len(NPY_MAGIC)) == NPY_MAGIC


def _line_labels(path: Path) -> Iterator[str]:
    for lineno, line in numbered_lines(path):
        label = line.strip()
        if not label:
            raise DataError(path, "empty label (one label per line, one line per item)",
                            line=lineno)
        yield label


def _npy_labels(path: Path) -> np.ndarray:
    """The labels array of a .npy file, memory-mapped, after its header says it is a 1-D array
    of integers or strings (an array of Python objects would need unpickling: refused)."""
    try:
        with open(path, "rb") as fh:
            major, _ = np.lib.format.read_magic(fh)
            read = (np.lib.format.read_array_header_1_0 if major == 1
                    else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read(fh)
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(path, f"not a readable .npy file ({exc})") from None
    if dtype.hasobject:
        raise DataError(path, f"an array of Python objects (dtype {dtype}), which bnpmix never "
                        "unpickles: save the labels as integers or strings, e.g. "
                        "np.save(path, labels.astype(str))")
    if dtype.kind not in "iuUS":
        raise DataError(path, f"labels must be integers or strings, not dtype {dtype}")
    if len(shape) != 1:
        raise DataError(path, f"expected a 1-D array of labels (one per item), got shape "
                        f"{shape}")
    return np.load(path, mmap_mode="r", allow_pickle=False)


def _array_labels(path: Path, array: np.ndarray, block: int = 1 << 16) -> Iterator[str]:
    """Each entry of a labels array as text, read ``block`` entries at a time."""
    for start in range(0, len(array), block):
        for row, value in enumerate(np.array(array[start:start + block]).tolist(), start):
            if isinstance(value, bytes):
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(path, f"label not UTF-8 (byte {exc.start})", row=row) from None
            label = str(value).strip()
            if not label:
                raise DataError(path, "empty label (one label per item)", row=row)
            yield label


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
