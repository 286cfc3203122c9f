"""The fully observed language model of Sec. 5.1 under the sequential ddCRP
(docs/theory/ddcrp.rst).

Tokens w_i sit at tables; each table draws its word from G_0 (word frequencies). With the words
observed, p(w | c) = Π_i G_0(w_i)^{1[c_i = i]} · 1[w_i = w_{c_i}]^{1[c_i ≠ i]}: every customer of
a table shares the root's word, and only the root draws from G_0. The likelihood factorises over
the links, so the posterior is Π_i p(c_i | w) with

    p(c_i = j | w) ∝ f(d_ij) 1[w_j = w_i] (j < i),    p(c_i = i | w) ∝ α G_0(w_i),

the mean-field family contains it, and one coordinate sweep reaches it from any start (why the
paper saw convergence in one iteration). E[#tables] = Σ_i q(c_i = i) in closed form.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp


def word_links(words: np.ndarray, logp: np.ndarray, log_g0: np.ndarray) -> np.ndarray:
    """q(c) for observed words: the band of ``logp`` (``links.log_link_band``) restricted to
    earlier tokens of the same word, the self-link weighted by G_0(w_i); rows normalised."""
    w = np.asarray(words)
    N, width = logp.shape
    d = np.arange(width)
    earlier = np.arange(N)[:, None] - d[None, :]
    same = (earlier >= 0) & (w[np.maximum(earlier, 0)] == w[:, None])
    score = np.where(same, logp, -np.inf)
    score[:, 0] = logp[:, 0] + np.asarray(log_g0, float)[w]
    return np.exp(score - logsumexp(score, axis=1, keepdims=True))


def expected_tables(q: np.ndarray) -> float:
    """E[#tables] = Σ_i q(c_i = i)."""
    return float(q[:, 0].sum())
