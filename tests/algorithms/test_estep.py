"""The Gaussians' fused E-step (``local_step``, run by ``batch_step``) against the unfused one.

The reference is the computation as it was before the fusion, written out here: E_loglik (the
Cholesky-whitened distances of wishart.mahalanobis) plus E[log w], normalised by scipy's
logsumexp, R = exp(log R), H_k = -Σ_n r_nk log r_nk (see ``reference``), N_k = Σ_n r_nk and the
statistics as explicit sums over items. Every result must agree to 1e-10 relative: R entry by
entry (below 1e-300, where doubles lose digits, to 1e-300 absolute), N and H per component (H
also to n·eps absolute), each statistic per component relative to its largest entry. The data
cross the block boundaries of the fused loop, sit 50 from the origin for the full Gaussian (its
expanded quadratic forms are centred), and include items so far from every component that all
their exp(E[log w] + E_loglik) underflow.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp, xlogy

from bnpmix.algorithms.obs import wishart as W
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.obs.zm_gauss import ZeroMeanGauss
from bnpmix.algorithms.vb.local import (
    PAIR_BLOCK,
    PAIR_FLOOR,
    Globals,
    Plan,
    batch_step,
    entropies,
    group_entropies,
    pair_entropies,
)

MODELS = {"gauss": Gauss, "zm-gauss": ZeroMeanGauss}
RTOL = 1e-10


def reference(X: np.ndarray, obs, g: Globals) -> tuple[np.ndarray, np.ndarray, dict, np.ndarray]:
    """(R, N, stats, H) computed the unfused way. The entropies take log r_nk as
    -log1p(Σ_{j≠k} exp(L_nj - L_nk)) rather than L_nk - logsumexp_j L_nj: where r_nk ≈ 1 the
    difference keeps only the digits left after cancelling |L_nk| (the unfused code's own error,
    4e-14 absolute, is 1e-9 of the entropy 4e-5 of a well-separated component)."""
    L = obs.E_loglik(X, g.post) + g.Elogw
    R = np.exp(L - logsumexp(L, axis=1, keepdims=True))
    with np.errstate(over="ignore", invalid="ignore"):  # inf, 0 · inf only where r_nk = 0
        others = np.exp(L[:, None, :] - L[:, :, None]).sum(axis=2) - 1.0  # j ≠ k
        H = np.where(R > 0, R * np.log1p(others), 0.0).sum(axis=0)
    stats = {"xxT": np.einsum("nk,ni,nj->kij", R, X, X)}
    if isinstance(obs, Gauss):
        stats["x"] = R.T @ X
    return R, R.sum(axis=0), stats, H


def problem(name: str, n: int, K: int, D: int, seed: int = 0, offset: float = 0.0):
    """A default prior on clustered data (centres 4 apart in each coordinate, plus ``offset``
    for the full Gaussian), and q(phi) from soft responsibilities near the true clusters."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, K, n)
    centres = 4.0 * rng.normal(size=(K, D))
    if name == "zm-gauss":  # zero-mean components differing in scale and orientation
        A = rng.normal(size=(K, D, D)) * rng.uniform(0.3, 3.0, (K, 1, 1)) + np.eye(D)
        X = np.einsum("nij,nj->ni", A[labels], rng.normal(size=(n, D)))
    else:
        X = centres[labels] + rng.normal(size=(n, D)) + offset
    obs = MODELS[name].default(X)
    R0 = 0.7 * np.eye(K)[labels] + 0.3 * rng.dirichlet(np.ones(K), n)
    post = obs.post(R0.sum(0), obs.stats(X, R0))
    Elogw = np.log(rng.dirichlet(np.ones(K) * 2))
    return X, obs, Globals(np.arange(10, 10 + K), post, Elogw)


