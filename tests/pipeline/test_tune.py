"""`bnpmix tune`: the NRM prior's (a, tau) by held-out predictive log-likelihood of ADF on a
sample (Tank, Foti & Fox 2015, supplement 4.1)."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest
from scipy.special import logsumexp

from bnpmix.algorithms.adf import adf_pass
from bnpmix.algorithms.alloc import NRM
from bnpmix.algorithms.obs.mult import Mult
from bnpmix.pipeline.engines.nrm import NRMConfig
from bnpmix.pipeline.engines.nrm_tune import grid, heldout_score, tune
from bnpmix.pipeline.tune import edge_warnings, sample_size, sample_split
from bnpmix.storage import BnpmixError, Corpus, Manifest, ingest_array
from bnpmix.storage.writer import new_corpus
from helpers import cli


def bow_corpus(path, n=240, V=40, seed=0):
    """Three well-separated word distributions, 30 tokens a document."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.2), size=3)
    labels = rng.integers(0, 3, size=n)
    X = np.stack([rng.multinomial(30, topics[z]) for z in labels])
    manifest = Manifest(kind="bow", dim=V, dtype="int32", columns=(), vocab=None)
    with new_corpus(path, manifest) as writer:
        for s in range(0, n, 60):
            B = X[s:s + 60]
            rows, cols = np.nonzero(B)
            indptr = np.concatenate([[0], np.cumsum(np.count_nonzero(B, axis=1))])
            writer.add_bow(indptr, cols.astype(np.int32), B[rows, cols].astype(np.int32), {})
    return path



