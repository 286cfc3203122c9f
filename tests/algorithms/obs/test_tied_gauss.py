"""tied-gauss (one precision Λ shared by all components) against definitions computed here.

References are built in the tests from the model's definition, not from the model's code: the
posterior from raw per-component statistics (B = B0 + Σ_k [S_k + κ0 m0 m0ᵀ - κ_k m_k m_kᵀ]),
densities from scipy.stats, draws of q from scipy, the evidence by the candidate formula and by
the chain rule of predictives. Also Summary.shared (the pooled scatter's home), the one-item
path of ADF and EP, merges and the fused local step.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from scipy.special import digamma, logsumexp

from bnpmix.algorithms.adf import Clusters, adf_pass
from bnpmix.algorithms.alloc import NRM, StickBreaking
from bnpmix.algorithms.ep import ep_step
from bnpmix.algorithms.mixture import Mixture, optimal_elbo
from bnpmix.algorithms.obs import obs_class
from bnpmix.algorithms.obs import wishart as W
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.obs.tied_gauss import TiedGauss
from bnpmix.algorithms.summary import (
    Delete,
    Insert,
    Merge,
    MergeGroup,
    Pool,
    Reorder,
    Summary,
)
from bnpmix.algorithms.vb.local import Globals, Plan, batch_step, summarize
from bnpmix.algorithms.vb.merge import merge_scores

LOG2PI = np.log(2 * np.pi)
RTOL = 1e-10


# ---------------------------------------------------------------- fixtures and references

def spd(rng: np.random.Generator, D: int) -> np.ndarray:
    A = rng.normal(size=(D, D))
    return A @ A.T + D * np.eye(D)


def setup(seed: int = 0, n: int = 40, D: int = 3, K: int = 3, offset: float = 0.0):
    """A non-default prior (m0 away from the data, full B0, κ0 = 0.5) so every prior term
    matters; correlated data; soft responsibilities."""
    rng = np.random.default_rng(seed)
    model = TiedGauss(D, m0=rng.normal(size=D), kappa0=0.5, nu0=D + 2.5, B0=spd(rng, D))
    A = rng.normal(size=(D, D)) + 2 * np.eye(D)
    X = rng.normal(size=(n, D)) @ A + np.array([1.0, -2.0, 0.5, 3.0][:D]) + offset
    R = rng.dirichlet(np.ones(K), size=n)
    return model, X, R, rng


def ref_post(model: TiedGauss, X: np.ndarray, R: np.ndarray) -> dict:
    """The optimal q from the definition, with raw per-component scatters S_k."""
    N = R.sum(0)
    kappa = model.kappa0 + N
    m = (model.kappa0 * model.m0 + R.T @ X) / kappa[:, None]
    S = np.einsum("nk,ni,nj->kij", R, X, X)
    B = model.B0 + sum(S[k] + model.kappa0 * np.outer(model.m0, model.m0)
                       - kappa[k] * np.outer(m[k], m[k]) for k in range(R.shape[1]))
    return {"kappa": kappa, "m": m, "nu": model.nu0 + N.sum(), "B": B}


def gauss_logpdf(X: np.ndarray, mu: np.ndarray, Lam: np.ndarray) -> np.ndarray:
    """log N(x_n | μ_k, Λ⁻¹): (n, K) for one (μ (K, D), Λ (D, D)); (S, n, K) for S stacked
    draws (μ (S, K, D), Λ (S, D, D))."""
    diff = X[..., :, None, :] - mu[..., None, :, :]
    quad = np.einsum("...nkd,...de,...nke->...nk", diff, Lam, diff)
    logdet = np.linalg.slogdet(Lam)[1][..., None, None]
    return -0.5 * X.shape[1] * LOG2PI + 0.5 * logdet - 0.5 * quad


def log_q(p: dict, mu: np.ndarray, Lam: np.ndarray) -> np.ndarray:
    """log W(Λ | ν, B⁻¹) + Σ_k log N(μ_k | m_k, (κ_k Λ)⁻¹) for S stacked draws: (S,). The
    Wishart density is scipy's; the normal's is written out (scipy's takes one covariance)."""
    out = np.atleast_1d(stats.wishart.logpdf(np.moveaxis(Lam, 0, -1), df=p["nu"],
                                             scale=np.linalg.inv(p["B"])))
    D = Lam.shape[-1]
    diff = mu - p["m"]  # (S, K, D)
    quad = np.einsum("skd,sde,ske->sk", diff, Lam, diff)
    logdet = np.linalg.slogdet(Lam)[1][:, None]
    kappa = p["kappa"]
    return out + (0.5 * (D * np.log(kappa / (2 * np.pi)) + logdet - kappa * quad)).sum(1)


def prior_params(model: TiedGauss, K: int) -> dict:
    return {"kappa": np.full(K, model.kappa0), "m": np.tile(model.m0, (K, 1)),
            "nu": model.nu0, "B": model.B0}


def draw_q(p: dict, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """size draws (μ (S, K, D), Λ (S, D, D)) ~ q: Λ from scipy's Wishart, μ_k | Λ =
    m_k + L⁻ᵀ z / √κ_k with Λ = L Lᵀ and z ~ N(0, I), so that Cov(μ_k | Λ) = (κ_k Λ)⁻¹."""
    D = p["B"].shape[0]
    Lam = stats.wishart.rvs(df=p["nu"], scale=np.linalg.inv(p["B"]), size=size,
                            random_state=rng).reshape(size, D, D)
    L = np.linalg.cholesky(Lam)
    z = rng.normal(size=(size, len(p["kappa"]), D))
    step = np.linalg.solve(np.swapaxes(L, 1, 2)[:, None], z[..., None])[..., 0]
    return p["m"] + step / np.sqrt(p["kappa"])[:, None], Lam


def mc_elbo_terms(X: np.ndarray, R: np.ndarray, p0: dict, p: dict, mu: np.ndarray,
                  Lam: np.ndarray) -> np.ndarray:
    """Σ_nk r_nk log N(x_n|μ_k,Λ⁻¹) + log p(μ, Λ) - log q(μ, Λ) at each draw: (S,)."""
    return (gauss_logpdf(X, mu, Lam) * R).sum((1, 2)) + log_q(p0, mu, Lam) - log_q(p, mu, Lam)


def E_loglik_direct(model: TiedGauss, X: np.ndarray, p: dict) -> np.ndarray:
    D = X.shape[1]
    elogdet = (digamma(0.5 * (p["nu"] - np.arange(D))).sum() + D * np.log(2)
               - np.linalg.slogdet(p["B"])[1])
    out = np.empty((len(X), len(p["kappa"])))
    for k in range(len(p["kappa"])):
        d = X - p["m"][k]
        quad = np.einsum("nd,nd->n", d, np.linalg.solve(p["B"], d.T).T)
        out[:, k] = (-0.5 * D * LOG2PI + 0.5 * elogdet
                     - 0.5 * (D / p["kappa"][k] + p["nu"] * quad))
    return out


def as_post(p: dict) -> dict:
    """A structured q given by (κ, m, ν, B) in the model's form."""
    f = W.factorize(np.asarray(p["B"], float))
    return {"kappa": np.asarray(p["kappa"], float), "m": np.asarray(p["m"], float),
            "nu": np.asarray(float(p["nu"])), "B": f["B"], "U": f["U"],
            "logdet_B": np.asarray(f["logdet_B"])}


def assert_states_close(got: dict, want: dict, rtol: float = RTOL) -> None:
    assert got.keys() == want.keys()
    for key in want:
        scale = max(np.abs(want[key]).max(initial=0.0), 1.0)
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=rtol * scale, err_msg=key)


# ---------------------------------------------------------------- statistics and posterior

def test_stats_are_additive_and_match_definition():
    model, X, R, _ = setup()
    s = model.stats(X, R)
    s1, s2 = model.stats(X[:15], R[:15]), model.stats(X[15:], R[15:])
    assert set(model.stat_shapes()) == {"x"} and set(model.shared_shapes()) == {"n", "scatter"}
    assert s["x"].shape == (3, 3) and s["scatter"].shape == (3, 3) and s["n"].shape == ()
    for key in s:
        np.testing.assert_allclose(s[key], s1[key] + s2[key], rtol=1e-12, atol=1e-12)
    Y = X - model.m0
    np.testing.assert_allclose(s["x"], sum(np.outer(R[n], X[n]) for n in range(len(X))))
    np.testing.assert_allclose(s["scatter"], sum(np.outer(y, y) for y in Y), rtol=1e-12)
    assert float(s["n"]) == pytest.approx(len(X), rel=1e-12)
    # the shared statistics do not depend on q(z), also where an item's responsibilities sum
    # to less than 1 (EP's sites after a cluster left)
    sw = model.stats(X, R * np.linspace(0.2, 1.0, len(X))[:, None])
    np.testing.assert_array_equal(sw["scatter"], s["scatter"])
    assert float(sw["n"]) == len(X)


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_post_equals_the_normal_wishart_update_with_raw_statistics(offset):
    model, X, R, _ = setup(offset=offset)
    if offset:  # a prior centred on the data, as the default is
        model = TiedGauss(3, X.mean(0), 0.5, 5.5, model.B0)
    post, want = model.post(R.sum(0), model.stats(X, R)), ref_post(model, X, R)
    np.testing.assert_allclose(post["kappa"], want["kappa"], rtol=1e-12)
    np.testing.assert_allclose(post["m"], want["m"], rtol=1e-12)
    assert float(post["nu"]) == pytest.approx(want["nu"], rel=1e-12)
    # the raw formula loses digits far from the origin (offset 1e4: |x|² ~ 1e8): compare
    # within what it keeps
    tol = 1e-9 if not offset else 1e-16 * (offset**2) * len(X) * 10
    np.testing.assert_allclose(post["B"], want["B"], atol=tol * np.abs(want["B"]).max())
    np.testing.assert_allclose(post["U"].T @ post["U"], np.linalg.inv(post["B"]), rtol=1e-9)
    assert float(post["logdet_B"]) == pytest.approx(np.linalg.slogdet(post["B"])[1], rel=1e-12)


# ---------------------------------------------------------------- ELBO and evidence

def test_elbo_at_optimum_equals_evidence_by_candidate_formula():
    """log p(X | R) = Σ_nk r_nk log N(x_n | μ_k, Λ⁻¹) + log p(μ, Λ) - log q*(μ, Λ) at any
    (μ, Λ) (the optimal q is the exact posterior of the weighted likelihood): equal at several
    draws, and equal to elbo(post), elbo_at_optimum and log_evidence."""
    model, X, R, rng = setup(n=25)
    N, s = R.sum(0), model.stats(X, R)
    post, want = model.post(N, s), ref_post(model, X, R)
    p0 = prior_params(model, R.shape[1])
    values = mc_elbo_terms(X, R, p0, want, *draw_q(want, rng, 4))
    np.testing.assert_allclose(values, values[0], rtol=1e-9)
    for got in (model.elbo(N, s, post), model.elbo_at_optimum(N, s, post),
                model.log_evidence(N, s)):
        assert got == pytest.approx(values[0], rel=1e-9)


def test_elbo_is_exact_for_any_q_by_monte_carlo():
    """At a non-optimal structured q, elbo = E_q[Σ_nk r_nk log N(x_n|μ_k,Λ⁻¹) + log p(μ, Λ)
    - log q(μ, Λ)], the data term item by item, draws from scipy."""
    model, X, R, rng = setup(n=20)
    N, s = R.sum(0), model.stats(X, R)
    R2 = rng.dirichlet(np.ones(R.shape[1]), size=len(X))
    p0 = prior_params(model, R.shape[1])
    other = ref_post(model, X, R2)
    over = {**ref_post(model, X, R), "nu": model.nu0 + 1.5 * len(X)}
    for p in (other, over):
        q = as_post(p)
        f = mc_elbo_terms(X, R, p0, p, *draw_q(p, rng, 3000))
        assert abs(model.elbo(N, s, q) - f.mean()) < 5 * f.std() / np.sqrt(len(f))


def test_elbo_is_lower_away_from_the_optimum():
    model, X, R, rng = setup()
    N, s = R.sum(0), model.stats(X, R)
    post = model.post(N, s)
    best = model.elbo(N, s, post)
    R2 = rng.dirichlet(np.ones(R.shape[1]), size=len(X))
    for q in (model.post(R2.sum(0), model.stats(X, R2)), model.post(1.25 * N, s),
              model.prior_post(R.shape[1]),
              {**post, "nu": post["nu"] + 3.0}, {**post, "kappa": post["kappa"] * 1.1},
              {**post, "m": post["m"] + 0.05}):
        assert model.elbo(N, s, q) < best - 1e-6


def test_evidence_is_the_chain_of_predictives():
    """With hard assignments, log p(X | z) = Σ_i log p(x_i | x_<i, z) (Student-t predictives
    under the posterior of the earlier items, every component's items sharing Λ)."""
    model, X, _, rng = setup(n=24)
    K = 3
    z = rng.integers(0, K, len(X))
    R = np.eye(K)[z]
    chain = 0.0
    for i in range(len(X)):
        prev = model.post(R[:i].sum(0), model.stats(X[:i], R[:i]))
        chain += model.predictive_logpdf(X[i:i + 1], prev)[0, z[i]]
    assert chain == pytest.approx(model.log_evidence(R.sum(0), model.stats(X, R)), rel=1e-10)


def test_log_marginal_refuses_a_per_component_split():
    model, X, R, _ = setup()
    with pytest.raises(NotImplementedError, match="log_evidence"):
        model.log_marginal(R.sum(0), model.stats(X, R))


# ---------------------------------------------------------------- the E-step

def test_E_loglik_equals_the_direct_computation():
    model, X, R, _ = setup()
    post = model.post(R.sum(0), model.stats(X, R))
    np.testing.assert_allclose(model.E_loglik(X, post),
                               E_loglik_direct(model, X, ref_post(model, X, R)), rtol=1e-10)


def test_E_loglik_is_the_mean_loglik_under_q():
    """E_q[log N(x | μ_k, Λ⁻¹)] over draws from scipy equals E_loglik."""
    model, X, R, rng = setup(n=6)
    p = ref_post(model, X, R)
    post = model.post(R.sum(0), model.stats(X, R))
    ll = gauss_logpdf(X, *draw_q(p, rng, 4000))
    se = ll.std(0) / np.sqrt(len(ll))
    assert np.all(np.abs(ll.mean(0) - model.E_loglik(X, post)) < 5 * se)


def direct_local_step(model: TiedGauss, X: np.ndarray, post: dict, p: dict, Elogw: np.ndarray):
    """R, N, statistics and H from the direct E[log p(x|k)] and their definitions."""
    L = E_loglik_direct(model, X, p) + Elogw
    logR = L - logsumexp(L, axis=1, keepdims=True)
    R = np.exp(logR)
    return R, R.sum(0), model.stats(X, R), -(R * logR).sum(0)


@pytest.mark.parametrize("K", [1, 3, 25])
@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_local_step_equals_the_direct_computation(K, offset):
    """R, N, stats and H of the fused step (O(N K D) products about the batch mean, the pooled
    scatter once) against the direct E[log p(x|k)] per item and component, also for data
    10⁴ away from the origin (and from m0)."""
    model, X, R, rng = setup(n=300, K=K, offset=offset)
    post = model.post(R.sum(0) * 3, {k: 3 * v for k, v in model.stats(X, R).items()})
    Elogw = np.log(rng.dirichlet(np.ones(K)))
    got = model.local_step(X, post, Elogw)
    p = {"kappa": post["kappa"], "m": post["m"], "nu": float(post["nu"]), "B": post["B"]}
    want = direct_local_step(model, X, post, p, Elogw)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9, atol=1e-9)
    for key in want[2]:
        np.testing.assert_allclose(got[2][key], want[2][key], rtol=1e-9,
                                   atol=1e-9 * np.abs(want[2][key]).max())
    np.testing.assert_allclose(got[3], want[3], rtol=1e-8, atol=1e-9)


