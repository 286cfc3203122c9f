"""The synthetic temporal DP mixture data (``bnpmix.datasets.tdpm_gaussian``, Ahmed & Xing 2008,
Sec. 7): the recurrent CRP's seating probabilities, canonical labels, the chains' alive epochs,
the walk's and the emission's variances, reproducibility. The RCRP's probabilities are recomputed
here from the labels alone (not with the sampler's code)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bnpmix.algorithms.tdpm.gibbs import alive_per_epoch, relabel
from bnpmix.datasets import tdpm_gaussian


def seating_surprise(labels, epochs, T, alpha, window, decay):
    """Σ over items of (indicator − predicted probability) and Σ of the indicator's variance,
    for two events of each item in seating order: it starts a new chain (α / (M_t + i − 1 + α));
    it joins a chain inherited from the last W epochs (Σ_{k: m_k > 0} (m_k + n_k) / (same))."""
    w = np.array([1.0 if math.isinf(decay) else math.exp(-h / decay)
                  for h in range(1, window + 1)])
    K = labels.max() + 1
    counts = np.zeros((T, K))
    np.add.at(counts, (epochs, labels), 1)
    out = {"new": [0.0, 0.0], "inherited": [0.0, 0.0]}
    seen = np.zeros(K, bool)
    for t in range(T):
        m = sum(w[h - 1] * counts[t - h] for h in range(1, window + 1) if t - h >= 0)
        m = np.zeros(K) if np.isscalar(m) else m
        n = np.zeros(K)
        for k in labels[epochs == t]:
            denom = m.sum() + n.sum() + alpha
            p = {"new": alpha / denom, "inherited": (m + n)[m > 0].sum() / denom}
            hit = {"new": not seen[k], "inherited": m[k] > 0}
            for key in out:
                out[key][0] += hit[key] - p[key]
                out[key][1] += p[key] * (1 - p[key])
            seen[k] = True
            n[k] += 1
    return out


@pytest.mark.parametrize("window, decay", [(1, 0.8), (2, 1.5), (3, math.inf)])
def test_rcrp_seating_probabilities(window, decay):
    """Births and joins of inherited chains match the RCRP's predictive probabilities (a sum of
    martingale differences: |Σ (hit − p)| within 4 standard deviations). Checked by mutation:
    w_h = e^{−hλ} instead of e^{−h/λ}, no decay, only the last epoch's counts, 1.3 α, or joins
    that ignore m each move one of the sums by 5 sd or more."""
    alpha = 2.5
    totals = {"new": [0.0, 0.0], "inherited": [0.0, 0.0]}
    for seed in range(6):
        _, epochs, labels, _ = tdpm_gaussian(n_epochs=20, per_epoch=60, alpha=alpha,
                                             window=window, decay=decay, seed=seed)
        for key, (d, v) in seating_surprise(labels, epochs, 20, alpha, window, decay).items():
            totals[key][0] += d
            totals[key][1] += v
    for key, (d, v) in totals.items():
        assert abs(d) < 4 * math.sqrt(v), (key, d, math.sqrt(v))


def test_births_in_first_epoch_follow_the_crp():
    """Epoch 0 is a CRP: E[#chains] = Σ_{i<n} α / (α + i), Var = Σ p_i (1 − p_i)."""
    alpha, n, seeds = 2.5, 100, 300
    p = alpha / (alpha + np.arange(n))
    born = [tdpm_gaussian(n_epochs=1, per_epoch=n, alpha=alpha, seed=s)[2].max() + 1
            for s in range(seeds)]
    se = math.sqrt(np.sum(p * (1 - p)) / seeds)
    assert abs(np.mean(born) - p.sum()) < 4 * se, (np.mean(born), p.sum(), se)


@pytest.mark.parametrize("window", [0, 1, 3])
def test_labels_canonical_and_alive_epochs(window):
    T, per = 25, 40
    X, epochs, labels, states = tdpm_gaussian(n_epochs=T, per_epoch=per, window=window,
                                              decay=2.0, seed=window)
    K = labels.max() + 1
    assert X.shape == (T * per, 2) and states.shape == (K, T, 2)
    assert labels.dtype == np.int64 and labels.min() == 0
    np.testing.assert_array_equal(epochs, np.repeat(np.arange(T), per))
    np.testing.assert_array_equal(relabel(labels, epochs), labels)
    alive = ~np.isnan(states[..., 0])
    assert np.array_equal(alive, ~np.isnan(states).any(-1))
    for k in range(K):
        occ = np.unique(epochs[labels == k])
        assert occ.size > 0 and np.all(np.diff(occ) <= window)
        # alive from birth to the last item's epoch + W, contiguous
        expect = np.zeros(T, bool)
        expect[occ[0]:min(occ[-1] + window, T - 1) + 1] = True
        np.testing.assert_array_equal(alive[k], expect)
    np.testing.assert_array_equal(alive.sum(0), alive_per_epoch(labels, epochs, T, window))
    if window == 0:
        assert all(np.unique(epochs[labels == k]).size == 1 for k in range(K))
    else:
        # chains do persist, and some are alive at an epoch without items
        assert max(np.unique(epochs[labels == k]).size for k in range(K)) > 3
        occupied = np.zeros((K, T), bool)
        occupied[labels, epochs] = True
        assert np.any(alive & ~occupied)


def test_emission_and_walk_variances():
    """x − φ_{k,t} ~ N(0, Σ I); increments of the states (every alive epoch, items or not)
    ~ N(0, ρ I); births ~ N(0, σ I): sample variances within 4.5 sd of the chi-square."""
    birth, drift, noise = 10.0, 0.1, 0.1
    res, steps, born = [], [], []
    for seed in range(8):
        X, epochs, labels, states = tdpm_gaussian(n_epochs=30, per_epoch=100, window=2,
                                                  decay=1.0, birth_var=birth, drift_var=drift,
                                                  noise_var=noise, dim=3, seed=seed)
        res.append(X - states[labels, epochs])
        d = np.diff(states, axis=1)
        steps.append(d[~np.isnan(d[..., 0])])
        born.append(np.array([s[~np.isnan(s[:, 0])][0] for s in states]))
    for values, var in [(res, noise), (steps, drift), (born, birth)]:
        v = np.concatenate(values)
        assert abs(v.mean()) < 4.5 * math.sqrt(var / v.size)
        dof = v.size
        assert abs(np.mean(v ** 2) / var - 1) < 4.5 * math.sqrt(2 / dof), (var, np.mean(v ** 2))
    # within one (chain, epoch), the spread about the group's own mean is Σ, states unseen
    X, epochs, labels, _ = tdpm_gaussian(seed=11)
    key = labels * 1000 + epochs
    _, g, sizes = np.unique(key, return_inverse=True, return_counts=True)
    means = np.zeros((sizes.size, 2))
    np.add.at(means, g, X)
    means /= sizes[:, None]
    ss = np.sum((X - means[g]) ** 2)
    dof = 2 * (len(X) - sizes.size)
    assert abs(ss / dof / noise - 1) < 4.5 * math.sqrt(2 / dof)


def test_reproducible_by_seed():
    a, b, c = tdpm_gaussian(seed=5), tdpm_gaussian(seed=5), tdpm_gaussian(seed=6)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])
