"""`bnpmix info RUN_DIR` and `bnpmix show RUN_DIR` on real memoized-VB runs of dense data and of
text, through the command line; the vocabulary a text fit keeps in RUN_DIR/vocab.txt."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bnpmix.storage import Corpus, RunDir
from bnpmix.storage.text import builtin_stopwords
from helpers import cli

CENTRES = np.array([[0.0, 0.0], [6.0, 6.0], [-6.0, 6.0]])
TOPICS = {
    topic: words.split()
    for topic, words in (
        ("sport", "match goal team player coach league season score referee stadium"),
        ("food", "recipe flour oven butter sugar bake dough kitchen salt pepper"),
        ("space", "rocket orbit planet launch astronaut moon telescope galaxy star mission"),
    )
}
FILLER = ["the", "of", "and", "to", "in", "a", "is", "that", "it", "was", "for", "on", "with",
          "as"]  # all stop words


def ok(*args: object) -> str:
    res = cli(*args)
    assert res.returncode == 0, f"{args}: {res.stderr}"
    return res.stdout


@pytest.fixture(scope="module")
def dense_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dense")
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.4, size=(150, 2)) for c in CENTRES])
    np.save(root / "x.npy", X)
    ok("ingest", root / "x.npy", root / "corpus", "--partition-rows", "150")
    # the full Gaussian (these blobs share one covariance: --obs auto would choose tied-gauss)
    ok("fit", root / "corpus", "--out", root / "run", "--laps", "6", "--seed", "0",
       "--obs", "gauss")
    return root / "run"


@pytest.fixture(scope="module")
def text_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("text")
    rng = np.random.default_rng(1)
    lines = []
    for i in range(120):
        words = [*rng.choice(TOPICS[list(TOPICS)[i % 3]], 25), *rng.choice(FILLER, 40)]
        rng.shuffle(words)
        lines.append(" ".join(words).capitalize() + ".")
    (root / "docs.txt").write_text("\n".join(lines) + "\n")
    ok("ingest", root / "docs.txt", root / "corpus", "--partition-rows", "40")
    ok("fit", root / "corpus", "--out", root / "run", "--laps", "10", "--seed", "0")
    return root / "run"


# --------------------------------------------------------------------------------------------
# info


def test_info_of_a_dense_run(dense_run):
    info = json.loads(ok("info", dense_run, "--json"))
    summary = RunDir(dense_run).load_summary()
    assert info["engine"] == "memo" and info["obs"] == summary["obs"]
    assert info["K"] == summary["K"] >= 3
    assert info["K_effective"] == 3 and info["K_nonempty"] == 3
    assert info["weights"] == sorted(info["weights"], reverse=True)
    assert sum(info["sizes"]) == info["n_items"] == 450
    assert sorted(info["sizes"], reverse=True)[:3] == [150, 150, 150]
    assert info["objective"] == "elbo"
    assert info["objective_value"] == pytest.approx(summary["elbo"])
    assert info["objective_per_item"] == pytest.approx(summary["elbo"] / 450)
    assert info["laps"] == summary["laps"] and info["wall_seconds"] > 0
    assert info["corpus"] == str((dense_run.parent / "corpus").resolve())
    assert info["vocab_file"] is None

    text = ok("info", dense_run)
    assert "engine        memo" in text
    assert f"K             {info['K']} components: 3 with more than 1% of the weight, 3 with " \
           "at least one item" in text
    assert "150, 150, 150" in text and "elbo" in text and "wall seconds" in text


def test_info_shows_the_learned_prior(dense_run):
    """The default gauss fit learns its prior: summary.json keeps its figures, initial and
    final, and `bnpmix info` shows them; the saved model holds the learned prior itself."""
    summary = RunDir(dense_run).load_summary()
    prior = summary["prior"]
    assert prior["learn"] is True and set(prior["final"]) == {"kappa0", "nu0", "m0_norm", "scale"}
    assert prior["initial"]["kappa0"] == 0.01 and prior["final"]["kappa0"] != 0.01
    model = json.loads((dense_run / "model.json").read_text())
    assert model["prior"]["kappa0"] == prior["final"]["kappa0"]
    info = json.loads(ok("info", dense_run, "--json"))
    assert info["prior"] == prior
    line = next(s for s in ok("info", dense_run).splitlines() if s.startswith("prior"))
    assert line.startswith("prior         learned (initial -> final): kappa0 0.01 -> ")


def test_info_of_a_corpus_is_unchanged_in_kind(dense_run):
    info = json.loads(ok("info", dense_run.parent / "corpus", "--json"))
    assert (info["kind"], info["n_items"], info["dim"]) == ("dense", 450, 2)


def test_show_dense_run_lists_clusters_by_weight_with_means(dense_run):
    shown = json.loads(ok("show", dense_run, "--json"))
    assert shown["kind"] == "dense" and shown["engine"] == "memo"
    weights = [c["weight"] for c in shown["clusters"]]
    assert weights == sorted(weights, reverse=True)
    heavy = shown["clusters"][:3]
    assert [c["size"] for c in heavy] == [150, 150, 150]
    found = np.array(sorted(tuple(c["mean"]) for c in heavy))
    np.testing.assert_allclose(found, sorted(map(tuple, CENTRES)), atol=0.15)
    assert len(json.loads(ok("show", dense_run, "--json", "--top", "1"))["clusters"]) == 1
    text = ok("show", dense_run)
    assert "mean" in text.splitlines()[1] and text.count("\n") >= 4


# --------------------------------------------------------------------------------------------
# text runs


def test_text_fit_keeps_the_corpus_vocabulary(text_run):
    corpus = text_run.parent / "corpus"
    assert (text_run / "vocab.txt").read_bytes() == (corpus / "vocab.txt").read_bytes()
    assert RunDir(text_run).load_vocab() == Corpus(corpus).manifest.vocab
    info = json.loads(ok("info", text_run, "--json"))
    assert info["vocab_file"] == str(text_run / "vocab.txt")


def test_show_text_run_lists_real_top_words(text_run):
    shown = json.loads(ok("show", text_run, "--json", "--top-words", "5"))
    assert shown["kind"] == "text" and shown["vocab"] == str(text_run / "vocab.txt")
    stop = builtin_stopwords()
    heavy = shown["clusters"][:3]
    assert sum(c["size"] for c in heavy) == 120
    topics_found = set()
    for c in heavy:
        words = [w["word"] for w in c["top_words"]]
        assert len(words) == 5 and not set(words) & stop
        probs = [w["prob"] for w in c["top_words"]]
        assert probs == sorted(probs, reverse=True)
        topic = [t for t, vocab in TOPICS.items() if set(words) <= set(vocab)]
        assert len(topic) == 1, words  # each cluster's top words are one topic's
        topics_found |= set(topic)
    assert topics_found == set(TOPICS)
    text = ok("show", text_run)
    assert "top words" in text and " the " not in text


def test_show_falls_back_to_the_corpus_vocabulary(text_run, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(text_run, copy)
    (copy / "vocab.txt").unlink()
    shown = json.loads(ok("show", copy, "--json", "--top", "1", "--top-words", "3"))
    assert str(text_run.parent / "corpus") in shown["vocab"]
    assert all(not w["word"].startswith("#") for w in shown["clusters"][0]["top_words"])


def test_show_refuses_a_vocabulary_that_is_not_the_fitted_one(text_run, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(text_run, copy)
    words = (copy / "vocab.txt").read_text().split("\n")[:-1]
    (copy / "vocab.txt").write_text("".join(f"{w}\n" for w in reversed(words)))
    shown = json.loads(ok("show", copy, "--json", "--top", "1", "--top-words", "3"))
    assert shown["vocab"] is None and "SHA-256" in shown["vocab_note"]
    assert all(w["word"].startswith("#") for w in shown["clusters"][0]["top_words"])


# --------------------------------------------------------------------------------------------
# errors


def one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 1, res
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    return res.stderr


def test_missing_run_directory(tmp_path):
    for command in ("info", "show"):
        err = one_line_error(cli(command, tmp_path / "nothing"))
        assert str(tmp_path / "nothing") in err and "no such directory" in err


def test_show_on_a_corpus_and_on_an_unfinished_run(dense_run, tmp_path):
    err = one_line_error(cli("show", dense_run.parent / "corpus"))
    assert "a corpus, not a run directory" in err
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "job.json").write_text("{}")
    for command in ("info", "show"):
        err = one_line_error(cli(command, tmp_path / "half"))
        assert "not finished" in err and "bnpmix resume" in err
    (tmp_path / "empty").mkdir()
    err = one_line_error(cli("info", tmp_path / "empty"))
    assert "not a corpus directory (no manifest.json) nor a run directory" in err


def test_show_rejects_a_non_positive_count(dense_run):
    assert cli("show", dense_run, "--top", "0").returncode == 2
    assert cli("show", dense_run, "--top-words", "-1").returncode == 2


def test_wall_seconds_cover_the_whole_fit_command(tmp_path, monkeypatch):
    """`bnpmix fit --algorithm vb` with --obs auto, its race made 0.6 s slower: summary.json's
    wall_seconds include the race (main counted from the vb engine's context, after it), and
    `bnpmix info` says what they cover."""
    import time

    import bnpmix.pipeline.fit as fitting

    race = fitting.choose_obs

    def slow_race(*args, **kwargs):
        time.sleep(0.6)
        return race(*args, **kwargs)

    monkeypatch.setattr(fitting, "choose_obs", slow_race)
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", np.concatenate([rng.normal(c, 0.4, (60, 2)) for c in CENTRES]))
    ok("ingest", tmp_path / "x.npy", tmp_path / "corpus")
    start = time.perf_counter()
    ok("fit", tmp_path / "corpus", "--out", tmp_path / "run", "--algorithm", "vb", "--K", "3")
    took = time.perf_counter() - start
    summary = RunDir(tmp_path / "run").load_summary()
    assert 0.6 + summary["obs_auto"]["seconds"] <= summary["wall_seconds"] <= took
    info = ok("info", tmp_path / "run")
    assert "(the whole fit command: corpus checks, --obs auto's race" in info