def test_local_step_with_no_items_or_no_components():
    model, X, R, _ = setup()
    post = model.post(R.sum(0), model.stats(X, R))
    R0, N0, s0, H0 = model.local_step(X, model.prior_post(0), np.zeros(0))
    assert R0.shape == (len(X), 0) and N0.shape == H0.shape == (0,)
    want = model.stats(X, R0)
    assert float(s0["n"]) == float(want["n"]) == len(X)
    np.testing.assert_allclose(s0["scatter"], want["scatter"], rtol=1e-12)
    Re, Ne, se, He = model.local_step(X[:0], post, np.zeros(3))
    assert Re.shape == (0, 3) and not Ne.any() and not He.any() and not se["scatter"].any()


def test_repeated_local_steps_equal_fresh_ones(monkeypatch):
    """A birth's repeated steps on TiedItems (the scatter kept from the first step) give the
    same summaries as fresh steps; several blocks per step (a small block size)."""
    from bnpmix.algorithms.obs import tied_estep

    monkeypatch.setattr(tied_estep, "ESTEP_BYTES", 8 * 64 * 8)
    model, X, R, rng = setup(n=500)
    F = model.repeated(X)
    for _ in range(3):
        post = model.post(R.sum(0), model.stats(X, R))
        g = Globals(np.arange(3), post, np.log(rng.dirichlet(np.ones(3))))
        a, b = batch_step(F, model, g).summary, batch_step(X, model, g).summary
        np.testing.assert_allclose(a.N, b.N, rtol=1e-13)
        for key in b.obs_stats:
            np.testing.assert_allclose(a.obs_stats[key], b.obs_stats[key], rtol=1e-12)
        R = rng.dirichlet(np.ones(3), len(X))