def test_the_grid_is_searched_and_points_of_equal_beta_tie(tmp_path):
    result = tune(bow_corpus(tmp_path / "c"), prior="ig", fraction=1.0)
    rows = result["rows"]
    assert len(rows) == 20 and result["n_train"] + result["n_test"] == 240
    scores = [r["heldout_loglik_per_item"] for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert result["best"] == {"nrm_prior": "ig", "nrm_a": rows[0]["nrm_a"],
                              "nrm_tau": rows[0]["nrm_tau"]}
    by_beta: dict[float, list[float]] = {}
    for r in rows:
        by_beta.setdefault(round(np.log(r["beta"]), 9), []).append(r["heldout_loglik_per_item"])
    tied = [s for s in by_beta.values() if len(s) > 1]
    # one fit per beta (tests/algorithms/test_nrm.py: beta is what matters)
    assert len(by_beta) == 11 and tied
    for s in tied:
        np.testing.assert_allclose(s, s[0], rtol=1e-9)
    assert len({round(s, 6) for s in scores}) > 1  # different beta, different fits


def test_the_dp_grid_has_no_tau(tmp_path):
    result = tune(bow_corpus(tmp_path / "c"), prior="dp", fraction=1.0)
    assert [r["nrm_a"] for r in sorted(result["rows"], key=lambda r: r["nrm_a"])] == [
        1.0, 10.0, 100.0, 1000.0]
    assert "nrm_tau" not in result["best"]


def test_the_heldout_score_is_the_predictive_mixture_of_the_adf_clusters(tmp_path):
    """log Σ_{k ≤ K+1} π_k p(x* | λ_k) recomputed from adf_pass's clusters and the batch
    Dirichlet-multinomial (another code path than the one-item state tune uses)."""
    corpus = Corpus(bow_corpus(tmp_path / "c"))
    split = sample_split(corpus, 240, 0.25, seed=3)
    obs = Mult.default(split.train, lam0=0.5)
    prior = NRM(a=10.0, tau=1.0, sigma=0.5)
    score, K = heldout_score(obs, prior, 0.5, split)
    cl, _ = adf_pass(obs, prior, split.train, 0.5)
    w, w_new, _ = prior.predictive(cl.S, split.train.shape[0])
    pi = np.append(w, w_new) / (w.sum() + w_new)
    post = {"lam": np.vstack([cl.state["lam"], obs.prior_post(1)["lam"]])}
    logp = obs.predictive_logpdf(split.test, post) + np.log(pi)
    assert K == cl.K
    np.testing.assert_allclose(score, logsumexp(logp, axis=1).mean(), rtol=1e-10)


def test_grid_keeps_sigma_and_epsilon():
    points = grid(NRMConfig("nggp", nrm_sigma=0.3, epsilon=0.4), (1.0, 2.0), (5.0,))
    assert [(p.nrm_a, p.nrm_tau, p.sigma, p.eps()) for p in points] == [
        (1.0, 5.0, 0.3, 0.4), (2.0, 5.0, 0.3, 0.4)]


def test_cli_writes_a_job_file_that_fit_runs(tmp_path):
    corpus = bow_corpus(tmp_path / "c")
    job = tmp_path / "job.toml"
    done = cli("tune", str(corpus), "--prior", "ig", "--prior", '{"lam0": 0.5}', "--fraction",
               "1", "--a-grid", "1,100", "--tau-grid", "1,10", "--out", str(job))
    assert done.returncode == 0, done.stderr
    assert "best: nrm_prior = ig" in done.stdout
    values = tomllib.loads(job.read_text())
    assert values["algorithm"] == "adf" and values["prior"] == {"lam0": 0.5}
    assert values["nrm_a"] in (1.0, 100.0) and values["nrm_tau"] in (1.0, 10.0)
    fitted = cli("fit", "--config", str(job), "--out", str(tmp_path / "run"))
    assert fitted.returncode == 0, fitted.stderr
    resolved = json.loads((tmp_path / "run" / "job.json").read_text())["config"]
    assert resolved["engine"]["nrm_a"] == values["nrm_a"]
    assert resolved["engine"]["nrm_prior"] == "ig"
    assert resolved["model"]["prior"] == {"lam0": 0.5}
    again = cli("tune", str(corpus), "--fraction", "1", "--a-grid", "1", "--out", str(job))
    assert again.returncode == 1 and "exists" in again.stderr
    assert tomllib.loads(job.read_text()) == values  # nothing already written is lost


@pytest.mark.parametrize("args, message", [
    (["--fraction", "0"], "fraction"),
    (["--obs", "gauss"], "does not fit a bow corpus"),
    (["--prior", "nggp"], "nggp needs nrm_sigma"),
    (["--prior", "ig", "--epsilon", "0.2"], "at least sigma"),
])
def test_bad_tune_options_are_named(tmp_path, args, message):
    done = cli("tune", str(bow_corpus(tmp_path / "c")), *args)
    assert done.returncode == 1 and message in done.stderr, done.stderr


def test_a_dense_corpus_is_tuned_with_gaussians(tmp_path):
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(-4, 1, (100, 2)), rng.normal(4, 1, (100, 2))])
    ingest_array(X, tmp_path / "d", partition_rows=50)
    result = tune(tmp_path / "d", prior="dp", fraction=1.0, a_grid=(1.0, 10.0))
    assert result["obs"] == "gauss" and all(np.isfinite(r["heldout_loglik_per_item"])
                                            for r in result["rows"])
    # the Gaussian prior's scale is searched too, and the best one goes into the job's [prior]
    assert sorted((r["nrm_a"], r["scale"]) for r in result["rows"]) == [
        (a, s) for a in (1.0, 10.0) for s in (0.1, 0.3, 1.0)]
    assert result["prior"] == {"scale": result["rows"][0]["scale"]}
    assert len({r["heldout_loglik_per_item"] for r in result["rows"]}) > 2
    fixed = tune(tmp_path / "d", prior="dp", fraction=1.0, a_grid=(1.0,),
                 obs_prior={"scale": 0.5})
    assert [r["scale"] for r in fixed["rows"]] == [None] and fixed["prior"] == {"scale": 0.5}
    with pytest.raises(BnpmixError, match="cannot be split"):
        tune(tmp_path / "d", fraction=0.005)


