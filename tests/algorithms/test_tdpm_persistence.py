"""Membership stability (Sec. 9.2, ``tdpm/persistence.py``): the prior with stayers and
Beta-Binomial coins is a probability distribution over (chains, stay indicators), and the Gibbs
sampler's joint draws of (chain, stay) match exact enumeration of every configuration."""

from __future__ import annotations

import contextlib
import itertools
import math

import numpy as np
import pytest
from scipy.special import logsumexp

from bnpmix.algorithms.alloc.rcrp import log_prior, pseudo_counts
from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.emission import GaussianEmission
from bnpmix.algorithms.tdpm.gibbs import ChainSampler, RCRPPrior
from bnpmix.algorithms.tdpm.persistence import Persistence

from .test_rcrp import set_partitions
from .test_tdpm_gibbs import NOISE, RHO, SIGMA, chain_log_marginal, expected_after_step, spying


def configurations(epochs, ids, T, prior, a, b):
    """Every (labelling, stay indicators) with each chain's epochs at most W apart and every
    stayer in its previous appearance's chain; yields (z, y, log prior)."""
    epochs = np.asarray(epochs)
    P = Persistence.from_ids(np.asarray(ids), epochs, a, b)
    back = np.flatnonzero(P.prev >= 0)
    N = len(epochs)
    for part in set_partitions(list(range(N))):
        if not all(np.all(np.diff(sorted(set(epochs[blk]))) <= prior.window) for blk in part):
            continue
        z = np.empty(N, int)
        for j, blk in enumerate(part):
            z[blk] = j
        counts = np.zeros((T, len(part)))
        np.add.at(counts, (epochs, z), 1)
        for bits in itertools.product([False, True], repeat=len(back)):
            y = np.zeros(N, bool)
            y[back] = bits
            if np.any(y & (z != z[np.maximum(P.prev, 0)])):
                continue
            stay = np.zeros_like(counts)
            np.add.at(stay, (epochs[y], z[y]), 1)
            heads, tails = np.zeros(P.n_ids), np.zeros(P.n_ids)
            for v in back:
                m = pseudo_counts(counts, epochs[v], prior.window, prior.decay)[z[P.prev[v]]]
                if y[v]:
                    heads[P.ids[v]] += 1
                elif m > 0:
                    tails[P.ids[v]] += 1
            value = log_prior(counts, prior.window, prior.decay, prior.alpha, stay)
            value += float(np.sum(P.log_coins(heads, tails)))
            yield z, y, value, P.rho_mean(heads, tails)


@pytest.mark.parametrize("epochs, ids, window, decay", [
    ([0, 0, 1, 1, 1], [0, 1, 0, 1, 2], 1, 0.8),
    ([0, 1, 1, 2, 2], [0, 0, 1, 0, 1], 1, math.inf),
    ([0, 0, 1, 2, 2], [0, 1, 2, 0, 1], 1, 2.0),
    ([0, 1, 2, 2, 3], [0, 0, 0, 1, 1], 2, 1.0),
])
def test_prior_with_stayers_and_coins_sums_to_one(epochs, ids, window, decay):
    prior = RCRPPrior(alpha=0.7, window=window, decay=decay)
    T = max(epochs) + 1
    values = [v for _, _, v, _ in configurations(epochs, ids, T, prior, 2.0, 0.5)]
    assert math.exp(logsumexp(values)) == pytest.approx(1.0, abs=1e-10)


def exact(x, epochs, ids, T, prior, a, b):
    """Posterior co-clustering, P(stay) per item, E[#chains] and E[ρ_u] by enumeration."""
    logw, co, stays, kk, rho = [], [], [], [], []
    for z, y, value, rho_mean in configurations(epochs, ids, T, prior, a, b):
        lik = sum(chain_log_marginal(x[z == k], epochs[z == k], epochs[z == k].min())
                  for k in np.unique(z))
        logw.append(value + lik)
        co.append(z[:, None] == z[None, :])
        stays.append(y)
        kk.append(len(np.unique(z)))
        rho.append(rho_mean)
    w = np.exp(np.array(logw) - logsumexp(logw))
    return (np.tensordot(w, np.array(co, float), axes=1), w @ np.array(stays, float),
            float(w @ np.array(kk)), w @ np.array(rho))


