"""The recurrent Chinese restaurant process of the temporal DP mixture (Ahmed & Xing 2008, Eq. 4.4
with the W-epoch window of Sec. 6).

Chains k carry counts n_{k,t} per epoch t. Epoch t's pseudo-counts are the decayed counts of the
last W epochs, m_{k,t} = Σ_{h=1}^{W} w_h n_{k,t−h} with w_h = exp(−h/λ) (λ = ∞: w_h = 1), and
M_t = Σ_k m_{k,t}. The i-th item of epoch t joins chain k with probability
(m_{k,t} + n^{(i)}_{k,t}) / (M_t + i − 1 + α) when m_{k,t} + n^{(i)}_{k,t} > 0 and a new chain with
α / (M_t + i − 1 + α). The whole epoch, label-free (new chains identified by their members):

    P(c_t | past) = Γ(M_t + α) / Γ(M_t + N_t + α) · Π_{k: m_k > 0} Γ(m_k + n_k) / Γ(m_k)
                    · Π_{k: m_k = 0, n_k > 0} α Γ(n_k).

W = 0 gives an independent CRP per epoch; W = T with λ = ∞ the CRP of the pooled items.
With membership stability (``tdpm/persistence.py``) the epoch's stayers s_k sit first: m_k
becomes m_k + s_k in the denominators (Γ(m_k + s_k), Γ(M + S + α)), n_k still counts everyone.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln


def decay_weights(window: int, decay: float) -> np.ndarray:
    """w_h = exp(−h/λ) for h = 1..W (all ones for λ = ∞)."""
    if window < 0:
        raise ValueError(f"window must be >= 0, not {window}")
    if not decay > 0:
        raise ValueError(f"decay must be positive (inf: no decay), not {decay}")
    h = np.arange(1, window + 1, dtype=float)
    return np.ones(window) if math.isinf(decay) else np.exp(-h / decay)


def pseudo_counts(counts: np.ndarray, t: int, window: int, decay: float) -> np.ndarray:
    """m_{·,t} = Σ_{h=1}^{W} w_h n_{·,t−h} from ``counts`` (T epochs × K chains); epochs
    before the first count as empty."""
    w = decay_weights(window, decay)
    m = np.zeros(counts.shape[1])
    for h, weight in enumerate(w, start=1):
        if t - h >= 0:
            m += weight * counts[t - h]
    return m


def seat_probabilities(m: np.ndarray, n: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """Eq. 4.4: the next item's probabilities of joining each chain (0 for a chain with
    m_k + n_k = 0) and of starting a new one, given pseudo-counts m and this epoch's counts n."""
    weight = np.asarray(m, float) + np.asarray(n, float)
    total = weight.sum() + alpha
    return weight / total, alpha / total


def log_epoch_prior(m: np.ndarray, n: np.ndarray, alpha: float,
                    stay: np.ndarray | None = None) -> float:
    """log P(c_t | past) of this epoch's counts n over the chains with pseudo-counts m (chains
    with m_k = 0 and n_k > 0 are born in the epoch; label-free); given ``stay`` (stayers per
    chain, seated first), the probability of the others' seating."""
    m, n = np.asarray(m, float), np.asarray(n, float)
    s = np.zeros_like(m) if stay is None else np.asarray(stay, float)
    inherited = m > 0
    born = ~inherited & (n > 0)
    value = gammaln(m.sum() + s.sum() + alpha) - gammaln(m.sum() + n.sum() + alpha)
    value += float(np.sum(gammaln(m[inherited] + n[inherited])
                          - gammaln(m[inherited] + s[inherited])))
    value += float(np.sum(math.log(alpha) + gammaln(n[born])))
    return float(value)


def log_prior(counts: np.ndarray, window: int, decay: float, alpha: float,
              stay: np.ndarray | None = None) -> float:
    """log P(c_1, ..., c_T) = Σ_t log P(c_t | past) for counts (T epochs × K chains), given the
    stayers ``stay`` (same shape) if any."""
    return sum(log_epoch_prior(pseudo_counts(counts, t, window, decay), counts[t], alpha,
                               None if stay is None else stay[t])
               for t in range(counts.shape[0]))


def chain_log_factors(cols: np.ndarray, t: int, window: int, decay: float,
                      alpha: float, stay: np.ndarray | None = None) -> np.ndarray:
    """Σ_{s=t}^{min(t+W, T−1)} of each chain's own factor of log P(c_s | past) for count columns
    ``cols`` (T epochs × C chains): log Γ(m + n) − log Γ(m) where m > 0, log α + log Γ(n) where
    m = 0 < n, 0 otherwise. Moving one item of epoch t changes only these factors of the chains
    it leaves and joins (M_s does not depend on the labels), so their difference is the prior
    part of the item's conditional with the exact W-epoch look-ahead. ``stay``: the columns'
    stayers (same shape), log Γ(m + s) in place of log Γ(m)."""
    cols = np.asarray(cols, float)
    return own_factors(cols, t, min(t + window, cols.shape[0] - 1) + 1,
                       decay_weights(window, decay), alpha, stay)


def chain_log_prior(cols: np.ndarray, window: int, decay: float, alpha: float) -> np.ndarray:
    """Each chain's own factors of log P(c_1, ..., c_T) (``chain_log_factors`` over every epoch)
    for count columns ``cols``: log P of the columns is their sum plus the Γ(M_t + α) /
    Γ(M_t + N_t + α) terms, which depend on the columns' sum only."""
    cols = np.asarray(cols, float)
    return own_factors(cols, 0, cols.shape[0], decay_weights(window, decay), alpha)


def own_factors(cols: np.ndarray, start: int, stop: int, w: np.ndarray, alpha: float,
                stay: np.ndarray | None = None) -> np.ndarray:
    """Σ_{s=start}^{stop−1} of each column's own factor of log P(c_s | past), with decay weights
    w (``chain_log_factors``), vectorised over epochs and columns."""
    m = np.zeros((stop - start, cols.shape[1]))
    for h, weight in enumerate(w, start=1):
        lo = max(start, h)  # epochs s with s − h >= 0
        if lo < stop:
            m[lo - start:] += weight * cols[lo - h:stop - h]
    n = cols[start:stop]
    inherited = m > 0
    born = ~inherited & (n > 0)
    seated = m if stay is None else m + np.asarray(stay, float)[start:stop]
    value = np.where(inherited, gammaln(np.where(inherited, m + n, 1.0))
                     - gammaln(np.where(inherited, seated, 1.0)), 0.0)
    value += np.where(born, math.log(alpha) + gammaln(np.where(born, n, 1.0)), 0.0)
    return value.sum(0)
