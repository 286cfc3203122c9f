"""Held-out scoring (the reconstructed Eq. 7) and the fully observed language model of Sec. 5.1
(issue 12), the latter against enumerating every link graph."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from bnpmix.algorithms.ddcrp.gibbs import tables_of
from bnpmix.algorithms.ddcrp.heldout import heldout_links, heldout_logpdf
from bnpmix.algorithms.ddcrp.links import decay, dense, log_link_band
from bnpmix.algorithms.ddcrp.words import expected_tables, word_links
from bnpmix.algorithms.obs.gauss import Gauss


@pytest.mark.parametrize("kind, a", [("none", 1.0), ("exponential", 2.0)])
def test_word_links_are_the_exact_posterior(kind, a):
    """Every link graph of N = 6 tokens over three words: p(c | w) ∝ Π_i p(c_i) Π_tables
    G_0(w_root) 1[the table's words agree]; its link marginals and E[#tables] equal one sweep's
    q and Σ_i q(c_i = i), and the closed form Σ_i α G_0(w_i) / (α G_0(w_i) + Σ_{j<i, w_j = w_i}
    f(d_ij))."""
    words = np.array([0, 1, 0, 0, 2, 1])
    g0 = np.array([0.5, 0.3, 0.2])
    alpha, N = 0.8, len(words)
    pos = np.array([0.0, 1.0, 1.5, 4.0, 5.0, 5.5])
    f = decay(kind, a)
    logp = log_link_band(pos, alpha, f)
    q = dense(word_links(words, logp, np.log(g0)))
    p = np.exp(dense(logp, -np.inf))
    marg, tables, total = np.zeros((N, N)), 0.0, 0.0
    for c in itertools.product(*[range(i + 1) for i in range(N)]):
        lab = tables_of(np.array(c))
        roots = np.unique(lab)
        if any(len(set(words[lab == r])) > 1 for r in roots):
            continue
        w = np.prod([p[i, c[i]] for i in range(N)]) * np.prod(g0[words[roots]])
        total += w
        tables += w * len(roots)
        marg[np.arange(N), list(c)] += w
    np.testing.assert_allclose(q, marg / total, atol=1e-12)
    assert expected_tables(word_links(words, logp, np.log(g0))) == pytest.approx(
        tables / total, abs=1e-12)
    closed = sum(alpha * g0[words[i]] / (alpha * g0[words[i]] + sum(
        float(f(pos[i] - pos[j])) for j in range(i) if words[j] == words[i])) for i in range(N))
    assert tables / total == pytest.approx(closed, abs=1e-12)


def test_heldout_links_follow_the_decay_and_the_window():
    link = heldout_links(np.arange(5.0), np.array([5.0, 7.0]), decay("exponential", 2.0))
    for row, t in zip(link, [5.0, 7.0], strict=True):
        w = np.exp(-(t - np.arange(5.0)) / 2.0)
        np.testing.assert_allclose(row, w / w.sum(), rtol=1e-12)
    win = heldout_links(np.arange(5.0), np.array([5.0]), decay("none"), window=2)
    np.testing.assert_allclose(win, [[0, 0, 0, 0.5, 0.5]])
    with pytest.raises(ValueError, match=r"held-out item 0 .* every decay weight is 0"):
        heldout_links(np.arange(5.0), np.array([50.0]), decay("window", 3.0))


def test_heldout_items_among_the_training_items_link_backwards():
    """An item at t* = 2.5 links to the customers at 0, 1, 2 only (and, with a window of 2, to
    the two most recent of those); one at a training position includes that customer; one
    before the first training position, or at a NaN position, is an error naming it."""
    train = np.arange(6.0)
    link = heldout_links(train, np.array([2.5, 4.0]), decay("exponential", 2.0))
    w = np.exp(-(2.5 - np.arange(3.0)) / 2.0)
    np.testing.assert_allclose(link[0], np.r_[w / w.sum(), 0, 0, 0], rtol=1e-12)
    w = np.exp(-(4.0 - np.arange(5.0)) / 2.0)
    np.testing.assert_allclose(link[1], np.r_[w / w.sum(), 0], rtol=1e-12)
    win = heldout_links(train, np.array([2.5, 9.0]), decay("none"), window=2)
    np.testing.assert_allclose(win, [[0, 0.5, 0.5, 0, 0, 0], [0, 0, 0, 0, 0.5, 0.5]])
    with pytest.raises(ValueError, match=r"held-out item 1 .* at or before its position -1"):
        heldout_links(train, np.array([3.0, -1.0]), decay("none"))
    with pytest.raises(ValueError, match=r"held-out item 0 .* at or before its position nan"):
        heldout_links(train, np.array([np.nan]), decay("none"))
    with pytest.raises(ValueError, match="non-decreasing"):
        heldout_links(np.array([0.0, 2.0, 1.0]), np.array([3.0]), decay("none"))


def test_heldout_density_is_the_table_mixture():
    """Hard tables and f ≡ 1: p(x*) = Σ_k (n_k / N) p(x* | table k); soft tables by a direct
    double sum over customers and tables."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 1, (6, 2)), rng.normal(6, 1, (4, 2))])
    obs = Gauss.default(X)
    Z = np.zeros((10, 2))
    Z[:6, 0] = Z[6:, 1] = 1.0
    post = obs.post(Z.sum(0), obs.stats(X, Z))
    Xt = rng.normal(3, 3, (5, 2))
    got = heldout_logpdf(Xt, heldout_links(np.arange(10.0), np.full(5, 10.0), decay("none")),
                         Z, post, obs)
    pred = np.exp(obs.predictive_logpdf(Xt, post))
    np.testing.assert_allclose(got, np.log(0.6 * pred[:, 0] + 0.4 * pred[:, 1]), rtol=1e-12)
    Zs = rng.dirichlet(np.ones(2), size=10)
    post = obs.post(Zs.sum(0), obs.stats(X, Zs))
    link = heldout_links(np.arange(10.0), np.arange(10.0, 15.0), decay("exponential", 3.0))
    pred = np.exp(obs.predictive_logpdf(Xt, post))
    direct = [math.log(sum(link[n, j] * Zs[j, k] * pred[n, k] for j in range(10)
                           for k in range(2))) for n in range(5)]
    np.testing.assert_allclose(heldout_logpdf(Xt, link, Zs, post, obs), direct, rtol=1e-12)
