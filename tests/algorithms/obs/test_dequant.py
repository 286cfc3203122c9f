"""Integer-valued columns (issue 45): the Gaussian models' dequantisation terms against their
definitions, E_u over u ~ Uniform(-Δ/2, Δ/2) on the integer columns.

The references never use a model's ``delta``: they average the continuous model (delta None)
over u by Monte Carlo (antithetic pairs, tolerance from the standard error) or by
Gauss-Legendre quadrature (exact: the Gaussian log density is quadratic in u), and integrate
the predictive density over a cell numerically.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate
from scipy.special import logsumexp

from bnpmix.algorithms.obs import obs_from_prior
from bnpmix.algorithms.obs.diag_gauss import DiagGauss
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.obs.tied_gauss import TiedGauss
from bnpmix.algorithms.obs.zm_gauss import ZeroMeanGauss

NAMES = ["gauss", "zm-gauss", "diag-gauss", "tied-gauss"]
FUSED = ["gauss", "zm-gauss", "tied-gauss"]  # the models with a fused local_step
DELTA = np.array([1.0, 2.0, 0.0])  # steps 1 and 2 (Σ log Δ = log 2), one continuous column
D, N_ITEMS, K = 3, 30, 3


def spd(rng: np.random.Generator, D: int) -> np.ndarray:
    A = rng.normal(size=(D, D))
    return A @ A.T + D * np.eye(D)


def make_model(name: str, D: int, seed: int, delta: np.ndarray | None):
    """A non-default prior (m0 away from the data, full B0), the same for any ``delta``."""
    rng = np.random.default_rng(seed)
    if name == "gauss":
        return Gauss(D, rng.normal(size=D), 0.5, D + 2.5, spd(rng, D), delta)
    if name == "zm-gauss":
        return ZeroMeanGauss(D, D + 2.5, spd(rng, D), delta)
    if name == "tied-gauss":
        return TiedGauss(D, rng.normal(size=D), 0.5, D + 2.5, spd(rng, D), delta)
    return DiagGauss(D, rng.normal(size=D), 0.5, 2.0, rng.uniform(0.5, 2.0, D), delta)


def setup(name: str, seed: int = 0):
    """(model with DELTA, the continuous model, integer-column data X, responsibilities R, a q
    that is no global update of (X, R))."""
    rng = np.random.default_rng(seed + 100)
    X = np.column_stack([rng.integers(-3, 4, N_ITEMS), 2 * rng.integers(-2, 3, N_ITEMS),
                         rng.normal(size=N_ITEMS)]).astype(float)
    R = rng.dirichlet(np.ones(K), size=N_ITEMS)
    model, plain = make_model(name, D, seed, DELTA), make_model(name, D, seed, None)
    other = rng.normal(size=(N_ITEMS, D)) * 2
    post = plain.post(R.sum(0), plain.stats(other, R))
    return model, plain, X, R, post


def cell_nodes(delta: np.ndarray, points: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes u (J, D) and weights (J,) of the uniform average over the cell
    [-Δ/2, Δ/2) of each integer column (u_d = 0 on continuous ones): exact up to degree
    2 points - 1 in each u_d."""
    x, w = np.polynomial.legendre.leggauss(points)
    cols = np.flatnonzero(delta)
    grids = np.meshgrid(*[x * delta[d] / 2 for d in cols], indexing="ij")
    U = np.zeros((grids[0].size, len(delta)))
    for d, g in zip(cols, grids, strict=True):
        U[:, d] = g.ravel()
    weights = np.prod(np.meshgrid(*[w / 2 for _ in cols], indexing="ij"), axis=0).ravel()
    return U, weights


LOG_CELL = np.log(2.0)  # Σ_{Δ_d > 0} log Δ_d of DELTA


