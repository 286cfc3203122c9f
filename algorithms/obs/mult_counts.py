"""Bag-of-words counts as the multinomial reads them (Hughes & Sudderth 2013, Sec. 2): float
CSR in canonical form, the Dirichlet's log normaliser logB(λ) = Σ_w log Γ(λ_w) - log Γ(Σ_w λ_w),
the multinomial coefficient log(n_d! / Π_w x_dw!) the token-sequence likelihoods leave out, and
the non-zero entries of dense counts."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from .base import Data


def log_B(lam: np.ndarray) -> np.ndarray:
    """logB(λ) = Σ_w log Γ(λ_w) - log Γ(Σ_w λ_w), over the last axis."""
    return gammaln(lam).sum(-1) - gammaln(lam.sum(-1))


def log_multinomial_coefficient(X: Data) -> np.ndarray:
    """log(n_d! / Π_w x_dw!) per document: what turns the token-sequence likelihoods here into
    the probability of the count vector (the scale of Tank et al.'s Table 1)."""
    Xc = as_csr(X)
    rows = np.repeat(np.arange(Xc.shape[0]), np.diff(Xc.indptr))
    n_d = np.asarray(Xc.sum(1)).ravel()
    return gammaln(n_d + 1) - np.bincount(rows, weights=gammaln(Xc.data + 1),
                                          minlength=Xc.shape[0])


def nonzero_entries(wc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.nonzero of a 2-d array: the rows and columns of its non-zero entries in row-major
    order, from the flat positions of a boolean mask (about half np.nonzero's time on K x V
    counts)."""
    flat = np.flatnonzero(np.ravel(wc) != 0)
    rows = flat // wc.shape[1]
    flat -= rows * wc.shape[1]
    return rows, flat

def as_csr(X: Data) -> sp.csr_matrix:
    """X as float CSR in canonical form (sorted, duplicates summed), never modifying X (X itself
    when it is one)."""
    if type(X) is sp.csr_matrix and X.dtype == np.float64 and X.has_canonical_format:
        return X
    if sp.issparse(X):
        Xc = sp.csr_matrix(X, dtype=float)
        if not Xc.has_canonical_format:
            Xc = Xc.copy()  # the conversion may share X's arrays; sum_duplicates works in place
            Xc.sum_duplicates()
        return Xc
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"expected a 2-d count matrix, got shape {X.shape}")
    return sp.csr_matrix(X)
