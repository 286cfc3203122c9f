"""tied-gauss through the real pipeline: every engine that takes an observation model (memo,
vb, sovb, adf, ep) finds the four clusters of data drawn with one shared covariance; a memo run
interrupted and resumed equals an uninterrupted one; `bnpmix fit --obs tied-gauss` and `show`
(the means and the one shared covariance); ddcrp refuses the model."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.pipeline.inspect import format_show, show_clusters
from bnpmix.storage import BnpmixError, ingest_array

K_TRUE = 4


def tied_clusters(n: int = 800, D: int = 3, seed: int = 0):
    """Four clusters N(μ_k, Σ) with one random Σ (A Aᵀ / D + 0.3 I), means N(0, 10² I)."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(D, D))
    cov = A @ A.T / D + 0.3 * np.eye(D)
    means = rng.normal(0, 10.0, (K_TRUE, D))
    y = rng.integers(0, K_TRUE, n)
    return means[y] + rng.multivariate_normal(np.zeros(D), cov, n), y, cov


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tied")
    X, y, cov = tied_clusters()
    ingest_array(X, root / "c", partition_rows=200, columns={"label": y})
    return root / "c", X, y, cov


ENGINES = {
    "memo": {"K": 1, "laps": 10, "moves": ("birth", "merge")},
    "vb": {"K": K_TRUE, "laps": 30},
    "sovb": {"K": K_TRUE, "laps": 30},
    "adf": {},
    "ep": {"passes": 2},
}


@pytest.mark.parametrize("algorithm", sorted(ENGINES))
def test_every_engine_finds_the_clusters(corpus, tmp_path, algorithm):
    path, X, y, cov = corpus
    summary = fit(path, tmp_path / "run", job_config(algorithm=algorithm, obs="tied-gauss",
                                                      seed=1, **ENGINES[algorithm]))
    assert summary["obs"] == "tied-gauss"
    assert summary["K"] == K_TRUE and min(summary["weights"]) > 0.15
    model = load(tmp_path / "run")
    assert adjusted_rand_index(y, model.predict(X)) > 0.99
    cov_fit = model.model.obs.covariances(model.model.post)
    assert np.allclose(cov_fit, cov_fit[0])  # one covariance, the true one within 15 %
    if algorithm != "adf":  # ADF never revisits its first items' (mixed) responsibilities
        assert np.abs(cov_fit[0] - cov).max() < 0.15 * np.abs(cov).max()
    if algorithm == "vb":  # coordinate ascent on the exact ELBO never goes down
        elbo = pd.read_csv(tmp_path / "run" / "trace.csv")["elbo"].to_numpy()
        assert (np.diff(elbo) >= -1e-9 * np.abs(elbo[1:])).all()


def test_memo_resumed_equals_uninterrupted(corpus, tmp_path):
    path = corpus[0]
    cfg = job_config(obs="tied-gauss", K=1, laps=6, seed=3, moves=("birth", "merge"))
    whole = fit(path, tmp_path / "whole", cfg)
    laps = []

    def stop_after_two(engine, step):
        laps.append(step.lap_end)
        if sum(laps) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(path, tmp_path / "cut", cfg, on_step=stop_after_two)
    resumed = resume(tmp_path / "cut")
    assert resumed["elbo"] == pytest.approx(whole["elbo"], rel=1e-12)
    np.testing.assert_allclose(resumed["weights"], whole["weights"], rtol=1e-10)


def test_cli_fit_and_show_print_the_shared_covariance(corpus, tmp_path):
    path = corpus[0]
    run = subprocess.run([sys.executable, "-m", "bnpmix", "fit", str(path), "--out",
                          str(tmp_path / "run"), "--obs", "tied-gauss", "--laps", "4"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    shown = show_clusters(tmp_path / "run")
    model = load(tmp_path / "run")
    cov = model.model.obs.covariances(model.model.post)[0]
    np.testing.assert_allclose(shown["shared_covariance"], cov, atol=1e-6)
    assert len(shown["clusters"]) == model.n_components_ and "mean" in shown["clusters"][0]
    text = format_show(shown)
    sd = ", ".join(f"{v:.3g}" for v in np.sqrt(np.diag(cov)))
    assert f"shared covariance E[Σ] of every cluster: standard deviations [{sd}]" in text
    json.dumps(shown)  # what `show --json` prints


def test_ddcrp_refuses_a_model_with_shared_parameters(corpus, tmp_path):
    with pytest.raises(BnpmixError, match="share parameters"):
        fit(corpus[0], tmp_path / "run", job_config(algorithm="ddcrp", obs="tied-gauss"))
