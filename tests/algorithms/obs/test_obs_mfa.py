"""The mixture of factor analysers (algorithms/obs/mfa.py) against definitions, Monte Carlo and
its own coordinate ascent.

The references here are written from the model's definition item by item (an explicit q(y_n)
per item and component), not from the summary formulas the model uses, so a wrong moment or a
missing term shows up as a mismatch.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import roots_legendre

from bnpmix.algorithms.obs import mfa as M
from bnpmix.algorithms.obs import obs_class, obs_from_prior
from bnpmix.algorithms.obs.mfa import MFA


def mfa_data(seed: int = 0, n: int = 240, D: int = 6, q: int = 2, K: int = 3):
    rng = np.random.default_rng(seed)
    Lam = rng.normal(size=(K, D, q))
    mu = 3.0 * rng.normal(size=(K, D)) + 5.0
    z = rng.integers(K, size=n)
    y = rng.normal(size=(n, q))
    X = mu[z] + np.einsum("ndq,nq->nd", Lam[z], y) + 0.3 * rng.normal(size=(n, D))
    return X, z, rng


def fitted(seed: int = 0, delta: float | None = None, **kw):
    X, z, rng = mfa_data(seed, **kw)
    K = z.max() + 1
    model = MFA.default(X, delta=None if delta is None else np.full(X.shape[1], delta))
    R = 0.85 * np.eye(K)[z] + 0.15 * rng.dirichlet(np.ones(K), size=len(z))
    st = model.stats(X, R)
    return model, X, R, st, model.post(R.sum(0), st)


def row_moments(post: dict, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Component k's row means (D, q+1) and covariances (D, q+1, q+1), C_d = V diag(f_d) Vᵀ."""
    V, f = post["V"][k], post["f"][k]
    return post["mean"][k], np.einsum("ij,dj,lj->dil", V, f, V)


def direct_elbo(model: MFA, X: np.ndarray, R: np.ndarray, post: dict) -> float:
    """The bound item by item: E_q[log p(x_n | y, λ̃)] - KL(q(y_nk) || N(0, I)) with the optimal
    q(y_nk) written out, plus each row's E log p(λ̃_d) - E log q(λ̃_d), and the Jacobian of the
    standardisation. Integer columns: the item's term averaged over u ~ U(-Δ/2, Δ/2)^D by the
    2D-point cubature x ± √(D δ_d) e_d, exact for the quadratic it is."""
    Y = (X - model.m0) / model.sd
    w, q, D = model._w, model.q, model.D
    shifts = np.zeros((1, D))
    if np.any(model._dq):
        steps = np.diag(np.sqrt(D * model._dq))
        shifts = np.concatenate([steps, -steps])
    total = 0.0
    for k in range(R.shape[1]):
        mean, cov = row_moments(post, k)
        E = cov + mean[:, :, None] * mean[:, None, :]
        G = np.einsum("dij,d->ij", E[:, 1:, 1:], w)
        c = np.einsum("di,d->i", E[:, 1:, 0], w)
        V = np.linalg.inv(np.eye(q) + G)

        for n in range(len(Y)):
            total += R[n, k] * (np.mean([item_bound(Y[n] + u, mean, E, V, c, w) for u in shifts])
                                - np.log(model.sd).sum() + model._log_cell)
        P = np.r_[1.0 / model.v0, post["alpha"][k]]
        on = np.isfinite(P)
        for d in range(D):
            Pd, Ed, Cd = P[on], E[d][np.ix_(on, on)], cov[d][np.ix_(on, on)]  # the model with
            total += (0.5 * np.log(Pd).sum() - 0.5 * (Pd * np.diag(Ed)).sum()  # its columns on
                      + 0.5 * np.linalg.slogdet(Cd)[1] + 0.5 * on.sum())
    return total


def item_bound(y: np.ndarray, mean: np.ndarray, E: np.ndarray, V: np.ndarray, c: np.ndarray,
               w: np.ndarray) -> float:
    """One item's E_q log p(y | ỹ, λ̃) - KL(q(y) || N(0, I)) under q(y) = N(V (M̄ᵀ Ψ⁻¹ y - c), V)."""
    q = len(c)
    yb = V @ (mean[:, 1:].T @ (w * y) - c)
    Eyy = np.zeros((q + 1, q + 1))
    Eyy[0, 0], Eyy[0, 1:], Eyy[1:, 0], Eyy[1:, 1:] = 1.0, yb, yb, V + np.outer(yb, yb)
    sq = y**2 - 2 * y * (mean @ np.r_[1.0, yb]) + np.einsum("dij,ji->d", E, Eyy)
    ll = float(np.sum(-0.5 * np.log(2 * np.pi / w) - 0.5 * w * sq))
    return ll - 0.5 * (np.trace(V) + yb @ yb - q - np.linalg.slogdet(V)[1])


