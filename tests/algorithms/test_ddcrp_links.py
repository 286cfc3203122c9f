"""The sequential ddCRP's links under a factorised q(c) (issue 12) against enumerating every link
graph: path probabilities R, table responsibilities E z, the rank-one update of R, the CRP limit,
and the exact coordinate step."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.linalg import solve_triangular

from bnpmix.algorithms.ddcrp.links import (
    decay,
    dense,
    from_dense,
    log_link_band,
    log_link_prior,
    window_width,
)
from bnpmix.algorithms.ddcrp.vi import LinkState, update


def reach(q: np.ndarray) -> np.ndarray:
    """The reference R = (I − A)⁻¹ of a dense q (A its strictly lower part), a fresh inverse."""
    N = len(q)
    return solve_triangular(np.eye(N) - np.tril(q, -1), np.eye(N), lower=True)


def links_of(logp: np.ndarray, q: np.ndarray, W: int | None = None,
             prune: float = 0.0) -> LinkState:
    """The link state of dense N × N matrices, banded to W (all links without)."""
    W = len(q) - 1 if W is None else W
    return LinkState.of(from_dense(logp, W, -np.inf), from_dense(q, W), prune)


def random_q(N: int, rng: np.random.Generator) -> np.ndarray:
    """A random row-stochastic lower-triangular q (row i over 0..i)."""
    q = np.tril(rng.gamma(0.7, size=(N, N)))
    return q / q.sum(1, keepdims=True)


def table_of(c) -> list[int]:
    """Each customer's table: the self-linker its path ends at."""
    out = []
    for i in range(len(c)):
        j = i
        while c[j] != j:
            j = c[j]
        out.append(j)
    return out


def enumerate_links(q: np.ndarray):
    """Every link graph c (c_i <= i) with its probability Π_i q(c_i)."""
    N = len(q)
    for c in itertools.product(*[range(i + 1) for i in range(N)]):
        yield c, float(np.prod([q[i, c[i]] for i in range(N)]))


@pytest.mark.parametrize("N", [1, 3, 6])
def test_paths_and_tables_against_every_link_graph(N):
    rng = np.random.default_rng(N)
    q = random_q(N, rng)
    links = links_of(np.zeros_like(q), q)  # the prior plays no part here
    assert list(links.cols) == list(range(N))  # every self-link has mass: every table live
    R = links.R
    paths, z = np.zeros((N, N)), np.zeros((N, N))
    for c, w in enumerate_links(q):
        tab = table_of(c)
        for i in range(N):
            j = i
            paths[i, j] += w
            while c[j] != j:
                j = c[j]
                paths[i, j] += w
            z[i, tab[i]] += w
    # R_ij = P(the path from i passes j) counts the paths that pass j whether or not they stop
    A = np.tril(q, -1)
    walk = np.eye(N)
    through = np.eye(N)
    for _ in range(N):
        walk = walk @ A
        through += walk
    np.testing.assert_allclose(R, through, atol=1e-12)
    np.testing.assert_allclose(paths, R, atol=1e-12)
    Z = links.responsibilities
    np.testing.assert_allclose(Z, z, atol=1e-12)
    np.testing.assert_allclose(Z.sum(1), 1.0, atol=1e-12)


@pytest.mark.parametrize("W, prune", [(None, 0.0), (4, 0.0), (None, 0.05), (4, 0.05)])
def test_rank_one_updates_equal_a_fresh_inverse(W, prune):
    """After every coordinate step (full or banded, with or without closed tables) the kept
    columns of R equal those of a fresh inverse, and a column not kept is solved exactly."""
    rng = np.random.default_rng(0)
    N = 40
    Wn = window_width(N, W)
    logp = log_link_band(np.arange(N), 0.5, decay("exponential", 3.0), W)
    q = np.exp(logp) * rng.gamma(0.7, size=logp.shape)
    links = LinkState.of(logp, q / q.sum(1, keepdims=True), prune)
    assert links.q.shape == (N, Wn + 1)
    ell = rng.normal(scale=2.0, size=(N, len(links.cols)))
    ell_empty = rng.normal(size=N)
    for i in rng.permutation(N):
        links, ell = update(links, int(i), ell, ell_empty)
        fresh = reach(links.dense_q())
        np.testing.assert_allclose(links.R, fresh[:, links.cols], atol=1e-12, rtol=0)
        j = int(rng.integers(N))
        np.testing.assert_allclose(links.column(j), fresh[j:, j], atol=1e-12, rtol=0)
    assert np.all(links.q[1:, 0][links.q[1:, 0] > 0] >= prune)
    np.testing.assert_allclose(links.q.sum(1), 1.0, atol=1e-12)


