"""Text users' basics at ingestion: the shipped stop-word list (on by default), the default
min-df, a fixed vocabulary for held-out text (--vocab), labels from a file beside any source
(--labels) and the warning for a CSV label left among the features."""

from __future__ import annotations

import json
import tomllib
import warnings
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from bnpmix.storage import (
    Corpus,
    DataError,
    DataWarning,
    ingest_csv,
    ingest_docword,
    ingest_npy,
    ingest_text,
)
from bnpmix.storage.text import builtin_stopwords
from helpers import cli, write_docword

ROOT = Path(__file__).parents[2]

DOCS = {
    "a.txt": "The cat and the dog sat on the mat.",
    "b.txt": "A dog and a cat ate the food of the cat.",
    "c.txt": "The rocket left the pad and the crowd cheered.",
    "d.txt": "A cat watched the rocket.",
}


def write_docs(folder: Path, docs: dict[str, str] = DOCS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    return folder


def assert_nothing_left(parent: Path, keep: set[str]) -> None:
    left = {p.name for p in parent.iterdir()} - keep
    assert left == set(), f"left behind in {parent}: {sorted(left)}"


# --------------------------------------------------------------------------------------------
# stop words and min-df


def test_shipped_stop_word_list_is_package_data():
    words = builtin_stopwords()
    assert 150 <= len(words) <= 300
    assert {"the", "and", "of", "a", "to", "in", "is", "it", "t", "s"} <= words
    assert not {"cat", "rocket", "government", "won"} & words
    assert resources.files("bnpmix.storage").joinpath("stopwords_en.txt").is_file()
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "stopwords_en.txt" in setup["package-data"]["bnpmix.storage"]


def test_stop_words_on_by_default_and_recorded(tmp_path):
    src = write_docs(tmp_path / "docs")
    manifest = ingest_text(src, tmp_path / "c")
    vocab = Corpus(tmp_path / "c").manifest.vocab
    assert "the" not in vocab and "and" not in vocab and "a" not in vocab
    assert vocab == ["cat", "dog", "rocket"]  # min_df 2: mat, food, pad, ... (one doc) dropped
    record = manifest.ingest["stopwords"]
    assert record["list"] == "bnpmix:english" and record["n_words"] == len(builtin_stopwords())
    assert manifest.ingest["min_df"] == 2
    on_disk = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert on_disk["ingest"]["stopwords"]["list"] == "bnpmix:english"


def test_stopwords_none_keeps_them_and_a_file_replaces_the_list(tmp_path):
    src = write_docs(tmp_path / "docs")
    ingest_text(src, tmp_path / "none", stopwords="none")
    corpus = Corpus(tmp_path / "none")
    assert {"the", "and", "a"} <= set(corpus.manifest.vocab)
    assert corpus.manifest.ingest["stopwords"] is None
    ingest_text(src, tmp_path / "none2", stopwords=None)
    assert Corpus(tmp_path / "none2").manifest.vocab == corpus.manifest.vocab
    (tmp_path / "mine.txt").write_text("# my list\nThe\ncat\n\n")
    manifest = ingest_text(src, tmp_path / "mine", stopwords=tmp_path / "mine.txt")
    vocab = Corpus(tmp_path / "mine").manifest.vocab
    assert "the" not in vocab and "cat" not in vocab and "and" in vocab  # replaced, not added
    assert manifest.ingest["stopwords"]["list"] == str((tmp_path / "mine.txt").resolve())
    assert manifest.ingest["stopwords"]["n_words"] == 2


def test_min_df_default_two_and_explicit_one(tmp_path):
    src = write_docs(tmp_path / "docs")
    ingest_text(src, tmp_path / "two")
    assert "mat" not in Corpus(tmp_path / "two").manifest.vocab
    ingest_text(src, tmp_path / "one", min_df=1)
    assert {"mat", "food", "pad", "cat"} <= set(Corpus(tmp_path / "one").manifest.vocab)


def test_pruning_error_names_the_way_out(tmp_path):
    src = write_docs(tmp_path / "docs", {"a.txt": "alpha beta", "b.txt": "gamma delta"})
    with pytest.raises(DataError, match=r"min_df=2.*--min-df"):
        ingest_text(src, tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_cli_text_defaults_and_flags(tmp_path):
    src = write_docs(tmp_path / "docs")
    assert cli("ingest", src, tmp_path / "c").returncode == 0
    assert Corpus(tmp_path / "c").manifest.vocab == ["cat", "dog", "rocket"]
    res = cli("ingest", src, tmp_path / "all", "--stopwords", "none", "--min-df", "1")
    assert res.returncode == 0, res.stderr
    assert {"the", "and", "mat"} <= set(Corpus(tmp_path / "all").manifest.vocab)
    info = cli("info", tmp_path / "c").stdout
    assert str((tmp_path / "c" / "vocab.txt").resolve()) in info
    assert "bnpmix:english" in info and "min_df 2" in info


# --------------------------------------------------------------------------------------------
# --vocab: held-out text with the training corpus's columns


def test_vocab_gives_heldout_text_the_training_columns(tmp_path):
    ingest_text(write_docs(tmp_path / "train"), tmp_path / "tc")
    train_vocab = tmp_path / "tc" / "vocab.txt"
    assert train_vocab.read_text() == "cat\ndog\nrocket\n"
    held = write_docs(tmp_path / "held", {"x.txt": "The rocket and the zebra met a cat, a cat!",
                                          "y.txt": "Zebra zebra dog"})
    manifest = ingest_text(held, tmp_path / "hc", vocab=train_vocab)
    corpus = Corpus(tmp_path / "hc")
    assert (tmp_path / "hc" / "vocab.txt").read_bytes() == train_vocab.read_bytes()
    assert corpus.manifest.vocab_sha256 == Corpus(tmp_path / "tc").manifest.vocab_sha256
    # columns cat, dog, rocket; "the", "and", "a" (stop words elsewhere) and "zebra" dropped
    np.testing.assert_array_equal(corpus.read_all().X.toarray(), [[2, 0, 1], [0, 1, 0]])
    assert manifest.ingest["vocab_file"] == str(train_vocab.resolve())
    assert manifest.ingest["stopwords"] is None and manifest.ingest["min_df"] is None
    # the corpus directory stands for its vocabulary
    ingest_text(held, tmp_path / "hc2", vocab=tmp_path / "tc")
    assert Corpus(tmp_path / "hc2").manifest.vocab == ["cat", "dog", "rocket"]


def test_vocab_order_is_the_files_and_no_pruning_applies(tmp_path):
    (tmp_path / "v.txt").write_text("the\nzebra\ncat\n")
    src = write_docs(tmp_path / "docs", {"a.txt": "the cat", "b.txt": "nothing here"})
    ingest_text(src, tmp_path / "c", vocab=tmp_path / "v.txt")
    corpus = Corpus(tmp_path / "c")
    assert corpus.manifest.vocab == ["the", "zebra", "cat"]  # kept: a stop word, unseen words
    assert list(corpus.read_all().columns["item"]) == ["a.txt"]  # b.txt has no vocabulary word


def test_vocab_with_a_repeated_word_is_refused_naming_the_line(tmp_path):
    (tmp_path / "v.txt").write_text("cat\ndog\ncat\n")
    src = write_docs(tmp_path / "docs")
    with pytest.raises(DataError, match=r"v\.txt, line 3: word 'cat' repeats line 1"):
        ingest_text(src, tmp_path / "c", vocab=tmp_path / "v.txt")
    assert not (tmp_path / "c").exists()


def test_vocab_words_no_token_can_match_get_a_warning(tmp_path):
    (tmp_path / "v.txt").write_text("cat\nNew_York\n")
    src = write_docs(tmp_path / "docs")
    with pytest.warns(DataWarning, match="1 of 2 words can never occur"):
        ingest_text(src, tmp_path / "c", vocab=tmp_path / "v.txt")


def test_cli_vocab_heldout_and_append(tmp_path):
    assert cli("ingest", write_docs(tmp_path / "train"), tmp_path / "tc").returncode == 0
    held = write_docs(tmp_path / "held", {"x.txt": "zebra cat rocket"})
    res = cli("ingest", held, tmp_path / "hc", "--vocab", tmp_path / "tc" / "vocab.txt")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "hc" / "vocab.txt").read_bytes() == \
        (tmp_path / "tc" / "vocab.txt").read_bytes()
    # pruning flags do not apply with a fixed vocabulary: a usage error, nothing written
    res = cli("ingest", held, tmp_path / "bad", "--vocab", tmp_path / "tc", "--min-df", "1")
    assert res.returncode == 2 and "--min-df" in res.stderr
    assert not (tmp_path / "bad").exists()
    # appending text needs the corpus's vocabulary, and works with it
    res = cli("ingest", held, tmp_path / "tc", "--append")
    assert res.returncode == 1 and "--vocab" in res.stderr
    res = cli("ingest", held, tmp_path / "tc", "--append", "--vocab", tmp_path / "tc")
    assert res.returncode == 0, res.stderr
    assert Corpus(tmp_path / "tc").n_items == 5


# --------------------------------------------------------------------------------------------
# --labels for npy, docword and text


def test_labels_for_npy_are_stored_like_a_csv_label_column(tmp_path):
    X = np.arange(10.0).reshape(5, 2)
    np.save(tmp_path / "x.npy", X)
    (tmp_path / "y.txt").write_text("1\n+2\n 03\n-1\n2\n")
    manifest = ingest_npy(tmp_path / "x.npy", tmp_path / "c", labels=tmp_path / "y.txt",
                          partition_rows=2)
    batch = Corpus(tmp_path / "c").read_all()
    assert manifest.columns == ("label",)
    assert list(batch.columns["label"]) == ["1", "2", "3", "-1", "2"]
    labels = manifest.ingest["labels"]
    assert labels["integer"] is True and labels["n_classes"] == 4 and "mapping" not in labels
    # the same representation as csv's --label-column
    (tmp_path / "d.csv").write_text("a,b,label\n0,1,1\n2,3,2\n")
    ingest_csv(tmp_path / "d.csv", tmp_path / "csv", label_column="label")
    types = {pq.read_schema(Corpus(tmp_path / c).partition_file(0)).field("label").type
             for c in ("c", "csv")}
    assert types == {pa.string()}


def test_string_labels_for_text_are_mapped_and_follow_dropped_documents(tmp_path):
    src = tmp_path / "lines.txt"
    src.write_text("cat dog\n\ndog rocket cat\nrocket\n")  # line 2 is empty: dropped
    (tmp_path / "y.txt").write_text("pets\nnone\nmixed\nspace\n")
    manifest = ingest_text(src, tmp_path / "c", labels=tmp_path / "y.txt", min_df=1,
                           partition_rows=2)
    batch = Corpus(tmp_path / "c").read_all()
    assert list(batch.columns["item"]) == ["1", "3", "4"]
    assert list(batch.columns["label"]) == ["pets", "mixed", "space"]
    assert manifest.ingest["labels"]["mapping"] == {"mixed": 0, "none": 1, "pets": 2, "space": 3}


def test_labels_for_a_folder_follow_file_name_order(tmp_path):
    src = write_docs(tmp_path / "docs")
    (tmp_path / "y.txt").write_text("a\nb\nc\nd\n")
    ingest_text(src, tmp_path / "c", labels=tmp_path / "y.txt")
    batch = Corpus(tmp_path / "c").read_all()
    assert dict(zip(batch.columns["item"], batch.columns["label"], strict=True)) == {
        "a.txt": "a", "b.txt": "b", "c.txt": "c", "d.txt": "d"}


def test_labels_for_docword(tmp_path):
    X = sp.csr_matrix(np.array([[1, 0, 2], [0, 0, 0], [0, 3, 0]]))
    write_docword(tmp_path / "docword.toy.txt", X, ["a", "b", "c"])
    (tmp_path / "y.txt").write_text("7\n8\n7\n")
    ingest_docword(tmp_path / "docword.toy.txt", tmp_path / "c", labels=tmp_path / "y.txt",
                   partition_rows=2)
    corpus = Corpus(tmp_path / "c")
    assert corpus.manifest.columns == ("label",)
    assert list(corpus.read_all().columns["label"]) == ["7", "8", "7"]


@pytest.mark.parametrize("fmt", ["npy", "text", "docword"])
def test_wrong_label_count_is_refused_naming_the_file_and_both_counts(tmp_path, fmt):
    src = {"npy": tmp_path / "x.npy", "text": tmp_path / "docs",
           "docword": tmp_path / "docword.toy.txt"}[fmt]
    if fmt == "npy":
        np.save(src, np.zeros((4, 2)))
    elif fmt == "text":
        write_docs(src)
    else:
        write_docword(src, sp.csr_matrix(np.eye(4)), ["a", "b", "c", "d"])
    (tmp_path / "y.txt").write_text("1\n2\n3\n")
    ingest = {"npy": ingest_npy, "text": ingest_text, "docword": ingest_docword}[fmt]
    with pytest.raises(DataError, match=r"y\.txt: has 3 labels but .* has 4 ") as err:
        ingest(src, tmp_path / "c", labels=tmp_path / "y.txt")
    assert src.name in str(err.value)
    assert not (tmp_path / "c").exists()
    assert_nothing_left(tmp_path, {src.name, "y.txt", "vocab.toy.txt"})


def test_empty_label_line_is_refused_naming_the_line(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((3, 2)))
    (tmp_path / "y.txt").write_text("1\n\n2\n")
    with pytest.raises(DataError, match=r"y\.txt, line 2: empty label"):
        ingest_npy(tmp_path / "x.npy", tmp_path / "c", labels=tmp_path / "y.txt")
    assert not (tmp_path / "c").exists()


def test_cli_labels_and_wrong_count(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((4, 2)))
    (tmp_path / "y.txt").write_text("a\nb\na\nb\n")
    res = cli("ingest", tmp_path / "x.npy", tmp_path / "c", "--labels", tmp_path / "y.txt")
    assert res.returncode == 0, res.stderr
    assert list(Corpus(tmp_path / "c").read_all().columns["label"]) == ["a", "b", "a", "b"]
    (tmp_path / "short.txt").write_text("a\nb\n")
    res = cli("ingest", tmp_path / "x.npy", tmp_path / "d", "--labels",
              tmp_path / "short.txt")
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert "short.txt" in res.stderr and "has 2 labels" in res.stderr and "4 rows" in res.stderr
    assert not (tmp_path / "d").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    res = cli("ingest", tmp_path / "x.npy", tmp_path / "e", "--format", "csv", "--labels",
              tmp_path / "y.txt")
    assert res.returncode == 2 and "--label-column" in res.stderr


@pytest.mark.parametrize("labels, stored", [
    (np.array([3, 1, 1, 2, 3]), ["3", "1", "1", "2", "3"]),
    (np.array(["b", " a", "b", "c", "a"]), ["b", "a", "b", "c", "a"]),
    (np.array([b"x", b"y", b"x", b"y", b"x"]), ["x", "y", "x", "y", "x"])])
def test_npy_labels_beside_an_npy_corpus_are_stored_like_a_text_file(tmp_path, labels, stored):
    """ingest --labels labels.npy (a 1-D array of integers or strings) as a text file of the same
    labels: the same column and manifest entry, partition by partition."""
    np.save(tmp_path / "x.npy", np.arange(10.0).reshape(5, 2))
    np.save(tmp_path / "y.npy", labels)
    res = cli("ingest", tmp_path / "x.npy", tmp_path / "c", "--labels", tmp_path / "y.npy",
              "--partition-rows", "2")
    assert res.returncode == 0, res.stderr
    corpus = Corpus(tmp_path / "c")
    assert list(corpus.read_all().columns["label"]) == stored
    (tmp_path / "y.txt").write_text("\n".join(stored) + "\n")
    text = ingest_npy(tmp_path / "x.npy", tmp_path / "t", labels=tmp_path / "y.txt")
    meta = {k: v for k, v in corpus.manifest.ingest["labels"].items() if k != "file"}
    assert meta == {k: v for k, v in text.ingest["labels"].items() if k != "file"}


@pytest.mark.parametrize("labels, message", [
    (np.array(["a", 1, 2, 3], dtype=object), r"Python objects .*never unpickles"),
    (np.ones(4), "integers or strings, not dtype float64"),
    (np.ones((4, 1), dtype=int), r"1-D array .*shape \(4, 1\)"),
    (np.array([1, 2, 3]), "has 3 labels but .*x.npy has 4 rows"),
    (np.array(["a", "", "b", "c"]), "y.npy, row 1: empty label")])
def test_npy_labels_refused_naming_the_file(tmp_path, labels, message):
    """An object array (unpickling it could run code), floats, a 2-D array, a wrong count or an
    empty label: one error naming the labels file; nothing written."""
    np.save(tmp_path / "x.npy", np.zeros((4, 2)))
    np.save(tmp_path / "y.npy", labels)
    with pytest.raises(DataError, match=message) as err:
        ingest_npy(tmp_path / "x.npy", tmp_path / "c", labels=tmp_path / "y.npy")
    assert str(tmp_path / "y.npy") in str(err.value)
    assert not (tmp_path / "c").exists()


# --------------------------------------------------------------------------------------------
# CSV: a label left among the features


@pytest.mark.parametrize("name", ["label", "Class", "TARGET", "y", "category", "labels"])
def test_csv_integer_label_kept_as_feature_warns(tmp_path, name):
    (tmp_path / "d.csv").write_text(f"a,b,{name}\n0.5,1,1\n2,3.5,0\n")
    with pytest.warns(DataWarning, match=rf"column '{name}'.*kept as a feature.*--label-column"):
        manifest = ingest_csv(tmp_path / "d.csv", tmp_path / "c")
    assert manifest.dim == 3  # still a feature: the data are as before


@pytest.mark.parametrize("header,rows,kwargs", [
    ("a,b,label", "0.5,1,1\n2,3.5,0\n", {"label_column": "label"}),  # given
    ("a,b,y", "0.5,1,1.5\n2,3.5,0\n", {}),  # not integers
    ("a,b,labelled", "0.5,1,1\n2,3.5,0\n", {}),  # another name
])
def test_csv_without_a_label_like_integer_column_does_not_warn(tmp_path, header, rows, kwargs):
    (tmp_path / "d.csv").write_text(f"{header}\n{rows}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        ingest_csv(tmp_path / "d.csv", tmp_path / "c", **kwargs)


def test_cli_csv_warning_on_stderr(tmp_path):
    (tmp_path / "d.csv").write_text("a,b,label\n0.5,1,1\n2,3.5,0\n")
    res = cli("ingest", tmp_path / "d.csv", tmp_path / "c")
    assert res.returncode == 0, res.stderr
    assert res.stderr.startswith("bnpmix: warning: ") and "'label'" in res.stderr
    assert "--label-column label" in res.stderr
    res = cli("ingest", tmp_path / "d.csv", tmp_path / "c2", "--label-column", "label")
    assert res.returncode == 0 and res.stderr == ""
