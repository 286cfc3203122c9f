"""The births' and merges' faster paths on text: a batch step asked for dense statistics
(Plan.dense, what a birth's fresh model uses) gives the sums of the sparse batch form, bit for
bit; Mult's non-zero entries are numpy's; a merge candidate's ELBO with the allocation terms
computed once is the direct one."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from bnpmix.algorithms.alloc.stick import StickBreaking
from bnpmix.algorithms.mixture import optimal_elbo
from bnpmix.algorithms.obs.mult import Mult, nonzero_entries
from bnpmix.algorithms.summary import Summary
from bnpmix.algorithms.vb.local import Globals, Plan, batch_step
from bnpmix.algorithms.vb.merge import (
    allocation_terms,
    merge_move,
    merge_rest_changes,
    merge_scores,
)


def test_dense_statistics_are_the_sparse_ones_bit_for_bit():
    rng = np.random.default_rng(4)
    V, K, n = 300, 5, 80
    X = sp.random(n, V, density=0.03, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 4)
    obs = Mult(V, 0.1)
    wc = rng.gamma(0.2, 100.0, size=(K, V))  # topics far apart: nearly one-hot responsibilities
    post = obs.post(np.ones(K), {"wc": wc})
    g = Globals(np.arange(10, 10 + K), post, np.log(rng.dirichlet(np.ones(K))))
    pairs = np.array([[10, 11], [10, 14], [12, 13]])
    sparse = batch_step(X, obs, g, Plan(pairs)).summary
    dense = batch_step(X, obs, g, Plan(pairs, dense=True)).summary
    assert sp.issparse(sparse.stats["wc"]) and isinstance(dense.stats["wc"], np.ndarray)
    assert (sparse.stats["wc"].toarray() == 0).mean() > 0.2  # the floor made it sparse
    np.testing.assert_array_equal(dense.stats["wc"], sparse.stats["wc"].toarray())
    # and the sums are Eq. 7's: wc_k = Σ_n r_nk x_n, against a direct loop over the items
    R = np.exp(obs.E_loglik(X, post) + g.Elogw)
    R /= R.sum(1, keepdims=True)
    R[obs.responsibility_floor > R] = 0
    R /= R.sum(1, keepdims=True)
    direct = sum(np.outer(R[i], X[i].toarray().ravel()) for i in range(n))
    np.testing.assert_allclose(dense.stats["wc"], direct, rtol=1e-12, atol=1e-12)
    for name in ("N", "H", "Hpair"):
        np.testing.assert_array_equal(getattr(dense, name), getattr(sparse, name))


def test_nonzero_entries_are_numpys():
    rng = np.random.default_rng(2)
    wc = np.where(rng.random((7, 33)) < 0.2, rng.gamma(0.5, 2.0, (7, 33)), 0.0)
    wc[0, 3], wc[6, 32], wc[2, 5], wc[4, 4] = -0.0, np.nan, -1.5, 1e-300
    for a in (wc, np.zeros((3, 4)), np.ones((2, 5)), wc[:, :1]):
        for got, want in zip(nonzero_entries(a), np.nonzero(a), strict=True):
            np.testing.assert_array_equal(got, want)


def test_a_merge_candidates_elbo_is_the_direct_one_with_the_allocation_terms_kept():
    """merge_rest_changes with S's allocation terms given (as merge_round and settle_family
    pass them) are the same numbers, all pairs at once as one at a time (bit for bit), and
    a candidate's optimal ELBO, the current one plus the pair's Eq. 12 gain and that change,
    is the optimal ELBO of the merged summary itself (the larger component kept)."""
    rng = np.random.default_rng(5)
    V, K = 40, 4
    obs, alloc = Mult(V, 0.1), StickBreaking(1.0)
    wc = rng.gamma(0.4, 3.0, (K, V))
    pairs = np.array([[0, 1], [0, 2], [1, 3], [2, 3]])
    S = Summary(np.arange(K), wc.sum(1) / 5, {"wc": wc}, rng.random(K) * 3, 30, pairs,
                rng.random(len(pairs)) * 6)
    before = allocation_terms(alloc, S.N)
    changes = merge_rest_changes(alloc, S, np.arange(len(pairs)), before)
    np.testing.assert_array_equal(changes, merge_rest_changes(alloc, S, np.arange(len(pairs))))
    for i, gain in enumerate(merge_scores(obs, S, pairs)):
        assert changes[i] == merge_rest_changes(alloc, S, np.array([i]), before)[0]
        move = merge_move(S, i)
        assert S.N[S.index(move.a)] >= S.N[S.index(move.b)]
        direct = optimal_elbo(obs, alloc, move.apply(S))
        np.testing.assert_allclose(optimal_elbo(obs, alloc, S) + gain + changes[i], direct,
                                   rtol=1e-12)
