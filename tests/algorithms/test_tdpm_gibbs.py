"""The temporal DP mixture's Gibbs sampler against exact enumeration (issue 11): co-clustering
probabilities and the expected number of chains of 1-D Gaussian chains, with the chain states
integrated out by a dense Gaussian (independent of the sampler's Kalman code)."""

from __future__ import annotations

import contextlib
import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp
from scipy.stats import multivariate_normal

from bnpmix.algorithms.alloc.rcrp import log_prior
from bnpmix.algorithms.tdpm import item_step
from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.emission import GaussianEmission
from bnpmix.algorithms.tdpm.gibbs import (
    ChainSampler,
    FixedKPrior,
    RCRPPrior,
    alive_per_epoch,
    relabel,
)
from bnpmix.algorithms.tdpm.relink import relink_at

from .test_rcrp import set_partitions

SIGMA, RHO, NOISE = 4.0, 0.3, 0.5


def chain_log_marginal(x, t, born):
    """log p(x_block) for one chain born at epoch ``born``: Cov(x_i, x_j) =
    σ + ρ (min(t_i, t_j) − born) + Σ δ_ij."""
    t = np.asarray(t, float)
    cov = SIGMA + RHO * (np.minimum.outer(t, t) - born) + NOISE * np.eye(len(t))
    return float(multivariate_normal(np.zeros(len(t)), cov).logpdf(x))


def exact_tdpm(x, epochs, T, prior):
    """Every labelling as a set partition with each block's epochs at most W apart; weights
    P(c) p(x | c) with P(c) the label-free RCRP prior. Returns (co-clustering, E[#chains])."""
    N = len(x)
    logw, co, kk = [], [], []
    for part in set_partitions(list(range(N))):
        ok = all(np.all(np.diff(sorted(set(epochs[b]))) <= prior.window) for b in part)
        if not ok:
            continue
        counts = np.zeros((T, len(part)))
        for j, b in enumerate(part):
            np.add.at(counts[:, j], epochs[b], 1)
        value = log_prior(counts, prior.window, prior.decay, prior.alpha)
        value += sum(chain_log_marginal(x[b], epochs[b], epochs[b].min()) for b in part)
        logw.append(value)
        z = np.empty(N, int)
        for j, b in enumerate(part):
            z[b] = j
        co.append(z[:, None] == z[None, :])
        kk.append(len(part))
    w = np.exp(np.array(logw) - logsumexp(logw))
    return np.tensordot(w, np.array(co, float), axes=1), float(w @ np.array(kk))


def exact_fixed(x, epochs, T, K, alpha, carry):
    """The fixed-K baseline: K labelled chains born at epoch 0, each epoch's weights
    π_t ~ Dir(α/K + (carry: n_{·,t−1})) integrated out."""
    N = len(x)
    logw, co = [], []
    for z in itertools.product(range(K), repeat=N):
        z = np.array(z)
        counts = np.zeros((T, K))
        np.add.at(counts, (epochs, z), 1)
        value = 0.0
        for t in range(T):
            beta = alpha / K + (counts[t - 1] if carry and t > 0 else np.zeros(K))
            value += float(np.sum(gammaln(beta + counts[t]) - gammaln(beta))
                           + gammaln(beta.sum()) - gammaln(beta.sum() + counts[t].sum()))
        value += sum(chain_log_marginal(x[z == k], epochs[z == k], 0)
                     for k in range(K) if np.any(z == k))
        logw.append(value)
        co.append(z[:, None] == z[None, :])
    w = np.exp(np.array(logw) - logsumexp(logw))
    return np.tensordot(w, np.array(co, float), axes=1)


# Kept sweeps and the largest batch-means standard error allowed. The Rao-Blackwellised
# estimates (run, expected_after_step) have 1.25-1.76 times less variance than the 0/1
# indicators on these cases under the RCRP, 1.12-1.43 under fixed K (largest SE over the pairs,
# seed 0), so 1,600 kept sweeps (RCRP) and 1,800 (fixed K) give a largest SE at most the
# indicators' at the 2,000 kept before (0.016 and 0.025). The caps are 1.5 times those: a
# 20-batch SE is itself uncertain by about 1/sqrt(2 * 19) = 16 %, and the cap is there to keep
# the tolerance below 5 * 0.024 + 0.01 (fixed K: 5 * 0.036 + 0.01) whatever the chain does.
SWEEPS_RCRP, SWEEPS_FIXED, BURN = 1800, 2000, 200
MOST_SE_RCRP, MOST_SE_FIXED = 0.024, 0.036