def test_batch_step_summary_keeps_the_scatter_apart():
    model, X, R, _ = setup(n=60)
    post = model.post(R.sum(0), model.stats(X, R))
    g = Globals(np.array([4, 7, 9]), post, np.log(np.full(3, 1 / 3)))
    S = batch_step(X, model, g, Plan(pairs=np.array([[4, 7]]))).summary
    assert set(S.stats) == {"x"} and set(S.shared) == {"n", "scatter"}
    np.testing.assert_allclose(S.shared["scatter"], (X - model.m0).T @ (X - model.m0),
                               rtol=1e-12)
    assert float(S.shared["n"]) == len(X) == S.n_items


# ---------------------------------------------------------------- merges

def all_pairs(uids):
    iu, ju = np.triu_indices(len(uids), k=1)
    return np.stack([uids[iu], uids[ju]], axis=1)


def test_merge_equals_a_refit_on_the_union():
    """The exact ELBO of a Merge (statistics add, the scatter unchanged, H_a the recorded union
    entropy) equals the ELBO of the summary recomputed from r_a + r_b: tied-gauss merge =
    refit on the union."""
    model, X, R, _ = setup(n=50, K=4)
    uids = np.array([3, 5, 8, 11])
    alloc = StickBreaking(1.0)
    S = summarize(X, model, R, None, uids, all_pairs(uids))
    for a, b in all_pairs(uids):
        merged = Merge(int(a), int(b)).apply(S)
        ia, ib = S.index(a), S.index(b)
        Ru = R.copy()
        Ru[:, ia] += R[:, ib]
        Ru = np.delete(Ru, ib, axis=1)
        union = summarize(X, model, Ru, None, np.delete(uids, ib))
        np.testing.assert_allclose(merged.stats["x"], union.stats["x"], rtol=1e-12)
        for key in union.shared:
            np.testing.assert_allclose(merged.shared[key], union.shared[key], rtol=1e-12)
        assert optimal_elbo(model, alloc, merged.without_pairs()) == pytest.approx(
            optimal_elbo(model, alloc, union), rel=1e-12)