def test_a_window_keeps_only_the_most_recent_links():
    logp = log_link_band(np.arange(9), 0.4, decay("none"), window=3)
    full = dense(logp, -np.inf)
    for i in range(9):
        kept = np.flatnonzero(np.isfinite(full[i]))
        assert list(kept) == list(range(max(0, i - 3), i + 1))
        # f ≡ 1 over the kept links: each earlier one 1/(α + min(i, 3))
        np.testing.assert_allclose(np.exp(full[i, kept[:-1]]), 1 / (0.4 + min(i, 3)))


def crp_log_prob(blocks, alpha: float, N: int) -> float:
    return (len(blocks) * math.log(alpha) + sum(math.lgamma(len(b)) for b in blocks)
            - sum(math.log(alpha + i) for i in range(N)))


def test_with_no_decay_the_partitions_have_the_crp_probabilities():
    """f ≡ 1: summing the link prior over the graphs of each partition gives the CRP's
    α^K Π (n_k − 1)! / Π_i (α + i)."""
    N, alpha = 6, 0.7
    p = np.exp(log_link_prior(np.arange(N), alpha, decay("none")))
    mass: dict[tuple, float] = {}
    for c, w in enumerate_links(p):
        tab = table_of(c)
        key = tuple(sorted(tuple(i for i in range(N) if tab[i] == j) for j in set(tab)))
        mass[key] = mass.get(key, 0.0) + w
    assert len(mass) == 203  # the Bell number B_6: every partition reached
    for blocks, m in mass.items():
        assert math.log(m) == pytest.approx(crp_log_prob(blocks, alpha, N), abs=1e-10)


def test_uniform_links_within_blocks_give_the_crp_term_exactly():
    """f ≡ 1 and q(c_i) uniform over the earlier members of i's block (self-link for its first):
    the link term equals log CRP(partition)."""
    N, alpha = 7, 1.3
    blocks = [[0, 2, 3, 6], [1, 4], [5]]
    q = np.zeros((N, N))
    for b in blocks:
        q[b[0], b[0]] = 1.0
        for n, i in enumerate(b[1:], start=1):
            q[i, b[:n]] = 1.0 / n
    links = links_of(log_link_prior(np.arange(N), alpha, decay("none")), q)
    assert links.link_term() == pytest.approx(crp_log_prob(blocks, alpha, N), abs=1e-12)


@pytest.mark.parametrize("kind, a", [("none", 1.0), ("window", 3.0), ("exponential", 2.0),
                                     ("logistic", 2.0)])
def test_link_prior_rows_are_distributions(kind, a):
    logp = log_link_prior(np.arange(8) * 1.5, 0.4, decay(kind, a))
    np.testing.assert_allclose(np.exp(logp).sum(1), 1.0, atol=1e-12)
    assert np.all(np.isneginf(logp[np.triu_indices(8, 1)]))
    # by hand: f at distances 1.5 (i − j), and α on the diagonal, over their sum
    f = {"none": lambda d: 1.0, "window": lambda d: float(d < a),
         "exponential": lambda d: math.exp(-d / a),
         "logistic": lambda d: math.exp(-d + a) / (1 + math.exp(-d + a))}[kind]
    for i in range(8):
        w = [f(1.5 * (i - j)) for j in range(i)] + [0.4]
        np.testing.assert_allclose(np.exp(logp[i, :i + 1]), np.array(w) / sum(w), rtol=1e-12)


def bound(links: LinkState, ell: np.ndarray) -> float:
    """The links' bound with ℓ given for all N tables (the empty ones' columns unused)."""
    return links.bound(ell[:, links.cols])


def test_each_coordinate_step_is_the_argmax_and_the_bound_never_decreases():
    rng = np.random.default_rng(3)
    N = 9
    logp = log_link_prior(np.arange(N), 0.5, decay("exponential", 3.0))
    ell = rng.normal(scale=3.0, size=(N, N))
    links = links_of(logp, random_q(N, rng))
    before = bound(links, ell)
    for i in rng.permutation(N):
        i = int(i)
        links, _ = update(links, i, ell)
        best = bound(links, ell)
        assert best >= before - 1e-10
        before = best
        # no other q(c_i) does better (random rows and the vertices of the simplex)
        for row in [*rng.dirichlet(np.ones(i + 1), size=20), *np.eye(i + 1)]:
            q = links.dense_q()
            q[i, :i + 1] = row
            assert bound(links_of(logp, q), ell) <= best + 1e-10
        np.testing.assert_allclose(links.R, reach(links.dense_q()), atol=1e-12)
