"""Memo's kernels (algorithms/memo/) as functions over a MemoState value: memo's additivity
(Eq. 11: a batch's old summary leaves S^0 as its new one enters), lap-end steps that return a
new state and leave the old one as it was, and the state's checkpoint round trip
(pipeline/engines/state_codec.py)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np

from bnpmix.algorithms.alloc import StickBreaking
from bnpmix.algorithms.memo import lap, lapend
from bnpmix.algorithms.memo.state import Best, Birth, Lap, MemoState
from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.obs import obs_class
from bnpmix.algorithms.summary import Reorder, Summary
from bnpmix.algorithms.vb.local import batch_step


def blobs_state(seed: int = 0) -> tuple[MemoState, np.ndarray, object, object]:
    rng = np.random.default_rng(seed)
    X = np.r_[rng.normal(size=(60, 2)), rng.normal(size=(40, 2)) + 8.0]
    obs, alloc = obs_class("gauss").default(X), StickBreaking(1.0)
    R = np.c_[np.arange(100) < 60, np.arange(100) >= 60].astype(float)
    S = Summary.zeros(np.array([0, 1]), obs.stat_shapes(), obs.shared_shapes())
    S.N[:] = R.sum(0)
    for k, v in obs.stats(X, R).items():
        S.stats[k][...] = v
    model = Mixture.from_summary(obs, alloc, S)
    lap_ = Lap(0, np.array([0]), None, np.zeros(0), None, ())
    return MemoState(model, S, lap=lap_, laps_since={0: 1, 1: 1}), X, obs, alloc


def test_visiting_a_batch_again_with_its_own_summary_leaves_the_totals():
    """Eq. 11 is additive: a second visit of a batch whose summary has not changed takes out
    what it puts in, so S^0 (its N and statistics) stays S^0 plus the batch's, to rounding
    (absorb updates S^0 in place: the state's own, never copied on a visit)."""
    state, X, obs, _ = blobs_state()
    res = batch_step(X[:30], obs, state.model.globals())
    before = state.S0.copy()
    once = lap.absorb(state, None, res)
    twice = lap.absorb(once, res.summary, res)
    np.testing.assert_allclose(twice.S0.N, before.N + res.summary.N, rtol=1e-12)
    for k, v in before.stats.items():
        np.testing.assert_allclose(twice.S0.stats[k], v + res.summary.stats[k], rtol=1e-12)
    assert (once.lap.pos, twice.lap.pos, state.lap.pos) == (1, 2, 0)


def test_lap_end_steps_return_a_new_state_and_leave_the_old_one():
    state, *_ = blobs_state()
    state = replace(state, births=(Birth(1, n=5, seen=5),))
    failed = lapend.failure(state, 1, 40.0, 0)
    assert failed.failed == {1: (40.0, 0, 1)} and state.failed == {}
    again = lapend.failure(failed, 1, 41.0, 1, tries=2)  # about the same mass: in a row
    assert again.failed[1] == (41.0, 1, 3) and failed.failed[1] == (40.0, 0, 1)
    gone = state.forget(1)
    assert gone.births == () and 1 not in gone.laps_since
    assert state.births[0].target == 1 and 1 in state.laps_since
    N = state.S0.N.copy()
    moved, moves = lapend.reorder(state, Reorder((1, 0)))
    assert moves == [Reorder((1, 0))] and moved.S0.uids.tolist() == [1, 0]
    assert state.S0.uids.tolist() == [0, 1] and np.array_equal(state.S0.N, N)


def test_a_lap_end_closes_the_lap_and_keeps_its_best_state():
    state, *_ = blobs_state()
    env = SimpleNamespace(complete=True, n_items=100, births_on=False,
                          cfg=SimpleNamespace(tol=1e-6, moves=(), birth=None, delete=None))
    end = lapend.opened(state)
    closed = lapend.close(state, end, env, -300.0)
    assert closed.lap is None and closed.next_lap == 1 and closed.last_elbo == -300.0
    assert closed.best == Best(-300.0, 1, state.model, None)
    assert state.lap is not None and state.best is None and state.recent == ()
    assert closed.recent[-1]["elbo_change_per_item"] is None  # no previous lap end


def test_the_state_round_trips_through_a_checkpoint(tmp_path):
    """Written field by field and read back: the same values, the best model (the current q)
    written once and read as the same object."""
    from bnpmix.algorithms.memo.state import MemoState as M
    from bnpmix.pipeline.engines.state_codec import read_state, write_state
    from bnpmix.storage.arrays import read_arrays, write_arrays_atomic

    state, *_ = blobs_state()
    state = replace(state, failed={1: (40.0, 0, 1)}, kept={0: 3.5}, recent=({"lap": 1},),
                    best=Best(-1.0, 1, state.model), births=(Birth(0, (2,), 7, None, 9, 1.5),))
    meta, items = write_state(state)
    arrays = dict(items)
    assert not any(k.startswith("best/") for k in arrays)
    write_arrays_atomic(tmp_path / "s.npz", {"format": "t", "version": 1}, arrays.items())
    ctx = SimpleNamespace(obs=state.model.obs)
    back = read_state(meta, read_arrays(tmp_path / "s.npz", "t", 1), ctx, (M, Lap, Birth, Best))
    assert back.best.model is back.model and back.failed == state.failed
    assert (back.kept, back.recent, back.births, back.laps_since) == (
        state.kept, state.recent, state.births, state.laps_since)
    np.testing.assert_array_equal(back.S0.N, state.S0.N)
    np.testing.assert_array_equal(back.lap.order, state.lap.order)
    for k, v in state.model.post.items():
        np.testing.assert_array_equal(back.model.post[k], v)