def test_merge_gains_are_the_evidence_differences():
    """merge_gains (the determinant lemma on the rank-two change of B) equals the difference
    of the observation ELBOs at the optimum before and after, each from the general elbo; and
    merge_scores asks it by ids."""
    model, X, R, _ = setup(n=50, K=5)
    uids = np.array([0, 2, 4, 6, 8])
    S = summarize(X, model, R, None, uids)
    pairs = all_pairs(uids)
    before = model.elbo(S.N, S.obs_stats, model.post(S.N, S.obs_stats))
    want = []
    for a, b in pairs:
        merged = S.with_pairs(np.array([[a, b]]), np.zeros(1)).apply(Merge(int(a), int(b)))
        post = model.post(merged.N, merged.obs_stats)
        want.append(model.elbo(merged.N, merged.obs_stats, post) - before)
    np.testing.assert_allclose(merge_scores(model, S, pairs), want, rtol=1e-9, atol=1e-9)
    ia = np.array([S.index(a) for a in pairs[:, 0]])
    ib = np.array([S.index(b) for b in pairs[:, 1]])
    np.testing.assert_allclose(model.merge_gains(S.N, S.obs_stats, ib, ia), want, rtol=1e-9,
                               atol=1e-9)  # symmetric in the pair
    assert model.merge_gains(S.N, S.obs_stats, ia[:0], ib[:0]).shape == (0,)