@pytest.mark.parametrize("delta", [None, 1.0, 2.0])
def test_elbo_from_statistics_equals_item_by_item(delta):
    model, X, R, st, post = fitted(delta=delta)
    assert model.elbo(R.sum(0), st, post) == pytest.approx(direct_elbo(model, X, R, post),
                                                           rel=1e-10)
    assert model.elbo_at_optimum(R.sum(0), st, post) == pytest.approx(
        model.elbo(R.sum(0), st, post), rel=1e-12)


def test_E_loglik_is_the_data_part_of_the_bound():
    """Σ_nk r_nk ℓ_nk (the local step's log-likelihoods) + the rows' terms = the ELBO; the rows'
    terms are the bound of the same q on empty statistics."""
    model, X, R, st, post = fitted(delta=0.5)
    data = float((R * model.E_loglik(X, post)).sum())
    zero = model.stats(X, np.zeros_like(R))
    rows = model.elbo(np.zeros(R.shape[1]), zero, post)
    assert data + rows == pytest.approx(model.elbo(R.sum(0), st, post), rel=1e-10)


@pytest.mark.parametrize("delta", [1.0, 2.0])
def test_dequantised_E_loglik_is_the_uniform_average(delta):
    """E_u ℓ(x + u) + Σ log Δ_d, u ~ U(-Δ/2, Δ/2)^D, by Monte Carlo: ℓ is quadratic in x, so
    the average over many u matches the closed form within its standard error."""
    model, X, _R, _st, post = fitted(delta=delta)
    plain = MFA(model.D, model.m0, model.sd, model.psi, model.q, model.v0)
    rng = np.random.default_rng(5)
    x = X[:3]
    u = rng.uniform(-delta / 2, delta / 2, size=(20000, model.D))
    draws = np.stack([plain.E_loglik(xi + u, post) for xi in x])  # (3, n_u, K)
    mc, se = draws.mean(1) + model.D * np.log(delta), draws.std(1) / np.sqrt(u.shape[0])
    exact = model.E_loglik(x, post)
    assert np.all(np.abs(mc - exact) < 5 * se + 1e-12)


def test_global_update_never_lowers_the_bound_and_is_stationary():
    """Each ascent round raises each component's bound (watched round by round), and the
    result is a fixed point: another round from it changes the bound by < 1e-6 per item."""
    model, _X, R, st, post = fitted()
    N, s, S = model._standard(R.sum(0), st)
    state = model._start(N, s, S)
    previous = np.full(len(N), -np.inf)
    for _ in range(60):
        state = model._ascend(N, s, S, state, 1)
        assert np.all(state["elbo"] >= previous - 1e-9 * np.abs(state["elbo"]))
        previous = state["elbo"]
    again = model.post_update(post, R.sum(0), st, None)
    assert np.all(np.abs(again["elbo"] - post["elbo"]) < 1e-6 * N)
    assert np.all(again["elbo"] >= post["elbo"] - 1e-9 * np.abs(post["elbo"]))


def test_ard_switches_off_the_columns_the_data_do_not_need():
    """Three rank-2 clusters, each fitted to its own items with Ψ learned: ARD keeps 2 of the
    q = 5 columns in each."""
    X, z, _ = mfa_data(n=3000)
    model = MFA.default(X)
    R = np.eye(3)[z]
    st = model.stats(X, R)
    post = model.post(R.sum(0), st)
    for _ in range(40):
        model = model.learn_prior(post, model)
        post = model.post(R.sum(0), st)
    assert model.q == M.default_rank(6) == 5
    assert list(model.ranks(post)) == [2, 2, 2]
    assert np.allclose(model.psi, 0.09, rtol=0.2)  # the noise the data were drawn with


def test_learned_noise_is_the_argmax_and_raises_the_bound():
    """By the envelope theorem, ∂L*/∂(1/ψ_d) at fixed q(Λ̃) is N ψ_d/2 - R_d/2 (standard units),
    R the residuals the update averages: checked by finite differences; then the learned
    Ψ = Σ_k R_k / N raises the bound of the same q(Λ̃)."""
    model, _X, R, st, post = fitted(delta=1.0)
    N = R.sum(0)
    n = N.sum()
    for d in (0, 3):
        h = 1e-5
        up, dn = model._w.copy(), model._w.copy()
        up[d] += h
        dn[d] -= h
        f = [MFA(model.D, model.m0, model.sd, model.sd**2 / w, model.q, model.v0, model.delta)
             .elbo(N, st, post) for w in (up, dn)]
        slope = (f[0] - f[1]) / (2 * h)
        assert slope == pytest.approx(0.5 * n / model._w[d] - 0.5 * post["resid"][:, d].sum(),
                                      rel=1e-5)
    learned = model.learn_prior(post, model)
    assert learned.elbo(N, st, post) > model.elbo(N, st, post)
    share = learned.psi / learned.sd**2
    assert np.allclose(share, np.maximum(post["resid"].sum(0) / n, M.PSI_FLOOR))


