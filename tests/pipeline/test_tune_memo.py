"""`bnpmix tune --algorithm memo`: memo's DP concentration alpha0 and the observation prior's
scale (Gaussians) or lam0 (bag-of-words) by the held-out predictive log-likelihood of memo fits
on a sample (pipeline/engines/memo_tune.py)."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest
import scipy.sparse as sp

from bnpmix import BayesianMixture
from bnpmix.pipeline.cli import UsageError, build_parser
from bnpmix.pipeline.engines.memo_tune import ALPHA_GRID, LAM0_GRID, tune_memo
from bnpmix.pipeline.engines.nrm_tune import tune
from bnpmix.pipeline.estimator import write_corpus
from bnpmix.pipeline.tune import SCALE_GRID, format_table, job_text, sample_split
from bnpmix.storage import Corpus, ingest_array
from helpers import cli


@pytest.fixture(scope="module")
def blobs(tmp_path_factory):
    """600 items from three well-separated 2-D Gaussians, in partitions of 150."""
    rng = np.random.default_rng(5)
    centres = np.array([[-8.0, 0.0], [0.0, 8.0], [8.0, 0.0]])
    X = centres[rng.integers(0, 3, 600)] + rng.normal(size=(600, 2))
    path = tmp_path_factory.mktemp("blobs") / "corpus"
    ingest_array(X, path, partition_rows=150)
    return path


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """300 documents of 40 tokens from three word distributions over 60 words."""
    rng = np.random.default_rng(6)
    topics = rng.dirichlet(np.full(60, 0.2), size=3)
    X = np.stack([rng.multinomial(40, topics[z]) for z in rng.integers(0, 3, 300)])
    return write_corpus(sp.csr_matrix(X), tmp_path_factory.mktemp("docs") / "corpus")


def refit_score(corpus, n, seed, test_fraction=0.2, **options):
    """The held-out score and K of one grid point, fitted apart from tune: the same split, the
    estimator's own fit (its default executor), its score()."""
    split = sample_split(Corpus(corpus), n, test_fraction, seed)
    est = BayesianMixture(algorithm="memo", random_state=seed, **options).fit(split.train)
    return est.score(split.test), est.n_components_


