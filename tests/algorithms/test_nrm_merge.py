"""Evidence merges of ADF/EP clusters (algorithms/nrm_merge.py) against brute force: every
partition of six items scored by the exchangeable partition function (Ewens for the DP; the
NRM's given U = u with κ(n, u) by quadrature of the Lévy intensity) times each block's marginal
likelihood by the chain rule of posterior predictives; the objective never falls across the
greedy post-pass, which stops where no pair helps."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import gammaln

from bnpmix.algorithms.adf import adf_pass
from bnpmix.algorithms.alloc import NRM
from bnpmix.algorithms.nrm_merge import evidence_merges, log_joint, pair_gains
from bnpmix.algorithms.obs import obs_class
from bnpmix.algorithms.summary import Pool, Summary


def set_partitions(n: int):
    """Every partition of range(n) as a label vector (restricted growth strings)."""
    def grow(prefix: list[int]):
        if len(prefix) == n:
            yield np.array(prefix)
            return
        for c in range(max(prefix, default=-1) + 2):
            yield from grow([*prefix, c])
    yield from grow([])


def summary_of(obs, X: np.ndarray, labels: np.ndarray) -> Summary:
    """The hard partition's sums, cluster ids = labels."""
    K = int(labels.max()) + 1
    R = np.eye(K)[labels]
    stats, shared = obs.split_stats(obs.stats(X, R))
    return Summary(np.arange(K), R.sum(0), stats, np.zeros(K), n_items=len(X), shared=shared)


def chain_rule_log_marginal(obs, X: np.ndarray) -> float:
    """log p(x_1, ..., x_n) = Σ_i log p(x_i | x_<i), each a posterior predictive."""
    total = 0.0
    for i in range(len(X)):
        N = np.array([float(i)])
        post = obs.post(N, obs.stats(X[:i], np.ones((i, 1))))
        total += float(obs.predictive_logpdf(X[i:i + 1], post)[0, 0])
    return total


def kappa(n: int, u: float, a: float, tau: float, sigma: float) -> float:
    """log κ(n, u) = log ∫ s^n e^(−u s) ρ(ds), ρ(ds) = a/Γ(1−σ) s^(−1−σ) e^(−τ s) ds, by
    quadrature (s = t², so that the s^(−1/2) singularity at n = 1, σ = 1/2 goes)."""
    val, _ = quad(lambda t: 2 * t * t ** (2 * (n - 1 - sigma)) * math.exp(-(u + tau) * t * t),
                  0, np.inf, epsabs=0, epsrel=1e-13, limit=200)
    return math.log(a) - gammaln(1 - sigma) + math.log(val)


def brute_log_joint(obs, X, labels, a, tau, sigma, u) -> float:
    """log p(partition, X | U = u) up to a constant in N and u: Ewens's formula for the DP,
    Σ_k log κ(n_k, u) otherwise, plus Σ_k log p(X_k) by the chain rule."""
    sizes = np.bincount(labels)
    if sigma == 0:
        prior = len(sizes) * math.log(a) + gammaln(sizes).sum()
    else:
        prior = sum(kappa(int(n), u, a, tau, sigma) for n in sizes)
    return prior + sum(chain_rule_log_marginal(obs, X[labels == k]) for k in range(len(sizes)))


def merged(labels: np.ndarray, j: int, k: int) -> np.ndarray:
    """Block k pooled into block j, labels renumbered 0, 1, ... in order of first appearance
    (the restricted growth string set_partitions gives)."""
    out = np.where(labels == k, j, labels)
    first = {int(c): n for n, c in enumerate(dict.fromkeys(out.tolist()))}
    return np.array([first[int(c)] for c in out])


def key(labels: np.ndarray) -> tuple[int, ...]:
    return tuple(labels.tolist())


def six_items() -> np.ndarray:
    rng = np.random.default_rng(3)
    return np.concatenate([rng.normal(-2, 0.5, (3, 2)), rng.normal(2, 0.5, (3, 2))])


PRIORS = {"dp": (1.0, 1.0, 0.0, None), "nggp": (2.0, 1.0, 0.5, 3.0)}