def test_rows_against_monte_carlo_draws():
    """q(λ̃_d) drawn by ``draw`` (data units) has the posterior's mean and covariance, and the
    expected complete-data log-likelihood under draws of (λ̃, y) matches the closed form."""
    model, _X, _R, _st, post = fitted()
    rng = np.random.default_rng(3)
    draws = [model.draw(post, rng) for _ in range(4000)]
    lam = np.stack([(d["Lam"] / model.sd[None, :, None]) for d in draws])  # (S, K, D, q)
    mu = np.stack([(d["mu"] - model.m0) / model.sd for d in draws])
    k, dim = 1, 2
    mean, cov = row_moments(post, k)
    sample = np.concatenate([mu[:, k, dim][:, None], lam[:, k, dim]], axis=1)
    se = np.sqrt(np.diag(cov[dim]) / len(draws))
    assert np.all(np.abs(sample.mean(0) - mean[dim]) <= 5 * se)  # 0 = 0 where switched off
    assert np.allclose(np.cov(sample.T), cov[dim], rtol=0.15, atol=0.1 * np.abs(cov[dim]).max())


def test_merge_gain_is_a_refit_on_the_union():
    """Eq. 12 for MFA: the bound of one component fitted to both components' items, less theirs."""
    model, X, R, st, post = fitted()
    N = R.sum(0)
    gain = model.merge_gains(N, st, np.array([0]), np.array([2]))[0]
    union = R[:, [0]] + R[:, [2]]
    refit = model.log_marginal(union.sum(0), model.stats(X, union))[0]
    assert gain == pytest.approx(refit - post["elbo"][0] - post["elbo"][2], rel=1e-9)


def test_each_component_depends_on_its_own_statistics_only():
    model, _X, R, st, post = fitted()
    N = R.sum(0)
    alone = model.post(N[[1]], {k: v[[1]] for k, v in st.items()})
    assert alone["elbo"][0] == post["elbo"][1]
    assert np.array_equal(alone["mean"][0], post["mean"][1])


def test_predictive_is_a_density_and_matches_scipy():
    model, X, _R, _st, post = fitted()
    mu, Mk, dvar = model._predictive(post)
    k = 0
    cov = (Mk[k] @ Mk[k].T + np.diag(dvar[k])) * np.outer(model.sd, model.sd)
    ref = stats.multivariate_normal(model.m0 + model.sd * mu[k], cov).logpdf(X[:5])
    assert np.allclose(model.predictive_logpdf(X[:5], post)[:, k], ref, rtol=1e-10)
    draw = model.draw(post, np.random.default_rng(0))
    cov = draw["Lam"][k] @ draw["Lam"][k].T + np.diag(draw["psi"][k])
    ref = stats.multivariate_normal(draw["mu"][k], cov).logpdf(X[:5])
    assert np.allclose(model.loglik(X[:5], draw)[:, k], ref, rtol=1e-10)


def test_dequantised_predictive_is_below_the_cell_probability_in_1d():
    """D = 2 (q = 1): the bound on log P(integer) is at most the log of the predictive's mass
    on the cell [x - ½, x + ½)² and close to it."""
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(3.0, 2.0, size=(200, 2)))
    model = MFA.default(X, delta=np.ones(2))
    R = np.ones((200, 1))
    st = model.stats(X, R)
    post = model.post(R.sum(0), st)
    for _ in range(10):
        model = model.learn_prior(post, model)
        post = model.post(R.sum(0), st)
    mu, Mk, dvar = model._predictive(post)
    cov = (Mk[0] @ Mk[0].T + np.diag(dvar[0])) * np.outer(model.sd, model.sd)
    dist = stats.multivariate_normal(model.m0 + model.sd * mu[0], cov)
    g, gw = roots_legendre(40)  # Gauss-Legendre on [-½, ½]²
    u = 0.5 * np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    uw = 0.25 * np.outer(gw, gw).ravel()
    for x in X[:4]:
        cell = np.log((dist.pdf(x + u) * uw).sum())
        bound = model.predictive_logpdf(x[None], post)[0, 0]
        assert bound <= cell + 1e-6 and bound > cell - 0.05


def test_one_item_path_absorb_then_remove_restores_the_state():
    model, X, _R, _st, post = fitted()
    state = model.predictive_state(post)
    before = model.predictive_logpdf_state(state, X[:3])
    model.absorb(state, 1, X[7], 0.6)
    assert not np.allclose(model.predictive_logpdf_state(state, X[:3]), before)
    model.remove(state, 1, X[7], 0.6)
    assert np.allclose(model.predictive_logpdf_state(state, X[:3]), before, rtol=1e-6)
    with pytest.raises(ValueError):
        model.remove(state, 1, X[7], 1e6)


def test_prior_round_trips_and_is_registered():
    model, *_ = fitted(delta=1.0)
    assert obs_class("mfa") is MFA
    again = obs_from_prior("mfa", model.prior())
    assert again.prior() == model.prior()
    assert np.array_equal(again.delta, model.delta)
