"""Tests of the bag-of-words multinomial observation model (bnpmix.algorithms.obs.mult)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from bnpmix.algorithms.obs.mult import Mult
from bnpmix.algorithms.obs.mult_merge import held_columns
from helpers import random_counts

V = 8


def corpus(seed: int = 0, n: int = 30, V: int = V) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    return random_counts(rng, n, V, density=0.4)


def soft_R(seed: int, n: int, K: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    R = rng.dirichlet(np.ones(K), size=n)
    return R


def hard_R(z: np.ndarray, K: int) -> np.ndarray:
    return np.eye(K)[z]


def full_prior(V: int = V) -> Mult:
    """A non-symmetric prior, so that per-word prior mistakes show."""
    return Mult(V, np.linspace(0.2, 1.7, V))


def urn_log_evidence(lam0: np.ndarray, docs: list[np.ndarray]) -> float:
    """Exact log p(token sequence) under Dir(λ0) by the chain rule (sequential Pólya urn):
    tokens of each document in word order, documents in the given order, each contributing
    log((λ0_w + c_w) / (Σλ0 + c)) with c the counts seen so far."""
    c = np.zeros(len(lam0))
    total = 0.0
    out = 0.0
    for x in docs:
        for w in range(len(lam0)):
            for _ in range(round(x[w])):
                out += math.log((lam0[w] + c[w]) / (lam0.sum() + total))
                c[w] += 1
                total += 1
    return out


# (a) additivity ------------------------------------------------------------------------------

def test_stats_additive_over_row_split():
    X = corpus(1)
    R = soft_R(2, X.shape[0], 4)
    m = Mult(V, 0.3)
    whole = m.stats(X, R)["wc"]
    parts = m.stats(X[:11], R[:11])["wc"] + m.stats(X[11:], R[11:])["wc"]
    assert whole.shape == (4, V)
    np.testing.assert_allclose(whole, parts, rtol=1e-13, atol=1e-13)
    # and the statistic itself is Rᵀ X
    np.testing.assert_allclose(whole, R.T @ X.toarray(), rtol=1e-13)


# (b) ELBO at the optimum equals the log marginal ---------------------------------------------

@pytest.mark.parametrize("model", [Mult(V, 0.1), full_prior()])
def test_elbo_at_optimum_equals_log_marginal(model):
    X = corpus(3)
    R = soft_R(4, X.shape[0], 3)
    N = R.sum(0)
    S = model.stats(X, R)
    post = model.post(N, S)
    lm = model.log_marginal(N, S)
    assert lm.shape == (3,)
    elbo = model.elbo(N, S, post)
    assert abs(elbo - lm.sum()) <= 1e-10 * abs(lm.sum())


# (c) any other posterior gives a strictly lower ELBO -----------------------------------------

def kl_dirichlet(a: np.ndarray, b: np.ndarray) -> float:
    """KL(Dir(a) || Dir(b)), written out independently of the model."""
    a0, b0 = a.sum(), b.sum()
    return float(gammaln(a0) - gammaln(a).sum() - gammaln(b0) + gammaln(b).sum()
                 + ((a - b) * (digamma(a) - digamma(a0))).sum())


def test_elbo_lower_at_non_optimal_posterior():
    model = full_prior()
    X = corpus(5)
    R = soft_R(6, X.shape[0], 3)
    N = R.sum(0)
    S = model.stats(X, R)
    best = model.elbo(N, S, model.post(N, S))
    rng = np.random.default_rng(7)
    for scale in (0.5, 0.9, 1.1, 3.0):
        other_stats = {"wc": S["wc"] * scale + rng.uniform(0, 0.5, S["wc"].shape)}
        other = model.post(N, other_stats)
        val = model.elbo(N, S, other)
        assert val < best
        # the gap is exactly Σ_k KL(q_other ‖ q_opt)
        gap = sum(kl_dirichlet(other["lam"][k], model.lam0 + S["wc"][k]) for k in range(3))
        np.testing.assert_allclose(best - val, gap, rtol=1e-9)


# (d) Monte Carlo checks of E[log θ] and E_loglik ---------------------------------------------

def test_monte_carlo_Elogtheta_and_E_loglik():
    Vs = 5
    model = Mult(Vs, np.array([0.3, 0.5, 1.0, 0.2, 2.0]))
    X = corpus(8, n=6, V=Vs)
    wc = np.stack([np.zeros(Vs), np.array([3.0, 0, 1, 0, 2]), np.array([0.5, 7, 0, 1, 0])])
    post = model.post(np.zeros(3), {"wc": wc})
    EL = model.E_loglik(X, post)
    assert EL.shape == (6, 3)
    rng = np.random.default_rng(9)
    S = 200_000
    Xd = X.toarray()
    for k in range(3):
        logth = np.log(rng.dirichlet(post["lam"][k], size=S))  # (S, V)
        se = logth.std(0) / np.sqrt(S)
        assert np.all(np.abs(logth.mean(0) - model.E_log_theta(post)[k]) < 5 * se)
        ll = Xd @ logth.T  # (n, S): Σ_w x_w log θ_w
        se = ll.std(1) / np.sqrt(S) + 1e-12
        assert np.all(np.abs(ll.mean(1) - EL[:, k]) < 5 * se)


# (e) log marginal of hard assignments equals the sequential urn -------------------------------

@pytest.mark.parametrize("model", [Mult(V, 0.1), full_prior()])
def test_log_marginal_equals_polya_urn(model):
    X = corpus(10, n=12)
    z = np.random.default_rng(11).integers(0, 3, size=12)
    R = hard_R(z, 3)
    N = R.sum(0)
    lm = model.log_marginal(N, model.stats(X, R))
    Xd = X.toarray()
    for k in range(3):
        exact = urn_log_evidence(model.lam0, [Xd[i] for i in np.flatnonzero(z == k)])
        assert lm[k] == pytest.approx(exact, rel=1e-12, abs=1e-12)


# (f) predictive = increase of log evidence when the document is added -------------------------

def test_predictive_is_evidence_increment():
    model = full_prior()
    X = corpus(12, n=10)
    Xd = X.toarray()
    z = np.array([0, 0, 1, 1, 1, 0, 1, 0, 1, 1])
    R = hard_R(z, 3)  # component 2 has no data: its posterior is the prior
    N = R.sum(0)
    S = model.stats(X, R)
    post = model.post(N, S)
    Xnew = corpus(13, n=5)
    pred = model.predictive_logpdf(Xnew, post)
    assert pred.shape == (5, 3)
    lm = model.log_marginal(N, S)
    for k in range(3):
        mine = [Xd[i] for i in np.flatnonzero(z == k)]
        before = urn_log_evidence(model.lam0, mine)
        for d in range(5):
            x = Xnew[d].toarray().ravel()
            after = urn_log_evidence(model.lam0, [*mine, x])
            assert pred[d, k] == pytest.approx(after - before, rel=1e-11, abs=1e-11)
            added = model.log_marginal(N, {"wc": S["wc"] + x})[k]
            assert pred[d, k] == pytest.approx(added - lm[k], rel=1e-11, abs=1e-11)


# (g) sparse and dense inputs agree ------------------------------------------------------------

def test_sparse_and_dense_inputs_agree():
    model = full_prior()
    X = corpus(14)
    Xd = X.toarray()
    R = soft_R(15, X.shape[0], 3)
    S_sp, S_de = model.stats(X, R), model.stats(Xd, R)
    np.testing.assert_allclose(S_sp["wc"], S_de["wc"], rtol=1e-13)
    post = model.post(R.sum(0), S_sp)
    for f in (model.E_loglik, model.predictive_logpdf):
        np.testing.assert_allclose(f(X, post), f(Xd, post), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.features(X).toarray(), model.features(Xd).toarray(),
                               rtol=1e-13)
    # other sparse formats, and a CSR with duplicate (uncombined) entries, mean the same counts
    # an uncombined CSR: every entry split into two consecutive duplicates of the same word
    split = np.floor(X.data / 2)
    data = np.stack([split, X.data - split], axis=1).ravel()
    dup = sp.csr_matrix((data, np.repeat(X.indices, 2), 2 * X.indptr), shape=X.shape)
    assert not dup.has_canonical_format
    for Y in (X.tocsc(), X.tocoo(), sp.csr_array(X), dup):
        np.testing.assert_allclose(model.stats(Y, R)["wc"], S_sp["wc"], rtol=1e-13)
        np.testing.assert_allclose(model.predictive_logpdf(Y, post),
                                   model.predictive_logpdf(X, post), rtol=1e-12)
        np.testing.assert_allclose(model.features(Y).toarray(), model.features(X).toarray(),
                                   rtol=1e-13)
    assert dup.nnz == 2 * X.nnz  # the model did not canonicalise the caller's matrix in place


# (h) empty documents --------------------------------------------------------------------------

def test_empty_documents():
    model = full_prior()
    Xd = corpus(16, n=8).toarray()
    Xd[[2, 5]] = 0
    coo = sp.coo_matrix(Xd)
    # explicit stored zeros: row 5 holds only zeros (n_d = 0 with nnz > 0), row 7 one among counts
    rows = np.concatenate([coo.row, [5, 5, 7]])
    cols = np.concatenate([coo.col, [1, 4, np.flatnonzero(Xd[7] == 0)[0]]])
    X = sp.csr_matrix((np.concatenate([coo.data, [0.0, 0.0, 0.0]]), (rows, cols)), shape=Xd.shape)
    assert list(np.diff(X.indptr)[[2, 5]]) == [0, 2]
    assert np.diff(X.indptr)[7] == np.count_nonzero(Xd[7]) + 1
    R = soft_R(17, 8, 3)
    post = model.post(R.sum(0), model.stats(X, R))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        EL = model.E_loglik(X, post)
        pred = model.predictive_logpdf(X, post)
        F = model.features(X).toarray()
    for A in (EL, pred):
        assert np.all(np.isfinite(A))
        np.testing.assert_array_equal(A[[2, 5]], 0.0)
        assert np.all(A[[0, 1, 3, 4, 6, 7]] < 0)
    np.testing.assert_array_equal(F[[2, 5]], 0.0)
    np.testing.assert_allclose((F[[0, 1, 3, 4, 6, 7]] ** 2).sum(1), 1.0, rtol=1e-13)
    # an all-empty corpus contributes nothing
    Z = sp.csr_matrix((4, V))
    np.testing.assert_array_equal(model.stats(Z, soft_R(0, 4, 3))["wc"], 0.0)
    np.testing.assert_array_equal(model.predictive_logpdf(Z, post), 0.0)


# interface details ----------------------------------------------------------------------------

def test_features_are_hellinger():
    X = corpus(18, n=6)
    F = Mult(V, 0.1).features(X)
    Xd = X.toarray()
    P = Xd / Xd.sum(1, keepdims=True)
    assert sp.issparse(F)  # a news vocabulary would make a dense n x V embedding gigabytes
    np.testing.assert_allclose(F.toarray(), np.sqrt(P), rtol=1e-13)


def test_prior_roundtrip_and_default():
    X = corpus(19)
    m = Mult.default(X)
    assert m.V == V
    np.testing.assert_array_equal(m.lam0, 0.1)
    assert Mult.default(X, lam0=0.5).prior() == {"V": V, "lam0": 0.5}
    full = full_prior()
    again = Mult(**full.prior())
    np.testing.assert_array_equal(again.lam0, full.lam0)
    assert Mult.name == "mult"
    post = full.prior_post(2)
    np.testing.assert_array_equal(post["lam"], np.tile(full.lam0, (2, 1)))


def test_check_data():
    m = Mult(V, 0.1)
    X = corpus(20)
    m.check_data(X)
    m.check_data(X.toarray())
    with pytest.raises(ValueError):
        m.check_data(corpus(20, V=V + 1))
    bad = X.copy()
    bad.data[0] = -1.0
    with pytest.raises(ValueError):
        m.check_data(bad)
    with pytest.raises(ValueError):
        Mult(V, 0.0)


# (h) merge gains: word by word and pair by pair, both the evidence differences ----------------

def direct_log_B(lam: np.ndarray) -> np.ndarray:
    """logB(λ) over the whole vocabulary, written out: Σ_w log Γ(λ_w) - log Γ(Σ_w λ_w)."""
    return gammaln(lam).sum(-1) - gammaln(lam.sum(-1))


@pytest.mark.parametrize("sparse", [False, True])
def test_merge_gains_by_word_and_by_pair_equal_the_evidence_differences(sparse, monkeypatch):
    """Eq. 12 per pair, logB(λ0 + wc_a + wc_b) - logB(λ0 + wc_a) - logB(λ0 + wc_b) + logB(λ0)
    over every word, against both ways of finding the shared words (and merge_gains's pick),
    for all pairs and for a subset, with an empty component and chunks of a few entries."""
    Vs, K = 40, 9
    model = Mult(Vs, np.linspace(0.05, 0.9, Vs))
    X = corpus(14, n=60, V=Vs)
    R = soft_R(15, X.shape[0], K) ** 4  # near one-hot, so components hold different words
    R[:, 3] = 0.0  # an empty component
    R[R < 0.01] = 0.0
    wc = model.stats(X, R)["wc"]
    stats = {"wc": sp.csr_matrix(wc) if sparse else wc}
    iu, ju = np.triu_indices(K, k=1)
    want = np.array([direct_log_B(model.lam0 + wc[a] + wc[b]) - direct_log_B(model.lam0 + wc[a])
                     - direct_log_B(model.lam0 + wc[b]) + direct_log_B(model.lam0)
                     for a, b in zip(iu, ju, strict=True)])
    held = held_columns(wc)
    total = wc.sum(-1)
    L0 = model.lam0.sum()
    totals = (gammaln(L0 + total[iu]) + gammaln(L0 + total[ju]) - gammaln(L0)
              - gammaln(L0 + total[iu] + total[ju]))
    monkeypatch.setattr("bnpmix.algorithms.obs.base.MERGE_CHUNK_ENTRIES", 7)
    for pick in (np.arange(len(iu)), np.array([0, 5, 11, 20, 35])):
        a, b = iu[pick], ju[pick]
        by_word = totals[pick] + model._gains_by_word(held, a, b)
        by_pair = totals[pick] + model._gains_by_pair(wc, a, b)
        np.testing.assert_allclose(by_word, want[pick], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(by_pair, want[pick], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(model.merge_gains(R.sum(0), stats, b, a), want[pick],
                                   rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("sparse", [False, True])
def test_post_equals_the_digamma_and_log_gamma_of_every_entry(sparse):
    """Eq. 10 with its kept arrays: λ = λ0 + wc, ψ(λ), Σ_w λ_kw and Σ_w log Γ(λ_kw) over the
    whole vocabulary (written out here), whichever words the counts reach (an empty component
    included)."""
    model = full_prior()
    R = soft_R(16, 30, 4) ** 3
    R[:, 2] = 0.0
    R[R < 0.05] = 0.0
    wc = model.stats(corpus(17), R)["wc"]
    post = model.post(R.sum(0), {"wc": sp.csr_matrix(wc) if sparse else wc})
    lam = model.lam0 + wc
    np.testing.assert_array_equal(post["lam"], lam)
    np.testing.assert_array_equal(post["dig"], digamma(lam))
    np.testing.assert_allclose(post["lam_sum"], lam.sum(-1), rtol=1e-14)
    np.testing.assert_allclose(post["gl_sum"], gammaln(lam).sum(-1), rtol=1e-12)
