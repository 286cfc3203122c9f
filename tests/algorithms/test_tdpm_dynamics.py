"""The temporal DP mixture's chain dynamics (Ahmed & Xing 2008, Sec. 7-8) against dense Gaussian
linear algebra: a chain is born with φ_0 ~ N(0, σ) and walks φ_t = φ_{t−1} + N(0, ρ), so
Cov(φ_s, φ_t) = σ + ρ min(s, t); pseudo-observations y_t ~ N(φ_t, r_t) at some epochs give the
exact posterior by conditioning that joint Gaussian. Also the RCRP chain factors used by the
sampler's prior weights against the full ``log_prior``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammaln
from scipy.stats import multivariate_normal, norm

from bnpmix.algorithms.alloc.rcrp import chain_log_factors, log_prior
from bnpmix.algorithms.tdpm.dynamics import RandomWalk, gauss_logpdf, gauss_product

SIGMA, RHO = 4.0, 0.3
GARBAGE = 1e6  # y and r at unobserved epochs: must never be read


# --------------------------------------------------------------------------- dense reference


def prior_cov(L: int, var0: float, rho: float) -> np.ndarray:
    """Cov(φ_s, φ_t) = var0 + ρ min(s, t) of a walk started with variance var0."""
    idx = np.arange(L)
    return var0 + rho * np.minimum.outer(idx, idx).astype(float)


def dense_posterior(y, r, observed, mean0=0.0, var0=SIGMA, rho=RHO):
    """One dimension: the exact posterior mean and covariance of φ_0..φ_{L−1} given
    y_t ~ N(φ_t, r_t) at the observed epochs, by conditioning the joint Gaussian."""
    L = len(y)
    K = prior_cov(L, var0, rho)
    mu = np.full(L, float(mean0))
    obs = np.flatnonzero(observed)
    if obs.size == 0:
        return mu, K
    S = K[np.ix_(obs, obs)] + np.diag(np.asarray(r, float)[obs])
    Kxo = K[:, obs]
    mean = mu + Kxo @ np.linalg.solve(S, np.asarray(y, float)[obs] - mu[obs])
    cov = K - Kxo @ np.linalg.solve(S, Kxo.T)
    return mean, 0.5 * (cov + cov.T)


def pseudo_obs(rng, observed, D):
    """(L, D) pseudo-observations and per-dimension variances; garbage where unobserved."""
    L = len(observed)
    y = rng.normal(0.0, 2.0, (L, D))
    r = rng.uniform(0.05, 3.0, (L, D)) * np.array([1.0, 10.0, 0.1][:D] + [1.0] * (D - 3))
    y[~observed] = GARBAGE
    r[~observed] = GARBAGE
    return y, r


OBSERVED_PATTERNS = {
    # gaps in the middle and at the end
    "middle-and-end-gaps": [1, 1, 0, 1, 0, 0, 1, 0],
    # unobserved first epochs as well
    "start-gap": [0, 0, 1, 0, 0, 1, 1, 0, 0],
    "all-observed": [1, 1, 1, 1, 1],
    "none-observed": [0, 0, 0, 0],
    "single-epoch": [1],
    "single-unobserved": [0],
}


# --------------------------------------------------------------------------- 1. RTS smoother


@pytest.mark.parametrize("pattern", OBSERVED_PATTERNS.values(), ids=OBSERVED_PATTERNS.keys())
def test_smooth_matches_dense_posterior(pattern):
    observed = np.array(pattern, bool)
    rng = np.random.default_rng(len(pattern) + 10 * int(observed.sum()))
    D = 3
    y, r = pseudo_obs(rng, observed, D)
    walk = RandomWalk(birth_var=SIGMA, drift_var=RHO)
    sm, sv = walk.smooth(y, r, observed)
    assert sm.shape == sv.shape == (len(observed), D)
    for d in range(D):
        mean, cov = dense_posterior(y[:, d], r[:, d], observed)
        scale = 1 + np.abs(mean).max()
        np.testing.assert_allclose(sm[:, d], mean, rtol=1e-10, atol=1e-12 * scale)
        np.testing.assert_allclose(sv[:, d], np.diag(cov), rtol=1e-10)


def test_smooth_dimensions_are_independent():
    """Changing dimension 1's data leaves dimensions 0 and 2 bit-for-bit alone."""
    observed = np.array(OBSERVED_PATTERNS["middle-and-end-gaps"], bool)
    rng = np.random.default_rng(3)
    y, r = pseudo_obs(rng, observed, 3)
    walk = RandomWalk(birth_var=SIGMA, drift_var=RHO)
    sm, sv = walk.smooth(y, r, observed)
    y2, r2 = y.copy(), r.copy()
    y2[observed, 1] += 5.0
    r2[observed, 1] *= 0.2
    sm2, sv2 = walk.smooth(y2, r2, observed)
    np.testing.assert_array_equal(sm2[:, [0, 2]], sm[:, [0, 2]])
    np.testing.assert_array_equal(sv2[:, [0, 2]], sv[:, [0, 2]])
    assert not np.allclose(sm2[:, 1], sm[:, 1])


