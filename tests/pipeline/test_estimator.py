"""bnpmix.BayesianMixture (issue 13): scikit-learn's own estimator checks, predictions equal to
the run's assignments and to ``bnpmix evaluate``, every input kind, parameters and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import scipy.sparse as sp

sklearn = pytest.importorskip("sklearn", reason="scikit-learn is in the test extra")
from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_iris  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import bnpmix  # noqa: E402
from bnpmix import BayesianMixture  # noqa: E402
from bnpmix.pipeline.evaluate import evaluate  # noqa: E402
from bnpmix.pipeline.fit import fit, job_config  # noqa: E402
from bnpmix.storage import ingest_array  # noqa: E402
from helpers import blobs  # noqa: E402


# ADF's instance names its observation model: --obs auto chooses by memo fits whatever the
# engine (fit.choose_obs), so the memo instance covers that path, and on the checks' tiny data
# it was 80 % of each ADF check's time
@parametrize_with_checks([BayesianMixture(random_state=0, laps=10),
                          BayesianMixture(algorithm="adf", obs="gauss", random_state=0)])
def test_scikit_learn_estimator_checks(estimator, check):
    """Every check of sklearn's check_estimator, for memo (the default estimator) and ADF
    (ADF's check_clustering was waived before one labelling made the labels 0..K-1 by weight;
    it passes now)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("estimator")
    X, z = blobs(600, 0)
    Xh, zh = blobs(300, 1)
    ingest_array(X, root / "train", partition_rows=200)
    ingest_array(Xh, root / "held", partition_rows=100, columns={"label": zh})
    return root, X, z, Xh


def test_predict_on_training_data_equals_the_runs_assignments(corpus):
    root, X, z, _ = corpus
    est = BayesianMixture(random_state=3).fit(root / "train")
    assert est.n_components_ == 3
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    assert bnpmix.algorithms.metrics.adjusted_rand_index(z, est.labels_) > 0.99
    assert est.fit_predict(X).shape == (600,)


def test_score_samples_equals_evaluate(corpus, tmp_path):
    """The same engine, seed and corpus through ``bnpmix fit`` + ``evaluate`` and through the
    estimator: the held-out log-likelihood per item agrees to 1e-12."""
    root, _, _, Xh = corpus
    fit(root / "train", tmp_path / "run", job_config(algorithm="memo", seed=5))
    figures = evaluate(tmp_path / "run", root / "held")
    est = BayesianMixture(random_state=5).fit(root / "train")
    assert est.score(Xh) == pytest.approx(figures["heldout_loglik_per_item"], rel=1e-12)
    np.testing.assert_allclose(est.score_samples(Xh),
                               bnpmix.load(tmp_path / "run").score_samples(Xh), rtol=1e-12)


@pytest.mark.slow  # five fits of the same data
def test_every_input_kind_gives_the_same_fit():
    """numpy, pandas, pyarrow and a Dask array of the same rows (one partition each) fit the
    same model; a corpus of counts as scipy.sparse fits a multinomial mixture."""
    dask_array = pytest.importorskip("dask.array")
    X, _ = blobs(300, 2)
    kinds = [X, pd.DataFrame(X, columns=["a", "b"]),
             pa.table({"a": X[:, 0], "b": X[:, 1]}), dask_array.from_array(X, chunks=(300, 2))]
    scores = [BayesianMixture(random_state=1).fit(k).score(X) for k in kinds]
    assert scores == [scores[0]] * 4

    rng = np.random.default_rng(0)
    topics = rng.dirichlet(np.full(30, 0.1), size=3)
    counts = np.vstack([rng.multinomial(40, topics[t]) for t in rng.integers(3, size=200)])
    est = BayesianMixture(random_state=0).fit(sp.csr_matrix(counts))
    assert est.model_.model.obs.name == "mult"
    assert est.predict_proba(sp.csr_matrix(counts)).shape == (200, est.n_components_)


def test_engine_options_are_parameters():
    est = BayesianMixture(algorithm="vb", K=4, laps=3, random_state=0)
    params = est.get_params()
    assert params["K"] == 4 and params["laps"] == 3 and params["alpha0"] is None
    assert repr(est) == "BayesianMixture(K=4, algorithm='vb', laps=3, random_state=0)"
    assert clone(est).get_params() == params
    est.set_params(K=6)
    assert est.K == 6
    with pytest.raises(ValueError, match="Invalid parameter"):
        est.set_params(bogus=1)
    with pytest.raises(TypeError, match=r"unknown engine option.*bogus"):
        BayesianMixture(bogus=1)


def test_a_stop_at_the_lap_limit_warns_and_is_recorded():
    X, _ = load_iris(return_X_y=True)
    with pytest.warns(sklearn.exceptions.ConvergenceWarning, match="laps"):
        est = BayesianMixture(algorithm="vb", obs="gauss", K=10, laps=2, random_state=0).fit(X)
    assert not est.converged_ and est.n_iter_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert BayesianMixture(random_state=0).fit(X).converged_


def test_bad_options_and_data_are_refused_clearly():
    X, _ = blobs(50, 0)
    with pytest.raises(bnpmix.BnpmixError, match="laps"):
        BayesianMixture(laps=0).fit(X)
    with pytest.raises(ValueError, match="X, row 0: non-finite value nan in column 0"):
        BayesianMixture().fit(np.where(np.eye(50, 2) > 0, np.nan, X))
    est = BayesianMixture(random_state=0).fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but BayesianMixture is expecting 2"):
        est.predict(np.zeros((4, 3)))


