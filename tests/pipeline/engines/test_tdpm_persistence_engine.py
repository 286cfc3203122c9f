"""The tdpm engine with membership stability (``--id-column``): sticky and volatile ids told
apart with the default Beta(1, 1) prior, the tables, resume, online continuation, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bnpmix.algorithms.metrics import global_and_local_vi
from bnpmix.datasets import tdpm_persistent
from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.storage import BnpmixError, RunDir, ingest_array
from helpers import cli

STICKY, VOLATILE = 30, 30
RHO = np.r_[np.full(STICKY, 0.95), np.full(VOLATILE, 0.1)]


def persistent_corpus(path, n_epochs=12, seed=2):
    X, E, Z, _, ids, stays = tdpm_persistent(RHO, n_epochs=n_epochs, per_epoch=45, seed=seed)
    ingest_array(X, path, partition_rows=100,
                 columns={"time": E + 100, "item": np.array([f"u{v}" for v in ids])})
    return X, E, Z, ids, stays


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("persist") / "corpus"
    return (path, *persistent_corpus(path))


@pytest.mark.slow  # a long chain through the CLI
def test_sticky_and_volatile_ids_are_told_apart(corpus, tmp_path):
    path, X, E, Z, ids, stays = corpus
    run = tmp_path / "run"
    res = cli("fit", path, "--out", run, "--algorithm", "tdpm", "--id-column", "item",
              "--sweeps", "40", "--burn-in", "20", "--thin", "4")
    assert res.returncode == 0, res.stderr
    labels = RunDir(run).load_assignments()["cluster"].to_numpy()  # corpus order
    per = pd.read_parquet(run / "persistence.parquet").set_index("id")
    assert len(per) == len(np.unique(ids))
    # the table's counts are the corpus's
    appear = pd.Series(ids).map(lambda v: f"u{v}").value_counts()
    assert (per["appearances"] == appear.reindex(per.index)).all()
    assert (per["returns"] == per["appearances"] - 1).all()
    rho = per["rho_mean"].to_numpy()
    sticky = np.array([int(u[1:]) < STICKY for u in per.index])
    assert rho[sticky].mean() > 0.7 and rho[~sticky].mean() < 0.4, (rho[sticky].mean(),
                                                                    rho[~sticky].mean())
    assert np.mean(rho[sticky] > np.median(rho[~sticky])) > 0.9
    samples = pd.read_parquet(run / "samples.parquet")
    assert samples["stay"].dtype == bool and samples["sample"].nunique() == 5
    # staying items found where they stayed: most true stayers stay in the kept samples
    stay_rate = samples.groupby(samples.index % len(X))["stay"].mean().to_numpy()
    assert stay_rate[stays].mean() > 0.6 and stay_rate[~stays].mean() < 0.2
    gvi, lvi = global_and_local_vi(Z, labels, E)
    assert gvi < 1.0 and lvi < 0.3, (gvi, lvi)
    trace = pd.read_csv(run / "trace.csv")
    assert trace["stayers"].iloc[-1] > 0


@pytest.mark.slow  # resume and online continuation of a chain
def test_resume_and_online_continuation_keep_the_stays(corpus, tmp_path):
    path, *_ = corpus
    job = job_config(algorithm="tdpm", id_column="item", sweeps=6, burn_in=2, thin=2, seed=4)
    fit(path, tmp_path / "ref", job)

    def stop(engine, step):
        if engine.sweep == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(path, tmp_path / "run", job, on_step=stop)
    resume(tmp_path / "run")
    for name in ("samples", "persistence", "chains"):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "ref" / f"{name}.parquet"),
                                      pd.read_parquet(tmp_path / "run" / f"{name}.parquet"))
    # two more epochs of the same ids: the earlier items keep their chains and stays
    grown = tmp_path / "grown"
    _, E, *_ = persistent_corpus(grown, n_epochs=14)
    fit(grown, tmp_path / "new", job.replace(run_warm_start=str(tmp_path / "ref")))
    old = pd.read_parquet(tmp_path / "ref" / "samples.parquet")
    new = pd.read_parquet(tmp_path / "new" / "samples.parquet")
    n_old = len(old) // old["sample"].nunique()
    early = E[:n_old] < 11 - 1  # before the last W = 1 old epochs, which are swept again
    last_old = old[old["sample"] == old["sample"].max()]["stay"].to_numpy()
    first_new = new[new["sample"] == 0]["stay"].to_numpy()[:n_old]
    np.testing.assert_array_equal(last_old[early], first_new[early])
    plain = job_config(algorithm="tdpm", sweeps=2, burn_in=0)
    with pytest.raises(BnpmixError, match="fitted with id_column 'item'"):
        fit(grown, tmp_path / "plain", plain.replace(run_warm_start=str(tmp_path / "ref")))


@pytest.mark.parametrize("case, words", [
    ("twice", ["partition 0 row 0 and partition 1 row 0", "same item 'a'", "same time 5"]),
    ("missing", ["id_column 'item' is not a column"]),
])
def test_bad_ids_are_an_error_naming_the_rows(tmp_path, case, words):
    X = np.random.default_rng(0).normal(size=(4, 2))
    cols = {"time": np.array([5, 6, 5, 6])}
    if case == "twice":
        cols["item"] = np.array(["a", "b", "a", "c"])
    ingest_array(X, tmp_path / "c", partition_rows=2, columns=cols)
    res = cli("fit", tmp_path / "c", "--out", tmp_path / "r", "--algorithm", "tdpm",
              "--id-column", "item")
    assert res.returncode == 1
    for w in words:
        assert w in res.stderr, res.stderr
    assert not (tmp_path / "r" / "summary.json").exists()
