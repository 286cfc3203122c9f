"""Executors and the partition cache: order of results, per-partition payloads, the LRU budget,
checksum keys, and per-partition random streams."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from bnpmix.pipeline.runtime.context import partition_seed
from bnpmix.pipeline.runtime.data import PartitionCache, nbytes, partition_refs
from bnpmix.pipeline.runtime.executors import LocalExecutor
from bnpmix.storage import BnpmixError, Corpus, ingest_array


@pytest.fixture
def corpus(tmp_path):
    X = np.arange(60.0).reshape(30, 2)
    ingest_array(X, tmp_path / "c", partition_rows=5)  # six partitions of five rows
    return Corpus(tmp_path / "c")


def first_value(batch, *shared):
    return float(batch.X[0, 0]), shared


def slow_first(batch):
    time.sleep(0.05 * (6 - batch.index))  # later partitions finish first
    return batch.index, threading.get_ident()


@pytest.mark.parametrize("mode", ["threads", "synchronous"])
def test_results_come_in_the_order_asked_whatever_finishes_first(corpus, mode):
    ex = LocalExecutor(corpus, mode, workers=3)
    try:
        out = ex.map(slow_first, [5, 0, 3, 1])
        assert [i for i, _ in out] == [5, 0, 3, 1]
        if mode == "threads":
            assert len({t for _, t in out}) > 1  # really in parallel
        assert ex.map(first_value, [2], "a", 7) == [(20.0, ("a", 7))]
    finally:
        ex.close()


def test_payloads_travel_with_their_own_partition(corpus):
    ex = LocalExecutor(corpus, "threads", workers=2)
    try:
        out = ex.map(lambda batch, own, shared: (batch.index, own, shared), [4, 1, 2],
                     "everyone", payloads=["four", "one", "two"])
        assert out == [(4, "four", "everyone"), (1, "one", "everyone"), (2, "two", "everyone")]
        with pytest.raises(ValueError, match="2 payloads for 3 partitions"):
            ex.map(first_value, [0, 1, 2], payloads=[1, 2])
    finally:
        ex.close()


def test_the_cache_evicts_least_recently_used_within_its_budget(corpus):
    one = 5 * 2 * 8  # five float64 rows of two columns
    cache = PartitionCache(max_bytes=2 * one)
    refs = partition_refs(corpus)
    a = cache.get(refs[0])
    cache.get(refs[1])
    assert cache.get(refs[0]) is a  # a hit returns the cached batch
    cache.get(refs[2])  # evicts partition 1, the least recently used
    assert len(cache) == 2 and cache.held_bytes == 2 * one == nbytes(a.X) * 2
    assert cache.get(refs[0]) is a
    assert cache.get(refs[1]) is not None and len(cache) == 2
    cache.resize(one)
    assert len(cache) == 1 and cache.held_bytes == one
    big = PartitionCache(max_bytes=one - 1)  # a partition larger than the budget is not kept
    big.get(refs[0])
    assert len(big) == 0


def test_a_reingested_corpus_is_served_by_the_checksum_the_task_carries(tmp_path):
    """A long-lived cache (a Dask worker's) that read the old manifest and data serves the new
    data once tasks name the new checksums, without being told; a task naming checksums the
    corpus no longer has fails naming the partition instead of serving other data."""
    ingest_array(np.zeros((10, 2)), tmp_path / "c", partition_rows=5)
    cache = PartitionCache(1 << 20)
    old = partition_refs(Corpus(tmp_path / "c"))
    assert cache.get(old[0]).X.sum() == 0 and cache.get(old[1]).X.sum() == 0
    ingest_array(np.ones((10, 2)), tmp_path / "c", partition_rows=5, overwrite=True)
    new = partition_refs(Corpus(tmp_path / "c"))
    assert cache.get(new[1]).X.sum() == 10 and cache.get(new[0]).X.sum() == 10
    fresh = PartitionCache(1 << 20)  # nothing cached: the old checksum cannot be served
    with pytest.raises(BnpmixError, match=r"part-00000\.parquet: the corpus changed while"):
        fresh.get(old[0])


def test_partition_streams_depend_only_on_seed_partition_and_pass():
    def draw(seed, part, pass_):
        return np.random.default_rng(partition_seed(seed, part, pass_)).random(4)

    np.testing.assert_array_equal(draw(3, 5, 2), draw(3, 5, 2))
    others = [draw(4, 5, 2), draw(3, 6, 2), draw(3, 5, 3)]
    assert all(not np.array_equal(draw(3, 5, 2), o) for o in others)
    # and none coincides with the run's own streams (init, order, birth, merge)
    run = [np.random.default_rng(s).random(4) for s in np.random.SeedSequence(3).spawn(4)]
    assert all(not np.array_equal(draw(3, p, q), r) for r in run for p in range(4)
               for q in range(4))
