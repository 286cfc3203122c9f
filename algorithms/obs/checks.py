"""The checks of the items and arguments an observation model is given: dense (n, D) arrays,
one finite item, a responsibility weight w ≥ 0 and a component index (the one-item path's
absorb and remove, base.ObsModel)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .base import Data


def check_dense(X: Data, D: int) -> None:
    """Raise ValueError unless X is a dense (n, D) array."""
    if sp.issparse(X):
        raise ValueError("expected a dense array, got a sparse matrix")
    if X.ndim != 2 or X.shape[1] != D:
        raise ValueError(f"expected {D} columns, got shape {X.shape}")


def check_weight(w: float) -> float:
    """w as a float; ValueError unless it is finite and non-negative."""
    w = float(w)
    if not (np.isfinite(w) and w >= 0):
        raise ValueError(f"the weight must be finite and non-negative, got {w}")
    return w


def check_component(k: int, K: int) -> int:
    """k as an int; IndexError unless 0 <= k < K (a negative k would silently wrap)."""
    k = int(k)
    if not 0 <= k < K:
        raise IndexError(f"component {k} out of range for {K} components")
    return k


def dense_items(X: Data, D: int) -> np.ndarray:
    """One item (D,) or a few (n, D) as a float (n, D) array; ValueError otherwise."""
    if sp.issparse(X):
        raise ValueError("expected a dense array, got a sparse matrix")
    X = np.asarray(X, dtype=float)
    X = X[None, :] if X.ndim == 1 else X
    check_dense(X, D)
    return X


def dense_item(x: Data, D: int) -> np.ndarray:
    """One finite item, (D,) or (1, D), as a float (D,) array; ValueError otherwise."""
    X = dense_items(x, D)
    if X.shape[0] != 1:
        raise ValueError(f"expected one item, got {X.shape[0]}")
    if not np.all(np.isfinite(X)):
        raise ValueError("the item must be finite")
    return X[0]
