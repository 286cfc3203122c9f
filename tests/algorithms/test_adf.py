"""ADF for NRM mixtures against an independent plain reference, its exact bookkeeping, and the
Dirichlet-multinomial predictive it relies on."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp

from bnpmix.algorithms.adf import Clusters, adf_pass, adf_step
from bnpmix.algorithms.alloc import NRM
from bnpmix.algorithms.ep import sweep
from bnpmix.algorithms.nrm_mixture import NRMMixture
from bnpmix.algorithms.obs import obs_class
from bnpmix.algorithms.summary import Summary


def docs(n: int, V: int, seed: int) -> sp.csr_matrix:
    """Documents from three well-separated topics."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.2), size=3)
    return sp.csr_matrix(np.stack([rng.multinomial(15, topics[rng.integers(3)])
                                   for _ in range(n)]).astype(float))


def dm(lk: np.ndarray, x: np.ndarray) -> float:
    """The Dirichlet-multinomial without the multinomial coefficient."""
    return gammaln(lk.sum()) - gammaln(lk.sum() + x.sum()) + np.sum(gammaln(lk + x) - gammaln(lk))


def reference_adf(X: np.ndarray, lam0: float, a: float, tau: float, sigma: float, eps: float,
                  exact_k: bool = False):
    """ADF written out plainly: dense λ per cluster, the Dirichlet-multinomial by its formula,
    log Û by root-finding on g'(u) in u = U (not the library's Newton in log U); with
    ``exact_k``, E[K'] = K − Σ_k Π_i (1 − q_ik) as a product over the items so far. Also each
    item's one-step-ahead predictive log density, log Σ_j w_j p_j(x) − log Σ_j w_j."""
    lam, S, qs, logp = [], [], [], []
    for i, x in enumerate(X):
        if i == 0:
            q = np.ones(1)
            lam.append(np.full(len(x), lam0))
            S.append(0.0)
            logp.append(dm(lam[0], x))
        else:
            m = i
            K = len(S)
            if exact_k:
                R = np.zeros((i, len(S)))
                for j, qj in enumerate(qs):
                    R[j, :len(qj)] = qj
                K = len(S) - np.prod(1 - R, axis=0).sum()
            if sigma == 0:
                w_new = a
            else:
                def dg(u, m=m, K=K):  # u d/du [m log u − (m − σK) log(u + τ) − (a/σ)(u + τ)^σ]
                    return m - (m - sigma * K) * u / (u + tau) - a * u * (u + tau) ** (sigma - 1)
                hi = 1.0
                while dg(hi) > 0:
                    hi *= 2
                U = brentq(dg, 1e-300, hi, xtol=1e-300, rtol=1e-15)
                w_new = a * (U + tau) ** sigma
            w = np.append(np.maximum(np.array(S) - sigma, 0), w_new)
            ll = np.array([dm(lk, x) for lk in lam] + [dm(np.full(len(x), lam0), x)])
            with np.errstate(divide="ignore"):
                r = np.log(w) + ll
            q = np.exp(r - logsumexp(r))
            logp.append(logsumexp(r) - np.log(w.sum()))
            if q[-1] > eps:
                lam.append(np.full(len(x), lam0))
                S.append(0.0)
            else:
                q = q[:-1] / q[:-1].sum()
        q = np.where(q < 1e-10, 0.0, q)
        q /= q.sum()
        for k in range(len(S)):
            lam[k] = lam[k] + q[k] * x
            S[k] += q[k]
        qs.append(q)
    return np.array(S), np.array(lam), qs, np.array(logp)


