"""The NRM predictive rule (Tank, Foti & Fox 2015, Eq. 23 with the corrected exponent of Û)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from bnpmix.algorithms.alloc import NRM


def test_sigma_zero_is_the_dp_rule_exactly():
    """Eq. 19: w_k = S_k, w_new = a; so p(k) = S_k / (m + a), p(new) = a / (m + a)."""
    S = np.array([3.2, 0.7, 1.1])
    prior = NRM(a=2.5, sigma=0.0)
    w, w_new, v = prior.predictive(S, m=S.sum())
    np.testing.assert_array_equal(w, S)
    assert w_new == 2.5 and math.isnan(v)
    np.testing.assert_allclose(np.exp(prior.log_predictive_probs(S, S.sum())),
                               [*(S / (S.sum() + 2.5)), 2.5 / (S.sum() + 2.5)], rtol=1e-15)


@pytest.mark.parametrize("a", [0.1, 1.0, 7.0, 1000.0])
def test_tau_zero_reduces_to_pitman_yor(a):
    """τ = 0, hard counts (3, 1, 1), m = 5, σ = 1/2: (0.5, 0.1, 0.1, 0.3) for any a — the check
    the printed exponent n − 1 − a E[K] fails and n − 1 − σ E[K] passes."""
    probs = np.exp(NRM(a=a, tau=0.0, sigma=0.5).log_predictive_probs(np.array([3, 1, 1.]), 5))
    np.testing.assert_allclose(probs, [0.5, 0.1, 0.1, 0.3], rtol=1e-9)


@pytest.mark.parametrize("a, tau, sigma, m, EK", [
    (1.0, 1.0, 0.5, 10, 3), (100.0, 0.1, 0.5, 50, 20), (10.0, 1000.0, 0.25, 7, 2),
    (1.0, 10.0, 0.9, 1e5, 400), (1000.0, 1.0, 0.1, 3, 3), (0.5, 0.0, 0.5, 40, 12)])
def test_the_newton_mode_is_the_argmax_of_g_on_a_fine_grid(a, tau, sigma, m, EK):
    prior = NRM(a=a, tau=tau, sigma=sigma)
    v = prior.log_u_mode(m, EK)
    grid = np.linspace(v - 5, v + 5, 200_001)
    g = np.array([prior.log_density(x, m, EK) for x in grid])
    assert abs(grid[g.argmax()] - v) <= 2 * (grid[1] - grid[0])
    assert prior.log_density(v, m, EK) >= g.max() - 1e-9
    for start in (v - 30, v + 30):  # any starting point finds the same mode
        assert prior.log_u_mode(m, EK, v0=start) == pytest.approx(v, abs=1e-9)


@pytest.mark.parametrize("sigma, tau", [(0.0, 1.0), (0.5, 1.0), (0.3, 50.0), (0.5, 0.0)])
def test_predictive_probabilities_sum_to_one(sigma, tau):
    rng = np.random.default_rng(0)
    prior = NRM(a=3.0, tau=tau, sigma=sigma)
    for _ in range(20):
        S = rng.gamma(1.0, 3.0, size=rng.integers(1, 30))
        probs = np.exp(prior.log_predictive_probs(S, S.sum()))
        assert probs.shape == (len(S) + 1,) and probs.sum() == pytest.approx(1.0, abs=1e-12)
        assert (probs >= 0).all()


def test_clusters_lighter_than_the_discount_get_no_weight():
    w, _, _ = NRM(a=1.0, tau=1.0, sigma=0.5).predictive(np.array([2.0, 0.3]), 2.3)
    np.testing.assert_array_equal(w, [1.5, 0.0])


def test_no_item_no_cluster_puts_the_mode_at_minus_infinity():
    prior = NRM(a=2.0, tau=4.0, sigma=0.5)
    assert prior.log_u_mode(0, 0) == -math.inf
    _, w_new, _ = prior.predictive(np.zeros(0), 0)
    assert w_new == pytest.approx(2.0 * 4.0 ** 0.5)


@pytest.mark.parametrize("n", [2, 4, 6])
def test_dp_predictive_of_soft_counts_equals_enumeration_of_past_assignments(n):
    """ADF's DP predictive (Eq. 14): the CRP rule n_k(z) / (n − 1 + a) averaged over every hard
    assignment z of the n − 1 past items, each weighted by Π_i q(z_i), equals S_k / (n − 1 + a)."""
    rng = np.random.default_rng(n)
    K, a = 3, 1.7
    q = rng.dirichlet(np.ones(K), size=n - 1)
    expected = np.zeros(K + 1)
    for z in itertools.product(range(K), repeat=n - 1):
        weight = np.prod(q[np.arange(n - 1), z])
        counts = np.bincount(z, minlength=K)
        expected += weight * np.append(counts, a) / (n - 1 + a)
    probs = np.exp(NRM(a=a, sigma=0.0).log_predictive_probs(q.sum(0), n - 1))
    np.testing.assert_allclose(probs, expected, rtol=1e-12)


@pytest.mark.parametrize("bad", [{"a": 0}, {"a": -1}, {"tau": -1}, {"sigma": 1.0},
                                 {"sigma": -0.1}, {"a": math.inf}])
def test_bad_parameters_are_refused_by_name(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        NRM(**bad)


@pytest.mark.parametrize("sigma", [0.25, 0.5, 0.9])
@pytest.mark.parametrize("c", [0.01, 3.0, 1000.0])
def test_the_rule_depends_on_a_and_tau_only_through_a_tau_to_the_sigma(sigma, c):
    """(a c^σ, τ / c) has Û' + τ' = (Û + τ)/c (its g is g + const under U' = U/c), so w_new is
    unchanged: the a × τ grid of `bnpmix tune` is one-dimensional in β = a τ^σ."""
    S, m = np.array([4.2, 0.9, 2.6, 1.3]), 9.0
    a, tau = 7.0, 2.0
    base = NRM(a=a, tau=tau, sigma=sigma).log_predictive_probs(S, m)
    scaled = NRM(a=a * c ** sigma, tau=tau / c, sigma=sigma).log_predictive_probs(S, m)
    np.testing.assert_allclose(scaled, base, rtol=1e-9, atol=1e-12)
    other = NRM(a=a * 2.0, tau=tau, sigma=sigma).log_predictive_probs(S, m)
    assert abs(other[-1] - base[-1]) > 1e-3  # a change of β does change the rule