@pytest.mark.parametrize("n_items, fraction, max_items, expected", [
    (142, None, 20_000, 142),  # a small corpus: every item (wine was once 15)
    (5_000, None, 20_000, 5_000),
    (5_001, None, 20_000, 5_000),  # above ALL_ITEMS: 10 %, but at least 5,000
    (80_000, None, 20_000, 8_000),
    (1_000_000, None, 20_000, 20_000),  # at most max_items
    (8_000, None, 5_000, 5_000),  # memo's cap
    (142, 0.1, 20_000, 15),  # a fraction given replaces the rule
    (10, 0.01, 20_000, 2),
])
def test_the_sample_size_rule(n_items, fraction, max_items, expected):
    assert sample_size(n_items, fraction, max_items) == expected


def blob_corpus(path, n):
    rng = np.random.default_rng(2)
    X = np.concatenate([rng.normal(-4, 1, (n // 2, 2)), rng.normal(4, 1, (n - n // 2, 2))])
    ingest_array(X[rng.permutation(n)], path, partition_rows=100)
    return path


def test_a_small_corpus_is_tuned_on_all_its_items_and_a_small_test_part_is_named(tmp_path):
    result = tune(blob_corpus(tmp_path / "d", 300), prior="dp", a_grid=(1.0,),
                  scale_grid=(1.0,))
    assert (result["n_train"], result["n_test"]) == (240, 60)
    assert result["warnings"] == [
        "only 60 items held out (fewer than 200): the grid's differences may be noise (tune "
        "on more items: --fraction, --max-items, --test-fraction)"]  # one point: no edge
    larger = tune(blob_corpus(tmp_path / "e", 1000), prior="dp", a_grid=(1.0,),
                  scale_grid=(1.0,))
    assert (larger["n_train"], larger["n_test"]) == (800, 200) and larger["warnings"] == []


def test_edges_are_found_per_searched_parameter_in_beta_for_the_nrm():
    def rows(*points):  # (beta, scale), best first
        return [{"beta": b, "scale": s} for b, s in points]
    axes = {"beta": ("a tau^sigma", "--a-grid, --tau-grid"), "scale": ("scale", "--scale-grid")}
    inside = rows((10.0, 0.3), (1.0, 0.3), (100.0, 1.0), (10.0, 0.1))
    assert edge_warnings(inside, axes) == []
    low = rows((1.0, 0.3), (10.0, 0.3), (100.0, 0.1), (1.0, 1.0))
    assert edge_warnings(low, axes) == [
        "the best a tau^sigma (1) is the grid's smallest: the optimum may lie beyond it "
        "(widen --a-grid, --tau-grid)"]
    high = rows((100.0, 1.0), (10.0, 0.3), (1.0, 0.1))
    assert [w.split(":")[0] for w in edge_warnings(high, axes)] == [
        "the best a tau^sigma (100) is the grid's largest", "the best scale (1) is the grid's "
        "largest"]
    assert edge_warnings(rows((5.0, None), (5.0, None)), axes) == []  # one value: not searched


def test_warnings_go_to_stderr_the_json_and_the_job_file(tmp_path):
    corpus = blob_corpus(tmp_path / "d", 300)
    job = tmp_path / "job.toml"
    done = cli("tune", str(corpus), "--prior", "dp", "--a-grid", "1,10", "--scale-grid", "1",
               "--out", str(job))
    assert done.returncode == 0, done.stderr
    said = [line.removeprefix("bnpmix tune: warning: ") for line in done.stderr.splitlines()
            if line.startswith("bnpmix tune: warning: ")]
    assert len(said) == 2 and said[0].startswith("the best a (") and "--a-grid" in said[0]
    assert said[1].startswith("only 60 items held out")
    assert "warning:" not in done.stdout
    comments = [line.removeprefix("# warning: ") for line in job.read_text().splitlines()
                if line.startswith("# warning: ")]
    assert comments == said
    assert tomllib.loads(job.read_text())["nrm_a"] in (1.0, 10.0)  # still a valid job file
    printed = cli("tune", str(corpus), "--prior", "dp", "--a-grid", "1,10", "--scale-grid", "1",
                  "--json")
    assert json.loads(printed.stdout)["warnings"] == said