# --------------------------------------------------------------------------- 2. FFBS


def test_ffbs_monte_carlo_matches_dense_posterior():
    """20,000 joint draws: per dimension, sample means within 4 SE (SE² = Σ_tt / n) and every
    entry of the sample covariance across time within 5 SE of the dense posterior, where for
    Gaussian data Var(S_st) ≈ (Σ_ss Σ_tt + Σ_st²) / n; the cross-dimension covariances within
    5 SE of zero (SE² = Σ⁰_ss Σ¹_tt / n)."""
    observed = np.array([1, 0, 1, 1, 0, 0], bool)
    L, D, n = len(observed), 2, 20_000
    rng = np.random.default_rng(20080101)
    y, r = pseudo_obs(rng, observed, D)
    walk = RandomWalk(birth_var=SIGMA, drift_var=RHO)
    draws = np.stack([walk.ffbs(y, r, observed, rng) for _ in range(n)])
    assert draws.shape == (n, L, D)
    dense = [dense_posterior(y[:, d], r[:, d], observed) for d in range(D)]
    for d, (mean, cov) in enumerate(dense):
        x = draws[:, :, d]
        se_mean = np.sqrt(np.diag(cov) / n)
        z_mean = (x.mean(0) - mean) / se_mean
        assert np.all(np.abs(z_mean) < 4), (d, z_mean)
        S = np.cov(x, rowvar=False)
        v = np.diag(cov)
        se_cov = np.sqrt((np.outer(v, v) + cov ** 2) / n)
        z_cov = (S - cov) / se_cov
        assert np.all(np.abs(z_cov) < 5), (d, z_cov)
        # the cross-time correlation is strong here; a marginals-only sampler would miss it
        assert np.abs(cov[0, 1]) > 20 * se_cov[0, 1]
    cross = (draws[:, :, 0] - draws[:, :, 0].mean(0)).T @ (draws[:, :, 1] - draws[:, :, 1].mean(0))
    cross /= n - 1
    se_cross = np.sqrt(np.outer(np.diag(dense[0][1]), np.diag(dense[1][1])) / n)
    assert np.all(np.abs(cross / se_cross) < 5)


def test_ffbs_last_state_and_single_epoch():
    """With one epoch FFBS draws from the filtered (= smoothed) posterior N(m, P) exactly:
    check the draw against a replayed standard normal."""
    walk = RandomWalk(birth_var=SIGMA, drift_var=RHO)
    y, r, observed = np.array([[1.5, -2.0]]), np.array([[0.5, 2.0]]), np.array([True])
    draw = walk.ffbs(y, r, observed, np.random.default_rng(7))
    z = np.random.default_rng(7).standard_normal(2)
    v = 1 / (1 / SIGMA + 1 / r[0])
    np.testing.assert_allclose(draw[0], v * y[0] / r[0] + np.sqrt(v) * z, rtol=1e-12)


# --------------------------------------------------------------------------- 3. bridge


def test_bridge_monte_carlo_matches_brownian_bridge():
    """φ_u | φ_0 = a, φ_gap = b: mean a + (b − a) u / gap and
    Cov(u, v) = ρ min(u, v) (gap − max(u, v)) / gap, independently per dimension."""
    walk = RandomWalk(birth_var=SIGMA, drift_var=RHO)
    a, b, gap, n = np.array([1.0, -3.0]), np.array([4.0, 0.5]), 6, 20_000
    rng = np.random.default_rng(11)
    draws = np.stack([walk.bridge(a, b, gap, rng) for _ in range(n)])
    assert draws.shape == (n, gap - 1, 2)
    u = np.arange(1, gap, dtype=float)
    cov = RHO * np.minimum.outer(u, u) * (gap - np.maximum.outer(u, u)) / gap
    v = np.diag(cov)
    se_cov = np.sqrt((np.outer(v, v) + cov ** 2) / n)
    for d in range(2):
        x = draws[:, :, d]
        mean = a[d] + (b[d] - a[d]) * u / gap
        assert np.all(np.abs(x.mean(0) - mean) < 4 * np.sqrt(v / n)), (d, x.mean(0) - mean)
        assert np.all(np.abs(np.cov(x, rowvar=False) - cov) < 5 * se_cov), d
    cross = np.cov(draws[:, :, 0], draws[:, :, 1], rowvar=False)[:gap - 1, gap - 1:]
    assert np.all(np.abs(cross) < 5 * np.sqrt(np.outer(v, v) / n))