def sample(x, epochs, ids, T, prior, a, b, seed, sweeps=2200, burn=200):
    """Per kept sweep: the means over its item steps of the expected co-clustering, stay
    indicators and number of chains after the step, given the state it draws from (the
    sampler's own option probabilities; test_tdpm_gibbs.expected_after_step), and E[ρ_u] of
    the state at the sweep's end."""
    rng = np.random.default_rng(seed)
    P = Persistence.from_ids(np.asarray(ids), epochs, a, b)
    s = ChainSampler(epochs, T, GaussianEmission(x[:, None], NOISE), RandomWalk(SIGMA, RHO),
                     prior, P)
    steps = []

    def hook(state, i, opts):
        logw = np.array([o.logw for o in opts])
        co, k = expected_after_step(state.z, i, logw, [o.chains for o in opts])
        p = np.exp(logw - logw.max())
        stay = state.coins.y.astype(float)
        stay[i] = float(p[np.array([o.stays for o in opts], bool)].sum() / p.sum())
        steps.append((co, stay, k))

    out = {"co": [], "stay": [], "k": [], "rho": []}
    with contextlib.ExitStack() as spy:
        for sweep in range(sweeps):
            if sweep == burn:
                spy.enter_context(spying(hook))
            steps.clear()
            s.sweep(rng)
            if sweep >= burn:
                for key, j in (("co", 0), ("stay", 1), ("k", 2)):
                    out[key].append(np.mean([step[j] for step in steps], axis=0))
                out["rho"].append(P.rho_mean(s.heads, s.tails))
            # the incremental bookkeeping agrees with a recount from the labels
            if sweep % 500 == 0:
                heads, tails = s.heads.copy(), s.tails.copy()
                s.restore(s.to_arrays())
                np.testing.assert_array_equal(heads, s.heads)
                np.testing.assert_array_equal(tails, s.tails)
    return {k: np.array(v, float) for k, v in out.items()}


def within_mc_error(runs, key, exact_value):
    """Each seed within 5 batch-means standard errors (+ 0.01) of the exact value, the mean of
    the seeds within 4 of its standard error (+ 0.005)."""
    ses = []
    for r in runs:
        batches = np.array_split(r[key], 20)
        means = np.array([b.mean(0) for b in batches])
        se = means.std(0, ddof=1) / math.sqrt(len(batches))
        assert np.all(np.abs(r[key].mean(0) - exact_value) <= 5 * se + 0.01), (
            key, r[key].mean(0), exact_value)
        ses.append(se)
    pooled = np.mean([r[key].mean(0) for r in runs], axis=0)
    pooled_se = np.sqrt(np.sum(np.square(ses), axis=0)) / len(runs)
    assert np.all(np.abs(pooled - exact_value) <= 4 * pooled_se + 0.005), (key, pooled,
                                                                          exact_value)


CASES = {
    # two ids re-enter at epoch 1 (W = 1): the stay twin and the next appearance's coin
    "2-epochs": (np.array([-1.0, -0.6, 1.2, -0.8, 1.0, 1.5]), np.array([0, 0, 0, 1, 1, 1]),
                 np.array([0, 1, 2, 0, 1, 3]), 1, 0.8),
    # id 0 at epochs 0 and 3, id 1 at 0 and 3 (W = 1): their coins exist only if their chains
    # live through epochs 1-2, so the middle items' moves (extend, prepend, reconnect) change
    # coins beyond the look-ahead window
    "4-epochs": (np.array([0.0, 1.5, 0.2, 0.4, 0.3, 1.4]), np.array([0, 0, 1, 2, 3, 3]),
                 np.array([0, 1, 2, 3, 0, 1]), 1, 2.0),
    # W = 2: a re-entering item two epochs later, coins created inside the window
    "W=2": (np.array([-0.5, 0.8, 0.6, -0.3, 0.7, -0.1]), np.array([0, 0, 1, 1, 2, 2]),
            np.array([0, 1, 2, 0, 1, 0]), 2, 1.0),
}


@pytest.mark.slow  # long chains: 3 x 2,200 sweeps
@pytest.mark.parametrize("case", sorted(CASES))
def test_gibbs_with_stayers_matches_enumeration(case):
    x, epochs, ids, window, decay = CASES[case]
    T = int(epochs.max()) + 1
    prior = RCRPPrior(alpha=1.0, window=window, decay=decay)
    a, b = 3.0, 1.0
    co, stay, k, rho = exact(x, epochs, ids, T, prior, a, b)
    back = Persistence.from_ids(ids, epochs).prev >= 0
    # the test discriminates: staying is uncertain, and stability changes the co-clustering
    assert np.all((stay[back] > 0.05) & (stay[back] < 0.95)), stay
    plain_co, *_ = exact(x, epochs, np.arange(len(x)), T, prior, a, b)
    assert np.max(np.abs(co - plain_co)) > 0.05
    runs = [sample(x, epochs, ids, T, prior, a, b, seed) for seed in range(3)]
    within_mc_error(runs, "co", co)
    within_mc_error(runs, "stay", stay)
    within_mc_error(runs, "rho", rho)
    for r in runs:
        assert abs(r["k"].mean() - k) < 0.1, (r["k"].mean(), k)


def test_ids_link_appearances_and_reject_two_in_one_epoch():
    P = Persistence.from_ids(np.array(["u", "v", "u", "u"]), np.array([3, 0, 1, 2]))
    np.testing.assert_array_equal(P.prev, [3, -1, -1, 2])
    np.testing.assert_array_equal(P.next, [-1, -1, 3, 0])
    with pytest.raises(ValueError, match="items 0 and 2 have the same id and the same epoch 1"):
        Persistence.from_ids(np.array([7, 8, 7]), np.array([1, 1, 1]))
    with pytest.raises(ValueError, match="Beta"):
        Persistence.from_ids(np.array([1]), np.array([0]), a=0.0)
