"""A batch step over blocks of items (``local.blocks``: what bounds a visit's memory whatever the
partition's size) gives the whole batch's result: its summary (N, statistics, entropies, merge
pairs' and groups' entropies, item count), the rows collected for a birth target, each planned
deletion's change and the hard assignments, to 1e-12 relative, for the dense Gaussians and for
sparse text. The one-block run is the reference: the blocking is forced by shrinking the block."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bnpmix.algorithms.obs.diag_gauss import DiagGauss
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.obs.mult import Mult
from bnpmix.algorithms.summary import Summary
from bnpmix.algorithms.vb import local
from bnpmix.algorithms.vb.local import Globals, Plan, batch_step, blocks, hard_assignments

K = 6
UIDS = np.arange(20, 20 + K)


def problem(name: str, n: int = 2500, seed: int = 1):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, K, n)
    if name == "mult":
        V = 200
        topics = rng.dirichlet(np.full(V, 0.05), K)
        X = sp.csr_matrix(np.stack([rng.multinomial(30, topics[z]) for z in labels]).astype(float))
        obs = Mult(V, 0.1)
    else:
        D = 5
        X = 3.0 * rng.normal(size=(K, D))[labels] + rng.normal(size=(n, D))
        obs = {"gauss": Gauss, "diag-gauss": DiagGauss}[name].default(X)
    R0 = 0.6 * np.eye(K)[labels] + 0.4 * rng.dirichlet(np.ones(K), n)
    post = obs.post(R0.sum(0), obs.stats(X, R0))
    return X, obs, Globals(UIDS, post, np.log(rng.dirichlet(np.full(K, 2.0))))


def dense(v):
    return v.toarray() if sp.issparse(v) else np.asarray(v)


def assert_summaries_close(got: Summary, want: Summary) -> None:
    assert got.n_items == want.n_items
    np.testing.assert_array_equal(got.uids, want.uids)
    for name in ("N", "H", "Hpair", "Hgroup"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-12,
                                   atol=1e-9)
    assert got.stats.keys() == want.stats.keys() and got.shared.keys() == want.shared.keys()
    for key in got.stats:
        np.testing.assert_allclose(dense(got.stats[key]), dense(want.stats[key]), rtol=1e-12,
                                   atol=1e-9)
    for key in got.shared:
        np.testing.assert_allclose(got.shared[key], want.shared[key], rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("name", ["diag-gauss", "gauss", "mult"])
def test_a_blocked_batch_step_is_the_whole_batchs(name, monkeypatch):
    X, obs, g = problem(name)
    plan = Plan(pairs=np.array([[20, 21], [22, 25]]), groups=np.array([[20, 23, 24]]),
                targets=(21, 24), tau=0.3, deletes=(22, 25))
    whole = batch_step(X, obs, g, plan)
    ids0, r0 = hard_assignments(X, obs, g)
    monkeypatch.setattr(local, "BLOCK_ENTRIES", 1)
    monkeypatch.setattr(local, "MIN_BLOCK_ROWS", 700)
    assert len(list(blocks(X, K))) == 4  # 2500 items: three blocks of 700 and one of 400
    split = batch_step(X, obs, g, plan)
    assert_summaries_close(split.summary, whole.summary)
    for uid in plan.targets:
        assert split.collected[uid].shape[0] > 0
        np.testing.assert_array_equal(dense(split.collected[uid]), dense(whole.collected[uid]))
    for uid in plan.deletes:
        assert_summaries_close(split.delete_changes[uid], whole.delete_changes[uid])
    ids, r = hard_assignments(X, obs, g)
    np.testing.assert_array_equal(ids, ids0)
    np.testing.assert_allclose(r, r0, rtol=1e-12)


def test_the_block_size_follows_the_width_and_K_only():
    """n × K × width entries per block (width: D, or a CSR row's mean stored entries), never
    fewer than MIN_BLOCK_ROWS rows; an empty batch is one empty block."""
    rows = local.BLOCK_ENTRIES // (K * 8)
    parts = list(blocks(np.zeros((10 * rows + 1, 8)), K))
    assert [b.shape[0] for b in parts] == [rows] * 10 + [1]
    assert len(list(blocks(np.zeros((local.MIN_BLOCK_ROWS + 1, 10 ** 6)), 1))) == 2
    assert [b.shape for b in blocks(np.zeros((0, 3)), K)] == [(0, 3)]
    C = sp.random(50_000, 1000, density=0.01, format="csr", random_state=0)
    rows = max(local.MIN_BLOCK_ROWS, int(local.BLOCK_ENTRIES // (K * C.nnz / C.shape[0])))
    assert next(blocks(C, K)).shape[0] == rows < C.shape[0]


def test_blocks_come_one_at_a_time_and_a_one_block_batch_is_not_copied():
    """A CSR block is a copy of its rows: made when it is asked for, so a visit holds one
    block beside its partition, not a second copy of the partition; a batch that is a single
    block is handed over as it is."""
    C = sp.random(50_000, 1000, density=0.01, format="csr", random_state=0)
    made = blocks(C, K)
    first = next(made)
    assert first.shape[0] < C.shape[0] and not np.shares_memory(first.data, C.data)
    small = C[:100]
    assert next(blocks(small, K)) is small
    X = np.zeros((100, 3))
    assert next(blocks(X, K)) is X


@pytest.mark.parametrize("name", ["gauss", "mult"])
def test_a_target_wanting_fewer_rows_gets_the_first_of_those_past_tau(name, monkeypatch):
    """Plan.wanted: a batch returns, for each target, its first rows past tau up to what the
    target still wants (across blocks), and the count of all that qualified; 0 wanted returns
    none but still counts them (the birth's amplification, qualified / collected)."""
    X, obs, g = problem(name)
    plan = Plan(targets=(21, 24), tau=0.3)
    everything = batch_step(X, obs, g, plan)
    in_first_block = batch_step(X[:700], obs, g, plan).qualified[21]
    assert in_first_block < 300 < everything.qualified[21]  # the cap falls past the first block
    monkeypatch.setattr(local, "BLOCK_ENTRIES", 1)
    monkeypatch.setattr(local, "MIN_BLOCK_ROWS", 700)
    capped = batch_step(X, obs, g, Plan(targets=(21, 24), tau=0.3, wanted=(300, 0)))
    np.testing.assert_array_equal(dense(capped.collected[21]),
                                  dense(everything.collected[21][:300]))
    assert capped.collected[24].shape[0] == 0
    for uid in (21, 24):
        assert capped.qualified[uid] == everything.qualified[uid] == \
            everything.collected[uid].shape[0]
