"""No silently wrong answers from what is read back: partitions whose values or row counts do
not hold, manifests that are malformed, held-out corpora that do not match the model. Real
Parquet files rewritten with pyarrow, the CLI in subprocesses."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bnpmix.storage import Corpus, ingest_array
from helpers import cli


def replace_partition(corpus: Path, index: int, table: pa.Table, rows: int | None = None) -> Path:
    """Write ``table`` as partition ``index`` and make the manifest's checksum (and, unless
    ``rows`` is given, its row count) match: only the content is wrong."""
    path = corpus / f"part-{index:05d}.parquet"
    pq.write_table(table, path)
    data = path.read_bytes()
    manifest = json.loads((corpus / "manifest.json").read_text())
    entry = manifest["partitions"][index]
    entry.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(),
                 rows=table.num_rows if rows is None else rows)
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    return path


def dense_corpus(tmp_path: Path) -> Path:
    X = np.random.default_rng(0).normal(size=(60, 3))
    ingest_array(X, tmp_path / "c", partition_rows=20)
    return tmp_path / "c"


def dense_table(X: np.ndarray) -> pa.Table:
    return pa.table({"x": pa.array(list(X), type=pa.list_(pa.float64(), X.shape[1]))})


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_partition_with_non_finite_values_stops_the_fit_naming_file_and_row(tmp_path, bad):
    corpus = dense_corpus(tmp_path)
    X = Corpus(corpus).read(1).X.copy()
    X[7, 2] = bad
    path = replace_partition(corpus, 1, dense_table(X))
    res = cli("fit", str(corpus), "--out", str(tmp_path / "run"), "--laps", "2")
    assert res.returncode == 1
    assert f"{path}, row 7: non-finite value {bad} in column 2" in res.stderr, res.stderr
    assert not (tmp_path / "run" / "summary.json").exists()


def test_negative_or_non_finite_word_counts_are_named(tmp_path):
    from helpers import write_docword

    src = tmp_path / "docword.t.txt"
    write_docword(src, np.array([[1, 2, 0], [0, 1, 3], [2, 0, 1]]))
    assert cli("ingest", str(src), str(tmp_path / "c")).returncode == 0
    table = pa.table({"word_ids": pa.array([[0, 1], [1, 2], [0, 2]], pa.list_(pa.int32())),
                      "counts": pa.array([[1, 2], [1, -3], [2, 1]], pa.list_(pa.int32()))})
    path = replace_partition(tmp_path / "c", 0, table)
    res = cli("fit", str(tmp_path / "c"), "--out", str(tmp_path / "run"), "--laps", "1")
    assert res.returncode == 1
    assert f"{path}, row 1: word 2 has count -3.0" in res.stderr, res.stderr


def test_a_row_count_that_disagrees_with_the_manifest_is_named(tmp_path):
    corpus = dense_corpus(tmp_path)
    X = Corpus(corpus).read(2).X
    path = replace_partition(corpus, 2, dense_table(X), rows=25)  # the file holds 20
    res = cli("fit", str(corpus), "--out", str(tmp_path / "run"), "--laps", "1")
    assert res.returncode == 1
    assert f"{path}: 20 rows, the manifest says 25" in res.stderr, res.stderr


@pytest.mark.parametrize("change, message", [
    (lambda m: [m], "a manifest is a JSON object, not a list"),
    (lambda m: {**m, "dim": 0}, "field 'dim' must be a positive integer, not 0"),
    (lambda m: {**m, "dim": "3"}, "field 'dim' has the wrong type (str)"),
    (lambda m: {**m, "dim": True}, "field 'dim' has the wrong type (bool)"),
    (lambda m: {**m, "kind": "image"}, "field 'kind' must be one of"),
    (lambda m: {**m, "dtype": "int8"}, "field 'dtype' must be one of"),
    (lambda m: {**m, "partitions": []}, "field 'partitions' is empty"),
    (lambda m: {**m, "partitions": [{**m["partitions"][0], "file": "../../etc/passwd"}]},
     "partitions[0].file must be 'part-00000.parquet'"),
    (lambda m: {**m, "partitions": [{**m["partitions"][0], "rows": -1}]},
     "partitions[0].rows must be a non-negative integer"),
    (lambda m: {**m, "partitions": [7]}, "partitions[0] must be an object"),
])
def test_manifest_errors_name_the_file_and_the_field(tmp_path, change, message):
    corpus = dense_corpus(tmp_path)
    manifest = corpus / "manifest.json"
    manifest.write_text(json.dumps(change(json.loads(manifest.read_text()))))
    res = cli("info", str(corpus))
    assert res.returncode == 1
    assert f"{manifest}: {message}" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def bow(tmp_path: Path, name: str, vocab: list[str]) -> Path:
    from helpers import write_docword

    rng = np.random.default_rng(len(name))
    (tmp_path / name).mkdir()
    src = tmp_path / name / "docword.t.txt"
    write_docword(src, rng.integers(1, 4, (40, len(vocab))), vocab)
    out = tmp_path / f"{name}-corpus"
    res = cli("ingest", str(src), str(out), "--partition-rows", "20")
    assert res.returncode == 0, res.stderr
    return out


def test_evaluate_refuses_a_heldout_corpus_the_model_was_not_fitted_to(tmp_path):
    words = ["apple", "bread", "cheese", "dates"]
    train = bow(tmp_path, "train", words)
    assert cli("fit", str(train), "--out", str(tmp_path / "run"), "--laps", "2").returncode == 0
    same = bow(tmp_path, "same", words)
    ok = cli("evaluate", str(tmp_path / "run"), "--heldout", str(same))
    assert ok.returncode == 0 and "heldout_loglik_per_item" in json.loads(ok.stdout)
    other = bow(tmp_path, "other", ["apple", "bread", "cheese", "eggs"])  # same size
    res = cli("evaluate", str(tmp_path / "run"), "--heldout", str(other))
    assert res.returncode == 1
    assert f"{other}: field 'vocab' differs from the vocabulary" in res.stderr, res.stderr
    dense = tmp_path / "dense"
    ingest_array(np.ones((10, 4)), dense, partition_rows=5)
    res = cli("evaluate", str(tmp_path / "run"), "--heldout", str(dense))
    assert res.returncode == 1
    assert f"{dense}: field 'kind' is 'dense', the model was fitted to kind 'bow'" in res.stderr
    wider = bow(tmp_path, "wider", [*words, "eggs"])
    res = cli("evaluate", str(tmp_path / "run"), "--heldout", str(wider))
    assert res.returncode == 1
    assert f"{wider}: field 'dim' is 5, the model was fitted to dim 4" in res.stderr


def test_heldout_text_of_another_vocabulary_is_told_how_to_ingest_it(tmp_path):
    """The refusal gives the ingest command with the run's vocabulary; running it makes a corpus
    the run scores (the words the run never saw dropped)."""
    (tmp_path / "train.txt").write_text("apple bread cheese\nbread dates apple\n" * 20)
    (tmp_path / "held.txt").write_text("apple eggs figs\ncheese bread grapes\n" * 5)
    run_dir, held = tmp_path / "run", tmp_path / "held"
    for src, out in (("train.txt", "train"), ("held.txt", "held")):
        assert cli("ingest", str(tmp_path / src), str(tmp_path / out)).returncode == 0
    assert cli("fit", str(tmp_path / "train"), "--out", str(run_dir), "--laps", "2",
               "--obs", "mult").returncode == 0
    res = cli("evaluate", str(run_dir), "--heldout", str(held))
    hint = (f"bnpmix ingest {(tmp_path / 'held.txt').resolve()} {held} --vocab "
            f"{run_dir / 'vocab.txt'} --overwrite")
    assert res.returncode == 1 and hint in res.stderr, res.stderr
    assert cli(*hint.split()[1:]).returncode == 0
    ok = cli("evaluate", str(run_dir), "--heldout", str(held))
    assert ok.returncode == 0, ok.stderr
    assert np.isfinite(json.loads(ok.stdout)["heldout_loglik_per_item"])


def bow_corpus(tmp_path: Path) -> Path:
    from helpers import write_docword

    src = tmp_path / "docword.t.txt"
    write_docword(src, np.array([[1, 2, 0], [0, 1, 3], [2, 0, 1]]))
    assert cli("ingest", str(src), str(tmp_path / "c")).returncode == 0
    return tmp_path / "c"


@pytest.mark.parametrize("words, counts, message", [
    ([[0, None], [1, 2], [0, 2]], [[1, 2], [1, 3], [2, 1]], "column 'word_ids' has missing"),
    ([[0, 1], None, [0, 2]], [[1, 2], [1, 3], [2, 1]], "column 'word_ids' has missing"),
    ([[0, 1], [1, 2], [0, 2]], [[1, 2], [1, None], [2, 1]], "column 'counts' has missing"),
    ([[0, 1], [1, 2], [0]], [[1, 2], [1], [2, 1, 3]],
     "a document's word_ids and counts have different lengths"),
])
def test_a_bag_of_words_partition_with_missing_or_misaligned_entries_is_refused(
        tmp_path, words, counts, message):
    """A partition whose checksum matches (written by another tool) but whose lists are not
    a document each: refused naming the file, not fitted."""
    corpus = bow_corpus(tmp_path)
    table = pa.table({"word_ids": pa.array(words, pa.list_(pa.int32())),
                      "counts": pa.array(counts, pa.list_(pa.int32()))})
    path = replace_partition(corpus, 0, table)
    res = cli("fit", str(corpus), "--out", str(tmp_path / "run"), "--laps", "1")
    assert res.returncode == 1 and str(path) in res.stderr and message in res.stderr, res.stderr
    assert not (tmp_path / "run" / "summary.json").exists()


@pytest.mark.parametrize("rows, message", [
    ([[0.0, 1.0], [2.0, 3.0, 4.0, 5.0]] + [[0.0, 1.0, 2.0]] * 18,
     "column 'x' has a row that is not 3 values long"),
    ([[0.0, 1.0, None]] + [[0.0, 1.0, 2.0]] * 19, "column 'x' has missing values"),
    ([None] + [[0.0, 1.0, 2.0]] * 19, "column 'x' has missing values"),
])
def test_a_dense_partition_whose_rows_are_not_d_values_is_refused(tmp_path, rows, message):
    corpus = dense_corpus(tmp_path)
    path = replace_partition(corpus, 1, pa.table({"x": pa.array(rows, pa.list_(pa.float64()))}))
    res = cli("fit", str(corpus), "--out", str(tmp_path / "run"), "--laps", "1")
    assert res.returncode == 1 and str(path) in res.stderr and message in res.stderr, res.stderr
    assert not (tmp_path / "run" / "summary.json").exists()


def test_a_dense_partition_is_decoded_a_slice_at_a_time(tmp_path):
    """Corpus.read decodes column x READ_VALUES values at a time straight into the array it
    returns, so Arrow's memory peaks at a few slices' worth whatever the partition's size, not
    at the whole decoded table beside its combined chunks (a fit's read of a 250,000 x 32
    float64 partition, 61 MiB, held 3.4 times that at once). Each read in a fresh process, so
    that the pool's peak is its own. Values and stored type come back as written."""
    import sys

    X = np.random.default_rng(1).normal(size=(100_000, 16))  # 12.8 MB in one partition
    ingest_array(X, tmp_path / "big", partition_rows=100_000)
    ingest_array(X[:25_000], tmp_path / "small", partition_rows=25_000)
    ingest_array(X[:1000].astype(np.float32), tmp_path / "c32", partition_rows=400)
    script = ("import sys, pyarrow as pa\n"
              "from bnpmix.storage import corpus\n"
              "corpus.READ_VALUES = 1 << 14\n"
              "X = corpus.Corpus(sys.argv[1]).read(0).X\n"
              "print(pa.default_memory_pool().max_memory())\n")
    peak = {name: int(subprocess.run([sys.executable, "-c", script, str(tmp_path / name)],
                                     capture_output=True, text=True, check=True).stdout)
            for name in ("small", "big")}
    assert peak["big"] < 1.5 * peak["small"] and peak["big"] < X.nbytes / 4, peak
    np.testing.assert_array_equal(Corpus(tmp_path / "big").read(0).X, X)
    small = Corpus(tmp_path / "c32")
    got = np.concatenate([small.read(i).X for i in range(small.n_partitions)])
    assert got.dtype == np.float32 and got.shape == (1000, 16)
    np.testing.assert_array_equal(got, X[:1000].astype(np.float32))
