"""memo's partial_fit (issue 13): the earlier blocks stay as one summary (Mixture.past) under a
one-hot q(z); later calls run memo on the new block with that summary in S^0. Checked: the past
summary is additive (its statistics summed over components are those of every item absorbed,
whatever the assignments), its entropies are 0, merges move past mass without losing any, the
stream ends near the batch fit, and a run carrying a past resumes from a checkpoint exactly."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import helpers
from bnpmix import BayesianMixture
from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.pipeline.runtime.models import read_model, write_model
from bnpmix.storage import RunDir, ingest_array


def blobs(n: int, seed: int) -> np.ndarray:
    return helpers.blobs(n, seed)[0]


@pytest.fixture(scope="module")
def stream():
    """Ten partial_fit calls over 2,000 items of three blobs: the estimator after each call. The
    first call overshoots (K = 8 seeds, no moves), the later ones move (births, merges,
    deletes), so merges must take mass from the past (the prior fixed, the full Gaussian)."""
    X = blobs(2000, 3)
    est = BayesianMixture(random_state=0, obs="gauss", learn_prior=False, K=8, moves="")
    states = []
    for t, block in enumerate(np.array_split(X, 10)):
        est.partial_fit(block)
        model = est.model_.model
        states.append((est.n_components_, model.past, est.score(X)))
        if t == 0:
            est.set_params(moves="birth,merge,delete")
    return X, est, states


def test_the_past_is_the_one_hot_summary_of_every_item_absorbed(stream):
    X, _, states = stream
    for t, (_, past, _) in enumerate(states, start=1):
        seen = X[: 200 * t]
        assert past.n_items == len(seen)
        np.testing.assert_allclose(past.N.sum(), len(seen), rtol=1e-12)
        assert np.array_equal(past.N, np.round(past.N))  # whole items: one-hot
        assert not past.H.any()  # one-hot: no assignment entropy
        # Σ_k x_k and Σ_k S_k do not depend on who holds which item
        np.testing.assert_allclose(past.stats["x"].sum(0), seen.sum(0), rtol=1e-10)
        np.testing.assert_allclose(past.stats["xxT"].sum(0), seen.T @ seen, rtol=1e-10)


def test_merges_move_past_mass_and_the_stream_ends_near_the_batch_fit(stream):
    X, est, states = stream
    K = [k for k, _, _ in states]
    assert K[0] == 8 and any(b < a for a, b in itertools.pairwise(K)), K  # merges took past mass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batch = BayesianMixture(random_state=0, obs="gauss", learn_prior=False).fit(X)
    assert batch.n_components_ == 3
    assert abs(states[-1][2] - batch.score(X)) < 0.01, (states[-1][2], batch.score(X))
    big = np.sort(est.weights_)[-3:]  # the three blobs; a one-hot past may keep a sliver
    np.testing.assert_allclose(big, np.sort(batch.weights_), atol=0.01)
    assert est.weights_.sum() - big.sum() < 0.01


def test_the_first_call_is_a_plain_fit_of_the_block():
    X = blobs(400, 4)
    one = BayesianMixture(random_state=0).partial_fit(X)
    fitted = BayesianMixture(random_state=0).fit(X)
    np.testing.assert_array_equal(one.weights_, fitted.weights_)
    np.testing.assert_array_equal(one.means_, fitted.means_)
    assert fitted.model_.model.past is None and one.model_.model.past.n_items == 400


def test_a_run_carrying_a_past_resumes_exactly(tmp_path):
    """Warm-started from a model with a past, a memo run stopped after its first lap and resumed
    ends with the uninterrupted run's model and past, bit for bit."""
    est = BayesianMixture(random_state=0).partial_fit(blobs(600, 5))
    write_model(RunDir(tmp_path / "so-far").create(), est.model_.model)
    ingest_array(blobs(600, 6), tmp_path / "block", partition_rows=100)
    job = job_config(seed=1, laps=6, warm_start=str(tmp_path / "so-far"))
    fit(tmp_path / "block", tmp_path / "straight", job)

    def stop(engine, step):
        if step.lap_end:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path / "block", tmp_path / "resumed", job, on_step=stop)
    resume(tmp_path / "resumed")
    a, b = read_model(str(tmp_path / "straight")), read_model(str(tmp_path / "resumed"))
    assert a.past is not None and a.past.n_items == 600
    for key, value in a.past.to_arrays().items():
        np.testing.assert_array_equal(value, b.past.to_arrays()[key], err_msg=key)
    np.testing.assert_array_equal(a.post["m"], b.post["m"])
    np.testing.assert_array_equal(a.alloc.E_w(a.alloc_post)[0], b.alloc.E_w(b.alloc_post)[0])