def expected_after_step(z: np.ndarray, i: int, logw: np.ndarray,
                        labels: list[tuple[int, ...]]) -> tuple[np.ndarray, float]:
    """E[co-clustering matrix, number of chains] after item i's step, given the state the step
    draws from (z with z_i = −1, the chain states): the sampler's own conditional probabilities
    of its options, softmax(logw), weighting what each option makes of the labels. Joining
    chain k (alive, extend, prepend) pairs i with k's items; a bridge (a, b) pairs i with both
    and a's items with b's, one chain fewer; a new chain pairs i with nobody, one chain more.
    Its average over steps estimates the posterior expectations with the 0/1 indicators'
    conditional expectations (Rao-Blackwell), a smaller variance for the same sweeps."""
    p = np.exp(logw - logw.max())
    p /= p.sum()
    E = ((z[:, None] == z[None, :]) & (z[:, None] >= 0)).astype(float)
    k = float(len(np.unique(z[z >= 0])))
    for pj, lab in zip(p, labels, strict=True):
        if not lab:
            k += pj
            continue
        joined = np.isin(z, lab)
        E[i, joined] += pj
        E[joined, i] += pj
        if len(lab) == 2:
            a, b = z == lab[0], z == lab[1]
            E[np.ix_(a, b)] += pj
            E[np.ix_(b, a)] += pj
            k -= pj
    E[i, i] = 1.0
    return E, k


@contextlib.contextmanager
def spying(hook):
    """Within the block, ``hook(state, i, options)`` sees every item step's options (the
    sampler's conditional wrapped, its draws unchanged)."""
    conditional = item_step.conditional

    def spy(model, state, i, t, rng):
        opts = conditional(model, state, i, t, rng)
        hook(state, i, opts)
        return opts

    item_step.conditional = spy
    try:
        yield
    finally:
        item_step.conditional = conditional


def record_steps(steps: list[tuple[np.ndarray, float]]):
    """expected_after_step of every item step taken within the block, appended to ``steps``."""
    return spying(lambda state, i, opts: steps.append(
        expected_after_step(state.z, i, np.array([o.logw for o in opts]),
                            [o.chains for o in opts])))


def run(x, epochs, T, prior, seed, sweeps, burn=BURN, init_phi=None):
    """Per kept sweep, the mean over its item steps of the expected co-clustering and number
    of chains after the step (expected_after_step)."""
    rng = np.random.default_rng(seed)
    s = ChainSampler(epochs, T, GaussianEmission(x[:, None], NOISE), RandomWalk(SIGMA, RHO),
                     prior)
    if init_phi is not None:
        s.init_fixed(init_phi)
    for _ in range(burn):
        s.sweep(rng)
    steps: list[tuple[np.ndarray, float]] = []
    co, kk = [], []
    with record_steps(steps):
        for _ in range(sweeps - burn):
            steps.clear()
            s.sweep(rng)
            co.append(np.mean([e for e, _ in steps], axis=0))
            kk.append(np.mean([k for _, k in steps]))
    return np.array(co), np.array(kk)


def check_against(exact_co, exact_k, runs, most_se):
    """Each seed's estimate within 5 batch-means standard errors (+ 0.01) of the exact value
    (20 batches; a pair off by 5 SE at a few in 10⁶ per pair and seed), its largest SE at most
    ``most_se``; the mean of the seeds' estimates within 0.03."""
    pooled_co = np.mean([c.mean(0) for c, _ in runs], axis=0)
    for co, kk in runs:
        batches = np.array_split(np.arange(len(co)), 20)
        means = np.array([co[b].mean(0) for b in batches])
        se = means.std(0, ddof=1) / math.sqrt(len(batches))
        assert se.max() <= most_se, se.max()
        assert np.all(np.abs(co.mean(0) - exact_co) <= 5 * se + 0.01), (co.mean(0), exact_co)
        if exact_k is not None:
            kmeans = np.array([kk[b].mean() for b in batches])
            kse = kmeans.std(ddof=1) / math.sqrt(len(batches))
            assert abs(kk.mean() - exact_k) <= 5 * kse + 0.01, (kk.mean(), exact_k)
    assert np.max(np.abs(pooled_co - exact_co)) < 0.03


X6 = np.array([-1.0, -0.6, 1.2, -0.8, 1.0, 1.5])
E6 = np.array([0, 0, 0, 1, 1, 1])


