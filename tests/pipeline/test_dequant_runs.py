"""Integer-valued columns from ingest to evaluate (issue 45): the manifest records each column's
step, an append can turn a column continuous, a fit dequantises the integer columns unless
``--dequantise false`` (a flag, a job-file key and an estimator parameter), the run directory's
model reloads with its steps, and held-out scores say they are a dequantised bound."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bnpmix
from bnpmix.pipeline.estimator import BayesianMixture
from bnpmix.storage import Corpus, ingest_array
from bnpmix.storage.errors import BnpmixError
from helpers import blobs, cli


def integer_items(n: int = 400, seed: int = 0) -> np.ndarray:
    """Three blobs rounded to integers in the first column, continuous in the second."""
    X, _ = blobs(n, seed)
    return np.column_stack([np.round(2 * X[:, 0]), X[:, 1]])


def test_ingest_records_integer_columns(tmp_path):
    """ingest (array, npy with an integer dtype, csv) records step 1 for a column of integers
    only, 0 for any other; info says how many; a float32 array likewise."""
    X = integer_items()
    assert ingest_array(X, tmp_path / "a", partition_rows=150).steps == [1.0, 0.0]
    assert ingest_array(X.astype(np.float32), tmp_path / "f").steps == [1.0, 0.0]
    np.save(tmp_path / "x.npy", np.arange(12, dtype=np.int16).reshape(6, 2))
    assert cli("ingest", tmp_path / "x.npy", tmp_path / "n").returncode == 0
    assert Corpus(tmp_path / "n").manifest.steps == [1.0, 1.0]
    (tmp_path / "x.csv").write_text("a,b,c\n1,2.5,3\n4,5,6.0\n-7,8,9\n")
    assert cli("ingest", tmp_path / "x.csv", tmp_path / "c").returncode == 0
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["steps"] == [1.0, 0.0, 1.0]
    info = cli("info", tmp_path / "c")
    assert "integers      2 of 3 columns hold only integers" in info.stdout


def test_append_turns_a_column_continuous(tmp_path):
    """Appending rows with a non-integer value in an integer column makes it continuous; rows
    of integers keep the steps."""
    X = integer_items()
    ingest_array(X, tmp_path / "c", partition_rows=200)
    np.save(tmp_path / "more.npy", np.round(X[:50]))
    assert cli("ingest", tmp_path / "more.npy", tmp_path / "c", "--append").returncode == 0
    assert Corpus(tmp_path / "c").manifest.steps == [1.0, 0.0]
    noisy = X[:50].copy()
    noisy[3, 0] += 0.5
    np.save(tmp_path / "noisy.npy", noisy)
    assert cli("ingest", tmp_path / "noisy.npy", tmp_path / "c", "--append").returncode == 0
    corpus = Corpus(tmp_path / "c")
    assert corpus.manifest.steps == [0.0, 0.0] and corpus.manifest.integer_steps is None
    assert corpus.n_partitions == 4


def test_a_manifest_without_steps_reads_as_continuous(tmp_path):
    """A corpus ingested before the field existed: readable, no integer columns, and a fit of
    it keeps its data continuous; a malformed field is an error naming it."""
    ingest_array(integer_items(), tmp_path / "c")
    path = tmp_path / "c" / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["steps"]
    path.write_text(json.dumps(manifest))
    assert Corpus(tmp_path / "c").manifest.steps is None
    res = cli("fit", tmp_path / "c", "--out", tmp_path / "run", "--obs", "gauss", "--laps", "2")
    assert res.returncode == 0, res.stderr
    assert bnpmix.load(tmp_path / "run").model.obs.delta is None
    path.write_text(json.dumps({**manifest, "steps": [1, -1]}))
    with pytest.raises(BnpmixError, match="'steps'"):
        Corpus(tmp_path / "c")


def test_fit_dequantises_unless_told_not_to(tmp_path):
    """A plain fit of a corpus with an integer column passes its steps to the model; the run
    directory reloads with them (bnpmix.load), summary.json, info, fit's output and evaluate
    say the held-out score is a dequantised bound; --dequantise false and the job file's
    ``dequantise = false`` fit the values as continuous."""
    ingest_array(integer_items(), tmp_path / "c", partition_rows=200)
    res = cli("fit", tmp_path / "c", "--out", tmp_path / "run", "--laps", "4")
    assert res.returncode == 0, res.stderr
    assert "dequantised: the ELBO and held-out scores are a dequantised bound" in res.stdout
    model = bnpmix.load(tmp_path / "run").model
    np.testing.assert_array_equal(model.obs.delta, [1.0, 0.0])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["heldout_kind"] == "dequantised" and summary["config"]["model"]["dequantise"]
    assert "dequantised   held-out scores are" in cli("info", tmp_path / "run").stdout
    res = cli("evaluate", tmp_path / "run", "--heldout", tmp_path / "c")
    assert res.returncode == 0 and json.loads(res.stdout)["heldout_kind"] == "dequantised"
    assert "dequantised bound on the log probability" in res.stderr

    res = cli("fit", tmp_path / "c", "--out", tmp_path / "off", "--laps", "4",
              "--dequantise", "false")
    assert res.returncode == 0, res.stderr
    assert bnpmix.load(tmp_path / "off").model.obs.delta is None
    assert json.loads((tmp_path / "off" / "summary.json").read_text())["heldout_kind"] == "plain"
    res = cli("evaluate", tmp_path / "off", "--heldout", tmp_path / "c")
    assert json.loads(res.stdout)["heldout_kind"] == "plain" and "dequantised" not in res.stderr

    (tmp_path / "job.toml").write_text("dequantise = false\nlaps = 2\nobs = \"diag-gauss\"\n")
    res = cli("fit", tmp_path / "c", "--out", tmp_path / "job", "--config", tmp_path / "job.toml")
    assert res.returncode == 0, res.stderr
    assert bnpmix.load(tmp_path / "job").model.obs.delta is None


def test_a_job_from_before_the_option_keeps_its_data_continuous():
    """A job.json written before ``dequantise`` existed resumes as the run it was."""
    from bnpmix.pipeline.config import JobConfig
    from bnpmix.pipeline.fit import job_config

    assert job_config().model.dequantise is True
    old = job_config().to_dict()
    del old["model"]["dequantise"]
    assert JobConfig.from_dict(old).model.dequantise is False


@pytest.mark.parametrize("algorithm", ["adf", "ep"])
def test_one_item_engines_run_dequantised(tmp_path, algorithm):
    """ADF and EP absorb items through the one-item path, which adds each item's cells."""
    ingest_array(integer_items(), tmp_path / "c", partition_rows=200)
    res = cli("fit", tmp_path / "c", "--out", tmp_path / "run", "--algorithm", algorithm,
              "--obs", "gauss", *(["--passes", "1"] if algorithm == "ep" else []))
    assert res.returncode == 0, res.stderr
    fitted = bnpmix.load(tmp_path / "run")
    np.testing.assert_array_equal(fitted.model.obs.delta, [1.0, 0.0])
    assert fitted.n_components_ >= 3