def test_merge_gain_is_rank_two_not_rank_one():
    """With κ0 > 0 the change of B has a positive and a negative eigenvalue (so a rank-one
    update would be wrong); as κ0 → 0 the negative one vanishes."""
    _, X, R, _ = setup(n=50, K=2)
    for kappa0, negative in ((0.5, True), (1e-9, False)):
        model = TiedGauss(3, np.zeros(3), kappa0, 5.5, np.eye(3))
        N, s = R.sum(0), model.stats(X, R)
        B = model.post(N, s)["B"]
        Bm = model.post(np.array([N.sum()]), {**s, "x": s["x"].sum(0, keepdims=True)})["B"]
        ev = np.linalg.eigvalsh(Bm - B)
        assert (ev > 1e-6 * ev.max()).sum() == 1
        assert (ev < -1e-6 * ev.max()).any() == negative


# ---------------------------------------------------------------- the one-item path

def test_predictive_state_and_batch_predictive_match_scipy():
    model, X, R, _ = setup()
    post = model.post(R.sum(0), model.stats(X, R))
    state = model.predictive_state(post)
    lp = model.predictive_logpdf(X, post)
    np.testing.assert_allclose(model.predictive_logpdf_state(state, X), lp, rtol=1e-10)
    D = X.shape[1]
    dof = float(post["nu"]) - D + 1
    for k in range(R.shape[1]):
        kap = post["kappa"][k]
        ref = stats.multivariate_t.logpdf(X, loc=post["m"][k], df=dof,
                                          shape=post["B"] * (kap + 1) / (kap * dof))
        np.testing.assert_allclose(lp[:, k], ref, rtol=1e-10)


