"""One name per concept across the commands and the Python functions behind them (the former
spelling still works, with a deprecation note), and evaluate without --heldout (issue 48)."""

from __future__ import annotations

import argparse
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from bnpmix.pipeline.cli import build_parser
from bnpmix.pipeline.estimator import OPTIONS
from bnpmix.pipeline.evaluate import evaluate
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import Corpus, ingest_array
from helpers import blobs, cli

DEPRECATED = "bnpmix: warning: --labels-column is deprecated; use --label-column"
# the columns a corpus holds beside the data, each named by one flag wherever it is asked for
COLUMN_FLAGS = {"--label-column", "--time-column", "--id-column", "--sequence-column",
                "--position-column"}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> tuple[Path, Path]:
    """A small labelled corpus and a vb run on it (about a second)."""
    root = tmp_path_factory.mktemp("surface")
    X, y = blobs(300, 0)
    ingest_array(X, root / "corpus", partition_rows=100, columns={"label": y})
    fit(root / "corpus", root / "run",
        job_config(algorithm="vb", obs="gauss", K=3, laps=5, scheduler="synchronous"))
    return root / "corpus", root / "run"


def visible_flags(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """Each command's flags shown in its --help."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, sub in commands.choices.items():
        nested = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        subs = [sub] + [p for a in nested for p in a.choices.values()]
        out[name] = {flag for p in subs for a in p._actions if a.help != argparse.SUPPRESS
                     for flag in a.option_strings}
    return out


def test_every_command_and_the_estimator_name_a_column_the_same_way():
    """A flag naming a corpus column is spelled alike in ingest, fit, evaluate, report, compare,
    tune, plan, ...; the estimator's keywords are the same names (fit's options)."""
    flags = visible_flags(build_parser())
    columns = {flag for command in flags.values() for flag in command if "column" in flag}
    assert columns == COLUMN_FLAGS
    for command in ("ingest", "evaluate", "report", "compare"):
        assert "--label-column" in flags[command], command
    keywords = {"--" + name.replace("_", "-") for name in OPTIONS if "column" in name}
    assert keywords <= COLUMN_FLAGS


def test_ingest_takes_the_former_label_flag_with_a_note(tmp_path):
    (tmp_path / "d.csv").write_text("a,b,label\n0.5,1,1\n2,3.5,0\n")
    res = cli("ingest", tmp_path / "d.csv", tmp_path / "old", "--labels-column", "label")
    assert res.returncode == 0, res.stderr
    assert DEPRECATED in res.stderr
    new = cli("ingest", tmp_path / "d.csv", tmp_path / "new", "--label-column", "label")
    assert new.returncode == 0 and "deprecated" not in new.stderr
    for corpus in ("old", "new"):
        assert list(Corpus(tmp_path / corpus).read_all().columns["label"]) == ["1", "0"]


def test_evaluate_takes_the_former_label_flag_with_a_note(fitted):
    corpus, run = fitted
    old = cli("evaluate", run, "--heldout", corpus, "--labels-column", "label")
    assert old.returncode == 0, old.stderr
    assert DEPRECATED in old.stderr
    new = cli("evaluate", run, "--heldout", corpus, "--label-column", "label")
    assert new.returncode == 0 and "deprecated" not in new.stderr
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert json.loads(new.stdout)["ari"] > 0.95


@pytest.mark.parametrize("command", ["report", "compare"])
def test_report_and_compare_take_the_former_label_flag_with_a_note(fitted, monkeypatch, command,
                                                                    tmp_path):
    """What the command hands its function (the page itself is tests/pipeline/test_report.py's)."""
    import bnpmix.pipeline.report.cli as report_cli

    corpus, run = fitted
    given = []

    def page(*args):
        given.append(args[-1])
        return tmp_path / "index.html"

    monkeypatch.setattr(report_cli, command, page)
    runs = [run, run] if command == "compare" else [run]
    for flag in ("--labels-column", "--label-column"):
        res = cli(command, *runs, "--out", tmp_path / "out", "--heldout", corpus, flag, "label")
        assert res.returncode == 0, res.stderr
        assert (DEPRECATED in res.stderr) == (flag == "--labels-column")
    assert given == ["label", "label"]


def test_python_functions_take_the_former_keyword_with_a_deprecation_warning(fitted):
    corpus, run = fitted
    with pytest.warns(DeprecationWarning, match="labels_column is deprecated; use label_column"):
        old = evaluate(run, corpus, labels_column="label", scheduler="synchronous")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert evaluate(run, corpus, label_column="label", scheduler="synchronous") == old
    with pytest.raises(TypeError, match="label_column and labels_column"):
        evaluate(run, corpus, label_column="label", labels_column="label")


# --------------------------------------------------------------------------------------------
# evaluate without --heldout


def test_evaluate_without_heldout_scores_the_training_corpus_and_says_so(fitted, tmp_path):
    corpus, run = fitted
    res = cli("evaluate", run, "--label-column", "label")
    assert res.returncode == 0, res.stderr
    assert f"no --heldout: scored the run's training corpus {corpus}" in res.stderr
    training = json.loads(res.stdout)
    assert training["scored"] == "training" and training["corpus"] == str(corpus)
    explicit = json.loads(cli("evaluate", run, "--heldout", corpus, "--label-column",
                              "label").stdout)
    assert explicit["scored"] == "heldout"
    assert {k: v for k, v in training.items() if k != "scored"} == \
        {k: v for k, v in explicit.items() if k != "scored"}
    assert "no --heldout" not in cli("evaluate", run, "--heldout", corpus).stderr
    assert "--heldout CORPUS_DIR  score this corpus" in cli("evaluate", "--help").stdout
    shutil.copytree(run, tmp_path / "models" / "v0001")  # a scheduled run's latest version
    (tmp_path / "models" / "latest").write_text("v0001\n")
    latest = json.loads(cli("evaluate", tmp_path / "models" / "latest").stdout)
    assert latest["corpus"] == str(corpus) and latest["scored"] == "training"


def test_evaluate_without_heldout_refuses_a_changed_or_missing_training_corpus(fitted, tmp_path):
    """The training corpus must still be the one fitted (an appended corpus is not); a corpus
    moved away is named, and both say to give --heldout."""
    corpus, run = fitted
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    job = json.loads((copy / "job.json").read_text())
    moved = tmp_path / "corpus"
    shutil.copytree(corpus, moved)
    (copy / "job.json").write_text(json.dumps({**job, "corpus": str(moved)}))
    assert json.loads(cli("evaluate", copy).stdout)["corpus"] == str(moved)
    X, y = blobs(50, 1)
    np.save(tmp_path / "more.npy", X)
    np.save(tmp_path / "more-labels.npy", y)
    assert cli("ingest", tmp_path / "more.npy", moved, "--append", "--labels",
               tmp_path / "more-labels.npy").returncode == 0
    res = cli("evaluate", copy)
    assert res.returncode == 1
    assert f"{moved}: not the corpus {copy} was fitted to" in res.stderr
    assert "give --heldout CORPUS_DIR" in res.stderr
    shutil.rmtree(moved)
    res = cli("evaluate", copy)
    assert res.returncode == 1
    assert f"its training corpus {moved} (job.json) cannot be read" in res.stderr
