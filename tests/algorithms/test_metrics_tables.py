"""The clustering scores `bnpmix evaluate` reports, against tables computed by hand (issue 13):
identical labelings; A = 0011 against B = 0101; the majority-label accuracy of (0,0,0,1,1,1)
against (0,0,1,1,1,1). Then invariances (relabelling either side, swapping the sides) and
scikit-learn's ARI and NMI (arithmetic-mean normalisation, its default and ours) on random
labelings."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import (
    adjusted_rand_score,
    mutual_info_score,
    normalized_mutual_info_score,
)

from bnpmix.algorithms.metrics import (
    adjusted_rand_index,
    alignment_accuracy,
    contingency,
    majority_labels,
    normalized_mutual_info,
    variation_of_information,
)

A = np.array([0, 0, 1, 1])
B = np.array([0, 1, 0, 1])


@pytest.mark.parametrize("labels", [
    [0, 0, 1, 1],
    [3, 1, 4, 1, 5, 9, 2, 6],
    [7, 7, 7],
    ["cat", "dog", "dog", "cat", "eel"],
])
def test_identical_labelings(labels):
    y = np.array(labels)
    assert variation_of_information(y, y) == 0.0
    assert adjusted_rand_index(y, y) == 1.0
    assert normalized_mutual_info(y, y) == pytest.approx(1.0, abs=1e-15)
    assert alignment_accuracy(y, y) == 1.0


def test_two_independent_halvings():
    """A = 0011, B = 0101: H(A) = H(B) = log 2 and I(A; B) = 0, so VI = 2 log 2 nats, NMI 0;
    ARI: no agreeing pair, E = 2·2/6 = 2/3, max term ½(2 + 2) = 2: (0 − 2/3)/(2 − 2/3) = −1/2."""
    assert variation_of_information(A, B) == pytest.approx(2 * math.log(2), rel=1e-15)
    assert variation_of_information(B, A) == pytest.approx(2 * math.log(2), rel=1e-15)
    assert adjusted_rand_index(A, B) == -0.5
    assert normalized_mutual_info(A, B) == pytest.approx(0.0, abs=1e-15)
    assert alignment_accuracy(A, B) == 0.5  # each cluster holds one 0 and one 1


def test_majority_label_accuracy():
    """Cluster 0 = {0, 0, 1} maps to label 0 (2 right), cluster 1 = {1, 1, 1} to 1 (3 right)."""
    clusters, labels = np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 1, 1, 1, 1])
    assert alignment_accuracy(clusters, labels) == pytest.approx(5 / 6, rel=1e-15)
    assert majority_labels(clusters, labels) == {0: 0, 1: 1}


def test_accuracy_ties_and_many_to_one():
    """A tie goes to the smallest label; two clusters may map to the same label; singletons
    score 1 (the figure does not penalise over-splitting)."""
    assert majority_labels([5, 5, 6, 6], [2, 1, 1, 1]) == {5: 1, 6: 1}
    assert alignment_accuracy([5, 5, 6, 6], [2, 1, 1, 1]) == 0.75
    assert majority_labels(["b", "b"], ["y", "x"]) == {"b": "x"}
    assert alignment_accuracy(np.arange(7), np.zeros(7)) == 1.0
    assert alignment_accuracy(np.zeros(4), [0, 1, 2, 2]) == 0.5


def test_accuracy_refuses_bad_input():
    with pytest.raises(ValueError, match="same length"):
        alignment_accuracy([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="no items"):
        alignment_accuracy([], [])


def random_labelings(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 200))
    a = rng.integers(0, int(rng.integers(1, 8)), n)
    # b: a noisy copy of a half the time, independent otherwise
    b = np.where(rng.random(n) < 0.7, a, rng.integers(0, 6, n)) if seed % 2 else \
        rng.integers(0, int(rng.integers(1, 12)), n)
    return a, b


def brute_force_accuracy(clusters: np.ndarray, labels: np.ndarray) -> float:
    right = 0
    for c in set(clusters.tolist()):
        members = labels[clusters == c].tolist()
        right += max(members.count(y) for y in set(members))
    return right / len(clusters)


@pytest.mark.parametrize("seed", range(40))
def test_invariant_to_relabelling_and_symmetric(seed):
    """Renaming clusters or labels by any one-to-one map changes no score; ARI, NMI and VI are
    symmetric in their two arguments (accuracy is not)."""
    a, b = random_labelings(seed)
    rng = np.random.default_rng(1000 + seed)
    a2 = (rng.permutation(50) + 100)[a]  # another set of ids, in another order
    b2 = np.array([f"label-{v}" for v in rng.permutation(50)])[b]
    for f in (adjusted_rand_index, normalized_mutual_info, variation_of_information,
              alignment_accuracy):
        assert f(a2, b2) == pytest.approx(f(a, b), rel=1e-12, abs=1e-14), f.__name__
    for f in (adjusted_rand_index, normalized_mutual_info, variation_of_information):
        assert f(b, a) == pytest.approx(f(a, b), rel=1e-12, abs=1e-14), f.__name__
    assert alignment_accuracy(a, b) == pytest.approx(brute_force_accuracy(a, b), rel=1e-15)


@pytest.mark.parametrize("seed", range(40))
def test_against_scikit_learn(seed):
    """ARI and NMI as scikit-learn computes them (NMI with ``average_method="arithmetic"``,
    the normalisation we use); VI from its mutual information (nats) and the entropies."""
    a, b = random_labelings(seed)
    assert adjusted_rand_index(a, b) == pytest.approx(adjusted_rand_score(a, b), abs=1e-12)
    assert normalized_mutual_info(a, b) == pytest.approx(
        normalized_mutual_info_score(a, b, average_method="arithmetic"), abs=1e-12)

    def entropy(x: np.ndarray) -> float:
        p = np.unique(x, return_counts=True)[1] / len(x)
        return float(-(p * np.log(p)).sum())

    vi = entropy(a) + entropy(b) - 2 * mutual_info_score(a, b)
    assert variation_of_information(a, b) == pytest.approx(max(vi, 0.0), abs=1e-12)


def test_contingency_counts():
    t = contingency(np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 1, 1, 1, 1]))
    np.testing.assert_array_equal(t, [[2, 1], [0, 3]])
