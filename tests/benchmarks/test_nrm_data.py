"""The synthetic corpora of benchmarks/nrm_data.py (Tank, Foti & Fox 2015, Sec. 4)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from bnpmix.storage import Corpus

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "nrm_data.py"
_spec = importlib.util.spec_from_file_location("nrm_data", _PATH)
nrm = importlib.util.module_from_spec(_spec)
sys.modules["nrm_data"] = nrm  # dataclasses look the module up by name
_spec.loader.exec_module(nrm)

SMALL = {
    "bars": lambda seed: nrm.bars(seed),
    "power_law": lambda seed: nrm.power_law(seed, n=500, V=200, length=30),
    "kos_like": lambda seed: nrm.kos_like(seed, n=400, V=1000, K=12, mean_length=50),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_shapes_counts_topics(name):
    d = SMALL[name](3)
    n, V = d.X.shape
    assert d.X.dtype == np.float64 and d.X.format == "csr"
    assert d.labels.dtype == np.int64 and d.labels.shape == (n,)
    assert d.topics.dtype == np.float64 and d.topics.shape[1] == V
    assert d.labels.min() >= 0 and d.labels.max() < d.topics.shape[0]
    np.testing.assert_allclose(d.topics.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert (d.topics >= 0).all()
    assert (d.X.data > 0).all() and (d.X.data == np.round(d.X.data)).all()
    assert (np.asarray(d.X.sum(axis=1)).ravel() >= 1).all()
    # no word of zero probability is ever drawn
    rows = np.repeat(d.labels, np.diff(d.X.indptr))
    assert (d.topics[rows, d.X.indices] > 0).all()


@pytest.mark.parametrize("name", sorted(SMALL))
def test_deterministic_given_seed(name):
    a, b, c = SMALL[name](7), SMALL[name](7), SMALL[name](8)
    assert (a.X != b.X).nnz == 0
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.topics, b.topics)
    assert (a.X != c.X).nnz > 0


def test_bars_are_16_distinct_bars_and_lengths_fixed():
    d = nrm.bars(0, n=300, length=50, baseline=0.05)
    assert d.X.shape == (300, 64) and d.topics.shape == (16, 64)
    np.testing.assert_array_equal(np.asarray(d.X.sum(axis=1)).ravel(), 50)
    high = d.topics > d.topics.min(axis=1, keepdims=True)
    masks = high.reshape(16, 8, 8)
    for r in range(8):
        assert masks[r, r, :].all() and masks[r].sum() == 8  # horizontal bar: row r
        assert masks[8 + r, :, r].all() and masks[8 + r].sum() == 8  # vertical bar: column r
    assert len({m.tobytes() for m in high}) == 16
    # the bar pixels hold (1 + b) / (8 + 64 b) of the mass each
    np.testing.assert_allclose(d.topics[high], 1.05 / (8 + 64 * 0.05))
    assert len(np.unique(d.labels)) == 16  # uniform over 16 clusters: all seen in 300 draws
    # each document's mass sits mostly on its own bar (8/64 pixels carry 1.05*8/11.2 = 75%)
    on_bar = np.asarray(d.X.multiply(high[d.labels]).sum(axis=1)).ravel() / 50
    assert on_bar.mean() > 0.65


def test_power_law_cluster_count_grows_like_n_to_the_discount():
    ratios, singletons = [], []
    for seed in range(4):
        labels = nrm.pitman_yor_labels(np.random.default_rng(seed), 10_000, 0.75, 1.0)
        # tables open in order, so the first 1,000 customers are the n = 1,000 process
        ratios.append((labels.max() + 1) / (labels[:1000].max() + 1))
        singletons.append((np.bincount(labels) == 1).mean())
    assert np.mean(ratios) > 3  # 10^0.75 = 5.6
    assert np.mean(singletons) > 0.5
    d = nrm.power_law(0, n=2000, V=300, length=40)
    K = d.topics.shape[0]
    np.testing.assert_array_equal(np.unique(d.labels), np.arange(K))  # every topic is used
    assert K > 2000 ** 0.75 / 10
    lengths = np.asarray(d.X.sum(axis=1)).ravel()
    assert lengths.min() >= 1 and abs(lengths.mean() - 40) < 1.5
    assert not (np.diff(d.labels) >= 0).all()  # shuffled, not in order of opening


def test_kos_like_shape():
    d = nrm.kos_like(1)
    assert d.X.shape == (3430, 6906) and d.topics.shape == (60, 6906)
    tokens = d.X.sum()
    assert abs(tokens / 3430 - 136) < 10  # KOS: 467,714 tokens
    assert 20 <= len(np.unique(d.labels)) <= 60
    freq = np.asarray(d.X.sum(axis=0)).ravel()
    assert freq[:10].sum() > freq[-1000:].sum()  # Zipf background: low ids are popular


@pytest.mark.parametrize("name", sorted(SMALL))
def test_write_corpus_round_trip(tmp_path, name):
    d = SMALL[name](2)
    nrm.write_corpus(d, tmp_path / "c", partition_size=64)
    corpus = Corpus(tmp_path / "c")
    assert corpus.kind == "bow" and corpus.dim == d.X.shape[1]
    assert corpus.n_items == d.X.shape[0] and corpus.n_partitions == -(-d.X.shape[0] // 64)
    batch = corpus.read_all()
    assert (batch.X != d.X).nnz == 0 and batch.X.shape == d.X.shape
    np.testing.assert_array_equal(batch.columns["label"], d.labels)
