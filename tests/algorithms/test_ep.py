"""EP for NRM mixtures: against a plain sequential reference (Alg. 2 written out with dense λ),
its exact bookkeeping (S and λ are the sums of the stored sites), cavity-restore identity, and
removal of clusters below ε."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp

from bnpmix.algorithms.adf import Clusters
from bnpmix.algorithms.alloc import NRM
from bnpmix.algorithms.ep import OnSites, Sites, ep_step, sweep
from bnpmix.algorithms.nrm_mixture import NRMMixture
from bnpmix.algorithms.obs import obs_class
from bnpmix.algorithms.summary import Delete, Pool, Summary


def docs(n: int, V: int, seed: int, topics: int = 3, length: int = 15) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    T = rng.dirichlet(np.full(V, 0.2), size=topics)
    return sp.csr_matrix(np.stack([rng.multinomial(length, T[rng.integers(topics)])
                                   for _ in range(n)]).astype(float))


def log_u_by_root(m, K, a, tau, sigma):
    """log Û by root-finding on u g'(u) in u = U (not the library's Newton in log U)."""
    def dg(u):
        return m - (m - sigma * K) * u / (u + tau) - a * u * (u + tau) ** (sigma - 1)
    hi = 1.0
    while dg(hi) > 0:
        hi *= 2
    return np.log(brentq(dg, 1e-300, hi, xtol=1e-300, rtol=1e-15))


def dm(lam, x):
    return gammaln(lam.sum()) - gammaln(lam.sum() + x.sum()) + np.sum(gammaln(lam + x)
                                                                      - gammaln(lam))


def reference_ep(X, lam0, a, tau, sigma, eps, passes):
    """ADF then `passes` sequential EP sweeps, plainly: sites as a dict per item, λ recomputed
    from the sites each time, Û by root-finding. Also each EP pass's Σ_i of the cavity
    predictive log density, log Σ_j w_j p_j(x_i) − log Σ_j w_j."""
    n, V = X.shape
    sites: list[dict[int, float]] = []
    clusters: list[int] = []  # ids alive, in order
    nxt = 0

    def state(exclude=None):
        S = dict.fromkeys(clusters, 0.0)
        lam = {k: np.full(V, lam0) for k in clusters}
        for j, s in enumerate(sites):
            if j == exclude:
                continue
            for k, r in s.items():
                S[k] += r
                lam[k] = lam[k] + r * X[j]
        return S, lam

    def local(x, m, S, lam, K):
        if sigma == 0:
            w_new = a
        else:
            v = log_u_by_root(m, K, a, tau, sigma)
            w_new = a * (np.exp(v) + tau) ** sigma
        w = np.array([max(S[k] - sigma, 0.0) for k in clusters] + [w_new])
        ll = np.array([dm(lam[k], x) for k in clusters] + [dm(np.full(V, lam0), x)])
        with np.errstate(divide="ignore"):
            r = np.log(w) + ll
        return np.exp(r - logsumexp(r)), logsumexp(r) - np.log(w.sum())

    for i in range(n):  # ADF
        if i == 0:
            clusters.append(nxt)
            nxt += 1
            sites.append({0: 1.0})
            continue
        S, lam = state()
        q, _ = local(X[i], i, S, lam, len(clusters))
        if q[-1] > eps:
            clusters.append(nxt)
            nxt += 1
        else:
            q = q[:-1] / q[:-1].sum()
        q = np.where(q < 1e-10, 0.0, q)
        q /= q.sum()
        sites.append({k: float(v) for k, v in zip(clusters, q, strict=True) if v > 0})
    logps = []
    for _ in range(passes):
        logps.append(0.0)
        for i in range(n):
            S, lam = state(exclude=i)
            q, logp = local(X[i], n - 1, S, lam, len(clusters))
            logps[-1] += logp
            if q[-1] > eps:
                clusters.append(nxt)
                nxt += 1
            else:
                q = q[:-1] / q[:-1].sum()
            q = np.where(q < 1e-10, 0.0, q)
            q /= q.sum()
            sites[i] = {k: float(v) for k, v in zip(clusters, q, strict=True) if v > 0}
            S, _ = state()
            for k in [k for k in clusters if S[k] < eps]:
                clusters.remove(k)
                for s in sites:
                    s.pop(k, None)
    S, lam = state()
    return clusters, S, sites, logps


def run_ep(X, obs, prior, eps, passes, logliks=None):
    """ADF and EP sweeps over one partition, as the driver does with W = 1 (each EP pass's
    figure appended to ``logliks`` when given)."""
    total = Summary.zeros(np.zeros(0, np.int64), obs.stat_shapes(), obs.shared_shapes())
    res = sweep(X, obs, prior, eps, total, None, 0, 0.0)
    sites = res.sites.named(0)
    total, v, nxt = sites.summary, res.v, res.created
    for _ in range(passes):
        res = sweep(X, obs, prior, eps, total, sites, X.shape[0], v)
        sites = res.sites.named(nxt)
        nxt += res.created
        total, v = sites.summary, res.v
        if logliks is not None:
            logliks.append(res.loglik)
    return sites, total


@pytest.mark.parametrize("sigma, tau, a, eps", [(0.0, 1.0, 1.0, 0.1), (0.5, 1.0, 5.0, 0.5),
                                                (0.25, 10.0, 2.0, 0.3)])
def test_one_partition_ep_equals_a_plain_sequential_reference(sigma, tau, a, eps):
    X = docs(40, 10, seed=3, topics=4)
    obs = obs_class("mult")(10, 0.1)
    logliks: list[float] = []
    sites, total = run_ep(X, obs, NRM(a=a, tau=tau, sigma=sigma), eps, 3, logliks)
    clusters, S, ref_sites, ref_logliks = reference_ep(X.toarray(), 0.1, a, tau, sigma, eps, 3)
    np.testing.assert_allclose(logliks, ref_logliks, rtol=1e-10)  # the trace's figures
    assert total.uids.tolist() == clusters
    np.testing.assert_allclose(total.N, [S[k] for k in clusters], rtol=1e-9, atol=1e-10)
    for i, ref in enumerate(ref_sites):
        ids, r = sites.row(i)
        got = dict(zip(ids.tolist(), r.tolist(), strict=True))
        assert got.keys() == ref.keys()
        np.testing.assert_allclose([got[k] for k in ref], list(ref.values()), rtol=1e-9,
                                   atol=1e-10)


@pytest.mark.parametrize("name", ["mult", "gauss", "diag-gauss", "zm-gauss", "tied-gauss"])
def test_sums_equal_the_stored_sites_and_no_cluster_below_epsilon_survives(name):
    rng = np.random.default_rng(1)
    if name == "mult":
        X = docs(60, 8, seed=4)
    else:
        X = np.concatenate([rng.normal(c, 1.0, size=(20, 2)) for c in (-5, 0, 5)])[
            rng.permutation(60)]
    obs = obs_class(name).default(X)
    eps = 0.5
    sites, total = run_ep(X, obs, NRM(a=1.0, tau=1.0, sigma=0.5), eps, passes=2)
    Q = sites.matrix(total.uids)
    np.testing.assert_allclose(total.N, Q.sum(0), rtol=1e-12, atol=1e-12)
    for key, value in obs.stats(X, Q).items():
        np.testing.assert_allclose(total.obs_stats[key], value, rtol=1e-9, atol=1e-9)
    assert np.all(eps <= total.N)
    assert total.N.sum() <= 60 + 1e-9


def test_cavity_then_restore_with_the_same_q_returns_the_state():
    X = docs(30, 8, seed=5)
    obs = obs_class("mult")(8, 0.1)
    sites, total = run_ep(X, obs, NRM(a=1.0, tau=1.0, sigma=0.5), 0.5, passes=1)
    cl = Clusters.from_summary(obs, NRM(a=1.0, tau=1.0, sigma=0.5), total)
    S0, lam0 = cl.S.copy(), cl.state["lam"].copy()
    Q = sites.matrix(total.uids)
    for i in range(30):
        cl.take(X[i:i + 1], Q[i])
        cl.add(X[i:i + 1], Q[i])
    np.testing.assert_allclose(cl.S, S0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cl.state["lam"], lam0, rtol=0, atol=1e-12)


def test_replayed_moves_keep_sites_and_their_sum_consistent():
    X = docs(30, 8, seed=6, topics=4)
    obs = obs_class("mult")(8, 0.1)
    sites, total = run_ep(X, obs, NRM(a=2.0, tau=1.0, sigma=0.5), 0.5, passes=1)
    assert total.K >= 3
    a, b, c = total.uids[:3].tolist()
    for move in (Pool(a, b), Delete(c)):
        sites = OnSites(move).apply(sites)
        Q = sites.matrix(sites.summary.uids)
        np.testing.assert_allclose(sites.summary.N, Q.sum(0), atol=1e-12)
        np.testing.assert_allclose(sites.summary.stats["wc"], obs.stats(X, Q)["wc"], atol=1e-9)
    assert b not in sites.summary.uids and c not in sites.summary.uids
    assert not np.isin(sites.uids, [b, c]).any()
    back = Sites.from_arrays(sites.to_arrays())
    np.testing.assert_array_equal(back.r, sites.r)
    np.testing.assert_array_equal(back.summary.uids, sites.summary.uids)


@pytest.mark.parametrize("eta", [0.3, 0.5, 1.0])
def test_damped_sites_are_the_blend_item_by_item_and_their_sum_stays_exact(eta):
    """blend: r_i = (1 − η) r_i(old) + η r_i(new) over the union of components (a component only
    one side has counts 0 on the other), and the blend of the two sums is the sum of the
    blended sites: N = Σ_i r_i, stats = Σ_i r_i t(x_i)."""
    X = docs(50, 10, seed=5)
    obs = obs_class("mult")(10, 0.1)
    prior = NRM(a=20.0, tau=1.0, sigma=0.5)
    old, _ = run_ep(X, obs, prior, 0.5, passes=0)
    new, _ = run_ep(X, obs, prior, 0.5, passes=2)
    mixed = old.blend(new, eta)
    uids = mixed.summary.uids
    assert set(uids.tolist()) == set(old.summary.uids.tolist()) | set(new.summary.uids.tolist())
    R = mixed.csr(uids).toarray()
    np.testing.assert_allclose(R, (1 - eta) * old.csr(uids).toarray()
                               + eta * new.csr(uids).toarray(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(mixed.summary.N, R.sum(0), rtol=1e-12)
    np.testing.assert_allclose(mixed.summary.stats["wc"], obs.stats(X, R)["wc"], rtol=1e-12)
    assert mixed.n == 50 and np.all(np.diff(mixed.indptr) >= 1)


@pytest.mark.parametrize("sigma", [0.0, 0.5])
def test_each_items_cavity_figure_is_the_heldout_score_of_the_cavity(sigma):
    """EP's figure for item i is what NRMMixture (the held-out scorer) gives x_i from the fit
    without item i's site, at m = N − 1: the trace is a leave-one-out held-out score."""
    rng = np.random.default_rng(2)
    X = np.concatenate([rng.normal(c, 1.0, size=(15, 2)) for c in (-4, 0, 4)])[
        rng.permutation(45)]
    obs, prior, eps = obs_class("gauss").default(X), NRM(a=1.0, tau=1.0, sigma=sigma), 0.5
    sites, total = run_ep(X, obs, prior, eps, passes=1)
    R, uids = sites.matrix(total.uids), total.uids.copy()
    cl = Clusters.from_summary(obs, prior, total)
    for i in range(len(X)):
        cavity = R.copy()
        cavity[i] = 0.0
        sums = Summary(uids.copy(), cavity.sum(0), obs.stats(X, cavity), np.zeros(len(uids)))
        heldout = NRMMixture(obs, prior, sums, len(X) - 1, cl.v).score_samples(X[i:i + 1])[0]
        q, loglik, keep = ep_step(cl, X[i:i + 1], R[i], len(X) - 1, eps, 100 + i)
        assert loglik == pytest.approx(heldout, rel=1e-9, abs=1e-9)
        R = np.pad(R, ((0, 0), (0, len(q) - R.shape[1])))
        R[i], uids = q, cl.uids.copy()
        cl.drop(keep)
        R, uids = R[:, keep], uids[keep]
