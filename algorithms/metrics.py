"""Clustering agreement scores computed from the contingency table of two labelings."""

from __future__ import annotations

import numpy as np
from scipy.special import comb, xlogy


def contingency(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Counts n_ij of items with label i in ``a`` and label j in ``b``."""
    _, ia = np.unique(np.asarray(a), return_inverse=True)
    _, ib = np.unique(np.asarray(b), return_inverse=True)
    table = np.zeros((ia.max() + 1, ib.max() + 1))
    np.add.at(table, (ia, ib), 1)
    return table


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """Hubert & Arabie's ARI: (Σ C(n_ij,2) - E) / (½(Σ C(a_i,2) + Σ C(b_j,2)) - E)."""
    t = contingency(a, b)
    n = t.sum()
    pairs = comb(t, 2).sum()
    rows, cols = comb(t.sum(1), 2).sum(), comb(t.sum(0), 2).sum()
    expected = rows * cols / comb(n, 2) if n > 1 else 0.0
    denom = 0.5 * (rows + cols) - expected
    return 1.0 if denom == 0 else float((pairs - expected) / denom)


def normalized_mutual_info(a: np.ndarray, b: np.ndarray) -> float:
    """NMI with the arithmetic-mean normalisation: I(a; b) / ((H(a) + H(b)) / 2)."""
    p = contingency(a, b) / len(a)
    pa, pb = p.sum(1), p.sum(0)
    mi = float(np.sum(xlogy(p, p)) - np.sum(xlogy(pa, pa)) - np.sum(xlogy(pb, pb)))
    ha, hb = -float(np.sum(xlogy(pa, pa))), -float(np.sum(xlogy(pb, pb)))
    if ha + hb == 0:
        return 1.0
    return max(0.0, mi / (0.5 * (ha + hb)))


def variation_of_information(a: np.ndarray, b: np.ndarray) -> float:
    """Meila's VI(a, b) = H(a) + H(b) − 2 I(a; b), natural log (0 for identical partitions)."""
    p = contingency(a, b) / len(a)
    pa, pb = p.sum(1), p.sum(0)
    h = -float(np.sum(xlogy(pa, pa))) - float(np.sum(xlogy(pb, pb)))
    mi = float(np.sum(xlogy(p, p)) - np.sum(xlogy(pa, pa)) - np.sum(xlogy(pb, pb)))
    return max(0.0, h - 2 * mi)


def global_and_local_vi(a: np.ndarray, b: np.ndarray, epochs: np.ndarray) -> tuple[float, float]:
    """Ahmed & Xing Sec. 7: GVI, the VI of the chain labels over all items, and LVI, the average
    over epochs of the per-epoch VI."""
    epochs = np.asarray(epochs)
    local = [variation_of_information(a[epochs == t], b[epochs == t]) for t in np.unique(epochs)]
    return variation_of_information(a, b), float(np.mean(local))
