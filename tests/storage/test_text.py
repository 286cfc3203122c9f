"""Plain-text ingestion: tokeniser, stop words, document-frequency pruning, min length."""

from __future__ import annotations

import numpy as np

from bnpmix.storage import Corpus, ingest_text, tokenize


def test_tokenizer_lowercases_and_keeps_letter_runs():
    assert tokenize("Hello, World! x2 don't café_bar 3.14") == [
        "hello", "world", "x", "don", "t", "café", "bar"]


def test_folder_of_files_with_pruning(tmp_path):
    src = tmp_path / "docs"
    src.mkdir()
    texts = {
        "a.txt": "apple banana apple the cherry",
        "b.txt": "banana the cherry cherry",
        "c.txt": "the banana durian",
        "d.txt": "the the the",  # only stop words: dropped by min length
    }
    for name, text in texts.items():
        (src / name).write_text(text)
    (tmp_path / "stop.txt").write_text("THE\n\n")
    # banana in 3/4 docs (0.75 > 0.7: dropped); apple, durian in 1 doc (< min_df 2: dropped)
    ingest_text(src, tmp_path / "c", stopwords=tmp_path / "stop.txt", min_df=2,
                max_df_fraction=0.7, min_doc_length=1)
    corpus = Corpus(tmp_path / "c")
    assert corpus.manifest.vocab == ["cherry"]
    batch = corpus.read_all()
    assert list(batch.columns["item"]) == ["a.txt", "b.txt"]
    np.testing.assert_array_equal(batch.X.toarray(), [[1], [2]])


def test_one_document_per_line_keeps_line_numbers(tmp_path):
    src = tmp_path / "lines.txt"
    src.write_text("red blue\n\nblue blue green\nred\n")
    ingest_text(src, tmp_path / "c", partition_rows=2, min_df=1)
    corpus = Corpus(tmp_path / "c")
    assert corpus.manifest.vocab == ["blue", "green", "red"]
    assert corpus.n_partitions == 2
    batch = corpus.read_all()
    assert list(batch.columns["item"]) == ["1", "3", "4"]
    np.testing.assert_array_equal(batch.X.toarray(), [[1, 0, 1], [2, 1, 0], [0, 0, 1]])
