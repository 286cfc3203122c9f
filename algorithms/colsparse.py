"""Statistics that are sparse in their columns: a (K, V) array zero outside a set of columns.

A batch of documents touches a small share of the vocabulary (a PubMed-shaped batch of 10,000
abstracts: 1.65 % of K × V), so its word counts per component, wc = Rᵀ X, are held as the
columns it has (``cols``, sorted) and their values (K, len(cols)). Sums of such statistics are
sums over the union of their columns; anything dense they meet makes the result dense. Rows are
components, and select, fold (a merge) and stack (an insert) like the rows of an array, so a
Summary and its moves treat both kinds alike through the functions below.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ColumnSparse:
    """A (K, width) array that is zero outside the columns ``cols``; ``values`` holds those
    columns (K, len(cols))."""

    __slots__ = ("cols", "values", "width")

    def __init__(self, cols: np.ndarray, values: np.ndarray, width: int) -> None:
        self.cols = np.asarray(cols, dtype=np.int64)
        self.values = np.asarray(values, dtype=float)
        self.width = int(width)
        if self.values.ndim != 2 or self.values.shape[1] != len(self.cols):
            raise ValueError(f"values {self.values.shape} do not match {len(self.cols)} columns")
        if len(self.cols) and (self.cols[0] < 0 or self.cols[-1] >= self.width
                               or np.any(np.diff(self.cols) <= 0)):
            raise ValueError("columns must be sorted, distinct and within the width")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.values.shape[0], self.width)

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes + self.cols.nbytes)

    def __len__(self) -> int:
        return self.values.shape[0]

    def __getitem__(self, rows: Any) -> ColumnSparse:
        """Rows ``rows`` (an index array, a mask or a slice), as a ColumnSparse."""
        values = self.values[rows]
        return ColumnSparse(self.cols, values.reshape(-1, len(self.cols)), self.width)

    def copy(self) -> ColumnSparse:
        return ColumnSparse(self.cols.copy(), self.values.copy(), self.width)

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape)
        out[:, self.cols] = self.values
        return out

    def __mul__(self, c: float) -> ColumnSparse:
        return ColumnSparse(self.cols, c * self.values, self.width)

    __rmul__ = __mul__

    def __neg__(self) -> ColumnSparse:
        return self * -1.0

    def __add__(self, other: Any) -> Any:
        return add(self, other, 1.0)

    def __sub__(self, other: Any) -> Any:
        return add(self, other, -1.0)

    def __radd__(self, other: Any) -> Any:
        return add(other, self, 1.0)

    def __rsub__(self, other: Any) -> Any:
        return add(other, self, -1.0)

    __array_ufunc__ = None  # ndarray + ColumnSparse defers to __radd__ (a dense result)


Stat = np.ndarray | ColumnSparse


def dense(v: Stat) -> np.ndarray:
    """``v`` as an ndarray."""
    return v.toarray() if isinstance(v, ColumnSparse) else np.asarray(v)


def add(a: Stat, b: Stat, sign: float = 1.0) -> Stat:
    """a + sign · b: over the union of columns when both are column-sparse, else dense."""
    if isinstance(a, ColumnSparse) and isinstance(b, ColumnSparse):
        if a.width != b.width or len(a) != len(b):
            raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
        if np.array_equal(a.cols, b.cols):
            return ColumnSparse(a.cols, a.values + sign * b.values, a.width)
        cols = np.union1d(a.cols, b.cols)
        values = np.zeros((len(a), len(cols)))
        values[:, np.searchsorted(cols, a.cols)] = a.values
        values[:, np.searchsorted(cols, b.cols)] += sign * b.values
        return ColumnSparse(cols, values, a.width)
    if isinstance(b, ColumnSparse):
        out = np.array(a, dtype=float)  # a copy: a is never modified
        add_into(out, b, sign)
        return out
    return dense(a) + sign * np.asarray(b)


def add_into(out: np.ndarray, b: Stat, sign: float = 1.0) -> None:
    """out += sign · b in place: O(K · len(b.cols)) for a column-sparse b."""
    if isinstance(b, ColumnSparse):
        if out.shape != b.shape:
            raise ValueError(f"shapes differ: {out.shape} vs {b.shape}")
        out[:, b.cols] += sign * b.values
    else:
        out += sign * b


def fold(v: Stat, keep: int, gone: list[int]) -> Stat:
    """Row ``keep`` plus the rows ``gone`` (a merge: r_keep <- r_keep + Σ r_gone), in a copy."""
    out = v.copy()
    data = out.values if isinstance(out, ColumnSparse) else out
    data[keep] += data[gone].sum(axis=0)
    return out


def stack(a: Stat, b: Stat) -> Stat:
    """The rows of a, then the rows of b (an insert of components)."""
    if isinstance(a, ColumnSparse) or isinstance(b, ColumnSparse):
        if not (isinstance(a, ColumnSparse) and isinstance(b, ColumnSparse)):
            return np.concatenate([dense(a), dense(b)])
        cols = np.union1d(a.cols, b.cols)
        values = np.zeros((len(a) + len(b), len(cols)))
        values[: len(a), np.searchsorted(cols, a.cols)] = a.values
        values[len(a):, np.searchsorted(cols, b.cols)] = b.values
        return ColumnSparse(cols, values, a.width)
    return np.concatenate([a, b])


def zero_rows(v: Stat, n: int) -> Stat:
    """n rows of zeros of v's kind and width (no columns for a column-sparse v)."""
    if isinstance(v, ColumnSparse):
        return ColumnSparse(np.zeros(0, np.int64), np.zeros((n, 0)), v.width)
    return np.zeros((n, *np.shape(v)[1:]))


def place(out: np.ndarray, rows: np.ndarray, v: Stat) -> None:
    """out[rows] = v, for a dense ``out``."""
    if isinstance(v, ColumnSparse):
        out[rows] = 0.0
        out[np.asarray(rows)[:, None], v.cols] = v.values
    else:
        out[rows] = v


def changed_columns(v: Stat) -> np.ndarray | None:
    """The columns a column-sparse statistic can change (None: any)."""
    return v.cols if isinstance(v, ColumnSparse) else None


def to_arrays(name: str, v: Stat) -> dict[str, np.ndarray]:
    """Named arrays of a statistic: ``name`` (values), and for a column-sparse one also
    ``name@cols`` and ``name@width``."""
    if isinstance(v, ColumnSparse):
        return {name: v.values, f"{name}@cols": v.cols, f"{name}@width": np.array(v.width)}
    return {name: np.asarray(v)}


def from_arrays(arrays: dict[str, np.ndarray], name: str) -> Stat:
    """The inverse of to_arrays."""
    if f"{name}@cols" in arrays:
        return ColumnSparse(np.asarray(arrays[f"{name}@cols"]), np.asarray(arrays[name]),
                            int(arrays[f"{name}@width"]))
    return np.asarray(arrays[name])
