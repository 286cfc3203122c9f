"""The recurrent CRP prior of the temporal DP mixture (Ahmed & Xing 2008, Eq. 4.4, Sec. 6) and
the variation of information (Sec. 7)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln

from bnpmix.algorithms.alloc.rcrp import (
    decay_weights,
    log_epoch_prior,
    log_prior,
    pseudo_counts,
    seat_probabilities,
)
from bnpmix.algorithms.metrics import global_and_local_vi, variation_of_information


def test_eq_4_4_by_hand():
    """W = 1, λ = 0.8: last epoch's counts (3, 1) weigh e^{−1.25} = 0.2865 each; with α = 1 and
    one item of chain 0 already seated, the next item's probabilities are
    ((0.8595 + 1), 0.2865, 1) / (1.1460 + 1 + 1)."""
    counts = np.array([[3.0, 1.0], [0.0, 0.0]])
    m = pseudo_counts(counts, 1, window=1, decay=0.8)
    np.testing.assert_allclose(m, np.exp(-1.25) * np.array([3.0, 1.0]), rtol=1e-15)
    assert np.exp(-1.25) == pytest.approx(0.2865, abs=1e-4)
    probs, new = seat_probabilities(m, np.array([1.0, 0.0]), alpha=1.0)
    denom = 4 * np.exp(-1.25) + 1 + 1
    np.testing.assert_allclose(probs, [(3 * np.exp(-1.25) + 1) / denom, np.exp(-1.25) / denom],
                               rtol=1e-15)
    assert new == pytest.approx(1 / denom, rel=1e-15)
    assert probs.sum() + new == pytest.approx(1.0, rel=1e-15)


def test_decay_weights():
    np.testing.assert_allclose(decay_weights(3, 2.0), np.exp(-np.arange(1, 4) / 2.0))
    np.testing.assert_array_equal(decay_weights(2, math.inf), [1.0, 1.0])
    assert decay_weights(0, 0.8).shape == (0,)
    with pytest.raises(ValueError, match="decay"):
        decay_weights(1, 0.0)


def set_partitions(items):
    """Every set partition of ``items`` (lists of blocks)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in set_partitions(rest):
        for j in range(len(part)):
            yield [*part[:j], [first, *part[j]], *part[j + 1:]]
        yield [[first], *part]


def epoch_configurations(N, K):
    """Label-free configurations of N items over K inherited chains: each block of a set
    partition goes to a distinct inherited chain or is a new chain; as count vectors over
    K + (new blocks) chains."""
    for part in set_partitions(list(range(N))):
        B = len(part)
        for r in range(min(B, K) + 1):
            for blocks in itertools.combinations(range(B), r):
                for chains in itertools.permutations(range(K), r):
                    n = np.zeros(K + B - r)
                    for blk, k in zip(blocks, chains, strict=True):
                        n[k] = len(part[blk])
                    others = [len(part[b]) for b in range(B) if b not in blocks]
                    n[K:] = others
                    yield part, dict(zip(blocks, chains, strict=True)), n


@pytest.mark.parametrize("N", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("m", [[], [0.6], [2.0, 0.287], [1.0, 0.0, 3.5]])
def test_the_label_free_epoch_prior_sums_to_one(N, m):
    """Σ over every configuration of N items (set partitions, blocks to inherited chains or
    new) of P(c_t | past) is 1; chains with m_k = 0 are not inherited (they may only be reborn
    as new ones)."""
    m = np.array(m, float)
    alive = m[m > 0]
    total = sum(math.exp(log_epoch_prior(np.concatenate([alive, np.zeros(len(n) - len(alive))]),
                                         n, alpha=1.7))
                for _, _, n in epoch_configurations(N, len(alive)))
    assert total == pytest.approx(1.0, rel=1e-12)


def test_the_epoch_prior_is_the_product_of_the_seatings():
    """The label-free formula equals the chain rule of Eq. 4.4 over the items in order (new
    chains named by their first member)."""
    rng = np.random.default_rng(0)
    m = np.array([1.3, 0.4])
    for _ in range(20):
        labels = rng.integers(0, 5, size=7)  # 0, 1 inherited; 2, 3, 4 new
        n, logp = np.zeros(5), 0.0
        for z in labels:
            mm = np.concatenate([m, np.zeros(3)])
            probs, new = seat_probabilities(mm, n, alpha=0.9)
            logp += math.log(probs[z] if mm[z] + n[z] > 0 else new)
            n[z] += 1
        assert log_epoch_prior(np.concatenate([m, np.zeros(3)]), n, 0.9) == pytest.approx(
            logp, rel=1e-12)


def crp_log_prob(sizes, alpha):
    """The Ewens / CRP probability of a partition with these block sizes."""
    sizes = np.asarray([s for s in sizes if s > 0], float)
    N = sizes.sum()
    return (len(sizes) * math.log(alpha) + float(np.sum(gammaln(sizes)))
            + gammaln(alpha) - gammaln(alpha + N))


def test_window_zero_is_an_independent_crp_per_epoch():
    counts = np.array([[3, 1, 0], [0, 2, 2], [1, 0, 4]], float)
    want = sum(crp_log_prob(row, 2.0) for row in counts)
    assert log_prior(counts, window=0, decay=0.8, alpha=2.0) == pytest.approx(want, rel=1e-12)


def test_full_window_without_decay_is_the_crp_of_the_pooled_items():
    counts = np.array([[3, 1, 0], [0, 2, 2], [1, 0, 4]], float)
    want = crp_log_prob(counts.sum(0), 2.0)
    assert log_prior(counts, window=3, decay=math.inf, alpha=2.0) == pytest.approx(want,
                                                                                    rel=1e-12)
    assert log_prior(counts, window=1, decay=math.inf, alpha=2.0) != pytest.approx(want)


def test_variation_of_information():
    a = np.array([0, 0, 1, 1])
    assert variation_of_information(a, np.array([5, 5, 7, 7])) == 0.0
    # a against one block: H(a) = log 2, I = 0
    assert variation_of_information(a, np.zeros(4)) == pytest.approx(math.log(2), rel=1e-15)
    # independent halves: H = log 2 each, I = 0, VI = 2 log 2
    assert variation_of_information(a, np.array([0, 1, 0, 1])) == pytest.approx(2 * math.log(2))
    epochs = np.array([0, 0, 1, 1])
    gvi, lvi = global_and_local_vi(a, np.array([0, 1, 2, 2]), epochs)
    assert gvi == pytest.approx(variation_of_information(a, np.array([0, 1, 2, 2])))
    assert lvi == pytest.approx(0.5 * (math.log(2) + 0.0))
