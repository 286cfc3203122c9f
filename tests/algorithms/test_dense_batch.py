"""A batch step asked for dense statistics (Plan.dense, what a birth's fresh model uses) gives
the sums of the sparse batch form, bit for bit, and the same summary otherwise."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from bnpmix.algorithms.obs.mult import Mult
from bnpmix.algorithms.vb.local import Globals, Plan, batch_step


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
