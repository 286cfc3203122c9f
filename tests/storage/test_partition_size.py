"""The default partition size: 10,000 documents, or dense rows holding about 1.25 million
values (a multiple of 1,000), through every ingester and the CLI; a given size wins."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from bnpmix.storage import (
    DOCUMENTS_PER_PARTITION,
    Corpus,
    ingest_array,
    ingest_csv,
    ingest_docword,
    ingest_npy,
    ingest_text,
    partition_rows,
)
from helpers import write_docword


def rows_of(corpus) -> list[int]:
    return [p.rows for p in Corpus(corpus).manifest.partitions]


@pytest.mark.parametrize(("dim", "rows"), [(1, 1_250_000), (2, 625_000), (3, 417_000),
                                           (25, 50_000), (64, 20_000), (128, 10_000),
                                           (784, 2_000), (1250, 1_000), (5000, 1_000)])
def test_dense_rows_fill_about_a_million_and_a_quarter_values(dim, rows):
    assert partition_rows(None, dim) == rows
    assert (rows * dim >= 1_250_000 and (rows - 1000) * dim < 1_250_000) or rows == 1000


def test_documents_and_given_sizes():
    assert partition_rows(None, None) == DOCUMENTS_PER_PARTITION == 10_000
    assert partition_rows(7, 25) == partition_rows(7, None) == 7


def test_dense_ingesters_use_the_width_default(tmp_path):
    X = np.random.default_rng(0).normal(size=(120_001, 25))
    ingest_array(X, tmp_path / "a")
    assert rows_of(tmp_path / "a") == [50_000, 50_000, 20_001]
    np.save(tmp_path / "x.npy", X[:25_000].repeat(2, axis=1)[:, :50])  # D = 50: 25,000 rows
    ingest_npy(tmp_path / "x.npy", tmp_path / "n")
    assert rows_of(tmp_path / "n") == [25_000]
    header = ",".join(f"f{j}" for j in range(125)) + ",label\n"  # D = 125: 10,000 rows
    body = "".join(",".join(["1"] * 125) + f",{i % 3}\n" for i in range(10_500))
    (tmp_path / "x.csv").write_text(header + body)
    ingest_csv(tmp_path / "x.csv", tmp_path / "c", label_column="label")
    assert rows_of(tmp_path / "c") == [10_000, 500]
    ingest_array(X[:300], tmp_path / "given", partition_rows=100)
    assert rows_of(tmp_path / "given") == [100, 100, 100]


def test_documents_keep_ten_thousand_a_partition(tmp_path):
    X = sp.random(25_000, 30, density=0.2, format="csr", random_state=0)
    X.data = np.ceil(X.data * 5)
    X = X[np.asarray(X.sum(axis=1)).ravel() > 0]
    write_docword(tmp_path / "docword.t.txt", X)
    ingest_docword(tmp_path / "docword.t.txt", tmp_path / "d")
    n = X.shape[0]
    assert rows_of(tmp_path / "d") == [10_000, 10_000, n - 20_000]
    (tmp_path / "docs.txt").write_text("apple pear fig\n" * 12_000)
    ingest_text(tmp_path / "docs.txt", tmp_path / "t", stopwords="none")
    assert rows_of(tmp_path / "t") == [10_000, 2_000]


def test_the_cli_default_is_the_library_default(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((60_000, 25)))
    done = subprocess.run([sys.executable, "-m", "bnpmix", "ingest", str(tmp_path / "x.npy"),
                           str(tmp_path / "c")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert rows_of(tmp_path / "c") == [50_000, 10_000]
    info = subprocess.run([sys.executable, "-m", "bnpmix", "ingest", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert "50,000 at D = 25" in " ".join(info.stdout.split())
    assert json.loads(subprocess.run(
        [sys.executable, "-m", "bnpmix", "info", str(tmp_path / "c"), "--json"],
        capture_output=True, text=True, timeout=120).stdout)["n_partitions"] == 2