PRIOR = {"m0": [3.0, 3.0], "B0": [[4.0, 0.0], [0.0, 4.0]]}  # no data-scaled default


def test_partial_fit_over_ten_blocks_equals_one_adf_run():
    """ADF absorbs items in order: ten partial_fit calls over consecutive blocks give the one
    pass over all rows exactly (the prior fixed, so no block's scaling enters; merges none, as
    the evidence merges after each block change the clusters the next block meets)."""
    X, _ = blobs(1000, 4)
    # the full Gaussian named: --obs auto would choose on the first block, and on all of X
    one = BayesianMixture(algorithm="adf", obs="gauss", prior=PRIOR, random_state=0,
                          merges="none").fit(X)
    stream = BayesianMixture(algorithm="adf", obs="gauss", prior=PRIOR, random_state=0,
                             merges="none")
    for block in np.array_split(X, 10):
        assert stream.partial_fit(block) is stream
    assert stream.n_components_ == one.n_components_ >= 3
    np.testing.assert_allclose(stream.weights_, one.weights_, rtol=1e-12)
    np.testing.assert_allclose(stream.means_, one.means_, rtol=1e-12)
    np.testing.assert_allclose(stream.score_samples(X), one.score_samples(X), rtol=1e-12)
    # the same block twice is absorbed twice (not skipped as an already-absorbed partition)
    again = clone(stream).partial_fit(X[:100]).partial_fit(X[:100])
    assert again.model_.model.m == 200


def test_partial_fit_is_adf_and_memo_only_and_checks_the_width():
    X, _ = blobs(100, 0)
    with pytest.raises(AttributeError, match="partial_fit streams with adf or memo"):
        BayesianMixture(algorithm="vb").partial_fit(X)
    assert not hasattr(BayesianMixture(algorithm="sovb"), "partial_fit")
    for algorithm in ("adf", "memo"):
        est = BayesianMixture(algorithm=algorithm, random_state=0).partial_fit(X)
        with pytest.raises(ValueError, match="X has 3 features"):
            est.partial_fit(np.zeros((5, 3)))


def test_sample_follows_the_posterior_predictive():
    """Monte Carlo: labels by E[w] (-1 by the mass left), and the items' mean and covariance
    those of the predictive mixture: Σ_k w_k [E[Σ_k](1 + 1/κ_k) + m_k m_kᵀ] - μ μᵀ (a
    Student-t per component: Cov(μ_k | Λ_k) = (κ_k Λ_k)⁻¹), the new component from the prior."""
    X, _ = blobs(600, 5)
    est = BayesianMixture(obs="gauss", random_state=0).fit(X)  # the Normal-Wishart's B, ν
    model = est.model_.model
    S = 200_000
    Y, y = est.sample(S)
    assert Y.shape == (S, 2) and set(np.unique(y)) <= {-1, *range(est.n_components_)}
    post = {k: np.concatenate([model.post[k], model.obs.prior_post(1)[k]])
            for k in ("m", "kappa", "B", "nu")}
    w = np.append(est.weights_, est.weight_new_)
    freq = np.array([np.mean(y == k) for k in [*range(est.n_components_), -1]])
    assert np.all(np.abs(freq - w) <= 5 * np.sqrt(w * (1 - w) / S) + 1e-12)
    cov_k = model.obs.covariances(post) * (1 + 1 / post["kappa"])[:, None, None]
    mean = w @ post["m"]
    cov = np.einsum("k,kde->de", w, cov_k + np.einsum("kd,ke->kde", post["m"], post["m"]))
    cov -= np.outer(mean, mean)
    se = np.sqrt(np.diag(cov) / S)
    assert np.all(np.abs(Y.mean(0) - mean) <= 5 * se)
    np.testing.assert_allclose(np.cov(Y.T), cov, rtol=0.05)
    again, y2 = est.sample(S)  # random_state fixes the draws
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(again, Y)


def test_sample_of_text_and_fitted_covariances():
    rng = np.random.default_rng(6)
    C = sp.csr_matrix(rng.poisson(rng.gamma(1.0, 1.0, size=(1, 40)), size=(300, 40)))
    est = BayesianMixture(random_state=0).fit(C)
    assert not hasattr(est, "covariances_")  # multinomials have none
    Y, y = est.sample(50)
    assert sp.issparse(Y) and Y.shape == (50, 40) and y.shape == (50,)
    assert set(Y.sum(1).A1) == {round(C.sum() / 300)}  # the mean training length by default
    assert set(est.sample(3, n_words=[5, 6, 7])[0].sum(1).A1) == {5, 6, 7}
    X, _ = blobs(300, 7)
    X -= X.mean(0)  # zero-mean components are for centred data
    for obs, shape in (("gauss", (2, 2)), ("diag-gauss", (2,)), ("zm-gauss", (2, 2)),
                       ("tied-gauss", (2, 2))):
        fitted = BayesianMixture(obs=obs, random_state=0).fit(X)
        model = fitted.model_.model
        np.testing.assert_array_equal(fitted.covariances_, model.obs.covariances(model.post))
        assert fitted.covariances_.shape == (fitted.n_components_, *shape)
    assert not hasattr(fitted.set_params(obs="mult").fit(C), "covariances_")  # refit clears
