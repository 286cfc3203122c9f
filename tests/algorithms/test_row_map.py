"""A log of moves composed into one row map (summary.compose / Replay) gives, bit for bit, what
replaying the moves one by one gives: the same ids, sums (the same floating-point additions in
the same order), entropies, pairs and groups, for dense and sparse statistics."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bnpmix.algorithms.summary import (
    Delete,
    Insert,
    Merge,
    MergeGroup,
    Pool,
    Reorder,
    Replay,
    Summary,
    compose,
)
from bnpmix.pipeline.engines.memo import SUMMARIES
from bnpmix.pipeline.runtime.store import StateStore

UIDS = np.array([3, 5, 8, 13, 21, 34, 55, 89])


def summary(seed: int, sparse: bool, zeros: bool = False) -> Summary:
    """Random sums over UIDS: a sparse (K, 40) word-count-like statistic (with a stored zero
    when ``zeros``) or a dense (K, 3, 3) one, a dense (K, 3), a shared one; every pair planned;
    the groups (8; 13, 21, 34) and (55; 89)."""
    rng = np.random.default_rng(seed)
    K = len(UIDS)
    if sparse:
        big = sp.random(K, 40, density=0.3, random_state=rng, format="csr") * 7.3
        big.sum_duplicates()
        if zeros:
            big.data[::5] = 0.0  # stored zeros: a fold's product drops them
    else:
        big = rng.normal(size=(K, 3, 3))
    iu, ju = np.triu_indices(K, 1)
    pairs = np.stack([UIDS[iu], UIDS[ju]], axis=1)
    groups = np.array([[8, 13, 21, 34], [55, 89, -1, -1]])
    return Summary(UIDS.copy(), rng.random(K) * 50, {"big": big, "x": rng.normal(size=(K, 3))},
                   rng.random(K) * 9, 17, pairs, rng.random(len(pairs)) * 20, groups,
                   rng.random(2) * 30, {"T": rng.normal(size=(3, 3))})


def lap_end(s: Summary) -> list:
    """What one memo lap end logs: verification (a birth undone by a MergeGroup of three
    newborns, a kept one's origin deleted), a merge round, the reorder by mass, the next lap's
    births inserted."""
    moves = [MergeGroup(8, (13, 21, 34)), Delete(55), Merge(5, 3)]
    left = sequential(s, moves)
    order = tuple(int(u) for u in left.uids[np.argsort(-left.N, kind="stable")])
    return [*moves, Reorder(order), Insert((100, 101, 102))]


def sequential(s: Summary, moves: list) -> Summary:
    for m in moves:
        s = m.apply(s)
    return s


def assert_identical(a: Summary, b: Summary) -> None:
    """Equal bit for bit (array_equal on floats: no tolerance), sparse structure included."""
    np.testing.assert_array_equal(a.uids, b.uids)
    for name in ("N", "H", "pairs", "Hpair", "groups", "Hgroup"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.n_items == b.n_items
    assert a.stats.keys() == b.stats.keys() and a.shared.keys() == b.shared.keys()
    for k in a.stats:
        va, vb = a.stats[k], b.stats[k]
        assert sp.issparse(va) == sp.issparse(vb)
        if sp.issparse(va):
            for part in ("data", "indices", "indptr"):
                np.testing.assert_array_equal(getattr(va, part), getattr(vb, part), err_msg=k)
            assert va.shape == vb.shape
        else:
            np.testing.assert_array_equal(va, vb, err_msg=k)
    for k in a.shared:
        np.testing.assert_array_equal(a.shared[k], b.shared[k])


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_composed_lap_end_equals_the_sequential_replay_bit_for_bit(sparse, seed):
    s = summary(seed, sparse)
    moves = lap_end(s)
    rowmap = compose(moves, s)
    assert rowmap is not None and len(rowmap.events) == 2
    assert_identical(rowmap.apply(s), sequential(s, moves))


def test_a_group_of_many_sums_in_the_replays_order():
    """keep + (g1 + g2 + g3) is not (keep + g1 + g2) + g3 in floating point: values chosen so
    the two orders differ; the map must give the replay's."""
    s = summary(0, False)
    s.N[:] = [7.0, 3.0, 1e16, 1.0, 1.0, 1.0, 2.0, 5.0]
    move = MergeGroup(8, (13, 21, 34))
    ordered = 1e16 + (1.0 + 1.0 + 1.0)
    assert ordered != ((1e16 + 1.0) + 1.0) + 1.0  # the orders differ here
    out = compose([move], s).apply(s)
    assert out.N[2] == sequential(s, [move]).N[2] == ordered


@pytest.mark.parametrize("merge", [True, False])
def test_stored_zeros_fare_as_in_the_replay(merge):
    """A fold's sparse product drops stored zeros in every row, a selection keeps them: the map
    does what the replay does, with and without a fold in the log."""
    s = summary(3, True, zeros=True)
    assert (s.stats["big"].data == 0).any()
    moves = [Merge(21, 13), Delete(5)] if merge else [
        Delete(5), Insert((100, 101)), Reorder((89, 100, 55, 34, 21, 13, 101, 8, 3))]
    assert_identical(compose(moves, s).apply(s), sequential(s, moves))


@pytest.mark.parametrize("moves", [
    [Reorder(tuple(int(u) for u in UIDS[::-1])), Merge(3, 5)],  # a fold after a reorder
    [Pool(3, 5)],  # H adds
])
def test_declined_logs_are_replayed_in_turn(moves):
    s = summary(1, True)
    assert compose(moves, s) is None
    assert_identical(Replay()(s, moves), sequential(s, moves))


@pytest.mark.parametrize("bad", [
    [Merge(3, 5), Merge(8, 3)],  # a chain: 3's pairs are void once it absorbed 5
    [MergeGroup(3, (5, 8))],  # no such group planned
])
def test_a_move_that_cannot_apply_raises_as_in_the_replay(bad):
    s = summary(2, False)
    with pytest.raises(ValueError, match="no merge entropy"):
        sequential(s, bad)
    with pytest.raises(ValueError, match="no merge entropy"):
        compose(bad, s)


def test_the_store_composes_once_for_a_laps_batches_and_equals_the_replay():
    replay = Replay()
    composed = StateStore(SUMMARIES, 1 << 30, replay=replay)
    plain = StateStore(SUMMARIES, 0)  # spilled, replayed move by move
    for b in range(4):
        composed.put(b, summary(10 + b, True))
        plain.put(b, summary(10 + b, True))
    moves = lap_end(summary(10, True))
    for m in moves:
        composed.log(m)
        plain.log(m)
    for (ka, a), (kb, b) in zip(composed.items(), plain.items(), strict=True):
        assert ka == kb
        assert_identical(a, b)
    assert len(replay._maps) == 1  # one map, shared by the four batches
    # items() kept the replayed forms: a later get replays nothing
    assert all(seen == len(moves) for _, seen in composed._items.values())
    assert_identical(composed.get(2), plain.get(2))