@pytest.mark.parametrize("start", ["prior", "data"])
def test_absorbed_items_equal_the_batch_posterior(start):
    """Items absorbed one at a time into every component with their responsibilities reach
    the batch posterior's state to 1e-10 (Λ's factor, every whitened mean, κ, m, ν)."""
    model, X, R, _ = setup(n=60, K=4)
    first = 0 if start == "prior" else 30
    state = model.predictive_state(model.post(R[:first].sum(0),
                                              model.stats(X[:first], R[:first])))
    for i in range(first, len(X)):
        for k in range(R.shape[1]):
            model.absorb(state, k, X[i], R[i, k])
    assert_states_close(state, model.predictive_state(model.post(R.sum(0), model.stats(X, R))))


def test_remove_is_the_inverse_of_absorb():
    model, X, R, _ = setup(n=60, K=4)
    state = model.predictive_state(model.post(R.sum(0), model.stats(X, R)))
    gone = np.arange(0, 60, 3)
    for i in gone:
        for k in range(R.shape[1]):
            model.remove(state, k, X[i], R[i, k])
    kept = np.setdiff1d(np.arange(60), gone)
    assert_states_close(state, model.predictive_state(
        model.post(R[kept].sum(0), model.stats(X[kept], R[kept]))))


def test_sequential_one_item_predictives_give_the_evidence():
    """Σ_i log p(x_i | state before it) under its component, absorbing it after, equals
    log_evidence of the hard assignment."""
    model, X, _, rng = setup(n=30)
    z = rng.integers(0, 3, len(X))
    state = model.predictive_state(model.prior_post(3))
    total = 0.0
    for i in range(len(X)):
        total += model.predictive_logpdf_state(state, X[i])[0, z[i]]
        model.absorb(state, z[i], X[i])
    R = np.eye(3)[z]
    assert total == pytest.approx(model.log_evidence(R.sum(0), model.stats(X, R)), rel=1e-10)


def test_invalid_removes_raise_and_change_nothing():
    model, X, R, _ = setup(n=10)
    state = model.predictive_state(model.post(R.sum(0), model.stats(X, R)))
    before = {k: v.copy() for k, v in state.items()}
    with pytest.raises(ValueError, match="kappa"):
        model.remove(state, 0, X[0], state["kappa"][0] + 1.0)
    with pytest.raises(ValueError, match="positive definite"):  # far away, a big weight
        model.remove(state, 1, X[0] + 1e3, 0.9 * state["kappa"][1])
    with pytest.raises(IndexError):
        model.absorb(state, 3, X[0])
    for key in before:
        np.testing.assert_array_equal(state[key], before[key])


def test_components_of_states_and_posteriors():
    """select / concat keep Λ's entries whole (copies); fresh puts a new component's entries
    beside the learnt Λ."""
    model, X, R, _ = setup()
    post = model.post(R.sum(0), model.stats(X, R))
    state = model.predictive_state(post)
    two = model.select(state, np.array([2, 0]))
    np.testing.assert_array_equal(two["m"], state["m"][[2, 0]])
    np.testing.assert_array_equal(two["L"], state["L"])
    assert two["L"] is not state["L"]
    new = model.predictive_state(model.prior_post(1))
    grown = model.concat(state, new)
    assert len(grown["kappa"]) == 4 and grown["kappa"][3] == model.kappa0
    np.testing.assert_array_equal(grown["L"], state["L"])
    one = model.fresh(state, new)
    np.testing.assert_allclose(model.predictive_logpdf_state(one, X),
                               model.predictive_logpdf_state(grown, X)[:, 3:], rtol=1e-12)
    np.testing.assert_array_equal(model.select(post, np.array([1, 1]))["m"], post["m"][[1, 1]])


def test_adf_pass_reaches_the_batch_posterior():
    """ADF on tied-gauss: the clusters' state after one item at a time equals the state of the
    batch posterior of the responsibilities it absorbed, to 1e-10."""
    model, X, _, _ = setup(n=80)
    X = np.concatenate([X, X + 12.0])  # two groups: ADF creates clusters on the way
    cl, qs = adf_pass(model, NRM(1.0, 1.0, 0.0), X, 0.1)
    assert cl.K > 1
    Q = np.zeros((len(X), cl.K))
    for i, q in enumerate(qs):
        Q[i, :len(q)] = q
    want = model.predictive_state(model.post(Q.sum(0), model.stats(X, Q)))
    assert_states_close(cl.state, want)
    np.testing.assert_allclose(cl.S, Q.sum(0), rtol=1e-12)


