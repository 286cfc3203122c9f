"""`--obs mfa` through the pipeline: a memo fit finds factor-analyser clusters, its ELBO never
falls between laps without moves, the run directory reloads, and engines that need a closed-form
evidence refuse it by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bnpmix import load
from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import BnpmixError, ingest_array


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Four clusters in D = 10, each a rank-2 factor model over one shared noise."""
    rng = np.random.default_rng(4)
    K, D, q, n = 4, 10, 2, 1600
    z = rng.integers(K, size=n)
    X = (6.0 * rng.normal(size=(K, D)))[z] + np.einsum(
        "ndq,nq->nd", 2.0 * rng.normal(size=(K, D, q))[z], rng.normal(size=(n, q)))
    X += 0.5 * rng.normal(size=(n, D))
    path = tmp_path_factory.mktemp("mfa") / "corpus"
    ingest_array(X, path, partition_rows=400)
    return path, z


def test_memo_finds_the_clusters_and_the_run_reloads(corpus, tmp_path):
    path, z = corpus
    summary = fit(path, tmp_path / "run", job_config(obs="mfa", seed=0))
    assert summary["K"] == 4
    a = pd.read_parquet(tmp_path / "run" / "assignments").sort_values("item")
    assert adjusted_rand_index(z, a["cluster"].to_numpy()) > 0.99
    model = load(tmp_path / "run").model
    assert model.obs.name == "mfa"
    assert list(model.obs.ranks(model.post)) == [2, 2, 2, 2]  # ARD kept each cluster's rank


def test_elbo_never_falls_between_laps_without_moves(corpus, tmp_path):
    path, _ = corpus
    fit(path, tmp_path / "run", job_config(obs="mfa", seed=1, K=4, moves="", laps=8,
                                           learn_prior=False))
    trace = pd.read_csv(tmp_path / "run" / "trace.csv")
    elbo = trace["elbo"].dropna().to_numpy()[1:]  # after the first lap's first pass
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))


def test_ddcrp_refuses_mfa_by_name(corpus, tmp_path):
    path, _ = corpus
    with pytest.raises(BnpmixError, match="exact evidence"):
        fit(path, tmp_path / "run", job_config(algorithm="ddcrp", obs="mfa"))