@pytest.mark.parametrize("exact_k", [False, True])
@pytest.mark.parametrize("sigma, tau, a", [(0.0, 1.0, 1.0), (0.5, 1.0, 10.0), (0.25, 100.0, 1.0)])
def test_adf_equals_a_plain_sequential_reference(sigma, tau, a, exact_k):
    X = docs(60, 12, seed=1)
    obs = obs_class("mult")(12, 0.1)
    st, qs = adf_pass(obs, NRM(a=a, tau=tau, sigma=sigma), X, max(sigma, 0.1), exact_k)
    S, lam, ref_qs, logp = reference_adf(X.toarray(), 0.1, a, tau, sigma, max(sigma, 0.1),
                                         exact_k)
    assert st.K == len(S) >= 2 and st.uids.tolist() == list(range(st.K))
    for q, r in zip(qs, ref_qs, strict=True):
        np.testing.assert_allclose(q, r, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(st.S, S, rtol=1e-10)
    np.testing.assert_allclose(st.state["lam"], lam, rtol=1e-10)
    empty = Summary.zeros(np.zeros(0, np.int64), obs.stat_shapes())
    res = sweep(X, obs, NRM(a=a, tau=tau, sigma=sigma), max(sigma, 0.1), empty, None, 0, 0.0,
                np.zeros(0) if exact_k else None)
    assert res.loglik == pytest.approx(logp.sum(), rel=1e-10)  # the trace's figure


@pytest.mark.parametrize("name", ["mult", "gauss", "diag-gauss", "zm-gauss", "tied-gauss"])
def test_counts_and_posteriors_are_exact_sums_of_what_was_absorbed(name):
    """S_k = Σ_i q_ik and the clusters' states equal the posterior of Σ_i q_ik t(x_i)."""
    rng = np.random.default_rng(0)
    if name == "mult":
        X = docs(80, 10, seed=2)
    else:
        X = np.concatenate([rng.normal(c, 1.0, size=(40, 3)) for c in (-6, 6)])[
            rng.permutation(80)]
    obs = obs_class(name).default(X)
    st, qs = adf_pass(obs, NRM(a=1.0, tau=1.0, sigma=0.5), X, eps=0.5)
    R = np.zeros((80, st.K))
    for i, q in enumerate(qs):
        R[i, :len(q)] = q
    np.testing.assert_allclose(st.S, R.sum(0), rtol=1e-12)
    assert st.S.sum() == pytest.approx(80, abs=1e-9)
    expected = obs.predictive_state(obs.post(R.sum(0), obs.stats(X, R)))
    for key, value in expected.items():
        np.testing.assert_allclose(st.state[key], value, rtol=1e-9, atol=1e-9)


def test_epsilon_below_sigma_is_refused():
    obs = obs_class("mult")(5, 0.1)
    with pytest.raises(ValueError, match="epsilon must be at least sigma"):
        adf_pass(obs, NRM(sigma=0.5), sp.csr_matrix(np.ones((2, 5))), eps=0.1)


@pytest.mark.parametrize("V, n", [(3, 4), (4, 3)])
def test_the_dirichlet_multinomial_predictive_sums_to_one_over_all_count_vectors(V, n):
    """With the multinomial coefficient log(n!/Π x_w!) (which bnpmix's mult leaves out), the
    predictive of a component that has seen data is a distribution over count vectors."""
    obs = obs_class("mult")(V, 0.3)
    post = obs.post(np.array([5.0]), {"wc": np.array([[1.0, 2.5, 0.5, 1.0][:V]])})
    state = obs.predictive_state(post)
    vectors = [c for c in itertools.product(range(n + 1), repeat=V) if sum(c) == n]
    X = sp.csr_matrix(np.array(vectors, dtype=float))
    logp = obs.predictive_logpdf_state(state, X)[:, 0]
    coef = gammaln(n + 1) - gammaln(np.array(vectors) + 1).sum(1)
    assert np.exp(logp + coef).sum() == pytest.approx(1.0, abs=1e-12)


def test_the_exact_expected_k_is_kept_as_log_products_and_changes_the_rule():
    """log P_k = Σ_i log(1 − q_ik) over what was absorbed (−inf once an item is certain), and
    E[K'] < K changes Û, hence the responsibilities, for σ > 0."""
    X = docs(80, 12, seed=4)
    obs = obs_class("mult")(12, 0.1)
    prior = NRM(a=5.0, tau=1.0, sigma=0.5)
    st, qs = adf_pass(obs, prior, X, 0.5, exact_k=True)
    R = np.zeros((80, st.K))
    for i, q in enumerate(qs):
        R[i, :len(q)] = q
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(st.logP, np.log(1 - R).sum(0), rtol=1e-12)
    assert st.expected_k == pytest.approx(st.K - np.prod(1 - R, axis=0).sum(), rel=1e-12)
    assert st.expected_k < st.K
    plain, plain_qs = adf_pass(obs, prior, X, 0.5)
    assert plain.logP is None and plain.expected_k is None
    assert max(np.abs(q[:len(p)] - p[:len(q)]).max() for q, p in zip(qs, plain_qs, strict=True)) \
        > 1e-6


def blobs(n: int, D: int, seed: int) -> np.ndarray:
    """n items from three Gaussian blobs in D dimensions, standardised."""
    rng = np.random.default_rng(seed)
    X = rng.normal(0, 3, (3, D))[rng.integers(3, size=n)] + rng.normal(size=(n, D))
    return (X - X.mean(0)) / X.std(0)


def summary_of(obs, uids: np.ndarray, X: np.ndarray, R: np.ndarray) -> Summary:
    """The Summary of items X with responsibilities R over clusters ``uids``."""
    stats, shared = obs.split_stats(obs.stats(X, R))
    return Summary(uids.copy(), R.sum(0), stats, np.zeros(len(uids)), shared=shared)


@pytest.mark.parametrize("name, sigma, exact_k", [("gauss", 0.0, False), ("gauss", 0.5, False),
                                                  ("gauss", 0.5, True), ("tied-gauss", 0.5, False)])
def test_each_steps_predictive_is_the_heldout_score_of_the_clusters_so_far(name, sigma, exact_k):
    """ADF's figure for item i is what NRMMixture (the held-out scorer: batch predictive,
    weights() normalised, the new cluster's term) gives x_i from the clusters of items < i."""
    X = blobs(40, 3, seed=5)
    obs, prior = obs_class(name).default(X), NRM(a=2.0, tau=1.0, sigma=sigma)
    cl = Clusters(obs, prior, logP=np.zeros(0) if exact_k else None)
    R = np.zeros((len(X), 0))
    for i, x in enumerate(X):
        sums = summary_of(obs, cl.uids, X[:i], R[:i])
        logP = None if cl.logP is None else cl.logP.copy()
        heldout = NRMMixture(obs, prior, sums, i, cl.v, logP).score_samples(x[None])[0]
        q, loglik = adf_step(cl, x[None], i, 0.5, cl.K)
        assert loglik == pytest.approx(heldout, rel=1e-9, abs=1e-9)
        R = np.pad(R, ((0, 0), (0, len(q) - R.shape[1])))
        R[i] = q
    assert cl.K >= 2


@pytest.mark.parametrize("name", ["gauss", "mult"])
def test_two_items_one_step_predictives_multiply_to_the_exact_marginal(name):
    """Under the DP the first two ADF steps are exact: log p(x1) + log p(x2 | x1) = log[1/(1+a)
    M(x1, x2) + a/(1+a) M(x1) M(x2)] with M the closed-form marginal likelihood (Eq. 12)."""
    if name == "gauss":
        X = blobs(2, 3, seed=1)
        obs = obs_class(name).default(blobs(50, 3, seed=2))
    else:
        X = docs(2, 6, seed=3).toarray()
        obs = obs_class(name)(6, 0.3)
    a = 1.7
    res = sweep(X if name == "gauss" else sp.csr_matrix(X), obs, NRM(a=a), 0.999,
                Summary.zeros(np.zeros(0, np.int64), obs.stat_shapes()), None, 0, 0.0)

    def M(rows):
        R = np.zeros((len(X), 1))
        R[rows] = 1.0
        data = X if name == "gauss" else sp.csr_matrix(X)
        return obs.log_marginal(R.sum(0), obs.stats(data, R))[0]
    together = M([0, 1]) - np.log(1 + a)
    apart = M([0]) + M([1]) + np.log(a / (1 + a))
    assert res.loglik == pytest.approx(np.logaddexp(together, apart), rel=1e-10)


def test_the_trace_figure_is_negative_on_iris_sized_data_like_heldout():
    """150 standardised items in 4 dimensions: the per-item training figure is a log density
    of standardised data (negative, a few nats), close to the held-out score of new items."""
    X = blobs(190, 4, seed=7)
    train, test = X[:150], X[150:]
    obs, prior = obs_class("gauss").default(train), NRM()
    res = sweep(train, obs, prior, 0.1, Summary.zeros(np.zeros(0, np.int64),
                obs.stat_shapes()), None, 0, 0.0)
    model = NRMMixture(obs, prior, res.sites.named(0).summary, len(train), res.v)
    per_item, heldout = res.loglik / len(train), model.score_samples(test).mean()
    assert per_item < 0 and heldout < 0
    assert abs(per_item - heldout) < 1.0