def test_ep_steps_reach_the_batch_posterior_of_the_new_sites():
    """EP over the ADF clusters: each item's old site removed (cavity) and its new one added;
    with no cluster dropped the state is that of the batch posterior of the new sites."""
    model, X, _, _ = setup(n=60)
    X = np.concatenate([X, X + 12.0])
    prior = NRM(1.0, 1.0, 0.0)
    cl, qs = adf_pass(model, prior, X, 0.1)
    K = cl.K
    Q = np.zeros((len(X), K))
    for i, q in enumerate(qs):
        Q[i, :len(q)] = q
    stats_, shared = model.split_stats(model.stats(X, Q))
    total = Summary(np.arange(K), Q.sum(0), stats_, np.zeros(K), shared=shared)
    ep = Clusters.from_summary(model, prior, total)
    new = np.zeros_like(Q)
    for i in range(len(X)):
        q, _, keep = ep_step(ep, X[i:i + 1], Q[i], len(X) - 1, 0.1, -1)
        assert keep.all() and len(q) == K
        new[i] = q
    assert_states_close(ep.state, model.predictive_state(model.post(new.sum(0),
                                                                    model.stats(X, new))))


# ---------------------------------------------------------------- draws

def test_draws_have_the_moments_of_q():
    """One Λ per draw for all components: E[Λ] = ν B⁻¹, E[log|Λ|], E[μ_k] = m_k and
    Cov(μ_k) = B / (κ_k (ν - D - 1)); the mean of loglik over draws is E_loglik."""
    model, X, R, _ = setup(n=30)
    post = model.post(R.sum(0), model.stats(X, R))
    rng = np.random.default_rng(5)
    S, D, K = 6000, 3, 3
    draws = [model.draw(post, rng) for _ in range(S)]
    P = np.array([d["U"] for d in draws])
    Lam = np.swapaxes(P, 1, 2) @ P
    mu = np.array([d["mu"] for d in draws])
    logdet = np.array([float(d["logdet"]) for d in draws])
    np.testing.assert_allclose(logdet, np.linalg.slogdet(Lam)[1], rtol=1e-10, atol=1e-10)

    def close(samples, exact, what):
        se = samples.std(0) / np.sqrt(len(samples))
        assert np.all(np.abs(samples.mean(0) - exact) < 5 * se + 1e-12), what

    nu = float(post["nu"])
    close(Lam, nu * np.linalg.inv(post["B"]), "E[Λ]")
    close(logdet, digamma(0.5 * (nu - np.arange(D))).sum() + D * np.log(2)
          - float(post["logdet_B"]), "E[log|Λ|]")
    close(mu, post["m"], "E[μ]")
    d = mu - post["m"]
    for k in range(K):
        close(d[:, k, :, None] * d[:, k, None, :],
              post["B"] / (post["kappa"][k] * (nu - D - 1)), "Cov(μ)")
    ll = np.array([model.loglik(X[:5], th) for th in draws])
    close(ll, model.E_loglik(X[:5], post), "E[loglik]")


def test_sample_items_and_the_predictive_mixture_sample():
    model, X, R, rng = setup(n=30)
    post = model.post(R.sum(0), model.stats(X, R))
    theta = model.draw(post, rng)
    S = 20000
    one = {"mu": np.repeat(theta["mu"][:1], S, axis=0), "U": theta["U"],
           "logdet": theta["logdet"]}
    Y = model.sample_items(one, rng)
    cov = np.linalg.inv(theta["U"].T @ theta["U"])
    se = Y.std(0) / np.sqrt(S)
    assert np.all(np.abs(Y.mean(0) - theta["mu"][0]) < 5 * se)
    C = np.einsum("sd,se->sde", Y - theta["mu"][0], Y - theta["mu"][0])
    assert np.all(np.abs(C.mean(0) - cov) < 5 * C.std(0) / np.sqrt(S))
    np.testing.assert_allclose(model.loglik(X, theta), gauss_logpdf(
        X, theta["mu"], theta["U"].T @ theta["U"]), rtol=1e-10)
    # PredictiveMixture.sample: every item's mean is that of the posterior predictive
    alloc = StickBreaking(1.0)
    mix = Mixture(model, alloc, np.arange(3), post, alloc.post(R.sum(0)))
    Xs, ks = mix.sample(S, rng)
    assert Xs.shape == (S, 3) and set(np.unique(ks)) <= {-1, 0, 1, 2}
    w, rest = mix.weights()
    mean = w @ post["m"] + rest * model.m0
    assert np.all(np.abs(Xs.mean(0) - mean) < 5 * Xs.std(0) / np.sqrt(S))