@pytest.mark.parametrize("obs_name", ["gauss", "diag-gauss"])
@pytest.mark.parametrize("nrm", sorted(PRIORS))
def test_merge_gain_is_the_exact_evidence_difference_on_every_partition_of_six(obs_name, nrm):
    a, tau, sigma, u = PRIORS[nrm]
    X = six_items()
    obs = obs_class(obs_name).default(X, scale=0.2)
    log_w_new = math.log(a) + (sigma * math.log(u + tau) if sigma else 0.0)
    brute = {key(p): brute_log_joint(obs, X, p, a, tau, sigma, u)
             for p in set_partitions(len(X))}
    assert len(brute) == 203  # the Bell number B_6
    signs = set()
    for labels in set_partitions(len(X)):
        K = int(labels.max()) + 1
        if K < 2:
            continue
        total = summary_of(obs, X, labels)
        j, k = np.triu_indices(K, k=1)
        gains = pair_gains(obs, sigma, log_w_new, total, j, k)
        want = np.array([brute[key(merged(labels, a_, b_))] - brute[key(labels)]
                         for a_, b_ in zip(j, k, strict=True)])
        np.testing.assert_allclose(gains, want, rtol=0, atol=1e-8)
        signs.update(np.sign(want).tolist())
        # the move picks, of the partition and its best pooled neighbour, the higher evidence
        moves = evidence_merges(obs, sigma, log_w_new, total)
        if moves:
            first = moves[0]
            after = merged(labels, first.a, first.b)
            assert brute[key(after)] > brute[key(labels)]
            gain = brute[key(after)] - brute[key(labels)]
            assert gain == pytest.approx(want.max(), abs=1e-8)
        else:
            assert want.max() <= 1e-12
    assert signs >= {-1.0, 1.0}  # the check saw merges both accepted and refused


def adf_summary(obs, X: np.ndarray, prior: NRM, eps: float) -> Summary:
    """The sums of one ADF pass over X (S_k = Σ_i q_ik, stats = Σ_i q_ik t(x_i))."""
    cl, qs = adf_pass(obs, prior, X, eps)
    Q = np.zeros((len(X), cl.K))
    for i, q in enumerate(qs):
        Q[i, :len(q)] = q
    stats, shared = obs.split_stats(obs.stats(X, Q))
    return Summary(cl.uids.copy(), Q.sum(0), stats, np.zeros(cl.K), n_items=len(X),
                   shared=shared)


@pytest.mark.parametrize("obs_name", ["gauss", "diag-gauss", "tied-gauss"])
@pytest.mark.parametrize("nrm", sorted(PRIORS))
def test_the_post_pass_raises_the_objective_at_every_merge_and_stops_at_a_local_maximum(
        obs_name, nrm):
    a, tau, sigma, u = PRIORS[nrm]
    rng = np.random.default_rng(0)
    centers = np.array([[-4.0, 0.0], [4.0, 0.0], [0.0, 5.0]])
    X = centers[rng.integers(0, 3, 150)] + rng.normal(size=(150, 2))
    obs = obs_class(obs_name).default(X, scale=0.02)  # narrow: ADF leaves many clusters
    log_w_new = math.log(a) + (sigma * math.log(u + tau) if sigma else 0.0)
    total = adf_summary(obs, X, NRM(a, tau, sigma), eps=max(0.1, sigma))
    assert total.K > 6
    F = log_joint(obs, sigma, log_w_new, total)
    moves = evidence_merges(obs, sigma, log_w_new, total)
    assert len(moves) >= 3
    for move in moves:
        i, j = total.index(move.a), total.index(move.b)
        predicted = pair_gains(obs, sigma, log_w_new, total, np.array([i]), np.array([j]))[0]
        total = move.apply(total)
        F_next = log_joint(obs, sigma, log_w_new, total)
        assert F_next > F
        assert F_next - F == pytest.approx(predicted, rel=1e-9, abs=1e-9)
        F = F_next
    # no pooled pair would raise F, each scored afresh from the pooled summary
    for i, j in itertools.combinations(range(total.K), 2):
        pooled = Pool(int(total.uids[i]), int(total.uids[j])).apply(total)
        assert log_joint(obs, sigma, log_w_new, pooled) <= F + 1e-9
    assert np.isclose(total.N.sum(), len(X))