def assert_same(got: tuple, want: tuple) -> None:
    R, N, stats, H = got
    R0, N0, stats0, H0 = want
    np.testing.assert_allclose(R, R0, rtol=RTOL, atol=1e-300)
    np.testing.assert_allclose(N, N0, rtol=RTOL, atol=0)
    # plus the float64 floor of a sum over n items: z_n = 1 + Σ_{j≠k} exp(L_nj - L_nk) keeps the
    # small terms of a well-separated item only to eps absolute, in either computation
    np.testing.assert_allclose(H, H0, rtol=RTOL, atol=len(R) * np.finfo(float).eps)
    assert stats.keys() == stats0.keys()
    for key, value in stats.items():
        scale = np.abs(stats0[key]).reshape(len(N0), -1).max(axis=1)
        err = np.abs(value - stats0[key]).reshape(len(N0), -1).max(axis=1)
        assert np.all(err <= RTOL * scale), (key, err / scale)


def test_merge_entropies_skip_only_what_the_floor_bounds():
    """Responsibilities spread over 1e-40..1 (as a well-separated dense fit's are): the merge
    entropies from the items' held pairs equal the item-by-item sum to within n · 4e-14 nats,
    the documented bound on the items where a pair's smaller responsibility is below
    PAIR_FLOOR, and a single pair (computed directly) equals it; and that bound holds at
    its worst case, on a grid of (r_a, r_b) with r_b < PAIR_FLOOR <= ... <= 1."""
    rng = np.random.default_rng(1)
    n, K = 4_000, 12
    log_r = -rng.exponential(20.0, size=(n, K)) * rng.integers(0, 2, size=(n, K))
    log_r -= np.logaddexp.reduce(log_r, axis=1, keepdims=True)
    R = np.exp(log_r)
    assert ((R > 0) & (R < PAIR_FLOOR)).mean() > 0.05 and (R >= PAIR_FLOOR).mean() > 0.3
    uids = np.arange(K)
    ia, ib = np.triu_indices(K, k=1)
    want = -xlogy(R[:, ia] + R[:, ib], R[:, ia] + R[:, ib]).sum(axis=0)
    got = pair_entropies(R, entropies(R, log_r), uids, np.stack([ia, ib], axis=1))
    assert np.abs(got - want).max() <= n * 4e-14
    one = [pair_entropies(R, entropies(R, log_r), uids, np.array([[a, b]])) for a, b in
           zip(ia, ib, strict=True)]  # one pair: fewer sums item by item than pairs held
    np.testing.assert_allclose(np.concatenate(one), want, rtol=1e-13)
    b = np.geomspace(1e-300, PAIR_FLOOR, 400)[:, None]
    a = np.linspace(0.0, 1.0, 401)[None, 1:]
    c = xlogy(a + b, a + b) - xlogy(a, a) - xlogy(b, b)
    assert c.min() >= 0 and c.max() < 4e-14


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("K", [1, 3, 25])
def test_local_step_matches_the_unfused_computation(name, K, monkeypatch):
    D, block = 6, 1000
    monkeypatch.setattr(W, "FEATURE_BYTES", 8 * block * (D * (D + 1) // 2 + D + 1))
    n = 2 * block + 17  # two full blocks (a gauss one; zm-gauss has fewer features) and a rest
    X, obs, g = problem(name, n, K, D=D, seed=K, offset=50.0)
    got = obs.local_step(X, g.post, g.Elogw)
    assert_same(got, reference(X, obs, g))
    assert got[0].shape == (n, K)
    np.testing.assert_allclose(got[0].sum(axis=1), 1.0, rtol=1e-14)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_items_far_from_every_component(name):
    """Items 10^3 standard deviations out: every E[log w] + E_loglik is below -700 (exp
    underflows without the max shift); most of their responsibilities underflow to 0."""
    X, obs, g = problem(name, 300, 4, D=5, seed=7)
    rng = np.random.default_rng(1)
    far = 1e3 * rng.normal(size=(40, X.shape[1]))
    X = np.vstack([X, far])
    logits = obs.E_loglik(X, g.post) + g.Elogw
    assert np.all(logits[-40:] < -700)
    want = reference(X, obs, g)
    assert np.mean(want[0][-40:] == 0.0) > 0.3
    got = obs.local_step(X, g.post, g.Elogw)
    assert_same(got, want)
    assert np.all(np.isfinite(got[0])) and np.all(np.isfinite(got[3]))
    np.testing.assert_array_equal(got[0] == 0.0, want[0] == 0.0)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_batch_step_summary_equals_the_unfused_one(name):
    """batch_step through the fused path: N, statistics, entropies, the merge pairs' and groups'
    entropies and the rows collected for a birth target, at D = 25 and K = 25."""
    X, obs, g = problem(name, 3000, 25, D=25, seed=3)
    R0, N0, stats0, H0 = reference(X, obs, g)
    pairs = np.array([[10, 11], [12, 30], [33, 34]])
    groups = np.array([[10, 14, 20], [21, 22, -1]])
    res = batch_step(X, obs, g, Plan(pairs=pairs, groups=groups, targets=(15,), tau=0.2))
    S = res.summary
    assert_same((R0, S.N, S.stats, S.H), (R0, N0, stats0, H0))
    merged = R0[:, [0, 2, 23]] + R0[:, [1, 20, 24]]
    floor = len(X) * np.finfo(float).eps  # as for H (assert_same)
    # H_ab = H_a + H_b - (their shared items' part): the error of two entropies
    np.testing.assert_allclose(S.Hpair, -np.sum(merged * np.log(merged), axis=0), rtol=RTOL,
                               atol=2 * floor)
    union = np.stack([R0[:, [0, 4, 10]].sum(1), R0[:, [11, 12]].sum(1)], axis=1)
    np.testing.assert_allclose(S.Hgroup, -np.sum(union * np.log(union), axis=0), rtol=RTOL,
                               atol=floor)
    np.testing.assert_array_equal(res.collected[15], X[R0[:, 5] > 0.2])
    np.testing.assert_array_equal(S.uids, g.uids)
    assert S.n_items == 3000


def test_pair_and_group_entropies_across_blocks_and_zeros():
    """The merge entropies against scipy's xlogy, item by item, over more pairs than three blocks
    hold, with exact zeros in R (0 log 0 = 0) and one pair of components without any mass."""
    rng = np.random.default_rng(0)
    R = rng.dirichlet(np.full(22, 0.3), size=500)
    R[rng.random(R.shape) < 0.3] = 0.0
    R[:, [5, 9]] = 0.0
    uids = np.arange(100, 122)
    ia, ib = np.triu_indices(22, k=1)
    assert len(ia) > 3 * PAIR_BLOCK
    pairs = np.stack([uids[ia], uids[ib]], axis=1)
    want = -xlogy(R[:, ia] + R[:, ib], R[:, ia] + R[:, ib]).sum(axis=0)
    got = pair_entropies(R, entropies(R, np.log(np.maximum(R, 1e-300))), uids, pairs)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    assert got[np.flatnonzero((ia == 5) & (ib == 9))[0]] == 0.0
    groups = np.array([[100, 105, 109, -1], [101, 102, 103, 104], [105, 109, -1, -1]])
    union = np.stack([R[:, [0, 5, 9]].sum(1), R[:, 1:5].sum(1), R[:, [5, 9]].sum(1)], axis=1)
    np.testing.assert_allclose(group_entropies(R, uids, groups),
                               -xlogy(union, union).sum(axis=0), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_no_items_and_no_components(name):
    X, obs, g = problem(name, 50, 2, D=3)
    R, N, stats, H = obs.local_step(X[:0], g.post, g.Elogw)
    assert R.shape == (0, 2) and not N.any() and not H.any()
    assert all(not v.any() for v in stats.values())
    empty = obs.prior_post(0)
    R, N, stats, H = obs.local_step(X, empty, np.zeros(0))
    assert R.shape == (50, 0) and N.shape == (0,) and H.shape == (0,)
    assert stats["xxT"].shape == (0, 3, 3)


def test_quad_theta_gives_the_centred_quadratic_forms():
    """θ_k·φ(y) = -½ ν_k (y - c_k)ᵀ B_k⁻¹ (y - c_k) for random B_k, c_k, with and without c."""
    rng = np.random.default_rng(5)
    K, D, n = 4, 5, 30
    A = rng.normal(size=(K, D, D))
    B = A @ np.swapaxes(A, 1, 2) + D * np.eye(D)
    f = W.factorize(B)
    nu, c, Y = rng.uniform(6, 20, K), rng.normal(size=(K, D)), rng.normal(size=(n, D))
    rows, cols = W.quad_pairs(D)
    assert sorted(zip(rows, cols, strict=True)) == sorted(zip(*np.triu_indices(D), strict=True))
    quad = Y[:, rows] * Y[:, cols]
    for centers, phi in ((c, np.hstack([quad, Y, np.ones((n, 1))])),
                         (None, np.hstack([quad, np.ones((n, 1))]))):
        theta = W.quad_theta(f["U"], nu, centers)
        d = Y[:, None, :] - (0.0 if centers is None else centers)
        want = -0.5 * nu * np.einsum("nki,kij,nkj->nk", d, np.linalg.inv(B), d)
        np.testing.assert_allclose(phi @ theta.T, want, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("kept", [True, False])
def test_repeated_local_steps_equal_fresh_ones_bit_for_bit(name, kept, monkeypatch):
    """A birth's fresh VB runs many local steps on the same items through obs.repeated(X),
    which makes the quadratic features once (when they fit in KEPT_BYTES): every step under new
    globals gives exactly the arrays a step on X gives, across blocks, and makes no features."""
    D, block = 5, 300
    P = D * (D + 1) // 2 + D + 1
    monkeypatch.setattr(W, "FEATURE_BYTES", 8 * block * P)
    n = 2 * block + 11
    monkeypatch.setattr(W, "KEPT_BYTES", 8 * n * P if kept else 8 * block * P)
    made = []
    blocks = W._feature_blocks
    monkeypatch.setattr(W, "_feature_blocks", lambda *a: made.append(1) or blocks(*a))
    X, obs, _ = problem(name, n, 4, D=D, seed=2, offset=20.0)
    repeated = obs.repeated(X)
    before = len(made)
    assert before == (1 if kept else 0)
    for K, seed in ((4, 5), (7, 6), (1, 7)):
        _, _, g = problem(name, n, K, D=D, seed=seed, offset=20.0)
        want = obs.local_step(X, g.post, g.Elogw)
        made.clear()
        got = obs.local_step(repeated, g.post, g.Elogw)
        assert len(made) == (0 if kept or K == 1 else 1)
        for a, b in zip(got[:2] + got[3:], want[:2] + want[3:], strict=True):
            np.testing.assert_array_equal(a, b)
        for key in want[2]:
            np.testing.assert_array_equal(got[2][key], want[2][key])


def test_mahalanobis_takes_its_product_a_block_of_items_at_a_time(monkeypatch):
    """The n x K D product of wishart.mahalanobis (the unfused E_loglik of gauss and zm-gauss:
    hard assignments, predictive densities) is formed at most MAHALANOBIS_BYTES at a time:
    the memory numpy allocates stays near the (n, K) result, where the whole product was nine
    times a partition (250,000 x 32 at K = 8: 512 MiB, each of the assignment pass's threads).
    Below the budget it is the one product as before, bit for bit; blocks agree to 1e-12."""
    import tracemalloc

    rng = np.random.default_rng(3)
    n, K, D = 20_000, 8, 16  # a 20 MB product whole
    X = rng.normal(size=(n, D))
    U = np.triu(rng.normal(size=(K, D, D)))
    c = rng.normal(size=(K, D))

    def whole(X, U, centers):
        Wm = U.transpose(2, 0, 1).reshape(D, K * D)
        Wm = np.concatenate([Wm, -np.einsum("kij,kj->ki", U, centers).reshape(1, K * D)])
        Z = (np.concatenate([X, np.ones((len(X), 1))], axis=1) @ Wm).reshape(len(X), K, D)
        return np.einsum("nkd,nkd->nk", Z, Z)

    np.testing.assert_array_equal(W.mahalanobis(X[:100], U, c), whole(X[:100], U, c))
    monkeypatch.setattr(W, "MAHALANOBIS_BYTES", 2**20, raising=False)
    tracemalloc.start()
    try:
        got = W.mahalanobis(X, U, c)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * got.nbytes + 4 * 2**20, peak  # the product whole: 20.5 MB
    np.testing.assert_allclose(got, whole(X, U, c), rtol=1e-12)
    np.testing.assert_allclose(W.mahalanobis(X, U), whole(X, U, np.zeros((K, D))), rtol=1e-12,
                               atol=1e-12)
