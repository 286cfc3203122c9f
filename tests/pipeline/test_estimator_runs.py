"""The estimator's fits as runs (issue 48): ``BayesianMixture.save`` writes a run directory
every command reads (no pickle), and errors and warnings name the user's data (X, the corpus
given), never a temporary directory of the estimator."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import scipy.sparse as sp

import bnpmix
from bnpmix import BayesianMixture
from bnpmix.pipeline.estimator import NotFittedError
from helpers import blobs, cli, full_disk_at_checkpoints


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("sparse", [False, True])
def test_non_finite_x_names_its_row_and_column_as_ingest_does(bad, sparse):
    """fit, predict and score name the first row and column holding NaN or inf, 0-based, in
    the words of storage's check_finite (what `bnpmix ingest` and `fit` say of a file)."""
    X, _ = blobs(40, 0)
    X = np.abs(np.round(X * 3))
    est = BayesianMixture(algorithm="adf", obs="gauss" if not sparse else "mult",
                          random_state=0).fit(sp.csr_matrix(X) if sparse else X)
    X[5, 1], X[9, 0] = bad, bad
    wanted = f"X, row 5: non-finite value {bad} in column 1 (row and column 0-based;"
    for call in (est.fit, est.predict, est.score):
        with pytest.raises(ValueError, match=re.escape(wanted)):
            call(sp.csr_matrix(X) if sparse else X)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A memo fit of X in memory, saved, and X ingested as a corpus (to evaluate the run)."""
    from bnpmix.storage import ingest_array

    X, y = blobs(300, 1)
    est = BayesianMixture(random_state=0).fit(X)
    where = tmp_path_factory.mktemp("saved")
    ingest_array(X, where / "corpus", columns={"label": y})
    return est, est.save(where / "run"), X, where


def test_a_saved_fit_is_a_run_bnpmix_load_predicts_alike(saved):
    est, run, X, _ = saved
    model = bnpmix.load(run)
    np.testing.assert_array_equal(model.predict(X), est.predict(X))
    np.testing.assert_array_equal(model.score_samples(X), est.score_samples(X))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["config"]["run"]["out"] == str(run.resolve())
    assert summary["config"]["run"]["corpus"] is None  # X in memory is not kept


def test_every_command_reads_a_saved_fit(saved):
    est, run, _, where = saved
    info = cli("info", run)
    assert info.returncode == 0 and f"K             {est.n_components_} component" in info.stdout
    assert "not kept" in info.stdout and "bnpmix-estimator" not in info.stdout, info.stdout
    assert cli("show", run).returncode == 0
    done = cli("evaluate", run, "--heldout", where / "corpus", "--label-column", "label")
    assert done.returncode == 0 and json.loads(done.stdout)["ari"] > 0.9, done.stdout
    done = cli("evaluate", run)  # X in memory is not kept: there is no training corpus to score
    assert done.returncode == 1 and "no training corpus recorded" in done.stderr, done.stderr
    assert "give --heldout" in done.stderr and "bnpmix-estimator" not in done.stderr
    pytest.importorskip("matplotlib")
    done = cli("report", run)
    assert done.returncode == 0 and (run / "report" / "index.html").is_file(), done.stderr


def test_save_refuses_an_existing_path_unless_overwrite(saved, tmp_path):
    est, _, X, _ = saved
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    with pytest.raises(bnpmix.BnpmixError, match="overwrite=True"):
        est.save(tmp_path / "run")
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine"
    est.save(tmp_path / "run", overwrite=True)
    assert not (tmp_path / "run" / "notes.txt").exists()
    np.testing.assert_array_equal(bnpmix.load(tmp_path / "run").predict(X), est.predict(X))
    with pytest.raises(NotFittedError):
        BayesianMixture().save(tmp_path / "other")


def test_a_saved_fit_holds_no_pickle(saved):
    """Every array file opens with allow_pickle=False, and no file is a pickle (protocol 2+
    starts with 0x80)."""
    _, run, _, _ = saved
    files = [p for p in run.rglob("*") if p.is_file()]
    assert any(p.suffix == ".npz" for p in files)
    for p in files:
        assert not p.read_bytes().startswith(b"\x80"), p
        if p.suffix in (".npz", ".npy"):
            with np.load(p, allow_pickle=False) as z:
                [z[k] for k in z.files]


def test_a_fit_to_a_corpus_path_saves_that_corpus(saved, tmp_path):
    """A fit given a corpus directory records it, so evaluate and report can read it."""
    where = saved[3]
    est = BayesianMixture(algorithm="adf", obs="gauss", random_state=0).fit(where / "corpus")
    run = est.save(tmp_path / "run")
    job = json.loads((run / "job.json").read_text())
    assert job["corpus"] == job["config"]["run"]["corpus"] == str((where / "corpus").resolve())
    done = cli("evaluate", run)  # scores that training corpus
    assert done.returncode == 0 and json.loads(done.stdout)["n_items"] == 300, done.stderr


def offset_column(n: int, seed: int = 0) -> np.ndarray:
    """Blobs beside a column about 1e9 with spread 1: too far from 0 for float64 sums of
    squares (not constant, so it is refused, naming the column)."""
    X, _ = blobs(n, seed)
    return np.c_[1e9 + np.random.default_rng(seed).normal(size=n), X]


def test_a_refusal_of_x_names_x_not_a_temporary_corpus():
    with pytest.raises(bnpmix.BnpmixError) as caught:
        BayesianMixture(obs="gauss", random_state=0).fit(offset_column(200))
    assert str(caught.value).startswith("X: column 0 (0-based, of 3) is about 1e+09")


def test_tune_names_the_corpus_it_sampled(tmp_path):
    from bnpmix.storage import ingest_array

    ingest_array(offset_column(300), tmp_path / "corpus")
    done = cli("tune", tmp_path / "corpus", "--algorithm", "memo", "--alpha-grid", "1",
               "--scale-grid", "0.1")
    assert done.returncode == 1
    assert (f"bnpmix: error: {tmp_path / 'corpus'} (tune's training sample of it): column 0 "
            "(0-based, of 3) is about 1e+09") in done.stderr, done.stderr


def test_a_full_disk_during_the_estimators_checkpoint_names_no_temporary_run(monkeypatch):
    """The checkpoint's write fails with ENOSPC: the error says where (the temporary directory
    the estimator's run is in) without a /tmp/bnpmix-estimator-* path nor a `bnpmix resume`
    of a directory that is removed."""
    full_disk_at_checkpoints(monkeypatch)
    X, _ = blobs(100, 0)
    with pytest.raises(bnpmix.BnpmixError) as caught:
        BayesianMixture(obs="gauss", random_state=0).fit(X)
    text = "\n".join([str(caught.value), *getattr(caught.value, "__notes__", [])])
    assert "<the estimator's temporary run>/checkpoint.npz: cannot write (No space" in text
    assert "bnpmix-estimator-" not in text and "resume" not in text, text


def test_tune_holds_a_constant_column_as_a_fit_does(tmp_path):
    """bnpmix tune (ADF's grid, fitted from the sample directly) warns of a constant column
    naming the corpus, and fits it as a quantised column like make_context does."""
    from bnpmix.pipeline.engines.nrm_tune import tune
    from bnpmix.storage import DataWarning, ingest_array

    X, _ = blobs(300, 0)
    ingest_array(np.c_[X, np.full(300, 7.5)], tmp_path / "corpus")
    with pytest.warns(DataWarning, match=re.escape(f"{tmp_path / 'corpus'}: column 2 (0-based, "
                                                   "of 3) is constant in a sample of 240")):
        tune(tmp_path / "corpus", a_grid=[1.0], tau_grid=[1.0], scale_grid=[0.1])