def antithetic_mean(f, rng: np.random.Generator, S: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """E_u f(u) by S antithetic pairs (f(u) + f(-u)) / 2, u ~ Uniform(-Δ/2, Δ/2) on the integer
    columns, and its standard error."""
    pairs = []
    for _ in range(S):
        u = (rng.random(D) - 0.5) * DELTA
        pairs.append(0.5 * (f(u) + f(-u)))
    pairs = np.array(pairs)
    return pairs.mean(0), pairs.std(0, ddof=1) / np.sqrt(S)


@pytest.mark.parametrize("name", NAMES)
def test_expected_loglik_is_the_monte_carlo_average_over_the_cell(name):
    """E_loglik with delta = E_u E_loglik(x + u) + Σ log Δ (the continuous model's), within 5
    standard errors; the correction itself is far beyond that (the check can fail)."""
    model, plain, X, _R, post = setup(name)
    mean, se = antithetic_mean(lambda u: plain.E_loglik(X + u, post), np.random.default_rng(1))
    closed = model.E_loglik(X, post)
    assert np.all(np.abs(mean + LOG_CELL - closed) < 5 * se + 1e-12)
    assert np.all(np.abs(plain.E_loglik(X, post) - closed) > 20 * se)


@pytest.mark.parametrize("name", NAMES)
def test_loglik_at_a_draw_is_the_monte_carlo_average_over_the_cell(name):
    """loglik(x, θ) with delta = E_u log N(x + u | θ) + Σ log Δ at a drawn θ (the uncollapsed
    samplers' density), within 5 standard errors."""
    model, plain, X, _R, post = setup(name)
    theta = plain.draw(post, np.random.default_rng(2))
    mean, se = antithetic_mean(lambda u: plain.loglik(X + u, theta), np.random.default_rng(3))
    closed = model.loglik(X, theta)
    assert np.all(np.abs(mean + LOG_CELL - closed) < 5 * se + 1e-12)
    assert np.all(np.abs(plain.loglik(X, theta) - closed) > 20 * se)


def evidence(model, N, stats):
    if isinstance(model, TiedGauss):
        return model.log_evidence(N, stats)
    return float(np.sum(model.log_marginal(N, stats)))


@pytest.mark.parametrize("name", NAMES)
def test_elbo_and_evidence_are_the_average_over_the_cells(name):
    """At any q, the ELBO from the dequantised statistics is the continuous ELBO of the items
    x + u averaged over u (quadrature, exact) plus N Σ log Δ; log M(S) is that average at the
    optimal q of the dequantised statistics (so merges, which read log M, follow)."""
    model, plain, X, R, post = setup(name)
    N = R.sum(0)
    stats = model.stats(X, R)
    U, w = cell_nodes(DELTA)

    def averaged(q):
        return sum(wj * plain.elbo(N, plain.stats(X + u, R), q) for u, wj in zip(U, w, strict=True))

    assert model.elbo(N, stats, post) == pytest.approx(averaged(post) + N.sum() * LOG_CELL,
                                                       rel=1e-11)
    best = model.post(N, stats)
    assert evidence(model, N, stats) == pytest.approx(averaged(best) + N.sum() * LOG_CELL,
                                                      rel=1e-11)
    assert model.elbo(N, stats, best) == pytest.approx(evidence(model, N, stats), rel=1e-11)
    assert abs(evidence(model, N, stats) - evidence(plain, N, plain.stats(X, R))) > 1.0


@pytest.mark.parametrize("name", FUSED)
def test_fused_local_step_equals_the_separate_steps(name):
    """local_step with delta: the responsibilities of E_loglik + E[log w], the statistics of
    ``stats`` (with N_k diag(δ)) and the entropies."""
    model, plain, X, _R, post = setup(name)
    Elogw = np.log(np.array([0.5, 0.3, 0.2]))
    L = model.E_loglik(X, post) + Elogw
    R_ref = np.exp(L - logsumexp(L, axis=1, keepdims=True))
    R_fused, _N, stats, H = model.local_step(X, post, Elogw)
    np.testing.assert_allclose(R_fused, R_ref, rtol=1e-9, atol=1e-12)
    ref = model.stats(X, R_ref)
    for key in ref:
        np.testing.assert_allclose(stats[key], ref[key], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(H, -(R_ref * np.log(R_ref)).sum(0), rtol=1e-8)
    plain_stats = plain.local_step(X, post, Elogw)[2]
    second = "scatter" if name == "tied-gauss" else "xxT"
    assert not np.allclose(stats[second], plain_stats[second])


def one_d(name: str, spread: float, seed: int):
    """D = 1 models with Δ = 1 and without, and a two-component posterior fitted to integer
    data of about this spread (a narrow one: the bound is loose; a wide one: tight)."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(0, spread, size=(40, 1)) + np.repeat([[0.0], [3 * spread]], 20, 0))
    R = np.repeat(np.eye(2), 20, axis=0)
    B0 = np.array([[1.0]])
    if name == "gauss":
        models = [Gauss(1, 0.0, 0.5, 3.0, B0, d) for d in ([1.0], None)]
    elif name == "zm-gauss":
        models = [ZeroMeanGauss(1, 3.0, B0, d) for d in ([1.0], None)]
    elif name == "tied-gauss":
        models = [TiedGauss(1, 0.0, 0.5, 3.0, B0, d) for d in ([1.0], None)]
    else:
        models = [DiagGauss(1, 0.0, 0.5, 2.0, [1.0], d) for d in ([1.0], None)]
    model, plain = models
    return model, plain, model.post(R.sum(0), model.stats(X, R))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("spread", [0.3, 6.0])
def test_heldout_bound_is_below_the_cell_probability(name, spread):
    """In D = 1 the dequantised predictive of an integer x, log Σ_k w_k exp(bound_k(x)), is at
    most log ∫_{x-½}^{x+½} Σ_k w_k t_k(y) dy (numerical integration of the continuous
    predictive), per component and for the mixture; for wide components (spread 6) within
    0.01 of it (the gap grows in the tails, where log t is steeper across the cell)."""
    model, plain, post = one_d(name, spread, seed=4)
    xs = np.arange(-4, 4 + int(4 * spread))[:, None].astype(float)
    bound = model.predictive_logpdf(xs, post)
    exact = np.log([[integrate.quad(lambda y, k=k: np.exp(plain.predictive_logpdf(
        np.array([[y]]), post)[0, k]), x - 0.5, x + 0.5, epsabs=0, epsrel=1e-12)[0]
        for k in range(2)] for x in xs[:, 0]])
    assert np.all(bound <= exact + 1e-9)
    logw = np.log([0.4, 0.6])
    assert np.all(logsumexp(bound + logw, axis=1) <= logsumexp(exact + logw, axis=1) + 1e-9)
    if spread > 1:
        np.testing.assert_allclose(bound, exact, atol=1e-2)
    else:  # a narrow component: the continuous density at x exceeds the cell's probability
        assert np.any(plain.predictive_logpdf(xs, post) > exact + 0.1)


@pytest.mark.parametrize("name", NAMES)
def test_zero_steps_change_nothing(name):
    """delta of zeros is the continuous model, bit for bit: statistics, local steps, densities,
    bounds, the one-item path, and prior() without a delta."""
    _model, plain, X, R, post = setup(name)
    zero = make_model(name, D, 0, np.zeros(D))
    assert zero.dq is None and zero.delta is None and "delta" not in zero.prior()
    N = R.sum(0)
    for a, b in [(plain.stats(X, R), zero.stats(X, R))]:
        assert all(np.array_equal(a[k], b[k]) for k in a)
    assert np.array_equal(plain.E_loglik(X, post), zero.E_loglik(X, post))
    assert np.array_equal(plain.predictive_logpdf(X, post), zero.predictive_logpdf(X, post))
    assert plain.elbo(N, plain.stats(X, R), post) == zero.elbo(N, zero.stats(X, R), post)
    assert evidence(plain, N, plain.stats(X, R)) == evidence(zero, N, zero.stats(X, R))
    if name in FUSED:
        a, b = plain.local_step(X, post, np.zeros(K)), zero.local_step(X, post, np.zeros(K))
        assert np.array_equal(a[0], b[0]) and all(np.array_equal(a[2][k], b[2][k]) for k in a[2])
    s1, s2 = plain.predictive_state(post), zero.predictive_state(post)
    plain.absorb(s1, 1, X[0], 0.7)
    zero.absorb(s2, 1, X[0], 0.7)
    assert all(np.array_equal(s1[k], s2[k]) for k in s1)
    assert np.array_equal(plain.predictive_logpdf_state(s1, X), zero.predictive_logpdf_state(s2, X))


@pytest.mark.parametrize("name", NAMES)
def test_one_item_path_adds_the_cells(name):
    """Absorbing the items one by one (weights r_nk) into the prior's state gives the state of
    the batch posterior post(N, stats) with the dequantised statistics, and its predictive is
    predictive_logpdf's bound; remove is absorb's inverse, and a removal that would leave no
    valid posterior changes nothing."""
    model, _plain, X, R, _post = setup(name)
    state = model.predictive_state(model.prior_post(K))
    for i in range(N_ITEMS):
        for k in range(K):
            model.absorb(state, k, X[i], R[i, k])
    batch = model.predictive_state(model.post(R.sum(0), model.stats(X, R)))
    for key in batch:
        np.testing.assert_allclose(state[key], batch[key], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(model.predictive_logpdf_state(state, X),
                               model.predictive_logpdf(X, model.post(R.sum(0),
                                                                     model.stats(X, R))),
                               rtol=1e-9)
    before = {k: np.array(v) for k, v in state.items()}
    model.absorb(state, 2, X[3], 0.8)
    model.remove(state, 2, X[3], 0.8)
    for key in before:
        np.testing.assert_allclose(state[key], before[key], rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError):  # an item far from anything the state holds
        model.remove(state, 0, X[0] + 1e4, 1.0)
    for key in before:  # untouched
        np.testing.assert_allclose(state[key], before[key], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_delta_survives_prior_and_learning(name):
    """prior() keeps delta (a run directory rebuilds the model) and learn_prior's model has
    it too."""
    model, _plain, _X, _R, _post = setup(name)
    rebuilt = obs_from_prior(model.name, model.prior())
    np.testing.assert_array_equal(rebuilt.delta, DELTA)
    rng = np.random.default_rng(5)
    Y = rng.normal(size=(300, D)) * 3
    R6 = np.repeat(np.eye(6), 50, axis=0)
    learned = model.learn_prior(model.post(R6.sum(0), model.stats(Y, R6)), model)
    assert learned is not model  # something was learned
    np.testing.assert_array_equal(learned.delta, DELTA)


def test_delta_is_checked():
    with pytest.raises(ValueError, match="delta"):
        Gauss(2, np.zeros(2), 1.0, 4.0, np.eye(2), [1.0, -1.0])
    with pytest.raises(ValueError, match="delta"):
        DiagGauss(2, np.zeros(2), 1.0, 1.0, np.ones(2), [1.0])
