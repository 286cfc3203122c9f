"""The data-scaled default priors' E[Σ]: the sample covariance with its correlations shrunk
towards its diagonal (Schäfer & Strimmer 2005, target "D"), constant columns given the mean
variance (docs/theory/priors.rst)."""

from __future__ import annotations

import numpy as np

SHRINKAGE = 0.1  # default weight of the diagonal target in data_scale_matrix

# a column whose variance is below this share of the mean variance counts as constant: only
# float64 rounding, far below any real ratio of scales (right_k's scales6 spans 1e8 in variance)
CONSTANT_SHARE = 1e-12


def shrinkage_target(var: np.ndarray, floor: np.ndarray | None = None) -> np.ndarray:
    """The diagonal target T of data_scale_matrix from the columns' variances (or second
    moments): each column's own, and their mean v for a constant column (below
    CONSTANT_SHARE · v), which has none; at least ``floor`` (per column, None: 0), which a
    fit gives a constant column far from 0 (pipeline/runtime/context.py, constant_floor)."""
    v = max(float(np.mean(var)), 1e-12) if len(var) else 1.0
    target = np.where(constant_columns(var), v, var)
    return target if floor is None else np.maximum(target, floor)


def constant_columns(var: np.ndarray) -> np.ndarray:
    """Which columns count as constant: variance (or second moment) below CONSTANT_SHARE of
    their mean."""
    return var <= CONSTANT_SHARE * (max(float(np.mean(var)), 1e-12) if len(var) else 1.0)


def prior_variances(var: np.ndarray, scale: float, shrinkage: float = SHRINKAGE,
                    floor: np.ndarray | None = None) -> np.ndarray:
    """The diagonal of data_scale_matrix from the diagonal of M alone: scale · [(1 - λ) var_j
    + λ T_jj], i.e. scale · var_j for a real column and about scale · λ · v for a constant
    one."""
    return scale * ((1.0 - shrinkage) * var + shrinkage * shrinkage_target(var, floor))


def data_scale_matrix(M: np.ndarray, scale: float, shrinkage: float = SHRINKAGE,
                      floor: np.ndarray | None = None) -> np.ndarray:
    """scale · [(1 - λ) M + λ T] for a sample's covariance or second-moment matrix M: the
    default Gaussian priors' E[Σ]. T = diag(M) (Schäfer & Strimmer 2005's target "D") shrinks
    the correlations only, so every column keeps its own variance and the prior follows each
    column's units (a column rescaled by c rescales its row and column of E[Σ] by c); a
    constant column gets T_jj = the mean variance (shrinkage_target), so E[Σ_jj] =
    scale · λ · mean variance instead of 0 (or ``floor``'s, when larger)."""
    if not 0 < shrinkage <= 1:
        raise ValueError(f"shrinkage must lie in (0, 1], not {shrinkage}")
    if not (isinstance(scale, int | float) and np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, not {scale!r}")
    target = shrinkage_target(np.diag(M), floor)
    return scale * ((1.0 - shrinkage) * M + shrinkage * np.diag(target))