@pytest.mark.slow  # long: every grid point fitted twice
def test_every_point_is_scored_best_first_as_an_independent_fit_scores_it(blobs):
    result = tune_memo(blobs, alpha_grid=(1.0, 10.0), scale_grid=(0.1, 1.0), seed=3)
    rows = result["rows"]
    assert result["obs"] == "gauss" and (result["n_train"], result["n_test"]) == (480, 120)
    assert sorted((r["alpha0"], r["scale"]) for r in rows) == [
        (1.0, 0.1), (1.0, 1.0), (10.0, 0.1), (10.0, 1.0)]
    scores = [r["heldout_loglik_per_item"] for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert result["best"] == {"alpha0": rows[0]["alpha0"]}
    assert result["prior"] == {"scale": rows[0]["scale"]}
    for r in rows:
        score, K = refit_score(blobs, 600, 3, alpha0=r["alpha0"], prior={"scale": r["scale"]},
                               obs="gauss")  # tune's model for dense data, as its job file
        assert abs(r["heldout_loglik_per_item"] - score) < 1e-10 and r["K"] == K
        assert r["laps"] >= 1 and r["seconds"] > 0
    assert rows[0]["K"] == 3  # the three blobs
    table = format_table(result)
    assert table.splitlines()[1].split() == ["alpha0", "scale", "K", "laps", "seconds",
                                             "held-out", "per", "item"]
    assert table.endswith(f"best: alpha0 = {rows[0]['alpha0']}, "
                          f"prior.scale = {rows[0]['scale']}")


def test_a_prior_value_given_is_kept_and_not_searched(blobs):
    result = tune_memo(blobs, alpha_grid=(2.0,), obs_prior={"scale": 0.5}, max_items=300)
    assert [set(r) for r in result["rows"]] == [
        {"alpha0", "K", "laps", "seconds", "heldout_loglik_per_item"}]
    assert result["prior"] == {"scale": 0.5} and result["n_train"] == 240
    score, _ = refit_score(blobs, 300, 0, alpha0=2.0, prior={"scale": 0.5}, obs="gauss")
    assert abs(result["rows"][0]["heldout_loglik_per_item"] - score) < 1e-10


@pytest.mark.slow  # long: a grid search and a fit
def test_cli_prints_the_table_and_writes_a_job_file_that_fits(blobs, tmp_path):
    job = tmp_path / "job.toml"
    done = cli("tune", str(blobs), "--algorithm", "memo", "--out", str(job))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("memo (seed 0") and "on 480 items" in lines[0]
    assert len(lines) == 2 + len(ALPHA_GRID) * len(SCALE_GRID) + 2  # head, rows, best, job
    assert lines[-2].startswith("best: alpha0 = ") and "prior.scale = " in lines[-2]
    values = tomllib.loads(job.read_text())
    assert values["algorithm"] == "memo" and values["obs"] == "gauss"
    assert values["alpha0"] in ALPHA_GRID and values["prior"]["scale"] in SCALE_GRID
    assert lines[-2] == (f"best: alpha0 = {values['alpha0']}, "
                         f"prior.scale = {values['prior']['scale']}")
    fitted = cli("fit", "--config", str(job), "--out", str(tmp_path / "run"))
    assert fitted.returncode == 0, fitted.stderr
    config = json.loads((tmp_path / "run" / "summary.json").read_text())["config"]
    assert config["algorithm"] == "memo"
    assert config["model"]["alpha0"] == values["alpha0"]
    assert config["model"]["prior"] == values["prior"]


@pytest.mark.parametrize("args, named", [
    (["--algorithm", "memo", "--a-grid", "1,10"], "--a-grid"),
    (["--algorithm", "memo", "--tau-grid", "1"], "--tau-grid"),
    (["--algorithm", "memo", "--prior", "ig"], "--prior ig"),
    (["--algorithm", "memo", "--nrm-sigma", "0.5", "--epsilon", "0.5"], "--nrm-sigma, --epsilon"),
    (["--alpha-grid", "1,10"], "--alpha-grid"),
    (["--algorithm", "ep", "--lam0-grid", "0.1"], "--lam0-grid"),
])
def test_a_flag_of_the_other_engine_is_a_usage_error(blobs, tmp_path, args, named):
    args = build_parser().parse_args(["tune", str(blobs), *args, "--out", str(tmp_path / "j")])
    with pytest.raises(UsageError, match=named):
        args.func(args)
    assert not (tmp_path / "j").exists()


def test_the_usage_error_exits_2_naming_the_flag(blobs):
    done = cli("tune", str(blobs), "--algorithm", "memo", "--a-grid", "1,10")
    assert done.returncode == 2 and "--a-grid" in done.stderr and not done.stdout
    done = cli("tune", str(blobs), "--alpha-grid", "1,10")
    assert done.returncode == 2 and "--alpha-grid" in done.stderr and not done.stdout


def test_documents_search_alpha0_and_lam0(documents):
    result = tune_memo(documents, alpha_grid=(1.0, 10.0), seed=1)
    rows = result["rows"]
    assert result["obs"] == "mult"
    assert sorted((r["alpha0"], r["lam0"]) for r in rows) == [
        (a, lam) for a in (1.0, 10.0) for lam in LAM0_GRID]
    assert result["prior"] == {"lam0": rows[0]["lam0"]}
    score, K = refit_score(documents, 300, 1, alpha0=rows[0]["alpha0"],
                           prior={"lam0": rows[0]["lam0"]})
    assert abs(rows[0]["heldout_loglik_per_item"] - score) < 1e-10 and rows[0]["K"] == K
    text = job_text(documents, result, "memo")
    assert tomllib.loads(text)["prior"] == {"lam0": rows[0]["lam0"]}


def test_the_adf_table_is_unchanged(blobs):
    result = tune(blobs, prior="dp", fraction=0.5, a_grid=(1.0,), scale_grid=(1.0,))
    assert "engine" not in result
    assert format_table(result).splitlines()[:2] == [
        "ADF on 240 items, scored on 60 held out (gauss observations)",
        "       a      tau  a tau^sigma  scale      K  held-out per item"]