# Each of these is a long chain (3 seeds x 1,800-2,000 sweeps): the default run keeps one case,
# the slow run the others.
@pytest.mark.parametrize("window, decay", [
    (1, 0.8),
    pytest.param(1, math.inf, marks=pytest.mark.slow),
    pytest.param(0, 0.8, marks=pytest.mark.slow),
])
def test_gibbs_matches_enumeration_6_items_2_epochs(window, decay):
    prior = RCRPPrior(alpha=1.0, window=window, decay=decay)
    exact_co, exact_k = exact_tdpm(X6, E6, 2, prior)
    # the test discriminates: the posteriors are not degenerate
    assert 0.05 < exact_co[0, 1] < 0.95
    assert 0.05 < exact_co[0, 3] < 0.95 or window == 0
    runs = [run(X6, E6, 2, prior, seed, sweeps=SWEEPS_RCRP) for seed in range(3)]
    check_against(exact_co, exact_k, runs, MOST_SE_RCRP)


@pytest.mark.slow  # long chains: 3 seeds x 1,800 sweeps (the default run has the 6-item case)
@pytest.mark.parametrize("window", [1, 2])
def test_gibbs_matches_enumeration_with_splits_over_3_epochs(window):
    """The middle item bridges its chain: removing it splits the chain (W = 1), and the
    'reconnect two chains' option of its conditional is needed to be exact. With W = 2 a chain
    may skip epoch 1, and relinking across a boundary integrates out the state in between."""
    x = np.array([0.0, 0.3, 0.1, 0.2, 2.0, -0.2])
    epochs = np.array([0, 0, 1, 2, 2, 2])
    prior = RCRPPrior(alpha=0.7, window=window, decay=2.0)
    exact_co, exact_k = exact_tdpm(x, epochs, 3, prior)
    runs = [run(x, epochs, 3, prior, seed, sweeps=SWEEPS_RCRP) for seed in range(3)]
    check_against(exact_co, exact_k, runs, MOST_SE_RCRP)


@pytest.mark.slow  # long chains: 3 seeds x 2,000 sweeps
@pytest.mark.parametrize("carry", [True, False])
def test_fixed_k_baseline_matches_enumeration(carry):
    prior = FixedKPrior(K=2, alpha=1.0, carry=carry)
    exact_co = exact_fixed(X6, E6, 2, 2, 1.0, carry)
    # the two priors differ on this problem (the test tells them apart)
    assert np.max(np.abs(exact_co - exact_fixed(X6, E6, 2, 2, 1.0, not carry))) > 0.03
    init = np.zeros((2, 2, 1))
    init[0, :, 0], init[1, :, 0] = -1.0, 1.0
    runs = [run(X6, E6, 2, prior, seed, sweeps=SWEEPS_FIXED, init_phi=init)
            for seed in range(3)]
    check_against(exact_co, None, runs, MOST_SE_FIXED)


def test_relabel_and_alive_per_epoch():
    z = np.array([7, 3, 7, 9, 3])
    epochs = np.array([1, 0, 2, 3, 0])
    np.testing.assert_array_equal(relabel(z, epochs), [1, 0, 1, 2, 0])
    # chain 3 occupies epoch 0, chain 7 epochs 1-2, chain 9 epoch 3; W = 1 keeps each alive one
    # epoch after its last member
    np.testing.assert_array_equal(alive_per_epoch(z, epochs, 5, 1), [1, 2, 1, 2, 1])
    np.testing.assert_array_equal(alive_per_epoch(z, epochs, 5, 0), [1, 1, 1, 1, 0])