def test_resume_keeps_the_steps(tmp_path):
    """job.json records dequantise; a resumed run rebuilds the same dequantised model."""
    from bnpmix.pipeline.fit import fit, job_config, resume

    ingest_array(integer_items(), tmp_path / "c", partition_rows=100)
    stops = []

    def stop(engine, step):
        if step.lap_end and not stops:
            stops.append(True)
            raise KeyboardInterrupt

    job = job_config(obs="gauss", laps=3, seed=1)
    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path / "c", tmp_path / "run", job, on_step=stop)
    resumed = resume(tmp_path / "run")
    whole = fit(tmp_path / "c", tmp_path / "whole", job)
    assert resumed["elbo"] == whole["elbo"]
    np.testing.assert_array_equal(bnpmix.load(tmp_path / "run").model.obs.delta, [1.0, 0.0])


@pytest.mark.filterwarnings("ignore::bnpmix.pipeline.estimator.ConvergenceWarning")
def test_estimator_finds_integer_columns_itself():
    """BayesianMixture on an integer-valued array dequantises those columns (dequantise=False:
    not), and takes dequantise as a parameter like any other."""
    X = integer_items(300, seed=2)
    on = BayesianMixture(obs="gauss", random_state=0, laps=4).fit(X)
    np.testing.assert_array_equal(on.model_.model.obs.delta, [1.0, 0.0])
    off = BayesianMixture(obs="gauss", random_state=0, laps=4, dequantise=False).fit(X)
    assert off.model_.model.obs.delta is None
    assert "dequantise" in on.get_params()
