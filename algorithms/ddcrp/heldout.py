"""Held-out scoring under the sequential ddCRP (the paper's Eq. 7, reconstructed in
docs/theory/ddcrp.rst, held-out items).

A test item comes after the N training customers and links only to them (no self-link):
p̃(c* = j) = f(d*_j) / Σ_{j'} f(d*_{j'}) over the training customers (the W most recent with a
window). A test item placed among the training items links, as every customer does, only
backwards: to the training customers at or before its position. Its density is
p(x*) = Σ_j p̃(c* = j) Σ_k Z_jk p(x* | table k), where p(x* | table k) is the posterior
predictive ∫ p(x* | θ) q(θ_k) dθ (not the plug-in at the posterior mean).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

from ..obs.base import Arrays, Data, ObsModel


def heldout_links(train_positions: np.ndarray, test_positions: np.ndarray,
                  f: Callable[[np.ndarray], np.ndarray], window: int | None = None) -> np.ndarray:
    """p̃(c* = j): (n*, N), each row ∝ f(t* − t_j) over the training customers at or before the
    test item's position t* (links point backwards; the last ``window`` of those if given).
    Training positions must be non-decreasing. A test item with no positive weight (none
    before it, or every decay weight 0) is an error naming it."""
    x = np.asarray(train_positions, float)
    t = np.asarray(test_positions, float)
    if np.any(np.diff(x) < 0):
        raise ValueError("training positions must be non-decreasing (the sequence's order)")
    d = t[:, None] - x[None, :]
    before = d >= 0  # false for a NaN position too
    w = np.where(before, f(np.where(before, d, 0.0)), 0.0)
    if window is not None:
        n_before = before.sum(1, keepdims=True)  # a prefix of the sorted training positions
        w[np.arange(len(x))[None, :] < n_before - window] = 0.0
    total = w.sum(1)
    bad = np.flatnonzero(~(total > 0))
    if len(bad):
        i = int(bad[0])
        why = ("no training customer at or before its position "
               f"{t[i]:g} (the first is at {x[0]:g})" if len(x) and not before[i].any()
               else "every decay weight is 0: widen the decay or the window")
        raise ValueError(f"held-out item {i} has no training customer to link to: {why}")
    return w / total[:, None]


def heldout_logpdf(X_test: Data, link: np.ndarray, Z: np.ndarray, post: Arrays,
                   obs: ObsModel) -> np.ndarray:
    """log p(x*) per test item: log Σ_k (p̃ Z)_k + log p(x* | table k), in log space."""
    mix = link @ Z
    with np.errstate(divide="ignore"):
        return logsumexp(np.log(mix) + obs.predictive_logpdf(X_test, post), axis=1)