def test_variance_conditionals_are_the_inverse_gammas_of_the_residuals():
    """Σ | · ~ IG(a + N·D/2, b + ½ Σ ||x − φ||²), ρ | · ~ IG(a + n/2, b + ½ Σ ||Δφ||²): the
    draws replayed from the same stream, with the sums computed here from the sample."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2)) * 3
    epochs = np.repeat(np.arange(5), 6)
    s = ChainSampler(epochs, 5, GaussianEmission(X, 0.5), RandomWalk(SIGMA, RHO),
                     RCRPPrior(alpha=1.0, window=1, decay=0.8))
    for _ in range(3):
        s.sweep(rng)
    states = np.array([s.phi[int(s.z[i])][epochs[i] - s.first[s.z[i]]] for i in range(30)])
    rss = float(np.sum((X - states) ** 2))
    chains = np.flatnonzero(s.active)
    sq = sum(float(np.sum(np.diff(s.phi[int(k)], axis=0) ** 2)) for k in chains)
    n_inc = sum(len(s.phi[int(k)]) - 1 for k in chains) * 2
    s.resample_variances(np.random.default_rng(9), (2.0, 0.3), (3.0, 0.2))
    replay = np.random.default_rng(9)
    assert s.emission.noise_var == pytest.approx((0.3 + rss / 2) / replay.gamma(2.0 + 30),
                                                 rel=1e-12)
    assert s.walk.drift_var == pytest.approx((0.2 + sq / 2) / replay.gamma(3.0 + n_inc / 2),
                                             rel=1e-12)
    assert n_inc > 0


def relink_frequencies(s: ChainSampler, t: int, moves: int, seed: int):
    """Relinking moves alone at boundary t (the states fixed): visit frequency and log joint of
    each configuration visited."""
    rng = np.random.default_rng(seed)
    seen: dict[tuple, list] = {}
    for _ in range(moves):
        s.state, _ = relink_at(s.model, s.state, t, rng)
        key = tuple(s.canonical().tolist())
        if key not in seen:
            seen[key] = [0, s.log_joint()]
        seen[key][0] += 1
    freq = np.array([v[0] for v in seen.values()], float) / moves
    logp = np.array([v[1] for v in seen.values()])
    return freq, np.exp(logp - logsumexp(logp))


def close_to_target(freq: np.ndarray, target: np.ndarray, moves: int) -> bool:
    """Within 4 binomial standard errors, inflated 3x for the moves' autocorrelation."""
    se = np.sqrt(target * (1 - target) / moves)
    return bool(np.all(np.abs(freq - target) < 4 * 3 * se + 0.002))


@pytest.mark.slow  # 20,000 moves
@pytest.mark.parametrize("window", [1, 2])
def test_relinking_alone_samples_the_matchings_in_proportion_to_the_joint(window):
    """Three heads (chains with members before t = 2), two tails: with the states held fixed,
    the moves visit all Σ_k C(3,k) C(2,k) k! = 13 ways to link them and stay in each in
    proportion to exp(log joint), computed by the sampler's log_joint (not the move's
    differences). W = 2 changes the prior factors of epochs 2 and 3 (a link more than one epoch
    apart, whose states between are integrated out, is in the enumeration test below)."""
    x = np.array([-1.0, -0.8, 0.3, 1.1, -0.9, -0.7, 0.5, 0.6, 1.0, 0.0])
    epochs = np.array([0, 1, 1, 1, 2, 2, 2, 3, 3, 3])
    # chains: 0 = items 0, 1, 4, 5 (crosses t = 2); 1 = item 2; 2 = item 3; 3 = items 6-9
    z = np.array([0, 0, 1, 2, 0, 0, 3, 3, 3, 3])
    s = ChainSampler(epochs, 4, GaussianEmission(x[:, None], NOISE), RandomWalk(SIGMA, 1.0),
                     RCRPPrior(alpha=1.0, window=window, decay=2.0))
    first = np.array([epochs[z == k].min() for k in range(4)])
    last = np.array([epochs[z == k].max() for k in range(4)])
    phi = np.concatenate([np.linspace(-0.5, 0.5, last[k] - first[k] + 1)[:, None]
                          for k in range(4)])
    s.restore({"z": z, "labels": np.arange(4), "first": first, "last": last, "phi": phi})
    freq, target = relink_frequencies(s, 2, 20000, seed=window)
    assert len(freq) == 13
    assert target.min() > 0.002 and target.max() < 0.6  # the test discriminates
    assert close_to_target(freq, target, 20000), (freq, target)


@pytest.mark.slow  # 20,000 moves
def test_relinking_alone_swaps_the_fixed_k_chains_in_proportion_to_the_joint():
    """Fixed K = 3 with Eq. 4.5's carry: only swaps, the 3! = 6 permutations of the tails."""
    x = np.array([-1.0, 0.0, 1.0, -0.5, 0.4, 0.9, 0.1])
    epochs = np.array([0, 0, 0, 1, 1, 1, 1])
    s = ChainSampler(epochs, 2, GaussianEmission(x[:, None], NOISE), RandomWalk(SIGMA, 1.0),
                     FixedKPrior(K=3, alpha=1.0, carry=True))
    phi = np.array([[-1.0], [-0.2], [0.0], [0.6], [1.0], [0.8]])
    s.restore({"z": np.array([0, 1, 2, 0, 1, 2, 2]), "labels": np.arange(3),
               "first": np.zeros(3, int), "last": np.ones(3, int), "phi": phi})
    freq, target = relink_frequencies(s, 1, 20000, seed=3)
    assert len(freq) == 6
    assert target.min() > 0.002 and target.max() < 0.6
    assert close_to_target(freq, target, 20000), (freq, target)
