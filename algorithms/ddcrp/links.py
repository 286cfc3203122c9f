"""The sequential distance-dependent CRP's link prior (Bartunov & Vetrov 2014; the mathematics as
re-derived in docs/theory/ddcrp.rst, the paper's copy having lost its equations).

Customers i = 0..N−1 in sequence order link to an earlier customer j with probability
f(d_ij)/Z_i or to themselves with α/Z_i, Z_i = α + Σ_{j<i} f(d_ij). A table is the set of
customers whose link paths end at the same self-linker j.

Links are held as bands: ``band[i, d]`` is about the link i → i − d (d = 0 the self-link), for
d = 0..W, W the window (the W most recent customers; W = N − 1 keeps every link). Entries with
i − d < 0 are −inf (log) or 0. Memory is O(N·W), not O(N²).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

DECAYS = ("none", "window", "exponential", "logistic")


def decay(kind: str, a: float = 1.0) -> Callable[[np.ndarray], np.ndarray]:
    """The decay f(d): none f ≡ 1 (the sequential CRP), window 1[d < a], exponential e^{−d/a},
    logistic e^{−d+a}/(1 + e^{−d+a})."""
    if kind == "none":
        return lambda d: np.ones_like(np.asarray(d, float))
    if not a > 0:
        raise ValueError(f"the {kind} decay's parameter a must be positive, not {a}")
    if kind == "window":
        return lambda d: (np.asarray(d, float) < a).astype(float)
    if kind == "exponential":
        return lambda d: np.exp(-np.asarray(d, float) / a)
    if kind == "logistic":
        return lambda d: 1.0 / (1.0 + np.exp(np.asarray(d, float) - a))
    raise ValueError(f"unknown decay {kind!r}: choose from {', '.join(DECAYS)}")


def window_width(N: int, window: int | None) -> int:
    """W: the links kept per customer besides the self-link (all N − 1 without a window)."""
    if window is None:
        return max(N - 1, 0)
    if window < 1:
        raise ValueError(f"the window must be at least 1 customer, not {window}")
    return min(window, max(N - 1, 0))


def log_link_band(positions: np.ndarray, alpha: float, f: Callable[[np.ndarray], np.ndarray],
                  window: int | None = None) -> np.ndarray:
    """log p(c_i = i − d) as an (N, W + 1) band: f(d_ij)/Z_i for the W most recent j < i with
    d_ij = positions_i − positions_j, α/Z_i at d = 0, Z_i summed over the kept links only."""
    x = np.asarray(positions, float)
    N = len(x)
    W = window_width(N, window)
    i = np.arange(N)[:, None]
    j = i - np.arange(W + 1)[None, :]
    valid = j >= 0
    w = np.where(valid, f(np.where(valid, x[:, None] - x[np.maximum(j, 0)], 0.0)), 0.0)
    w[:, 0] = alpha
    with np.errstate(divide="ignore"):
        return np.log(w) - np.log(w.sum(1, keepdims=True))


def log_link_prior(positions: np.ndarray, alpha: float,
                   f: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """log p(c_i = j) as an N × N lower-triangular matrix (−inf above the diagonal)."""
    return dense(log_link_band(positions, alpha, f), -np.inf)


def dense(band: np.ndarray, fill: float = 0.0) -> np.ndarray:
    """The N × N lower-triangular matrix of a band (``fill`` outside it)."""
    N, width = band.shape
    out = np.full((N, N), fill)
    for d in range(min(width, N)):
        rows = np.arange(d, N)
        out[rows, rows - d] = band[d:, d]
    return out


def from_dense(M: np.ndarray, W: int, fill: float = 0.0) -> np.ndarray:
    """The (N, W + 1) band of a lower-triangular matrix (``fill`` where i − d < 0)."""
    N = len(M)
    out = np.full((N, W + 1), fill)
    for d in range(min(W + 1, N)):
        rows = np.arange(d, N)
        out[d:, d] = M[rows, rows - d]
    return out
