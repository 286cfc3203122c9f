"""Coordinate ascent for one sequence under the sequential ddCRP (issue 12) with a real
observation model: the ELBO never decreases over half-steps, an empty table adds nothing, and
well-separated clusters are found."""

from __future__ import annotations

import numpy as np
import pytest

from bnpmix.algorithms.alloc.stick import StickBreaking
from bnpmix.algorithms.ddcrp.fit import ascend, default_starts, fit_restarts, fit_sequence
from bnpmix.algorithms.ddcrp.links import decay, from_dense, log_link_band, log_link_prior
from bnpmix.algorithms.ddcrp.moves import Tables
from bnpmix.algorithms.ddcrp.vi import LinkState
from bnpmix.algorithms.metrics import adjusted_rand_index as ari
from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.vb.birth import fresh_vb
from bnpmix.algorithms.vb.init import nearest_seed
from bnpmix.algorithms.vb.local import responsibilities


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
        fit = fit_sequence(X, np.arange(len(X)), obs, 0.1, decay(kind, a), rng, max_iter=30,
                           prune=0.0, rounds=0)
        assert len(fit.trace) == fit.iterations + 1
        steps = np.array(fit.trace).ravel()
        assert np.all(np.diff(steps) >= -1e-8 * np.abs(steps[1:])), np.diff(steps).min()
        assert steps[-1] > steps[0] + 1.0  # and the ascent moves
        np.testing.assert_allclose(fit.links.q.sum(1), 1.0, atol=1e-12)
        np.testing.assert_allclose(fit.links.responsibilities.sum(1), 1.0, atol=1e-9)


def test_an_empty_table_contributes_nothing():
    rng = np.random.default_rng(1)
    X, _ = five_gaussians(3.0, 10, rng)
    obs = Gauss.default(X)
    N, stats = np.zeros(1), obs.stats(X, np.zeros((10, 1)))
    assert abs(obs.elbo(N, stats, obs.post(N, stats))) < 1e-9


def test_the_true_partition_is_a_fixed_point_and_restarts_reach_it():
    """R = 5: links uniform within the true clusters stay put under coordinate ascent (ARI 1,
    five tables); single drawn starts end in local optima below it, and the best of ten
    restarts is where the truth is."""
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
    truth = ascend(X, LinkState.of(from_dense(logp, 199, -np.inf), from_dense(q, 199)), obs, rng)
    Z = truth.links.responsibilities
    assert ari(z, truth.links.cols[Z.argmax(1)]) == 1.0 and abs(truth.n_tables - 5) < 1e-6
    _, plain = fit_restarts(X, np.arange(200), obs, 0.1, decay("none"), 7, restarts=10,
                            starts=("drawn",), rounds=0)
    assert min(plain) < truth.elbo - 5.0  # local optima exist for ascent alone
    best, elbos = fit_restarts(X, np.arange(200), obs, 0.1, decay("none"), 7, restarts=10)
    assert best.elbo == max(elbos) >= truth.elbo - 1e-6 * abs(truth.elbo)
    assert ari(z, best.links.cols[best.links.responsibilities.argmax(1)]) == 1.0


@pytest.mark.slow
def test_without_a_decay_the_default_starts_hold_against_dp_vb_on_overlapping_clusters():
    """R = 3 (overlapping components), f ≡ 1, α = 0.1, a fixed prior, ten data sets the
    defaults were not chosen on: the best of ten restarts from the default starts
    (``default_starts("none")``: DP VB tables) is at most 0.5 nats below the best of ten DP VB
    fits (the same model and prior over partitions; k-means++ starts, run to a relative change
    of 1e-8) on at least nine. Where it is not, the search is not what falls short: the links'
    coordinate ascent from DP VB's own partition settles below DP VB's bound too (mean field
    over links holds less of the overlap's assignment entropy than mean field over labels)."""
    obs = Gauss(2, np.zeros(2), 0.01, 4.0001, 4.0001 * np.eye(2))
    alloc = StickBreaking(0.1)
    logp = log_link_band(np.arange(200.0), 0.1, decay("none"))
    assert default_starts("none") == ("vb",) and set(default_starts("exponential")) == {
        "vb", "drawn"}
    short = []
    for data_seed in range(21, 31):
        X, _ = five_gaussians(3.0, 200, np.random.default_rng(data_seed))
        best, _ = fit_restarts(X, np.arange(200.0), obs, 0.1, decay("none"), data_seed,
                               restarts=10, starts=default_starts("none"))
        dp, dp_labels = -np.inf, None
        for s in np.random.SeedSequence(data_seed).spawn(10):
            labels = nearest_seed(obs.features(X), 50, np.random.default_rng(s))
            S, _ = fresh_vb(X, obs, alloc, labels, 50, 1000, 1e-8)
            model = Mixture.from_summary(obs, alloc, S)
            if model.elbo(S) > dp:
                dp, dp_labels = model.elbo(S), responsibilities(X, obs, model.globals())[0]
        if best.elbo < dp - 0.5:
            short.append(data_seed)
            links = Tables.of(X, dp_labels.argmax(1), logp, obs).links(1e-6)
            at_dp = ascend(X, links, obs, np.random.default_rng(0), 1000, 0.0)
            assert at_dp.elbo < dp - 0.5, (data_seed, at_dp.elbo, dp)
    assert len(short) <= 1, short