def test_bridge_edge_gaps():
    walk = RandomWalk(birth_var=SIGMA, drift_var=RHO)
    rng = np.random.default_rng(0)
    assert walk.bridge(np.zeros(3), np.ones(3), 1, rng).shape == (0, 3)
    # gap 2: a single midpoint N((a + b)/2, ρ/2); replay the generator
    a, b = np.array([1.0, 2.0]), np.array([3.0, -2.0])
    mid = walk.bridge(a, b, 2, np.random.default_rng(5))
    z = np.random.default_rng(5).standard_normal(2)
    np.testing.assert_allclose(mid[0], (a + b) / 2 + np.sqrt(RHO / 2) * z, rtol=1e-12)


# --------------------------------------------------------------------------- 4. forward, density


def test_forward_filter_matches_dense_conditionals():
    """Filtered (m_t, P_t) = the posterior of φ_t given the pseudo-observations at epochs ≤ t,
    with the first state's prior the birth N(0, σ)."""
    observed = np.array([0, 1, 1, 0, 1, 0, 0], bool)
    L, D = len(observed), 3
    rng = np.random.default_rng(42)
    y, r = pseudo_obs(rng, observed, D)
    walk = RandomWalk(birth_var=SIGMA, drift_var=RHO)
    means, variances = walk.forward(y, r, observed)
    for d in range(D):
        for t in range(L):
            mean, cov = dense_posterior(y[:t + 1, d], r[:t + 1, d], observed[:t + 1],
                                        mean0=0.0, var0=SIGMA)
            assert means[t, d] == pytest.approx(mean[t], rel=1e-10, abs=1e-12)
            assert variances[t, d] == pytest.approx(cov[t, t], rel=1e-10)
    np.testing.assert_allclose(variances[0], SIGMA, rtol=1e-15)  # unobserved: the birth


@pytest.mark.parametrize("L", [1, 2, 6])
def test_log_density_is_dense_gaussian(L):
    """log p(φ_0..φ_{L−1}) = Σ_d log N(φ_{·,d}; 0, σ + ρ min(s, t)) for D = 2."""
    walk = RandomWalk(birth_var=SIGMA, drift_var=RHO)
    phi = np.random.default_rng(L).normal(0.0, 2.0, (L, 2))
    K = prior_cov(L, SIGMA, RHO)
    expected = sum(multivariate_normal(np.zeros(L), K).logpdf(phi[:, d]) for d in range(2))
    assert walk.log_density(phi) == pytest.approx(expected, rel=1e-12)


# --------------------------------------------------------------------------- 5. Gaussian helpers


def test_gauss_logpdf_is_summed_normal_logpdf():
    rng = np.random.default_rng(1)
    x, mean, var = rng.normal(size=(5, 3)), rng.normal(size=3), rng.uniform(0.1, 3.0, 3)
    expected = norm.logpdf(x, mean, np.sqrt(var)).sum(-1)
    np.testing.assert_allclose(gauss_logpdf(x, mean, var), expected, rtol=1e-13)
    np.testing.assert_allclose(gauss_logpdf(x, 0.0, 2.0),
                               norm.logpdf(x, 0.0, np.sqrt(2.0)).sum(-1), rtol=1e-13)


@pytest.mark.parametrize("scalar_var", [False, True])
def test_gauss_product_identity(scalar_var):
    """N(φ; m1, v1) N(φ; m2, v2) = N(m1; m2, v1 + v2) N(φ; m, v) at random φ."""
    rng = np.random.default_rng(2 + scalar_var)
    D = 3
    m1, m2 = rng.normal(0, 3, D), rng.normal(0, 3, D)
    v1, v2 = (1.7, 0.4) if scalar_var else (rng.uniform(0.1, 5, D), rng.uniform(0.1, 5, D))
    m, v = gauss_product(m1, v1, m2, v2)
    phi = rng.normal(0, 3, (50, D))
    lhs = gauss_logpdf(phi, m1, v1) + gauss_logpdf(phi, m2, v2)
    rhs = gauss_logpdf(m1, m2, np.asarray(v1) + v2) + gauss_logpdf(phi, m, v)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- 6. RCRP chain factors


def denominators(counts, t, window, decay, alpha):
    """Σ_{s=t}^{t+W} log Γ(M_s + α) − log Γ(M_s + N_s + α), written out independently."""
    T = counts.shape[0]
    w = [1.0 if math.isinf(decay) else math.exp(-h / decay) for h in range(1, window + 1)]
    total = 0.0
    for s in range(t, min(t + window, T - 1) + 1):
        M = sum(w[h - 1] * counts[s - h].sum() for h in range(1, window + 1) if s - h >= 0)
        total += gammaln(M + alpha) - gammaln(M + counts[s].sum() + alpha)
    return total


