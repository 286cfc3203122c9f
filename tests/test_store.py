"""The driver's per-batch summary store: replayed moves, spilling to disk, pickling."""

from __future__ import annotations

import pickle

import numpy as np

from bnpmix.algorithms.summary import Insert, Merge, Reorder, Summary
from bnpmix.pipeline.memo import SummaryStore


def summary(seed: int) -> Summary:
    rng = np.random.default_rng(seed)
    uids = np.array([4, 7, 9])
    return Summary(uids, rng.random(3), {"x": rng.random((3, 2))}, rng.random(3),
                   n_items=5, pairs=np.array([[4, 7], [4, 9], [7, 9]]), Hpair=rng.random(3))


def assert_same(a: Summary, b: Summary) -> None:
    np.testing.assert_array_equal(a.uids, b.uids)
    np.testing.assert_array_equal(a.N, b.N)
    np.testing.assert_array_equal(a.H, b.H)
    np.testing.assert_array_equal(a.stats["x"], b.stats["x"])


def test_spilled_summaries_come_back_with_moves_replayed(tmp_path):
    in_memory, spilling = SummaryStore(max_bytes=1 << 30), SummaryStore(max_bytes=0)
    for store in (in_memory, spilling):
        for b in range(4):
            store.put(b, summary(b))
        for move in (Merge(4, 7), Insert((11,)), Reorder((11, 9, 4))):
            store.log(move)
    assert spilling._held == 0 and all(s is None for s, _ in spilling._items.values())
    for b in range(4):
        expected = Reorder((11, 9, 4)).apply(Insert((11,)).apply(Merge(4, 7).apply(summary(b))))
        assert_same(in_memory.get(b), expected)
        assert_same(spilling.get(b), expected)
    assert_same(spilling.total(), in_memory.total())
    spilling.close()


def test_a_pickled_store_holds_every_summary_up_to_date():
    store = SummaryStore(max_bytes=0)
    store.put(0, summary(0))
    store.log(Merge(4, 9))
    copy = pickle.loads(pickle.dumps(store))
    store.close()  # the spill files are gone; the copy does not need them
    assert_same(copy.get(0), Merge(4, 9).apply(summary(0)))
