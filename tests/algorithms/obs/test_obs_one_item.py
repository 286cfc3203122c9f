"""The one-item path of every observation model: predictive states, absorb / remove, means.

Each incremental result is checked against the batch path it must reproduce: the predictive
state of the batch posterior post(N, stats) built from the same weights, and predictive_logpdf.
Priors are non-default (m0 away from the data, full B0, non-symmetric λ0) so every prior term
matters.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import scipy.sparse as sp

from bnpmix.algorithms.obs import ObsModel
from bnpmix.algorithms.obs.diag_gauss import DiagGauss
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.obs.mfa import MFA
from bnpmix.algorithms.obs.mult import Mult
from bnpmix.algorithms.obs.zm_gauss import ZeroMeanGauss
from helpers import random_counts

NAMES = ["gauss", "zm-gauss", "diag-gauss", "mfa", "mult"]
D, V = 4, 12
RTOL = 1e-10


# ---------------------------------------------------------------- fixtures

def spd(rng: np.random.Generator, D: int) -> np.ndarray:
    A = rng.normal(size=(D, D))
    return A @ A.T + D * np.eye(D)


def make_model(name: str, rng: np.random.Generator) -> ObsModel:
    if name == "gauss":
        return Gauss(D, m0=rng.normal(size=D), kappa0=0.5, nu0=D + 2.5, B0=spd(rng, D))
    if name == "zm-gauss":
        return ZeroMeanGauss(D, nu0=D + 2.5, B0=spd(rng, D))
    if name == "mfa":
        return MFA(D, m0=rng.normal(size=D), sd=rng.uniform(0.5, 2.0, D),
                   psi=rng.uniform(0.5, 2.0, D), q=2, v0=2.0)
    if name == "diag-gauss":
        return DiagGauss(D, m0=rng.normal(size=D), kappa0=0.5, a0=2.0,
                         b0=rng.uniform(0.5, 2.0, D))
    return Mult(V, np.linspace(0.2, 1.7, V))


def make_data(name: str, rng: np.random.Generator, n: int):
    """Dense (n, D) items for the Gaussians, a CSR count matrix (n, V) for Mult."""
    if name == "mult":
        return random_counts(rng, n, V, density=0.4)
    A = rng.normal(size=(D, D)) + 2 * np.eye(D)
    return rng.normal(size=(n, D)) @ A + np.array([1.0, -2.0, 0.5, 3.0])


def setup(name: str, seed: int = 0, n: int = 40, K: int = 3):
    rng = np.random.default_rng(seed)
    model = make_model(name, rng)
    X = make_data(name, rng, n)
    R = rng.dirichlet(np.ones(K), size=n)
    return model, X, R, rng


def batch_post(model: ObsModel, X, R: np.ndarray) -> dict:
    return model.post(R.sum(0), model.stats(X, R))


def copy_state(state: dict) -> dict:
    return {key: v.copy() for key, v in state.items()}


def assert_states_close(got: dict, want: dict, rtol: float = RTOL) -> None:
    """Same keys and shapes; values equal to rtol, relative to each array's largest finite
    entry (infinite ones, mfa's switched-off ARD columns, equal)."""
    assert set(got) == set(want)
    for key, v in want.items():
        assert got[key].shape == v.shape, key
        finite = np.abs(v[np.isfinite(v)])
        np.testing.assert_allclose(got[key], v, rtol=rtol,
                                   atol=rtol * (finite.max() if finite.size else 0.0),
                                   err_msg=key)


def assert_states_equal(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, v in want.items():
        np.testing.assert_array_equal(got[key], v, err_msg=key)


def hard_weights(z: np.ndarray, w: np.ndarray, K: int) -> np.ndarray:
    """Responsibilities with weight w_i on component z_i only."""
    R = np.zeros((len(z), K))
    R[np.arange(len(z)), z] = w
    return R


def add_stats(a: dict, b: dict) -> dict:
    return {key: a[key] + b[key] for key in a}


def test_interface_declares_the_one_item_path():
    one_item = {"predictive_state", "predictive_logpdf_state", "absorb", "remove", "means"}
    assert one_item <= ObsModel.__abstractmethods__


# ---------------------------------------------------------------- predictive from a state

@pytest.mark.parametrize("K", [1, 4, 9])
@pytest.mark.parametrize("name", NAMES)
def test_state_predictive_equals_batch(name, K):
    model, X, R, rng = setup(name, seed=K, K=K)
    Xnew = make_data(name, rng, 6)
    R_other = rng.dirichlet(np.full(K, 0.3), size=X.shape[0])  # peaked responsibilities
    for post in (batch_post(model, X, R), batch_post(model, X, R_other), model.prior_post(K)):
        state = model.predictive_state(post)
        for v in state.values():
            assert isinstance(v, np.ndarray) and v.shape[0] == K
        want = model.predictive_logpdf(Xnew, post)
        got = model.predictive_logpdf_state(state, Xnew)
        assert got.shape == (6, K)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=0)
        one = model.predictive_logpdf_state(state, Xnew[2])  # one item: (D,) or a 1-row CSR
        assert one.shape == (1, K)
        np.testing.assert_allclose(one[0], want[2], rtol=RTOL, atol=0)


@pytest.mark.parametrize("name", ["gauss", "zm-gauss"])
def test_gaussian_state_keeps_the_cholesky_factor_of_B(name):
    model, X, R, _ = setup(name)
    post = batch_post(model, X, R)
    state = model.predictive_state(post)
    L = state["L"]
    np.testing.assert_array_equal(np.triu(L, 1), 0.0)
    assert np.all(np.diagonal(L, axis1=1, axis2=2) > 0)
    np.testing.assert_allclose(L @ np.swapaxes(L, 1, 2), post["B"], rtol=1e-13)
    np.testing.assert_allclose(state["logdet_B"], np.linalg.slogdet(post["B"])[1], rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_state_is_plain_arrays_apart_from_the_posterior(name):
    """A state saves and loads with np.savez, the loaded copy updates like the original, and
    updating a state never writes through to the posterior it came from."""
    model, X, R, _ = setup(name)
    post = batch_post(model, X, R)
    before = copy_state(post)
    state = model.predictive_state(post)
    buf = io.BytesIO()
    np.savez(buf, **state)
    buf.seek(0)
    with np.load(buf) as f:
        loaded = {key: f[key] for key in f.files}
    assert_states_equal(loaded, state)
    for s in (state, loaded):
        model.absorb(s, 1, X[0], 0.7)
        model.remove(s, 2, X[3], R[3, 2])
    assert_states_equal(loaded, state)
    assert not np.array_equal(model.predictive_logpdf_state(state, X[:5]),
                              model.predictive_logpdf(X[:5], post))
    assert_states_equal(post, before)


# ---------------------------------------------------------------- absorb = batch posterior

@pytest.mark.parametrize("start", ["prior", "data"])
@pytest.mark.parametrize("name", NAMES)
def test_absorbed_items_equal_batch_posterior(name, start):
    """Items absorbed one at a time with fractional weights into random components give the
    predictive state of post(N, stats) computed in batch from the same weights."""
    K, n = 4, 25
    model, X, R, rng = setup(name, seed=2, K=K)
    Xa = make_data(name, rng, n)
    z = rng.integers(0, K - 1, size=n)  # the last component receives nothing
    w = rng.uniform(0.05, 1.0, size=n)
    Ra = hard_weights(z, w, K)
    if start == "prior":
        start_post = model.prior_post(K)
        N, s = Ra.sum(0), model.stats(Xa, Ra)
    else:
        start_post = batch_post(model, X, R)
        N, s = R.sum(0) + Ra.sum(0), add_stats(model.stats(X, R), model.stats(Xa, Ra))
    state = model.predictive_state(start_post)
    start_state = copy_state(state)
    for i in range(n):
        model.absorb(state, z[i], Xa[i], w[i])
    want_post = model.post(N, s)
    assert_states_close(state, model.predictive_state(want_post))
    if "L" in state:
        LLT = state["L"] @ np.swapaxes(state["L"], 1, 2)
        np.testing.assert_allclose(LLT, want_post["B"], rtol=RTOL,
                                   atol=RTOL * np.abs(want_post["B"]).max())
    Xnew = make_data(name, rng, 5)
    np.testing.assert_allclose(model.predictive_logpdf_state(state, Xnew),
                               model.predictive_logpdf(Xnew, want_post), rtol=RTOL, atol=0)
    for key, v in state.items():  # untouched component: bit-identical
        np.testing.assert_array_equal(v[K - 1], start_state[key][K - 1], err_msg=key)


# mfa's log_marginal is its bound and its predictive the moment-matched Gaussian: no chain rule
@pytest.mark.parametrize("name", [n for n in NAMES if n != "mfa"])
def test_sequential_predictives_multiply_to_the_evidence(name):
    """Chain rule with hard assignments: Σ_i log p(x_i | x_<i) from the state, absorbing each item
    after scoring it, equals log_marginal of all items (independent of predictive_state(post))."""
    model, X, _, rng = setup(name, seed=3, n=15)
    z = rng.integers(0, 2, size=15)
    state = model.predictive_state(model.prior_post(2))
    chain = np.zeros(2)
    for i in range(15):
        chain[z[i]] += model.predictive_logpdf_state(state, X[i])[0, z[i]]
        model.absorb(state, z[i], X[i])
    R = hard_weights(z, np.ones(15), 2)
    lm = model.log_marginal(R.sum(0), model.stats(X, R))
    np.testing.assert_allclose(chain, lm, rtol=1e-10)


def test_gauss_and_diag_gauss_one_item_paths_agree_in_1d():
    """In D = 1, Normal-Wishart(κ, m, ν, B) is Normal-Gamma(κ, m, a = ν/2, b = B/2): the rank-one
    Cholesky update and the O(D) Normal-Gamma update must move together."""
    rng = np.random.default_rng(4)
    g = Gauss(1, m0=[0.3], kappa0=0.4, nu0=3.0, B0=[[1.6]])
    d = DiagGauss(1, m0=[0.3], kappa0=0.4, a0=1.5, b0=[0.8])
    sg, sd = g.predictive_state(g.prior_post(2)), d.predictive_state(d.prior_post(2))
    X = rng.normal(size=(12, 1)) * 2.0
    for i, x in enumerate(X):
        k, w = i % 2, rng.uniform(0.1, 1.0)
        g.absorb(sg, k, x, w)
        d.absorb(sd, k, x, w)
        np.testing.assert_allclose(g.predictive_logpdf_state(sg, X),
                                   d.predictive_logpdf_state(sd, X), rtol=1e-12)
    np.testing.assert_allclose(sg["L"][:, 0, 0] ** 2, 2 * sd["b"][:, 0], rtol=1e-12)


# ---------------------------------------------------------------- remove

@pytest.mark.parametrize("name", NAMES)
def test_remove_undoes_absorb(name):
    model, X, R, rng = setup(name, seed=5, K=3)
    state0 = model.predictive_state(batch_post(model, X, R))
    Xa = make_data(name, rng, 10)
    z = rng.integers(0, 3, size=10)
    w = rng.uniform(0.05, 1.0, size=10)
    state = copy_state(state0)
    model.absorb(state, z[0], Xa[0], w[0])
    model.remove(state, z[0], Xa[0], w[0])
    assert_states_close(state, state0)
    for i in range(10):
        model.absorb(state, z[i], Xa[i], w[i])
    for i in rng.permutation(10):  # in another order than absorbed
        model.remove(state, z[i], Xa[i], w[i])
    assert_states_close(state, state0)
    for other in range(3):  # a component nobody touched is bit-identical
        if other not in z:
            for key, v in state.items():
                np.testing.assert_array_equal(v[other], state0[key][other])


@pytest.mark.parametrize("name", NAMES)
def test_remove_an_item_of_the_batch_posterior(name):
    """Removing x_i with weight r_ik from component k of post(R) gives post(R with r_ik = 0)."""
    model, X, R, rng = setup(name, seed=6, n=30, K=3)
    state = model.predictive_state(batch_post(model, X, R))
    R2 = R.copy()
    for i, k in ((0, 0), (5, 2), (7, 1), (7, 0), (29, 2)):
        model.remove(state, k, X[i], R[i, k])
        R2[i, k] = 0.0
    want_post = batch_post(model, X, R2)
    assert_states_close(state, model.predictive_state(want_post))
    Xnew = make_data(name, rng, 5)
    np.testing.assert_allclose(model.predictive_logpdf_state(state, Xnew),
                               model.predictive_logpdf(Xnew, want_post), rtol=RTOL, atol=0)


@pytest.mark.parametrize("name", ["gauss", "zm-gauss"])
def test_downdate_that_breaks_positive_definiteness_raises(name):
    """B' = B - c d dᵀ is positive definite iff c dᵀB⁻¹d < 1 (c = w for zm-gauss, w κ'/(κ' - w)
    for gauss, d = x - m'). Past that the remove raises and changes nothing; short of it, it
    succeeds and L' L'ᵀ = B - c d dᵀ."""
    model, _, _, rng = setup(name)
    post = model.prior_post(2)
    state = model.predictive_state(post)
    B, w = post["B"][1], 0.2  # w keeps κ and ν valid, so only B can fail
    center = state["m"][1] if "m" in state else np.zeros(D)
    c = w * state["kappa"][1] / (state["kappa"][1] - w) if "kappa" in state else w
    u = rng.normal(size=D)
    u /= np.sqrt(c * u @ np.linalg.solve(B, u))  # c uᵀB⁻¹u = 1: the boundary
    before = copy_state(state)
    for t in (1.5, 1.0 + 1e-6):
        with pytest.raises(ValueError, match="positive definite"):
            model.remove(state, 1, center + np.sqrt(t) * u, w)
        assert_states_equal(state, before)
    d = np.sqrt(0.9) * u
    model.remove(state, 1, center + d, w)
    L = state["L"][1]
    np.testing.assert_allclose(L @ L.T, B - c * np.outer(d, d), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state["logdet_B"][1], np.linalg.slogdet(B - c * np.outer(d, d))[1],
                               rtol=1e-12)
    for key, v in state.items():
        np.testing.assert_array_equal(v[0], before[key][0])


@pytest.mark.parametrize("name", NAMES)
def test_invalid_remove_raises_and_changes_nothing(name):
    """Removing what was never absorbed: κ, ν, a, b or λ would leave their domain."""
    model, X, _, _ = setup(name)
    state = model.predictive_state(model.prior_post(2))
    before = copy_state(state)
    if name == "gauss":
        cases = [(X[0], 0.5), (X[0], 0.45)]  # κ = κ0 - w = 0; κ, ν valid but B breaks
    elif name == "zm-gauss":
        cases = [(X[0], 3.6)]  # ν = ν0 - 3.6 < D - 1
    elif name == "diag-gauss":
        cases = [(X[0], 4.0), (X[0] + 100.0, 0.2)]  # a = a0 - 2 = 0; b < 0
    elif name == "mfa":
        cases = [(X[0], 1.0)]  # N = -1 items
    else:
        assert X[1].nnz > 0
        cases = [(X[1], 5.0)]  # λ0 - 5 x < 0
    for x, w in cases:
        with pytest.raises(ValueError):
            model.remove(state, 1, x, w)
        assert_states_equal(state, before)
    for bad_w in (-0.1, np.nan, np.inf):
        with pytest.raises(ValueError, match="weight"):
            model.absorb(state, 1, X[0], bad_w)
    with pytest.raises(IndexError):
        model.absorb(state, 2, X[0], 0.5)
    with pytest.raises(IndexError):
        model.absorb(state, -1, X[0], 0.5)
    with pytest.raises(ValueError):
        model.absorb(state, 0, X[:2], 0.5)  # two items
    if name == "mult":
        nan_doc = X[1].copy()
        nan_doc.data[0] = np.nan
    else:
        nan_doc = np.where(np.arange(D) == 1, np.nan, X[1])
    with pytest.raises(ValueError, match="finite"):
        model.absorb(state, 0, nan_doc, 0.5)
    assert_states_equal(state, before)


# ---------------------------------------------------------------- Mult specifics

def test_mult_sparse_and_dense_inputs_agree():
    model, X, R, rng = setup("mult")
    post = batch_post(model, X, R)
    state = model.predictive_state(post)
    Xnew = make_data("mult", rng, 6)
    Xd = Xnew.toarray()
    want = model.predictive_logpdf_state(state, Xnew)
    for Y in (Xd, Xnew.tocoo(), Xnew.tocsc(), sp.csr_array(Xnew)):
        np.testing.assert_allclose(model.predictive_logpdf_state(state, Y), want, rtol=1e-14)
    np.testing.assert_allclose(model.predictive_logpdf_state(state, Xd[3]), want[3:4],
                               rtol=1e-14)
    states = []
    for doc in (Xnew[3], Xd[3], Xd[3:4], Xnew[3].tocoo()):
        s = copy_state(state)
        model.absorb(s, 1, doc, 0.4)
        model.remove(s, 0, X[2], R[2, 0])
        states.append(s)
    for s in states[1:]:
        assert_states_equal(s, states[0])
    assert not np.array_equal(states[0]["lam"], state["lam"])


def test_mult_absorb_touches_only_the_documents_words():
    model, X, R, _ = setup("mult")
    state = model.predictive_state(batch_post(model, X, R))
    before = copy_state(state)
    doc = next(X[i] for i in range(X.shape[0]) if 0 < X[i].nnz < V - 2)
    cols, counts = doc.indices, doc.data
    others = np.setdiff1d(np.arange(V), cols)
    model.absorb(state, 1, doc, 0.3)
    np.testing.assert_array_equal(state["lam"][:, others], before["lam"][:, others])
    np.testing.assert_array_equal(state["lam"][[0, 2]], before["lam"][[0, 2]])
    np.testing.assert_array_equal(state["lam_sum"][[0, 2]], before["lam_sum"][[0, 2]])
    np.testing.assert_allclose(state["lam"][1, cols], before["lam"][1, cols] + 0.3 * counts,
                               rtol=1e-15)
    np.testing.assert_allclose(state["lam_sum"][1], before["lam_sum"][1] + 0.3 * counts.sum(),
                               rtol=1e-15)
    np.testing.assert_allclose(state["lam_sum"], state["lam"].sum(1), rtol=1e-13)
    # λ outside the document's words is never read: poisoned with NaN, nothing changes
    poisoned = copy_state(state)
    poisoned["lam"][:, others] = np.nan
    got = model.predictive_logpdf_state(poisoned, doc)
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(got, model.predictive_logpdf_state(state, doc))
    model.remove(poisoned, 1, doc, 0.3)
    model.remove(state, 1, doc, 0.3)
    np.testing.assert_array_equal(poisoned["lam"][:, cols], state["lam"][:, cols])
    assert np.all(np.isnan(poisoned["lam"][:, others]))
    assert_states_close(state, before)


# ---------------------------------------------------------------- means

@pytest.mark.parametrize("name", NAMES)
def test_means_match_definition(name):
    model, X, R, _ = setup(name, K=3)
    N, s = R.sum(0), model.stats(X, R)
    post = model.post(N, s)
    means = model.means(post)
    width = V if name == "mult" else D
    assert means.shape == (3, width)
    if name in ("gauss", "diag-gauss"):  # E[μ_k] = (κ0 m0 + Σ_n r_nk x_n) / (κ0 + N_k)
        Xd = np.asarray(X)
        want = (model.kappa0 * model.m0 + R.T @ Xd) / (model.kappa0 + N)[:, None]
        np.testing.assert_allclose(means, want, rtol=1e-12)
        np.testing.assert_allclose(means, post["m"], rtol=1e-12)
    elif name == "zm-gauss":
        np.testing.assert_array_equal(means, 0.0)
    elif name == "mfa":  # E[μ_k] = m0 + σ ⊙ (the rows' mean of μ), data units
        np.testing.assert_allclose(means, model.m0 + model.sd * post["mean"][:, :, 0], rtol=1e-12)
    else:  # E[θ_k] = λ_k / Σ_w λ_kw, λ_k = λ0 + Σ_n r_nk x_n
        lam = model.lam0 + R.T @ X.toarray()
        np.testing.assert_allclose(means, lam / lam.sum(1, keepdims=True), rtol=1e-12)
        np.testing.assert_allclose(means.sum(1), 1.0, rtol=1e-13)
    # a predictive state has the same means, and they do not alias it
    state = model.predictive_state(post)
    np.testing.assert_allclose(model.means(state), means, rtol=1e-13)
    model.means(state)[:] = 7.0
    np.testing.assert_allclose(model.means(state), means, rtol=1e-13)


# ---------------------------------------------------------------- default()

@pytest.mark.parametrize("name", NAMES)
def test_default_refuses_unknown_prior_parameters(name):
    _, X, _, _ = setup(name)
    cls = type(make_model(name, np.random.default_rng(0)))
    with pytest.raises(TypeError):
        cls.default(X, bogus=1.0)
    other = "kappa0" if name in ("zm-gauss", "mult") else "lam0"  # another model's parameter
    with pytest.raises(TypeError):
        cls.default(X, **{other: 0.5})


def test_zero_mean_gauss_default_takes_B0():
    rng = np.random.default_rng(7)
    X = make_data("zm-gauss", rng, 50)
    B0 = spd(rng, D)
    m = ZeroMeanGauss.default(X, B0=B0)
    np.testing.assert_array_equal(m.B0, B0)
    assert m.nu0 == D + 2.0
    np.testing.assert_array_equal(ZeroMeanGauss(**m.prior()).B0, B0)
    m = ZeroMeanGauss.default(X, nu0=D + 0.5, B0=B0)  # an explicit B0 needs only ν0 > D - 1
    assert m.nu0 == D + 0.5
    np.testing.assert_array_equal(m.B0, B0)
    with pytest.raises(ValueError, match="pass B0"):
        ZeroMeanGauss.default(X, nu0=D + 0.5)
    data_scaled = ZeroMeanGauss.default(X, scale=2.0, shrinkage=1.0)  # all target: diagonal
    np.testing.assert_allclose(data_scaled.B0, 2.0 * np.diag(np.mean(X**2, 0)), rtol=1e-12)
