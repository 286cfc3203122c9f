"""Draws θ_k ~ q(θ_k) and log likelihoods log p(x | θ_k) of every observation model, by Monte Carlo.

Each check compares a mean over S draws with its exact value within 5 Monte Carlo standard
errors: E_q[loglik(X, θ)] = E_loglik(X, post) (which checks draw and loglik together), and the
posterior means of the drawn parameters. The S draws come from one call of ``draw`` on the
posterior tiled S times along the component axis (which also exercises the vectorisation).
Posteriors: three components from random responsibilities and one that has seen no data.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import digamma

from bnpmix.algorithms.obs import ObsModel, obs_class
from bnpmix.algorithms.obs.base import log_gamma_draw
from bnpmix.algorithms.obs.mult import Mult
from bnpmix.algorithms.obs.mult_counts import log_multinomial_coefficient
from helpers import random_counts

NAMES = ["gauss", "zm-gauss", "diag-gauss", "mult"]
D, V, N_ITEMS, K = 3, 8, 30, 4
S = 20_000  # Monte Carlo draws per component
Z = 5.0  # tolerance in standard errors


def setup(name: str, seed: int = 0) -> tuple[ObsModel, object, dict]:
    """A default model on random data, and a posterior of K components: K - 1 from random
    responsibilities, the last from none (the prior)."""
    rng = np.random.default_rng(seed)
    if name == "mult":
        X = random_counts(rng, N_ITEMS, V, density=0.5)
    else:
        A = rng.normal(size=(D, D)) + 2 * np.eye(D)
        X = rng.normal(size=(N_ITEMS, D)) @ A + np.array([1.0, -2.0, 0.5])
    model = obs_class(name).default(X)
    R = np.zeros((N_ITEMS, K))
    R[:, :-1] = rng.dirichlet(np.ones(K - 1), size=N_ITEMS)
    return model, X, model.post(R.sum(0), model.stats(X, R))


def tile(post: dict, S: int) -> dict:
    """Each component repeated S times: component k * S + s."""
    return {key: np.repeat(v, S, axis=0) for key, v in post.items()}


def split(a: np.ndarray) -> np.ndarray:
    """Draws of the tiled posterior (K S, ...) as (K, ..., S)."""
    return np.moveaxis(a.reshape(K, S, *a.shape[1:]), 1, -1)


def assert_mc_close(samples: np.ndarray, exact: np.ndarray, what: str) -> None:
    """samples (..., S): their mean within Z standard errors (+1e-9) of exact, entrywise."""
    mean = samples.mean(-1)
    se = samples.std(-1, ddof=1) / np.sqrt(samples.shape[-1])
    err = np.abs(mean - exact)
    bad = err > Z * se + 1e-9
    assert not bad.any(), (f"{what}: |mean - exact| up to {(err / (se + 1e-300)).max():.1f} "
                           f"standard errors")


def precision(name: str, theta: dict) -> np.ndarray:
    """The drawn precision matrices Λ_k (K, D, D), from θ's factor (dense in the test only)."""
    if name == "diag-gauss":
        return np.einsum("kd,de->kde", theta["s"] ** 2, np.eye(D))
    P = theta["U"]
    return np.swapaxes(P, -1, -2) @ P


EXPECTED_KEYS = {"gauss": {"mu": (D,), "U": (D, D), "logdet": ()},
                 "zm-gauss": {"U": (D, D), "logdet": ()},
                 "diag-gauss": {"mu": (D,), "s": (D,), "logdet": ()},
                 "mult": {"logtheta": (V,)}}


def test_interface_declares_draw_and_loglik():
    assert {"draw", "loglik", "sample_items"} <= ObsModel.__abstractmethods__


@pytest.mark.parametrize("name", NAMES)
def test_mean_loglik_equals_E_loglik(name):
    """E_q[log p(x_n | θ_k)] over S draws = E_loglik, for every item and component."""
    model, X, post = setup(name)
    theta = model.draw(tile(post, S), np.random.default_rng(1))
    ll = model.loglik(X, theta).reshape(N_ITEMS, K, S)
    assert np.all(np.isfinite(ll))
    assert_mc_close(ll, model.E_loglik(X, post), f"{name} loglik")


