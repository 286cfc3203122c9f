"""The command line as a user runs it: a real subprocess, exit codes, output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from helpers import cli_process, write_docword


def test_help_lists_commands():
    res = cli_process("--help")
    assert res.returncode == 0
    for command in ("ingest", "info", "demo"):
        assert command in res.stdout


def test_usage_error_exits_2():
    assert cli_process("ingest").returncode == 2
    assert cli_process("no-such-command").returncode == 2
    assert cli_process("ingest", "a.npy", "out", "--partition-rows", "0").returncode == 2


def test_ingest_npy_then_info_json(tmp_path):
    X = np.random.default_rng(0).normal(size=(250, 4))
    np.save(tmp_path / "x.npy", X)
    res = cli_process("ingest", str(tmp_path / "x.npy"), str(tmp_path / "c"),
                      "--partition-rows", "100")
    assert res.returncode == 0, res.stderr
    info = json.loads(cli_process("info", str(tmp_path / "c"), "--json").stdout)
    assert info["kind"] == "dense"
    assert (info["n_items"], info["dim"], info["n_partitions"]) == (250, 4, 3)
    assert "nnz" not in info


def test_ingest_docword_then_info(tmp_path):
    X = sp.csr_matrix(np.array([[1, 0, 2], [0, 0, 0], [0, 3, 0]]))
    write_docword(tmp_path / "docword.toy.txt", X, ["a", "b", "c"])
    ingested = cli_process("ingest", str(tmp_path / "docword.toy.txt"), str(tmp_path / "c"))
    assert ingested.returncode == 0
    info = json.loads(cli_process("info", str(tmp_path / "c"), "--json").stdout)
    assert (info["kind"], info["n_items"], info["dim"], info["nnz"]) == ("bow", 3, 3, 3)
    text = cli_process("info", str(tmp_path / "c")).stdout
    assert "non-zeros     3" in text


def test_ingest_csv_with_columns(tmp_path):
    (tmp_path / "d.csv").write_text("id,a,b,label,t\nx1,1.5,2,cat,0\nx2,-1,0.25,dog,1\n")
    res = cli_process("ingest", str(tmp_path / "d.csv"), str(tmp_path / "c"), "--id-column", "id",
                      "--label-column", "label", "--time-column", "t")
    assert res.returncode == 0, res.stderr
    from bnpmix.storage import Corpus

    batch = Corpus(tmp_path / "c").read_all()
    np.testing.assert_array_equal(batch.X, [[1.5, 2.0], [-1.0, 0.25]])
    assert list(batch.columns["item"]) == ["x1", "x2"]
    assert list(batch.columns["label"]) == ["cat", "dog"]
    assert list(batch.columns["time"]) == [0, 1]


def test_info_on_missing_corpus_is_one_line_error(tmp_path):
    res = cli_process("info", str(tmp_path / "nothing"))
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "nothing" in res.stderr
    assert "Traceback" not in res.stderr
    res = cli_process("--debug", "info", str(tmp_path / "nothing"))
    assert res.returncode == 1 and "Traceback" in res.stderr


@pytest.mark.slow  # the full demo
def test_demo_finds_the_eight_components(tmp_path):
    res = cli_process("demo", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "K = 8 components (8 with more than 1% of the mass)" in res.stdout
    found, oracle = map(float, re.findall(r"ARI (\d\.\d+)", res.stdout))
    assert found >= oracle - 0.02


def test_fit_writes_run_directory_and_evaluate_prints_json(tmp_path):
    rng = np.random.default_rng(1)
    centers = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
    y = rng.integers(0, 3, 600)
    X = centers[y] + rng.normal(size=(600, 2))
    from bnpmix.storage import ingest_array

    ingest_array(X, tmp_path / "c", partition_rows=100, columns={"label": y})
    res = cli_process("fit", str(tmp_path / "c"), "--out", str(tmp_path / "run"), "--K", "1",
                      "--laps", "6", "--moves", "birth,merge", "--seed", "3")
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    for key in ("algorithm", "K", "elbo", "elbo_per_item", "laps", "n_items", "wall_seconds",
                "config"):
        assert key in summary
    assert summary["n_items"] == 600 and summary["K_effective"] == 3
    trace = (tmp_path / "run" / "trace.csv").read_text().splitlines()
    assert trace[0] == "lap,batch,elbo,K,seconds" and len(trace) > 6
    assert len(list((tmp_path / "run" / "assignments").glob("part-*.parquet"))) == 6
    res = cli_process("evaluate", str(tmp_path / "run"), "--heldout", str(tmp_path / "c"),
                      "--label-column", "label")
    assert res.returncode == 0, res.stderr
    scores = json.loads(res.stdout)
    assert scores["ari"] > 0.95 and scores["K"] == summary["K"]
    assert np.isfinite(scores["heldout_loglik_per_item"])


def test_fit_rejects_a_model_that_does_not_fit_the_corpus(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((10, 2)))
    assert cli_process("ingest", str(tmp_path / "x.npy"), str(tmp_path / "c")).returncode == 0
    res = cli_process("fit", str(tmp_path / "c"), "--out", str(tmp_path / "run"), "--obs", "mult")
    assert res.returncode == 1 and "does not fit" in res.stderr
    res = cli_process("fit", str(tmp_path / "c"), "--out", str(tmp_path / "run"),
                      "--algorithm", "vb", "--moves", "merge")
    assert res.returncode == 2 and "--moves: does not apply" in res.stderr


def test_the_console_script_flushes_its_output_before_its_fast_exit(tmp_path):
    """The console script ends with os._exit (no interpreter teardown, where pyarrow's threads
    could abort a finished command): what a command printed into a pipe or a file must all be
    there, and the exit code must be the command's own."""
    bnpmix = str(Path(sys.executable).parent / "bnpmix")
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(300, 2)))
    assert subprocess.run([bnpmix, "ingest", str(tmp_path / "x.npy"), str(tmp_path / "c")],
                          capture_output=True).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open(tmp_path / "out.json", "w") as fh:  # block-buffered: lost without a flush
        done = subprocess.run([bnpmix, "info", str(tmp_path / "c"), "--json"], stdout=fh,
                              env=env)
    assert done.returncode == 0
    assert json.loads((tmp_path / "out.json").read_text())["n_items"] == 300
    bad = subprocess.run([bnpmix, "info", str(tmp_path / "nothing")], capture_output=True,
                         text=True)
    assert bad.returncode == 1 and "not a corpus directory" in bad.stderr
