"""Items held by the caller (numpy, scipy.sparse, pandas, pyarrow, Dask) as float64 matrices: the
estimator's input, checked as ``bnpmix ingest`` checks a file, and cut into the row blocks that
become its partitions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

from .dense import check_finite
from .errors import DataError
from .manifest import Manifest, integer_columns
from .writer import partition_rows


def as_matrix(X: Any) -> Any:
    """X as float64: a CSR matrix for sparse input, else a 2-D array (finite values)."""
    if hasattr(X, "dask"):
        X = X.compute()
    if hasattr(X, "to_pandas") and not hasattr(X, "to_numpy"):  # pyarrow tables
        X = X.to_pandas()
    X = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X)
    if np.iscomplexobj(X):
        raise ValueError("Complex data not supported: X must be real")
    X = X.astype(np.float64)
    data = X.data if sp.issparse(X) else X
    if X.ndim != 2:
        raise ValueError(f"expected a 2-D array of items, got shape {X.shape}: Reshape your "
                         "data with X.reshape(-1, 1) for one feature or X.reshape(1, -1) for "
                         "one item")
    if X.shape[0] < 1:
        raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of "
                         "1 is required.")
    if X.shape[1] < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of "
                         "1 is required.")
    if not np.all(np.isfinite(data)):
        name_non_finite(X)
    return X


def name_non_finite(X: Any) -> None:
    """Raise the ValueError of storage's check_finite (what ``bnpmix ingest`` reports) for X:
    its first row holding NaN or inf, and the column, both 0-based."""
    row = (int(np.searchsorted(X.indptr, np.flatnonzero(~np.isfinite(X.data))[0], "right")) - 1
           if sp.issparse(X) else int(np.flatnonzero(~np.isfinite(X).all(axis=1))[0]))
    try:
        check_finite(X[row:row + 1].toarray() if sp.issparse(X) else X[row:row + 1], "X", row)
    except DataError as exc:
        raise ValueError(str(exc)) from None


def width(X: Any) -> int:
    """The number of columns of X without reading its rows."""
    shape = getattr(X, "shape", None)
    return int(shape[1]) if shape is not None and len(shape) == 2 else as_matrix(X).shape[1]


def is_dask(X: Any) -> bool:
    """Whether X is a Dask array or dataframe (its blocks computed where they are used)."""
    return hasattr(X, "to_delayed") and (hasattr(X, "divisions") or hasattr(X, "chunks"))


def dask_pieces(X: Any) -> list[tuple[list[Any], bool]]:
    """A Dask collection's row blocks as (delayed pieces, whether a dataframe's): a dataframe's
    partitions, or an array's rows of chunks (stacked side by side when read)."""
    if hasattr(X, "divisions"):
        return [([part], True) for part in X.to_delayed()]
    return [(list(np.atleast_1d(row)), False) for row in X.to_delayed()]


def block_of(values: list[Any], frame: bool) -> Any:
    """One row block from its computed pieces (block_pieces' order), as as_matrix gives it."""
    return as_matrix(values[0] if frame else np.hstack(values))


def blocks(X: Any) -> Iterator[Any]:
    """X's row blocks, each in memory one at a time: a Dask collection's partitions or chunks,
    else as many rows at a time as a partition takes by default (storage.partition_rows)."""
    if is_dask(X):
        for pieces, frame in dask_pieces(X):
            yield block_of([p.compute() for p in pieces], frame)
        return
    X = as_matrix(X)
    rows = partition_rows(None, None if sp.issparse(X) else X.shape[1])
    for a in range(0, X.shape[0], rows):
        yield X[a:a + rows]


def manifest_of(first: Any) -> Manifest:
    """The manifest of a corpus of X, from its first block: dense rows, or bag-of-words (words
    w0, w1, ...) for sparse counts; no partitions yet."""
    sparse = sp.issparse(first)
    return Manifest(kind="bow" if sparse else "dense", dim=first.shape[1],
                    dtype="int32" if sparse else "float64",
                    vocab=[f"w{v}" for v in range(first.shape[1])] if sparse else None)


def check_block(block: Any, dim: int) -> np.ndarray | None:
    """A block of X as a partition: its width ``dim`` and (sparse) non-negative integer counts
    checked; a dense block's integer_columns (None for counts)."""
    if block.shape[1] != dim:
        raise ValueError(f"a block of X has {block.shape[1]} columns, not {dim}")
    if not sp.issparse(block):
        return integer_columns(block)
    if np.any(block.data < 0) or np.any(block.data != np.round(block.data)):
        raise ValueError("sparse X must hold non-negative integer counts")
    return None


def counts_read_back(block: sp.csr_matrix) -> sp.csr_matrix:
    """A block of counts as a bag-of-words partition holds and reads it: int32 word ids and
    counts, the counts read as float64 (Corpus.read's matrix, bit for bit)."""
    indptr = np.concatenate([[0], np.cumsum(np.diff(block.indptr))])
    return sp.csr_matrix((block.data.astype(np.int32).astype(np.float64),
                          block.indices.astype(np.int32), indptr), shape=block.shape)