@pytest.mark.parametrize("name", NAMES)
def test_moments_of_draws(name):
    """The drawn parameters' means (and μ's covariance) against the posterior's."""
    model, _, post = setup(name)
    theta = model.draw(tile(post, S), np.random.default_rng(2))
    if name == "mult":
        lam = post["lam"]
        assert_mc_close(split(np.exp(theta["logtheta"])), lam / lam.sum(-1, keepdims=True),
                        "E[θ] = λ / Σλ")
        assert_mc_close(split(theta["logtheta"]), model.E_log_theta(post), "E[log θ]")
        return
    Lam = precision(name, theta)
    if name == "diag-gauss":
        assert_mc_close(split(theta["s"] ** 2), post["a"] / post["b"], "E[λ] = a / b")
        E_logdet = (digamma(post["a"]) - np.log(post["b"])).sum(-1)
    else:
        B_inv = np.linalg.inv(post["B"])
        assert_mc_close(split(Lam), post["nu"][:, None, None] * B_inv, "E[Λ] = ν B⁻¹")
        psi = digamma(0.5 * (post["nu"][:, None] - np.arange(D))).sum(-1)
        E_logdet = psi + D * np.log(2.0) - post["logdet_B"]
    np.testing.assert_allclose(theta["logdet"], np.linalg.slogdet(Lam)[1], rtol=1e-10, atol=1e-10)
    assert_mc_close(split(theta["logdet"]), E_logdet, "E[log|Λ|]")
    if name == "zm-gauss":
        return
    assert_mc_close(split(theta["mu"]), post["m"], "E[μ] = m")
    # Cov(μ) = E[(κΛ)⁻¹], with E[Λ⁻¹] = B / (ν - D - 1) (Gauss), E[1/λ_d] = b_d / (a_d - 1) (diag);
    # only for components with data: the prior's Student-t has too few moments for a stable se
    d = theta["mu"] - np.repeat(post["m"], S, axis=0)
    seen = slice(0, K - 1)
    kappa = post["kappa"][seen]
    if name == "gauss":
        cov = post["B"][seen] / (kappa * (post["nu"][seen] - D - 1))[:, None, None]
        assert_mc_close(split(d[:, :, None] * d[:, None, :])[seen], cov, "Cov(μ)")
    else:
        var = post["b"][seen] / (kappa[:, None] * (post["a"][seen] - 1))
        assert_mc_close(split(d**2)[seen], var, "Var(μ_d)")


