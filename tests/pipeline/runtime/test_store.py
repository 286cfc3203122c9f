"""The driver's per-partition state store: replayed moves, spilling to .npz (never pickle),
streaming every value for checkpoints."""

from __future__ import annotations

import numpy as np

from bnpmix.algorithms.summary import Insert, Merge, Reorder, Summary
from bnpmix.pipeline.engines.memo import SUMMARIES
from bnpmix.pipeline.runtime.store import ARRAYS, Budget, StateStore


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
    np.testing.assert_array_equal(a.pairs, b.pairs)
    np.testing.assert_array_equal(a.Hpair, b.Hpair)
    assert a.n_items == b.n_items


def test_spilled_summaries_come_back_with_moves_replayed():
    in_memory, spilling = StateStore(SUMMARIES, 1 << 30), StateStore(SUMMARIES, 0)
    for store in (in_memory, spilling):
        for b in range(4):
            store.put(b, summary(b))
        for move in (Merge(4, 7), Insert((11,)), Reorder((11, 9, 4))):
            store.log(move)
    assert spilling._held == 0 and all(s is None for s, _ in spilling._items.values())
    spill_files = sorted(p.name for p in __import__("pathlib").Path(spilling._spill).iterdir())
    assert spill_files == [f"{b}.npz" for b in range(4)]
    for b in range(4):
        expected = Reorder((11, 9, 4)).apply(Insert((11,)).apply(Merge(4, 7).apply(summary(b))))
        assert_same(in_memory.get(b), expected)
        assert_same(spilling.get(b), expected)
    for (ka, a), (kb, b) in zip(in_memory.items(), spilling.items(), strict=True):
        assert ka == kb
        assert_same(a, b)
    spilling.close()
    assert spilling._spill is None


def test_a_store_nobody_closes_removes_its_spill_files_when_dropped():
    """A store dropped without close (a program's, a test's) leaves nothing in the temporary
    directory: its spill directory goes with it."""
    import gc
    from pathlib import Path

    store = StateStore(SUMMARIES, 0)
    store.put(0, summary(0))
    spill = Path(store._spill)
    assert (spill / "0.npz").exists()
    del store
    gc.collect()
    assert not spill.exists()
    closed = StateStore(SUMMARIES, 0)
    closed.put(0, summary(0))
    spill = Path(closed._spill)
    closed.close()
    closed.close()  # a second close is harmless
    assert not spill.exists() and closed._spill is None


def test_a_value_stored_after_a_move_is_not_replayed_again():
    store = StateStore(SUMMARIES, 1 << 30)
    store.put(0, summary(0))
    store.log(Merge(4, 7))
    fresh = Merge(4, 7).apply(summary(1))
    store.put(1, fresh)  # stored in the new layout: the logged merge must not apply to it
    assert_same(store.get(1), fresh)
    assert_same(store.get(0), Merge(4, 7).apply(summary(0)))
    assert store.version(0) == 1 and store.version(1) == 1 and store.version(2) == 0


def test_held_bytes_follow_replacements_and_stay_within_budget():
    one = SUMMARIES.nbytes(summary(0))
    store = StateStore(SUMMARIES, max_bytes=2 * one)
    for b in range(5):
        store.put(b, summary(b))
    assert store._held == 2 * one
    store.put(0, summary(9))  # replaces a held value: the budget is not counted twice
    assert store._held == 2 * one
    assert store.version(0) == 2
    assert_same(store.get(0), summary(9))
    store.close()


def test_stores_sharing_a_budget_hold_at_most_it_between_them():
    """Memo's deletions' changes share the batch summaries' budget: together they hold at most
    its bytes, the rest spilled; a closed store's bytes return to the budget."""
    one = SUMMARIES.nbytes(summary(0))
    budget = Budget(3 * one)
    first = StateStore(SUMMARIES, budget=budget)
    second = StateStore(SUMMARIES, budget=budget)
    for b in range(4):
        first.put(b, summary(b))
    for b in range(4):
        second.put(b, summary(10 + b))
    assert first._held == 3 * one and second._held == 0 and budget.held == 3 * one
    assert first.max_bytes == second.max_bytes == 3 * one
    for b in range(4):
        assert_same(first.get(b), summary(b))
        assert_same(second.get(b), summary(10 + b))
    first.close()
    assert budget.held == 0 and len(first) == 0
    second.put(0, summary(20))
    assert second._held == one == budget.held
    second.close()


def test_values_grown_by_replayed_moves_stay_within_budget():
    """A held value read after an Insert (a birth's components) is bigger than when it was
    stored: kept in memory only while the budget holds it, else spilled in its replayed form,
    and read back the same either way (before, the held bytes grew past the budget)."""
    one = SUMMARIES.nbytes(summary(0))
    store = StateStore(SUMMARIES, max_bytes=2 * one)
    reference = StateStore(SUMMARIES, 1 << 30)
    for target in (store, reference):
        for b in range(2):
            target.put(b, summary(b))
        target.log(Insert((11, 12)))
    assert store._held == 2 * one
    for b in range(2):
        assert_same(store.get(b), reference.get(b))
        assert store.budget.held <= store.max_bytes
    # the first, grown, had no room beside the second and was spilled; then the second fitted
    assert [held is None for held, _ in store._items.values()] == [True, False]
    for b in range(2):  # and both read back as the moves left them, with no move replayed twice
        assert_same(store.get(b), reference.get(b))
    store.close()


def test_plain_array_values():
    store = StateStore(ARRAYS, max_bytes=0)
    store.put(3, {"sites": np.arange(6.0).reshape(2, 3)})
    np.testing.assert_array_equal(store.get(3)["sites"], np.arange(6.0).reshape(2, 3))
    assert store.get(4) is None and 3 in store and 4 not in store
    store.close()


def test_items_are_read_back_one_at_a_time(monkeypatch):
    """A checkpoint streams the store: reading the first value must not load the others."""
    store = StateStore(SUMMARIES, max_bytes=0)  # everything spilled
    for b in range(50):
        store.put(b, summary(b))
    loads = []
    real = SUMMARIES.from_arrays
    monkeypatch.setattr(store, "codec", type(SUMMARIES)(SUMMARIES.to_arrays,
                                                        lambda a: loads.append(1) or real(a)))
    items = store.items()
    key, first = next(items)
    assert key == 0 and len(loads) == 1
    assert_same(first, summary(0))
    assert sum(1 for _ in items) == 49 and len(loads) == 50
    store.close()