def random_counts(rng):
    T, K = int(rng.integers(2, 7)), int(rng.integers(1, 5))
    C = rng.poisson(1.2, (T, K)) * (rng.random((T, K)) < 0.55)
    if rng.random() < 0.3:
        C[:, rng.integers(K)] = 0
    if rng.random() < 0.3:
        C[rng.integers(T)] = 0
    return C.astype(float)


def cf(col, t, window, decay, alpha):
    return float(chain_log_factors(col[:, None], t, window, decay, alpha)[0])


@pytest.mark.parametrize("decay", [0.8, math.inf])
@pytest.mark.parametrize("window", [0, 1, 2])
def test_chain_log_factors_move_is_consistent_with_log_prior(window, decay):
    """Adding one item at epoch t to chain k (each existing one, or a new column) changes
    log_prior by the change of chain k's factors plus a constant independent of k, equal to the
    change of the Γ(M_s + α)/Γ(M_s + N_s + α) denominators over s = t..t+W."""
    rng = np.random.default_rng(1000 * window + int(10 * min(decay, 9)))
    checked = 0
    for _ in range(40):
        C = random_counts(rng)
        T, K = C.shape
        alpha = float(rng.uniform(0.3, 3.0))
        base = log_prior(C, window, decay, alpha)
        for t in range(T):
            e = np.zeros(T)
            e[t] = 1.0
            padded = np.hstack([C, np.zeros((T, 1))])
            gaps = []
            for k in range(K + 1):
                moved = padded.copy()
                moved[t, k] += 1
                change = log_prior(moved, window, decay, alpha) - base
                factor = (cf(padded[:, k] + e, t, window, decay, alpha)
                          - cf(padded[:, k], t, window, decay, alpha))
                gaps.append(change - factor)
            gaps = np.array(gaps)
            expected = (denominators(moved, t, window, decay, alpha)
                        - denominators(C, t, window, decay, alpha))
            np.testing.assert_allclose(gaps, gaps[-1], rtol=0, atol=1e-10)
            assert gaps[-1] == pytest.approx(expected, rel=1e-10, abs=1e-10)
            checked += 1
    assert checked > 100


@pytest.mark.parametrize("decay", [0.8, math.inf])
@pytest.mark.parametrize("window", [0, 1, 2])
def test_chain_log_factors_merge_is_consistent_with_log_prior(window, decay):
    """Chain a ends before t and chain b starts after t; adding the item at t to the merged
    chain a + b + e_t changes log_prior by cf(a + b + e_t) − cf(a) − cf(b) plus the same
    constant as a move into a new chain."""
    rng = np.random.default_rng(7 + 100 * window + int(10 * min(decay, 9)))
    checked = 0
    for _ in range(40):
        C = random_counts(rng)
        T = C.shape[0] + 2
        C = np.vstack([C, np.zeros((2, C.shape[1]))])
        t = int(rng.integers(1, T - 1))
        a = np.zeros(T)
        a[:t] = rng.poisson(1.5, t) * (rng.random(t) < 0.7)
        a[t - 1] = max(a[t - 1], float(rng.integers(0, 2)))
        b = np.zeros(T)
        b[t + 1:] = rng.poisson(1.5, T - t - 1) * (rng.random(T - t - 1) < 0.7)
        b[t + 1] = max(b[t + 1], float(rng.integers(0, 2)))
        C = np.hstack([C, a[:, None], b[:, None]])
        alpha = float(rng.uniform(0.3, 3.0))
        e = np.zeros(T)
        e[t] = 1.0
        base = log_prior(C, window, decay, alpha)
        new = np.hstack([C, e[:, None]])
        const = log_prior(new, window, decay, alpha) - base - cf(e, t, window, decay, alpha)
        merged = np.hstack([C[:, :-2], (a + b + e)[:, None]])
        change = log_prior(merged, window, decay, alpha) - base
        factor = (cf(a + b + e, t, window, decay, alpha) - cf(a, t, window, decay, alpha)
                  - cf(b, t, window, decay, alpha))
        assert change - factor == pytest.approx(const, rel=1e-10, abs=1e-10)
        # the merge is a genuinely different move from a new chain whenever a or b is in reach
        if window and (a[max(0, t - window):t].any() or b[t + 1:t + window + 1].any()):
            assert abs(factor - cf(e, t, window, decay, alpha)) > 1e-8
            checked += 1
    assert checked >= 10 or window == 0