@pytest.mark.parametrize("name", NAMES)
def test_loglik_matches_scipy(name):
    """Shapes, and loglik under one fixed θ = a direct scipy.stats evaluation."""
    model, X, post = setup(name)
    theta = model.draw(post, np.random.default_rng(3))
    assert set(theta) == set(EXPECTED_KEYS[name])
    for key, shape in EXPECTED_KEYS[name].items():
        assert theta[key].shape == (K, *shape), key
        assert np.all(np.isfinite(theta[key])), key
    ll = model.loglik(X, theta)
    assert ll.shape == (N_ITEMS, K)
    items = [0, 7, 19]
    for k in range(K):
        if name == "mult":
            theta_k = np.exp(theta["logtheta"][k])
            np.testing.assert_allclose(theta_k.sum(), 1.0, rtol=1e-12)
            rows = X[items].toarray()
            # loglik omits the multinomial coefficient, as E_loglik does
            want = (st.multinomial.logpmf(rows, rows.sum(1), theta_k)
                    - log_multinomial_coefficient(X[items]))
        elif name == "diag-gauss":
            want = st.norm.logpdf(X[items], theta["mu"][k], 1.0 / theta["s"][k]).sum(1)
        else:
            cov = np.linalg.inv(precision(name, theta)[k])
            mean = theta["mu"][k] if name == "gauss" else np.zeros(D)
            want = st.multivariate_normal.logpdf(X[items], mean, cov)
        np.testing.assert_allclose(ll[items, k], want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_draw_is_reproducible(name):
    model, _, post = setup(name)
    a = model.draw(post, np.random.default_rng(11))
    b = model.draw(post, np.random.default_rng(11))
    c = model.draw(post, np.random.default_rng(12))
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert any(not np.array_equal(a[key], c[key]) for key in a)


def test_log_gamma_draw_small_shapes():
    """Gamma(a) for a ≪ 1 drawn in log space: finite (a direct draw underflows to 0), with
    E[log G] = ψ(a); and Dirichlet draws from λ = 0.01 stay finite and normalised."""
    rng = np.random.default_rng(4)
    a = np.array([1e-3, 0.01, 0.3, 1.0, 4.5])
    logG = log_gamma_draw(np.repeat(a[:, None], S, axis=1), rng)
    assert np.all(np.isfinite(logG))
    assert_mc_close(logG, digamma(a), "E[log G] = ψ(a)")
    model = Mult(V, 0.01)
    logtheta = model.draw(model.prior_post(50), rng)["logtheta"]
    assert np.all(np.isfinite(logtheta))
    np.testing.assert_allclose(np.exp(logtheta).sum(-1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("name", ["gauss", "zm-gauss", "diag-gauss"])
def test_covariances_are_the_mean_of_drawn_inverse_precisions(name):
    """E[Σ_k] = E[Λ_k⁻¹]: covariances(post) against the mean of inv(Λ) over S draws."""
    model, _, post = setup(name)
    Lam = precision(name, model.draw(tile(post, S), np.random.default_rng(3)))
    drawn = np.linalg.inv(Lam)  # (K S, D, D)
    exact = model.covariances(post)
    if name == "diag-gauss":
        assert exact.shape == (K, D)
        drawn = np.diagonal(drawn, axis1=1, axis2=2)
    else:
        assert exact.shape == (K, D, D)
    assert_mc_close(split(drawn), exact, "E[Σ]")


def test_covariances_are_nan_where_the_mean_is_infinite():
    model, _, post = setup("gauss")
    post = {**post, "nu": np.where(np.arange(K) == 0, D + 0.5, post["nu"])}  # ν ≤ D + 1
    cov = model.covariances(post)
    assert np.isnan(cov[0]).all() and np.isfinite(cov[1:]).all()
    assert obs_class("mult").default(random_counts(np.random.default_rng(0), 5, V, 0.5)
                                     ).covariances({"lam": np.ones((2, V))}) is None


@pytest.mark.parametrize("name", NAMES)
def test_sample_items_have_the_moments_of_theta(name):
    """Items x ~ p(x | θ), one θ per item: mean μ and covariance Λ⁻¹ (Gaussians), n θ (counts)."""
    model, _, post = setup(name)
    rng = np.random.default_rng(4)
    one = {key: v[:1] for key, v in model.draw(post, rng).items()}  # component 0's θ, S times
    theta = {key: np.repeat(v, S, axis=0) for key, v in one.items()}
    if name == "mult":
        n_words = np.full(S, 7)
        X = model.sample_items(theta, rng, n_words).toarray().astype(float)
        assert X.sum(1).tolist() == n_words.tolist()
        assert_mc_close(X.T, 7 * np.exp(one["logtheta"][0]), "mean counts")
        with pytest.raises(ValueError, match="n_words"):
            model.sample_items(theta, rng)
        return
    X = model.sample_items(theta, rng)
    assert X.shape == (S, D)
    mean = one["mu"][0] if "mu" in one else np.zeros(D)
    cov = np.linalg.inv(precision(name, one)[0])
    assert_mc_close(X.T, mean, "mean")
    centred = X - mean
    assert_mc_close(np.einsum("sd,se->des", centred, centred), cov, "covariance")
