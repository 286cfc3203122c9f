"""The vb and sovb defaults (issue 48): a truncation that can find the clusters, the components
sorted by mass at convergence, and the warning of a fit that ends with one cluster."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array
from bnpmix.storage.errors import FitWarning
from helpers import cli


def blobs(tmp_path, centres, per=40, seed=0):
    """A corpus of unit Gaussians at ``centres``, ``per`` items each, in a random order."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.repeat(np.arange(len(centres)), per))
    X = np.asarray(centres, float)[labels] + rng.standard_normal((len(labels), 2))
    ingest_array(X, tmp_path / "corpus")
    return tmp_path / "corpus"


@pytest.mark.parametrize("algorithm", ["vb", "sovb"])
def test_the_default_truncation_finds_the_clusters(tmp_path, algorithm):
    """`bnpmix fit --algorithm vb CORPUS` with no --K: main's K = 1 fitted one cluster."""
    corpus = blobs(tmp_path, [[0, 0], [8, 8], [-8, 8]])
    done = cli("fit", corpus, "--out", tmp_path / "run", "--algorithm", algorithm,
               "--obs", "gauss", "--laps", "10")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["K"] == 10 and summary["K_effective"] >= 3
    assert "one cluster" not in done.stderr


def test_vb_converges_with_its_components_sorted_by_mass(tmp_path):
    """Five clusters, K = 50: on main this start converged with three emptied components ahead
    of the clusters in the stick order, 19 nats below the same partition's bound (-980.23 for
    -961.15; the partition itself was right)."""
    rng = np.random.default_rng([2, 5])
    centres = np.array([[0, 0], [5, 5], [5, -5], [-5, 5], [-5, -5]], float)
    labels = rng.permutation(np.repeat(np.arange(5), 40))
    corpus = tmp_path / "corpus"
    ingest_array(centres[labels] + rng.standard_normal((200, 2)), corpus)
    prior = {"m0": [0, 0], "kappa0": 0.01, "nu0": 4.0001, "B0": [[4.0001, 0], [0, 4.0001]]}
    summary = fit(corpus, tmp_path / "run", job_config(
        algorithm="vb", obs="gauss", K=50, alpha0=0.1, prior=prior, learn_prior=False, seed=0))
    assert summary["converged"] and summary["K_effective"] == 5
    assert summary["elbo"] == pytest.approx(-961.1498, abs=1e-3)
    weights = np.array(summary["weights"])
    assert np.all(np.diff(weights) <= 0)


def test_a_fit_that_ends_with_one_cluster_warns(tmp_path):
    """One blob: a fit with room for more ends with one cluster and says so (stderr, and a
    FitWarning from Python); vb told --K 1 could find no more, and no warning is given."""
    corpus = blobs(tmp_path, [[0, 0]], per=200)
    done = cli("fit", corpus, "--out", tmp_path / "run", "--obs", "gauss")
    assert done.returncode == 0, done.stderr
    assert "bnpmix: warning: memo ended with one cluster holding the mass of all 200" in done.stderr
    with pytest.warns(FitWarning, match="one cluster"):
        fit(corpus, tmp_path / "adf", job_config(algorithm="adf", obs="gauss"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FitWarning)
        fit(corpus, tmp_path / "one", job_config(algorithm="vb", obs="gauss", K=1))


def test_a_truncation_every_component_of_which_holds_mass_warns(tmp_path):
    """Four clusters in a truncation of three: the fit says the truncation may have capped
    them."""
    corpus = blobs(tmp_path, [[0, 0], [8, 8], [-8, 8], [8, -8]])
    with pytest.warns(FitWarning, match="each of the K = 3 components holds more than 1%"):
        fit(corpus, tmp_path / "run", job_config(algorithm="vb", obs="gauss", K=3))
