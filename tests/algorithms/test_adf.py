"""ADF for NRM mixtures against an independent plain reference, its exact bookkeeping, and the
Dirichlet-multinomial predictive it relies on."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp

from bnpmix.algorithms.adf import adf_pass
from bnpmix.algorithms.alloc import NRM
from bnpmix.algorithms.obs import obs_class


def docs(n: int, V: int, seed: int) -> sp.csr_matrix:
    """Documents from three well-separated topics."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.2), size=3)
    return sp.csr_matrix(np.stack([rng.multinomial(15, topics[rng.integers(3)])
                                   for _ in range(n)]).astype(float))


def reference_adf(X: np.ndarray, lam0: float, a: float, tau: float, sigma: float, eps: float,
                  exact_k: bool = False):
    """ADF written out plainly: dense λ per cluster, the Dirichlet-multinomial by its formula,
    log Û by root-finding on g'(u) in u = U (not the library's Newton in log U); with
    ``exact_k``, E[K'] = K − Σ_k Π_i (1 − q_ik) as a product over the items so far."""
    lam, S, qs = [], [], []
    for i, x in enumerate(X):
        if i == 0:
            q = np.ones(1)
            lam.append(np.full(len(x), lam0))
            S.append(0.0)
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

            def dm(lk, x=x):  # Dirichlet-multinomial without the multinomial coefficient
                return (gammaln(lk.sum()) - gammaln(lk.sum() + x.sum())
                        + np.sum(gammaln(lk + x) - gammaln(lk)))
            ll = np.array([dm(lk) for lk in lam] + [dm(np.full(len(x), lam0))])
            with np.errstate(divide="ignore"):
                r = np.log(w) + ll
            q = np.exp(r - logsumexp(r))
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
    return np.array(S), np.array(lam), qs


@pytest.mark.parametrize("exact_k", [False, True])
@pytest.mark.parametrize("sigma, tau, a", [(0.0, 1.0, 1.0), (0.5, 1.0, 10.0), (0.25, 100.0, 1.0)])
def test_adf_equals_a_plain_sequential_reference(sigma, tau, a, exact_k):
    X = docs(60, 12, seed=1)
    obs = obs_class("mult")(12, 0.1)
    st, qs = adf_pass(obs, NRM(a=a, tau=tau, sigma=sigma), X, max(sigma, 0.1), exact_k)
    S, lam, ref_qs = reference_adf(X.toarray(), 0.1, a, tau, sigma, max(sigma, 0.1), exact_k)
    assert st.K == len(S) >= 2 and st.uids.tolist() == list(range(st.K))
    for q, r in zip(qs, ref_qs, strict=True):
        np.testing.assert_allclose(q, r, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(st.S, S, rtol=1e-10)
    np.testing.assert_allclose(st.state["lam"], lam, rtol=1e-10)


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
