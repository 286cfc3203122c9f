"""bnpmix.BayesianMixture inside dask-ml's wrappers, on a real cluster (worker processes
on the loopback interface): ``Incremental`` calls ``partial_fit`` on a Dask array's blocks one
after another on the workers (the estimator travels between them), ``ParallelPostFit`` maps
``predict`` over the blocks of a Dask array (``predict_proba`` and ``score_samples`` are mapped
over the same blocks directly)."""

from __future__ import annotations

import numpy as np
import pytest

dask_ml = pytest.importorskip("dask_ml", reason="dask-ml is in the test extra")
import dask.array as da  # noqa: E402
from dask_ml.wrappers import Incremental, ParallelPostFit  # noqa: E402

import helpers  # noqa: E402
from bnpmix import BayesianMixture  # noqa: E402

PRIOR = {"m0": [3.0, 3.0], "B0": [[4.0, 0.0], [0.0, 4.0]]}  # fixed: no block's data scales it



@pytest.fixture
def client(dask_client):
    """A client of the session's cluster: two single-threaded worker processes on 127.0.0.1
    (tests/conftest.py)."""
    return dask_client


def blobs(n: int, seed: int) -> np.ndarray:
    return helpers.blobs(n, seed)[0]


@pytest.mark.slow  # three ADF and memo fits streamed block by block through a real cluster
def test_incremental_streams_the_blocks_through_partial_fit(client):
    """Ten blocks through Incremental on the cluster, in order, give the one ADF pass over the
    rows (Incremental shuffles the blocks unless told not to: ADF depends on the order). The
    model is named: --obs auto would choose it on the first block, and apart on all rows."""
    X = blobs(1000, 0)
    one = BayesianMixture(algorithm="adf", obs="gauss", prior=PRIOR, random_state=0).fit(X)
    inc = Incremental(BayesianMixture(algorithm="adf", obs="gauss", prior=PRIOR, random_state=0),
                      shuffle_blocks=False)
    inc.fit(da.from_array(X, chunks=(100, 2)))
    streamed = inc.estimator_
    assert streamed.n_components_ == one.n_components_ >= 3
    assert streamed._n_seen == 1000
    np.testing.assert_allclose(streamed.weights_, one.weights_, rtol=1e-12)
    np.testing.assert_allclose(streamed.means_, one.means_, rtol=1e-12)
    np.testing.assert_array_equal(inc.predict(da.from_array(X, chunks=(100, 2))).compute(),
                                  one.predict(X))
    shuffled = Incremental(
        BayesianMixture(algorithm="adf", obs="gauss", prior=PRIOR, random_state=0),
        random_state=0).fit(da.from_array(X, chunks=(100, 2))).estimator_
    assert shuffled._n_seen == 1000  # every block once, in another order
    memo = Incremental(BayesianMixture(random_state=0), shuffle_blocks=False).fit(
        da.from_array(X, chunks=(100, 2))).estimator_  # memo keeps the blocks' summaries
    assert memo.model_.model.past.n_items == 1000 and memo.n_components_ == 3


@pytest.mark.slow  # a real cluster
def test_parallel_post_fit_predicts_over_the_blocks(client):
    X, Xnew = blobs(600, 1), blobs(2000, 2)
    est = ParallelPostFit(BayesianMixture(random_state=0)).fit(X)
    fitted = est.estimator  # ParallelPostFit fits its estimator in place
    dX = da.from_array(Xnew, chunks=(250, 2))
    labels = est.predict(dX)
    assert isinstance(labels, da.Array)
    np.testing.assert_array_equal(labels.compute(), fitted.predict(Xnew))
    # ParallelPostFit.predict_proba sizes its blocks by a classifier's classes_; a clusterer's
    # columns are its components, so the blocks are mapped directly
    proba = dX.map_blocks(fitted.predict_proba, chunks=(dX.chunks[0], (fitted.n_components_,)),
                          dtype=float)
    np.testing.assert_allclose(proba.compute(), fitted.predict_proba(Xnew), rtol=1e-12)
    logp = dX.map_blocks(fitted.score_samples, drop_axis=1, dtype=float)
    np.testing.assert_allclose(logp.compute(), fitted.score_samples(Xnew), rtol=1e-12)
    assert len(client.scheduler_info()["workers"]) == 2
