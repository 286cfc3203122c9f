"""The sequential ddCRP's links under a factorised q(c) (issue 12) against enumerating every link
graph: path probabilities R, table responsibilities E z, the rank-one update of R, the CRP limit,
and the exact coordinate step."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from bnpmix.algorithms.ddcrp.links import decay, log_link_prior, reach, tables, update_row
from bnpmix.algorithms.ddcrp.vi import Links


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
    R = reach(np.tril(q, -1))
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
    Z = tables(R, np.diag(q).copy())
    np.testing.assert_allclose(Z, z, atol=1e-12)
    np.testing.assert_allclose(Z.sum(1), 1.0, atol=1e-12)


def test_rank_one_update_equals_a_fresh_inverse():
    rng = np.random.default_rng(0)
    N = 40
    q = random_q(N, rng)
    R = reach(np.tril(q, -1))
    for i in rng.permutation(N)[:15]:
        row = rng.dirichlet(np.ones(i + 1))
        update_row(R, int(i), row[:i] - q[i, :i])
        q[i, :i + 1] = row
        np.testing.assert_allclose(R, reach(np.tril(q, -1)), atol=1e-12, rtol=0)


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
    links = Links.from_q(log_link_prior(np.arange(N), alpha, decay("none")), q)
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


def test_each_coordinate_step_is_the_argmax_and_the_bound_never_decreases():
    rng = np.random.default_rng(3)
    N = 9
    logp = log_link_prior(np.arange(N), 0.5, decay("exponential", 3.0))
    ell = rng.normal(scale=3.0, size=(N, N))
    links = Links.from_q(logp, random_q(N, rng))
    before = links.bound(ell)
    for i in rng.permutation(N):
        i = int(i)
        links.update(i, ell)
        best = links.bound(ell)
        assert best >= before - 1e-10
        before = best
        # no other q(c_i) does better (random rows and the vertices of the simplex)
        for row in [*rng.dirichlet(np.ones(i + 1), size=20), *np.eye(i + 1)]:
            q = links.q.copy()
            q[i, :i + 1] = row
            assert Links.from_q(logp, q).bound(ell) <= best + 1e-10
        np.testing.assert_allclose(links.R, reach(np.tril(links.q, -1)), atol=1e-12)
