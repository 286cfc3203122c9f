"""Clustering agreement scores computed from the contingency table of two labelings."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import xlogy


def contingency(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Counts n_ij of items with label i in ``a`` and label j in ``b``."""
    _, ia = np.unique(np.asarray(a), return_inverse=True)
    _, ib = np.unique(np.asarray(b), return_inverse=True)
    table = np.zeros((ia.max() + 1, ib.max() + 1))
    np.add.at(table, (ia, ib), 1)
    return table


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """Hubert & Arabie's ARI: (Σ C(n_ij,2) - E) / (½(Σ C(a_i,2) + Σ C(b_j,2)) - E) with
    E = Σ C(a_i,2) Σ C(b_j,2) / C(n,2); computed in integers, one division at the end (A = 0011
    against B = 0101 is exactly -0.5). 1 when the denominator is 0 (both labelings one cluster,
    or both all singletons)."""
    t = contingency(a, b).astype(np.int64)
    n = int(t.sum())

    def pairs(counts: np.ndarray) -> int:
        return int((counts * (counts - 1) // 2).sum())

    total, both = n * (n - 1) // 2, pairs(t)
    rows, cols = pairs(t.sum(1)), pairs(t.sum(0))
    # ARI · 2 C(n,2) / 2 C(n,2): numerator and denominator multiplied through by 2 C(n,2)
    denom = total * (rows + cols) - 2 * rows * cols
    return 1.0 if denom == 0 else 2 * (total * both - rows * cols) / denom


def normalized_mutual_info(a: np.ndarray, b: np.ndarray) -> float:
    """NMI with the arithmetic-mean normalisation (scikit-learn's default,
    ``average_method="arithmetic"``): I(a; b) / ((H(a) + H(b)) / 2), a ratio, so the log's base
    does not matter; 1 when both labelings are a single cluster."""
    p = contingency(a, b) / len(a)
    pa, pb = p.sum(1), p.sum(0)
    mi = float(np.sum(xlogy(p, p)) - np.sum(xlogy(pa, pa)) - np.sum(xlogy(pb, pb)))
    ha, hb = -float(np.sum(xlogy(pa, pa))), -float(np.sum(xlogy(pb, pb)))
    if ha + hb == 0:
        return 1.0
    return max(0.0, mi / (0.5 * (ha + hb)))


def variation_of_information(a: np.ndarray, b: np.ndarray) -> float:
    """Meila's VI(a, b) = H(a) + H(b) − 2 I(a; b) = H(a | b) + H(b | a), in nats (natural log):
    −(1/N) Σ_ij n_ij [log(n_ij / a_i) + log(n_ij / b_j)] over the contingency table n_ij with
    margins a_i, b_j. Summed as conditional entropies, every term is ≤ 0, so identical
    partitions give exactly 0 and A = 0011 against B = 0101 gives 2 log 2."""
    t = contingency(a, b)
    i, j = np.nonzero(t)
    n = t[i, j]
    terms = np.log(n / t.sum(1)[i]) + np.log(n / t.sum(0)[j])
    return max(0.0, -float(np.sum(n * terms)) / float(t.sum()))


def global_and_local_vi(a: np.ndarray, b: np.ndarray, epochs: np.ndarray) -> tuple[float, float]:
    """Ahmed & Xing Sec. 7: GVI, the VI of the chain labels over all items, and LVI, the average
    over epochs of the per-epoch VI."""
    epochs = np.asarray(epochs)
    local = [variation_of_information(a[epochs == t], b[epochs == t]) for t in np.unique(epochs)]
    return variation_of_information(a, b), float(np.mean(local))


def alignment_accuracy(clusters: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy after mapping each cluster to its majority label (the memoized VB paper's MNIST
    figure): (1/N) Σ_k max_j n_kj over the contingency table n_kj of clusters k and labels j.
    A tie maps the cluster to its smallest label (which does not change the figure). Not
    symmetric: splitting a label into many clusters is not penalised (N singletons score 1)."""
    clusters, labels = np.asarray(clusters), np.asarray(labels)
    if clusters.shape != labels.shape or clusters.ndim != 1:
        raise ValueError(f"clusters {clusters.shape} and labels {labels.shape}: expected two "
                         "1-d arrays of the same length")
    if len(clusters) == 0:
        raise ValueError("no items: the accuracy of an empty labeling is undefined")
    t = contingency(clusters, labels)
    return float(t.max(axis=1).sum() / len(clusters))


def majority_labels(clusters: np.ndarray, labels: np.ndarray) -> dict[Any, Any]:
    """The label each cluster maps to in ``alignment_accuracy``: its most frequent label, the
    smallest of those on a tie."""
    cs, ls = np.unique(np.asarray(clusters)), np.unique(np.asarray(labels))
    t = contingency(clusters, labels)  # rows and columns in the order of cs and ls
    return {c.item(): ls[j].item() for c, j in zip(cs, t.argmax(axis=1), strict=True)}
