"""Coordinate ascent for one sequence under the sequential ddCRP (issue 12) with a real
observation model: the ELBO never decreases over half-steps, an empty table adds nothing, and
well-separated clusters are found."""

from __future__ import annotations

import numpy as np

from bnpmix.algorithms.ddcrp.fit import fit_sequence
from bnpmix.algorithms.ddcrp.links import decay, log_link_prior
from bnpmix.algorithms.ddcrp.vi import Links
from bnpmix.algorithms.metrics import adjusted_rand_index as ari
from bnpmix.algorithms.obs.gauss import Gauss


def five_gaussians(R: float, n: int, rng: np.random.Generator):
    """Sec. 5.2.1: unit-variance spherical Gaussians at (0, 0) and (±R, ±R), in random order."""
    centres = np.array([[0, 0], [R, R], [R, -R], [-R, R], [-R, -R]], float)
    z = rng.integers(5, size=n)
    return centres[z] + rng.standard_normal((n, 2)), z


def test_the_elbo_never_decreases_over_half_steps():
    rng = np.random.default_rng(0)
    X, _ = five_gaussians(3.0, 60, rng)
    obs = Gauss.default(X)
    for kind, a in [("none", 1.0), ("exponential", 4.0)]:
        fit = fit_sequence(X, np.arange(len(X)), obs, 0.1, decay(kind, a), rng, max_iter=30)
        steps = np.array(fit.trace).ravel()
        assert np.all(np.diff(steps) >= -1e-8 * np.abs(steps[1:])), np.diff(steps).min()
        assert steps[-1] > steps[0] + 1.0  # and the ascent moves
        np.testing.assert_allclose(fit.links.q.sum(1), 1.0, atol=1e-12)


def test_an_empty_table_contributes_nothing():
    rng = np.random.default_rng(1)
    X, _ = five_gaussians(3.0, 10, rng)
    obs = Gauss.default(X)
    N, stats = np.zeros(1), obs.stats(X, np.zeros((10, 1)))
    assert abs(obs.elbo(N, stats, obs.post(N, stats))) < 1e-9


def test_the_true_partition_is_a_fixed_point_above_what_the_starts_reach():
    """R = 5: links uniform within the true clusters stay put under coordinate ascent (ARI 1,
    five tables); the prior start ends in one table, and the one-pass start above it but below
    the truth (a local optimum: the paper restarts 300 times)."""
    rng = np.random.default_rng(2)
    X, z = five_gaussians(5.0, 200, rng)
    obs = Gauss.default(X)
    logp = log_link_prior(np.arange(200), 0.1, decay("none"))
    q = np.zeros((200, 200))
    for k in range(5):
        b = np.flatnonzero(z == k)
        q[b[0], b[0]] = 1.0
        for n, i in enumerate(b[1:], start=1):
            q[i, b[:n]] = 1.0 / n
    links = Links.from_q(logp, q)
    Z = links.responsibilities
    post = obs.post(Z.sum(0), obs.stats(X, Z))
    for _ in range(5):
        links.sweep(obs.E_loglik(X, post), rng)
        Z = links.responsibilities
        N, stats = Z.sum(0), obs.stats(X, Z)
        post = obs.post(N, stats)
    truth = links.link_term() + obs.elbo(N, stats, post)
    assert ari(z, Z.argmax(1)) == 1.0 and abs(np.trace(links.q) - 5) < 1e-6
    prior = fit_sequence(X, np.arange(200), obs, 0.1, decay("none"), rng, start="prior")
    one_pass = fit_sequence(X, np.arange(200), obs, 0.1, decay("none"), rng)
    assert prior.n_tables < 1.5
    assert prior.elbo < one_pass.elbo < truth
