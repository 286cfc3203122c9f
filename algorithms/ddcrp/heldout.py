"""Held-out scoring under the sequential ddCRP (issue 12; the paper's Eq. 7, reconstructed).

A test item comes after the N training customers and links only to them (no self-link):
p̃(c* = j) = f(d*_j) / Σ_{j'} f(d*_{j'}) over the training customers (the W most recent with a
window). Its density is p(x*) = Σ_j p̃(c* = j) Σ_k Z_jk p(x* | table k), where p(x* | table k) is
the posterior predictive ∫ p(x* | θ) q(θ_k) dθ (not the plug-in at the posterior mean).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

from ..obs.base import Arrays, Data, ObsModel


def heldout_links(train_positions: np.ndarray, test_positions: np.ndarray,
               f: Callable[[np.ndarray], np.ndarray], window: int | None = None) -> np.ndarray:
    """p̃(c* = j): (n*, N), each row ∝ f(d*_j) over the training customers (the last ``window``
    of them if given). A test item with no positive weight is an error naming it."""
    x = np.asarray(train_positions, float)
    w = f(np.asarray(test_positions, float)[:, None] - x[None, :])
    if window is not None:
        w[:, :max(len(x) - window, 0)] = 0.0
    total = w.sum(1, keepdims=True)
    bad = np.flatnonzero(~(total[:, 0] > 0))
    if len(bad):
        raise ValueError(f"held-out item {int(bad[0])} has no training customer to link to "
                         "(every decay weight is 0): widen the decay or the window")
    return w / total


def heldout_logpdf(X_test: Data, link: np.ndarray, Z: np.ndarray, post: Arrays,
                   obs: ObsModel) -> np.ndarray:
    """log p(x*) per test item: log Σ_k (p̃ Z)_k + log p(x* | table k), in log space."""
    mix = link @ Z
    with np.errstate(divide="ignore"):
        return logsumexp(np.log(mix) + obs.predictive_logpdf(X_test, post), axis=1)
