"""Ingested corpora read back exactly equal to their sources (property tests)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bnpmix.storage import Corpus, ingest_array, ingest_docword, ingest_npy
from helpers import random_counts, write_docword

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def dense_arrays(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    n = draw(st.integers(1, 60))
    d = draw(st.integers(1, 7))
    elements = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False,
                         width=32 if dtype == np.float32 else 64)
    return draw(hnp.arrays(dtype, (n, d), elements=elements))


@SETTINGS
@given(X=dense_arrays(), rows=st.integers(1, 25))
def test_dense_npy_roundtrip(tmp_path_factory, X, rows):
    tmp = tmp_path_factory.mktemp("npy")
    np.save(tmp / "x.npy", X)
    manifest = ingest_npy(tmp / "x.npy", tmp / "corpus", partition_rows=rows)
    corpus = Corpus(tmp / "corpus")
    assert manifest.n_items == corpus.n_items == X.shape[0]
    assert corpus.n_partitions == -(-X.shape[0] // rows)
    assert corpus.manifest.dtype == np.dtype(X.dtype).name
    back = corpus.read_all().X
    assert back.dtype == X.dtype
    np.testing.assert_array_equal(back, X)
    starts = [b.start for b in corpus]
    assert starts == list(range(0, X.shape[0], rows))


@SETTINGS
@given(X=dense_arrays(), rows=st.integers(1, 25))
def test_dense_array_roundtrip_with_columns(tmp_path_factory, X, rows):
    tmp = tmp_path_factory.mktemp("arr")
    n = X.shape[0]
    cols = {"label": np.arange(n) % 3, "time": np.arange(n) // 7, "item": np.array(
        [f"id{i}" for i in range(n)])}
    ingest_array(X, tmp / "c", partition_rows=rows, columns=cols)
    back = Corpus(tmp / "c").read_all()
    np.testing.assert_array_equal(back.X, X)
    for name, values in cols.items():
        np.testing.assert_array_equal(back.columns[name], values)


@st.composite
def count_matrices(draw):
    D = draw(st.integers(1, 40))
    V = draw(st.integers(1, 30))
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    seed = draw(st.integers(0, 2**31 - 1))
    X = random_counts(np.random.default_rng(seed), D, V, density)
    # empty documents: blank out a random subset of rows
    empty = draw(st.lists(st.integers(0, D - 1), max_size=D))
    X = X.tolil()
    for d in empty:
        X.rows[d] = []
        X.data[d] = []
    return X.tocsr()


@SETTINGS
@given(X=count_matrices(), rows=st.integers(1, 15))
def test_docword_roundtrip(tmp_path_factory, X, rows):
    tmp = tmp_path_factory.mktemp("bow")
    vocab = [f"w{i}" for i in range(X.shape[1])]
    write_docword(tmp / "docword.t.txt", X, vocab)
    manifest = ingest_docword(tmp / "docword.t.txt", tmp / "c", partition_rows=rows)
    corpus = Corpus(tmp / "c")
    assert manifest.vocab == vocab
    assert corpus.manifest.nnz == X.nnz
    back = corpus.read_all().X
    assert sp.isspmatrix_csr(back) and back.shape == X.shape
    assert (back != X).nnz == 0
    for batch in corpus:  # reading one partition gives exactly its rows
        assert (X[batch.start:batch.start + len(batch)] != batch.X).nnz == 0


def test_uci_corpus_3000_docs_7000_words(tmp_path):
    rng = np.random.default_rng(3)
    X = random_counts(rng, 3000, 7000, 0.01)
    keep = np.ones(3000)
    keep[17] = 0  # an empty document in the middle
    X = sp.csr_matrix(sp.diags(keep) @ X)
    X.eliminate_zeros()
    write_docword(tmp_path / "docword.gen.txt", X, [f"word{i}" for i in range(7000)])
    ingest_docword(tmp_path / "docword.gen.txt", tmp_path / "c", partition_rows=256)
    corpus = Corpus(tmp_path / "c")
    info = corpus.info()
    assert (info["n_items"], info["dim"], info["nnz"]) == (3000, 7000, X.nnz)
    assert info["n_partitions"] == 12
    back = corpus.read_all().X
    np.testing.assert_array_equal(np.asarray(back.sum(axis=1)).ravel(),
                                  np.asarray(X.sum(axis=1)).ravel())
    np.testing.assert_array_equal(np.diff(back.indptr), np.diff(X.indptr))
    assert back[17].nnz == 0


def test_reading_one_partition_opens_only_that_file(tmp_path, monkeypatch):
    X = np.arange(40.0).reshape(20, 2)
    ingest_array(X, tmp_path / "c", partition_rows=5)
    corpus = Corpus(tmp_path / "c")
    for i in (0, 1, 2):  # the others become unreadable: reading partition 3 must not touch them
        corpus.partition_file(i).unlink()
    np.testing.assert_array_equal(corpus.read(3).X, X[15:])
