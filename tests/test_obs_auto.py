"""`--obs auto`, the default observation model of dense corpora for the mixture engines: memo
fits of the initialisation sample under gauss, tied-gauss and diag-gauss, each taken one VB
step over the corpus, the highest ELBO per item there kept. On data drawn from each covariance
structure the evidence picks that structure; the run records every candidate's bound and
starts from the prior the chosen fit learned; the engines without the choice keep the full
Gaussian; bag-of-words corpora refuse it."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.algorithms.obs import obs_class
from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import AUTO_CANDIDATES, fit, job_config
from bnpmix.storage import BnpmixError, ingest_array, ingest_docword
from helpers import cli, random_counts, write_docword

K_TRUE = 3


def clusters(structure: str, n: int = 600, D: int = 3, seed: int = 0):
    """Three well-separated clusters whose covariances are ``structure``: "full" (each its own
    strongly correlated Σ_k), "tied" (one correlated Σ for all) or "diag" (axis-aligned, each
    dimension's variance drawn per cluster over a 30x range)."""
    rng = np.random.default_rng(seed)
    means = np.array([[0.0, 0, 0], [12, 0, 0], [0, 12, 0]])[:, :D]

    def correlated():
        A = rng.normal(size=(D, D))
        return A @ A.T + 0.05 * np.eye(D)

    shared = correlated()
    covs = {"full": [correlated() for _ in range(K_TRUE)],
            "tied": [shared] * K_TRUE,
            "diag": [np.diag(rng.uniform(0.1, 3.0, D)) for _ in range(K_TRUE)]}[structure]
    y = rng.integers(0, K_TRUE, n)
    X = np.stack([rng.multivariate_normal(means[k], covs[k]) for k in y])
    return X, y


@pytest.mark.parametrize(("structure", "expected"),
                         [("full", "gauss"), ("tied", "tied-gauss"), ("diag", "diag-gauss")])
def test_auto_chooses_the_structure_the_data_were_drawn_from(tmp_path, structure, expected):
    """Plain memo (no --obs): summary.json lists each candidate's ELBO per item, the run's model
    is their argmax, and it is the structure that generated the data; the fit finds the
    clusters."""
    X, y = clusters(structure)
    ingest_array(X, tmp_path / "c", partition_rows=200)
    summary = fit(tmp_path / "c", tmp_path / "r", job_config(algorithm="memo", seed=0))
    scores = summary["obs_candidates"]
    assert sorted(scores) == sorted(AUTO_CANDIDATES)
    assert summary["obs"] == max(scores, key=scores.get) == expected, scores
    assert summary["config"]["model"]["obs"] == "auto"
    assert adjusted_rand_index(y, load(tmp_path / "r").predict(X)) > 0.95


def test_an_auto_run_starts_from_the_prior_its_sample_fit_learned(tmp_path):
    """The candidate fits see the whole corpus here (fewer items than init_sample): the chosen
    model's run begins at the prior that fit ended with, so summary.json's initial prior
    differs from the default, and an explicit --obs run begins at the default."""
    X, _ = clusters("diag")
    ingest_array(X, tmp_path / "c", partition_rows=200)
    auto = fit(tmp_path / "c", tmp_path / "a", job_config(algorithm="adf"))
    plain = fit(tmp_path / "c", tmp_path / "p", job_config(algorithm="adf", obs=auto["obs"]))
    assert auto["obs"] == plain["obs"] == "diag-gauss"
    assert "obs_candidates" not in plain
    model_auto, model_plain = load(tmp_path / "a"), load(tmp_path / "p")
    assert model_auto.model.obs.prior() != model_plain.model.obs.prior()
    assert model_plain.model.obs.prior_figures()["kappa0"] == pytest.approx(0.01)


def full_covariance_clusters(n: int, D: int, seed: int = 0) -> np.ndarray:
    """Three clusters 10 apart, each with its own random correlated covariance."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(K_TRUE, D, D))
    L = np.linalg.cholesky(A @ A.transpose(0, 2, 1) / D + 0.1 * np.eye(D))
    y = rng.integers(0, K_TRUE, n)
    return 10.0 * np.eye(K_TRUE, D)[y] + np.einsum("nij,nj->ni", L[y], rng.normal(size=(n, D)))


def test_auto_compares_the_candidates_on_the_corpus_not_the_sample(tmp_path, monkeypatch,
                                                                   capsys):
    """On 60 sampled items of 8-D full-covariance clusters the sample fits' bounds prefer the
    diagonal model (a full covariance costs more evidence per item on few items); one VB step
    of each fit over the 2,400-item corpus prefers the full one, which generated the data, and
    the choice follows the corpus. Each candidate's score is that step's ELBO per item,
    recomputed here on the whole array at once (the partitions' summaries add up to it)."""
    import bnpmix.pipeline.fit as F
    from bnpmix.algorithms.mixture import Mixture
    from bnpmix.algorithms.vb.local import batch_step

    monkeypatch.setattr(F, "AUTO_ITEMS", 60)
    models = {}

    def keep(run_dir):
        model = real_read(run_dir)
        models[model.obs.name] = model
        return model

    real_read = F.read_model
    monkeypatch.setattr(F, "read_model", keep)
    X = full_covariance_clusters(2400, 8)
    ingest_array(X, tmp_path / "c", partition_rows=400)
    corpus = F.Corpus(tmp_path / "c")
    with F.open_executor(corpus, "threads") as executor:
        best, scores, _ = F.choose_obs(corpus, job_config(algorithm="memo", seed=0), executor)
    sample = {name: float(v) for name, v in re.findall(r"auto: (\S+) on 60 sampled items: K = "
                                                       r"\d+, ELBO (-?[\d.]+) per item;",
                                                       capsys.readouterr().err)}
    assert max(sample, key=sample.get) == "diag-gauss", sample
    assert best == "gauss" == max(scores, key=scores.get), scores
    for name, model in models.items():
        S = batch_step(X, model.obs, model.globals()).summary
        step = Mixture.from_summary(model.obs, model.alloc, S).elbo(S) / len(X)
        assert scores[name] == pytest.approx(step, rel=1e-10)
        assert scores[name] > sample[name]  # more items per parameter: a higher bound per item


def test_info_lists_the_candidates(tmp_path):
    X, _ = clusters("tied", n=300)
    ingest_array(X, tmp_path / "c")
    done = cli("fit", tmp_path / "c", "--out", tmp_path / "r", "--algorithm", "vb", "--K", "3")
    assert done.returncode == 0, done.stderr
    assert "--obs auto chose tied-gauss" in done.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    shown = cli("info", tmp_path / "r")
    line = next(s for s in shown.stdout.splitlines() if s.startswith("obs auto"))
    best = max(summary["obs_candidates"], key=summary["obs_candidates"].get)
    assert line.split()[2] == best == summary["obs"]  # ranked, the chosen first


def test_engines_without_the_choice_keep_the_full_gaussian_and_text_refuses_it(tmp_path):
    X, _ = clusters("tied", n=120)
    ingest_array(X, tmp_path / "c", partition_rows=40,
                 columns={"sequence": np.repeat(np.arange(3), 40)})
    with pytest.raises(BnpmixError, match="--obs auto: the ddcrp engine"):
        fit(tmp_path / "c", tmp_path / "r", job_config(algorithm="ddcrp", obs="auto"))
    assert not (tmp_path / "r").exists()
    summary = fit(tmp_path / "c", tmp_path / "d", job_config(algorithm="ddcrp", restarts=1))
    assert summary["obs"] == "gauss" and "obs_candidates" not in summary
    X = random_counts(np.random.default_rng(0), 50, 30, 0.2)
    write_docword(tmp_path / "docword.t.txt", X)
    ingest_docword(tmp_path / "docword.t.txt", tmp_path / "t")
    with pytest.raises(BnpmixError, match="bag-of-words corpus takes mult"):
        fit(tmp_path / "t", tmp_path / "m", job_config(algorithm="memo", obs="auto"))


def test_candidates_laps_fall_only_where_a_component_outnumbers_the_sample():
    """AUTO_LAPS while n / p ≥ AUTO_RATIO (every shape benchmarks/real_data.py checks the choice
    on, digits' 64-D gauss included), then in proportion to n / p, never below AUTO_MIN_LAPS;
    the tied and diagonal candidates keep theirs at D = 128."""
    from bnpmix.pipeline.fit import (
        AUTO_LAPS,
        AUTO_MIN_LAPS,
        AUTO_RATIO,
        candidate_laps,
    )

    assert obs_class("gauss").component_params(128) == 128 * 131 // 2
    for n, D in ((120, 4), (142, 13), (455, 30), (1437, 64), (1437, 20), (2000, 2)):
        for name in AUTO_CANDIDATES:
            assert candidate_laps(name, n, D) == AUTO_LAPS, (name, n, D)
    p = obs_class("gauss").component_params(128)
    assert candidate_laps("gauss", 2000, 128) == int(AUTO_LAPS * 2000 / p / AUTO_RATIO) == 14
    assert candidate_laps("gauss", 10, 128) == AUTO_MIN_LAPS
    assert candidate_laps("tied-gauss", 2000, 128) == AUTO_LAPS
    assert candidate_laps("diag-gauss", 2000, 128) == AUTO_LAPS
    n = np.arange(100, 4300, 100)  # p / 2 = 4,192
    laps = [candidate_laps("gauss", int(k), 128) for k in n]
    assert np.all(np.diff(laps) >= 0) and laps[-1] == AUTO_LAPS


def test_auto_fits_each_candidate_for_its_laps(tmp_path, monkeypatch):
    """choose_obs runs each candidate for candidate_laps laps (here made to differ by name)."""
    import bnpmix.pipeline.fit as F

    monkeypatch.setattr(F, "candidate_laps", lambda name, n, D: 1 + AUTO_CANDIDATES.index(name))
    X, _ = clusters("tied", n=300)
    ingest_array(X, tmp_path / "c")
    seen = {}
    real_fit = F.fit

    def spy(corpus, out, job=None, **kw):
        seen[job.model.obs] = job.engine.laps
        return real_fit(corpus, out, job, **kw)

    monkeypatch.setattr(F, "fit", spy)
    corpus = F.Corpus(tmp_path / "c")
    with F.open_executor(corpus, "synchronous") as executor:
        F.choose_obs(corpus, job_config(algorithm="memo", seed=0), executor)
    assert seen == {name: 1 + i for i, name in enumerate(AUTO_CANDIDATES)}