def test_covariances_means_features_and_prior():
    model, X, R, _ = setup()
    post = model.post(R.sum(0), model.stats(X, R))
    cov = model.covariances(post)
    assert cov.shape == (3, 3, 3)
    for k in range(3):
        np.testing.assert_allclose(cov[k], post["B"] / (float(post["nu"]) - 3 - 1), rtol=1e-12)
    np.testing.assert_array_equal(model.means(post), post["m"])
    np.testing.assert_array_equal(model.means(model.predictive_state(post)), post["m"])
    F = model.features(X)
    np.testing.assert_allclose(F.T @ F, model._U0 @ (X - model.m0).T @ (X - model.m0)
                               @ model._U0.T, rtol=1e-10)
    rebuilt = obs_class("tied-gauss")(**json.loads(json.dumps(model.prior())))
    N, s = R.sum(0), model.stats(X, R)
    assert rebuilt.log_evidence(N, s) == model.log_evidence(N, s)
    with pytest.raises(ValueError, match="columns"):
        model.check_data(X[:, :2])


def test_default_prior_is_the_gauss_default():
    """The same data-scaled Normal-Wishart prior as Gauss.default, every parameter
    overridable."""
    _, X, _, _ = setup(n=200)
    tied, full = TiedGauss.default(X), Gauss.default(X)
    assert tied.prior() == full.prior()
    assert TiedGauss.default(X, kappa0=2.0, nu0=9.0).prior() == Gauss.default(
        X, kappa0=2.0, nu0=9.0).prior()
    with pytest.raises(TypeError):
        TiedGauss.default(X, lam0=1.0)


# ---------------------------------------------------------------- Summary.shared

def tied_summary(seed: int, uids=(1, 2, 3), pairs=None):
    model, X, R, _ = setup(seed=seed, n=30, K=len(uids))
    return model, summarize(X, model, R, None, np.array(uids), pairs)


def test_shared_statistics_add_subtract_scale_and_add_in_place():
    model, a = tied_summary(0)
    _, b = tied_summary(1)
    for key in a.shared:
        np.testing.assert_allclose((a + b).shared[key], a.shared[key] + b.shared[key])
        np.testing.assert_allclose((a - b).shared[key], a.shared[key] - b.shared[key])
        np.testing.assert_allclose(a.scaled(2.5).shared[key], 2.5 * a.shared[key])
    c = a.copy()
    c.add_in_place(b, -1.0)
    for key in a.shared:
        np.testing.assert_allclose(c.shared[key], a.shared[key] - b.shared[key])
        assert c.shared[key] is not a.shared[key]
    empty = Summary.zeros(a.uids, model.stat_shapes(), model.shared_shapes())
    np.testing.assert_array_equal((empty + a).shared["scatter"], a.shared["scatter"])
    with pytest.raises(ValueError, match="statistics differ"):
        a + Summary.zeros(a.uids, model.stat_shapes())
    with pytest.raises(ValueError, match="both per component and shared"):
        Summary(a.uids, a.N, a.stats, a.H, shared={"x": np.zeros(3)})


def test_moves_leave_shared_statistics_unchanged():
    """Merge, MergeGroup, Pool, Delete, Reorder, Insert and over only regroup components: the
    pooled scatter and its mass stay as they were, in arrays of the moved summary's own."""
    pairs = np.array([[1, 2], [1, 3], [2, 3]])
    _, S = tied_summary(0, pairs=pairs)
    S = S.with_pairs(S.pairs, S.Hpair, np.array([[1, 2, 3]]), np.array([0.5]))
    moved = [Merge(1, 2).apply(S), MergeGroup(1, (2, 3)).apply(S), Pool(2, 3).apply(S),
             Delete(3).apply(S), Reorder((3, 1, 2)).apply(S), Insert((7, 9)).apply(S),
             S.over(np.array([9, 3, 2, 1]))]
    for T in moved:
        assert T.shared.keys() == S.shared.keys()
        for key in S.shared:
            np.testing.assert_array_equal(T.shared[key], S.shared[key])
            assert T.shared[key] is not S.shared[key]
        T.add_in_place(T)  # writes into T's own arrays only
    np.testing.assert_array_equal(S.shared["scatter"], tied_summary(0)[1].shared["scatter"])


def test_shared_statistics_round_trip_through_arrays(tmp_path):
    """to_arrays / from_arrays through an .npz read without pickle (a checkpoint's path);
    a summary saved without shared statistics reads back with none."""
    _, S = tied_summary(0, pairs=np.array([[1, 2]]))
    np.savez(tmp_path / "s.npz", **S.to_arrays())
    with np.load(tmp_path / "s.npz", allow_pickle=False) as z:
        back = Summary.from_arrays(dict(z))
    assert back.shared.keys() == S.shared.keys()
    for key in S.shared:
        np.testing.assert_array_equal(back.shared[key], S.shared[key])
        assert back.shared[key].shape == S.shared[key].shape
    np.testing.assert_array_equal(back.stats["x"], S.stats["x"])
    plain = Summary(S.uids, S.N, S.stats, S.H)
    assert Summary.from_arrays(plain.to_arrays()).shared == {}
