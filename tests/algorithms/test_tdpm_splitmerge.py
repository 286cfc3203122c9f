"""Split-merge moves over whole chains of the temporal DP mixture (issue 34) against exact
enumeration: the moves alone visit every configuration of the labels in proportion to its
posterior p(z | x) (the chain states integrated out by a dense Gaussian, independent of the
sampler's Kalman code); their pieces (a chain's evidence, the proposal's probability) against
direct computation; the moves find the merge of a cluster held as two parallel chains."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from bnpmix.algorithms.alloc.rcrp import log_prior
from bnpmix.algorithms.tdpm.cuts import cut_options, graft, peel, side_of, sort_items
from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.emission import GaussianEmission
from bnpmix.algorithms.tdpm.gibbs import ChainSampler, RCRPPrior, relabel
from bnpmix.algorithms.tdpm.text import TextEmission

from .test_rcrp import set_partitions
from .test_tdpm_gibbs import E6, NOISE, RHO, SIGMA, X6, chain_log_marginal

X3 = np.array([0.0, 0.3, 0.1, 0.2, 2.0, -0.2])
E3 = np.array([0, 0, 1, 2, 2, 2])


def exact_partitions(x, epochs, prior) -> dict[tuple, float]:
    """p(z | x) of every labelling whose chains have occupied epochs at most W apart, keyed by
    the canonical labels: P(z) (the RCRP's label-free prior) times each chain's dense Gaussian
    marginal likelihood, normalised."""
    T = int(epochs.max()) + 1
    keys, logw = [], []
    for part in set_partitions(list(range(len(x)))):
        if not all(np.all(np.diff(sorted(set(epochs[b]))) <= prior.window) for b in part):
            continue
        counts = np.zeros((T, len(part)))
        z = np.empty(len(x), int)
        for k, b in enumerate(part):
            np.add.at(counts[:, k], epochs[b], 1)
            z[b] = k
        logw.append(log_prior(counts, prior.window, prior.decay, prior.alpha)
                    + sum(chain_log_marginal(x[b], epochs[b], epochs[b].min()) for b in part))
        keys.append(tuple(relabel(z, epochs).tolist()))
    p = np.exp(np.array(logw) - logsumexp(logw))
    return dict(zip(keys, p.tolist(), strict=True))


def sampler(x, epochs, prior, **kw) -> ChainSampler:
    return ChainSampler(epochs, int(epochs.max()) + 1, GaussianEmission(x[:, None], NOISE),
                        RandomWalk(SIGMA, RHO), prior, **kw)


def start_apart(s: ChainSampler, rng) -> None:
    """Every item a chain of its own."""
    n = len(s.epochs)
    s.restore({"z": np.arange(n), "labels": np.arange(n), "first": s.epochs,
               "last": s.epochs, "phi": rng.normal(size=(n, 1))})


CASES = {
    "6-items-2-epochs-W1": (X6, E6, RCRPPrior(alpha=1.0, window=1, decay=0.8)),
    # a chain over epochs 0..2 split at its middle item leaves two chains (W = 1): the moves
    # must reject a split or merge whose chain skips an epoch
    "3-epochs-W1": (X3, E3, RCRPPrior(alpha=0.7, window=1, decay=2.0)),
    # W = 2: a chain may skip epoch 1
    "3-epochs-W2": (X3, E3, RCRPPrior(alpha=0.7, window=2, decay=2.0)),
}
# 40,000 moves a case: the default run keeps the first, the slow run the others
SLOW = {"3-epochs-W1", "3-epochs-W2"}
MOVES = 40000


def co_clustering(dist: dict[tuple, float]) -> tuple[np.ndarray, float]:
    """E[co-clustering matrix] and E[number of chains] under a distribution over labellings."""
    co, k = 0.0, 0.0
    for key, p in dist.items():
        z = np.array(key)
        co = co + p * (z[:, None] == z[None, :])
        k += p * (z.max() + 1)
    return co, k


def visits_match(s: ChainSampler, exact: dict[tuple, float], rng) -> None:
    """MOVES split-merge proposals of ``s`` (its ``attempts`` 1): the visit frequency of each
    labelling within 4 binomial standard errors (inflated 4x for the moves' autocorrelation) of
    its probability under ``exact``, the co-clustering probabilities within 0.03 and the
    expected number of chains within 0.05."""
    p = np.array(list(exact.values()))
    seen = dict.fromkeys(exact, 0)
    for _ in range(MOVES):
        s.state = s.splitmerge.sweep(s.state, rng)
        seen[tuple(s.canonical().tolist())] += 1  # a KeyError: a labelling the prior forbids
    freq = np.array([seen[k] for k in exact]) / MOVES
    se = np.sqrt(p * (1 - p) / MOVES)
    assert np.all(np.abs(freq - p) < 4 * 4 * se + 0.002), np.max(np.abs(freq - p) / se)
    got_co, got_k = co_clustering(dict(zip(exact, freq, strict=True)))
    exact_co, exact_k = co_clustering(exact)
    assert np.max(np.abs(got_co - exact_co)) < 0.03, np.max(np.abs(got_co - exact_co))
    assert abs(got_k - exact_k) < 0.05, (got_k, exact_k)


@pytest.mark.parametrize("case", [pytest.param(c, id=k, marks=[pytest.mark.slow] * (k in SLOW))
                                  for k, c in CASES.items()])
def test_split_merge_alone_visits_the_labellings_in_proportion_to_the_posterior(case):
    """Split-merge proposals only (no item moves, no relinking), from every item apart: the
    visit frequency of each labelling within 4 binomial standard errors (inflated 4x for the
    moves' autocorrelation) of its exact posterior probability, the co-clustering
    probabilities within 0.03 and the expected number of chains within 0.05."""
    x, epochs, prior = case
    exact = exact_partitions(x, epochs, prior)
    p = np.array(list(exact.values()))
    assert p.max() < 0.5 and np.sum(p > 0.01) >= 8  # the test discriminates
    rng = np.random.default_rng(11)
    s = sampler(x, epochs, prior)
    start_apart(s, rng)
    sm = s.splitmerge
    sm.attempts = 1
    visits_match(s, exact, rng)
    assert 0.05 < sm.accepted / MOVES < 0.95


def test_chain_evidence_is_the_dense_gaussian_marginal():
    """log p(x_chain) by the Kalman filter over grouped items (with each group's constant)
    equals the dense marginal of Cov(x_i, x_j) = σ + ρ (min(t_i, t_j) − born) + Σ δ_ij."""
    x = np.array([0.4, -0.3, 0.9, 1.4, 1.1, 0.2, 2.0])
    epochs = np.array([1, 1, 2, 4, 4, 4, 5])
    s = sampler(x, epochs, RCRPPrior(1.0, 2, 1.0))
    got = s.splitmerge.evidence(s.state, np.arange(7))
    assert got == pytest.approx(chain_log_marginal(x, epochs, 1), abs=1e-10)


def test_proposal_probability_is_that_of_the_draws():
    """The sequential allocation's log q of a split equals the frequency of that split among
    its draws (the proposal ratio the merges use is the probability the splits are drawn with),
    and the probabilities of all splits with i in A and j in B sum to 1."""
    x, epochs, prior = CASES["6-items-2-epochs-W1"]
    s = sampler(x, epochs, prior)
    sm = s.splitmerge
    items, i, j = np.arange(6), 0, 4
    rng = np.random.default_rng(3)
    draws = 20000
    counts: dict[tuple, int] = {}
    for _ in range(draws):
        into_a, _ = sm.allocate(s.state, items, i, j, rng)
        counts[tuple(into_a.tolist())] = counts.get(tuple(into_a.tolist()), 0) + 1
    total = 0.0
    for bits in range(2 ** 4):
        rest = [(bits >> u) & 1 == 1 for u in range(4)]
        into_a = np.array([True, rest[0], rest[1], rest[2], False, rest[3]])
        q = np.exp(sm.allocate(s.state, items, i, j, None, into_a)[1])
        total += q
        f = counts.get(tuple(into_a.tolist()), 0) / draws
        assert abs(f - q) < 4 * np.sqrt(q * (1 - q) / draws) + 1e-3, (into_a, f, q)
    assert total == pytest.approx(1.0, abs=1e-12)


def test_a_cluster_held_as_two_parallel_chains_is_merged():
    """One cluster over 6 epochs whose items alternate between two chains: the merge of the
    two has an MH ratio above 1 (the joint gain outweighs the split's proposal probability),
    so a proposal anchored in both chains merges them, and the log joint rises."""
    rng = np.random.default_rng(0)
    T, per = 6, 4
    epochs = np.repeat(np.arange(T), per)
    x = 3.0 + 0.2 * np.cumsum(rng.normal(size=T)).repeat(per) + rng.normal(size=T * per) * 0.3
    s = sampler(x, epochs, RCRPPrior(1.0, 1, 0.8))
    z = np.tile([0, 1], T * per // 2)
    phi = np.repeat(x.reshape(T, per).mean(1)[None], 2, axis=0).reshape(-1, 1)
    s.restore({"z": z, "labels": np.arange(2), "first": np.zeros(2, int),
               "last": np.full(2, T - 1), "phi": phi})
    sm = s.splitmerge
    A, B = sm.members(s.state, 0), sm.members(s.state, 1)
    items = np.arange(T * per)
    _, logq = sm.allocate(s.state, items, 0, 1, None, z == 0)
    assert sm.log_ratio(s.state, items, A, B) + logq > 1.0
    before = s.log_joint()
    s.state, accepted = sm.propose(s.state, 0, 1, rng)
    assert accepted
    assert np.all(s.z == s.z[0])
    assert s.log_joint() > before


def test_anchors_are_drawn_with_the_probability_the_ratio_uses():
    """A stub of 2 items beside a chain of 38 (4 epochs x 10 items): each item is drawn as the
    first anchor with frequency r_z(i) = ½/N + ½/(K n_{z_i}) (within 4 binomial standard
    errors), the probability the MH ratio carries, and the stub's items are drawn in more than a
    quarter of the proposals (uniform anchors: 1/20)."""
    rng = np.random.default_rng(4)
    epochs = np.repeat(np.arange(4), 10)
    x = rng.normal(size=40) * 0.2
    s = sampler(x, epochs, RCRPPrior(1.0, 1, 0.8))
    z = np.zeros(40, int)
    z[[12, 23]] = 1
    phi = np.zeros((4 + 2, 1))
    s.restore({"z": z, "labels": np.arange(2), "first": np.array([0, 1]),
               "last": np.array([3, 2]), "phi": phi})
    sm = s.splitmerge
    pool = np.arange(40)
    draws = 40000
    freq = np.bincount([sm.anchor(s.state, pool, rng, 0) for _ in range(draws)],
                       minlength=40) / draws
    r = np.exp([sm.log_pick(40, 2, int(np.sum(z == z[i]))) for i in range(40)])
    assert r.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(np.abs(freq - r) < 4 * np.sqrt(r * (1 - r) / draws)), (freq, r)
    assert freq[[12, 23]].sum() > 0.25


def restore_labels(s: ChainSampler, z: np.ndarray) -> None:
    """Set the labels to z (states zero: the cut moves' ratios do not read them)."""
    labels = np.unique(z)
    first = np.array([s.epochs[z == k].min() for k in labels])
    last = np.array([s.epochs[z == k].max() for k in labels])
    s.restore({"z": np.asarray(z), "labels": labels, "first": first, "last": last,
               "phi": np.zeros((int(np.sum(last - first + 1)), 1))})


def cut_kernel(s: ChainSampler, i: int, j: int) -> dict[tuple, float]:
    """The cut move's transition probabilities from the sampler's state with anchors i, j:
    each option drawn uniformly, a peel's every allocation with its probability q, accepted
    with min(1, ratio); keyed by the canonical labels reached (the state itself excluded)."""
    sm = s.splitmerge
    a, b = int(s.z[i]), int(s.z[j])
    options = cut_options(s.model, s.state, i, j)
    out: dict[tuple, float] = {}
    for side, c in options:
        if a != b:
            moves = [(graft(sm, s.state, i, j, side, c), 0.0)]
        else:
            c_epoch = int(s.first[c] if side > 0 else s.last[c])
            region = side_of(s.model, sm.members(s.state, a), side, c_epoch)
            rest = [u for u, item in enumerate(region) if item not in (i, j)]
            moves = []
            for bits in range(2 ** len(rest)):
                into_a = region != j
                into_a[rest] = [(bits >> u) & 1 == 1 for u in range(len(rest))]
                logq = sm.allocate(s.state, region, i, j, None, into_a)[1]
                moves.append((peel(sm, s.state, i, j, side, c, None, 0, into_a), logq))
        for (moved, target, ratio), logq in moves:
            if not np.isfinite(ratio):
                continue
            z = s.z.copy()
            z[moved] = target
            key = tuple(relabel(z, s.epochs).tolist())
            p = np.exp(logq) * min(1.0, np.exp(ratio)) / len(options)
            out[key] = out.get(key, 0.0) + p
    return out


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_cut_moves_are_reversible_with_respect_to_the_posterior(case):
    """Detailed balance of the grafts and peels, exactly: for every labelling x, every ordered
    pair of anchors (i, j) and every y the move reaches, p(x | data) r_x(i) K_ij(x → y) =
    p(y | data) r_y(i) K_ij(y → x), with K_ij summed over the options and (peels) over every
    allocation, and p the enumerated posterior (dense Gaussian marginals, not the sampler's
    Kalman code); the moves connect many pairs of labellings, with acceptance probabilities
    below 1 (the ratio matters)."""
    x, epochs, prior = case
    exact = exact_partitions(x, epochs, prior)
    s = sampler(x, epochs, prior)
    sm = s.splitmerge
    n = len(x)
    flows: dict[tuple, float] = {}
    for key in exact:
        z = np.array(key)
        restore_labels(s, z)
        for i in range(n):
            own = int(np.sum(z == z[i]))
            log_r = sm.log_pick(n, int(z.max()) + 1, own)
            for j in range(n):
                if j == i:
                    continue
                for y, p in cut_kernel(s, i, j).items():
                    if y != key:
                        flows[(key, y, i, j)] = exact[key] * np.exp(log_r) * p
    assert len(flows) > 100
    for (key, y, i, j), f in flows.items():
        back = flows.get((y, key, i, j), 0.0)
        assert f == pytest.approx(back, rel=1e-9, abs=1e-300), (key, y, i, j, f, back)


@pytest.mark.parametrize("case", [pytest.param(c, id=k, marks=[pytest.mark.slow] * (k in SLOW))
                                  for k, c in CASES.items()])
def test_cut_moves_alone_visit_the_two_chain_labellings_in_proportion_to_the_posterior(case):
    """Cut proposals only, from two chains: the number of chains stays 2, every labelling of
    two chains is visited, each with frequency within 4 binomial standard errors (inflated 4x
    for the moves' autocorrelation) of its posterior probability given two chains."""
    x, epochs, prior = case
    exact = {k: p for k, p in exact_partitions(x, epochs, prior).items() if max(k) == 1}
    keys = list(exact)
    p = np.array([exact[k] for k in keys])
    p /= p.sum()
    assert p.max() < 0.5 and np.sum(p > 0.01) >= 8  # the test discriminates
    rng = np.random.default_rng(12)
    s = sampler(x, epochs, prior)
    restore_labels(s, np.array(keys[0]))
    sm = s.splitmerge
    sm.attempts, sm.cut = 1, 1.0
    seen = dict.fromkeys(keys, 0)
    for _ in range(MOVES):
        s.state = sm.sweep(s.state, rng)
        seen[tuple(s.canonical().tolist())] += 1  # a KeyError: a labelling not of two chains
    freq = np.array([seen[k] for k in keys]) / MOVES
    se = np.sqrt(p * (1 - p) / MOVES)
    assert np.all(np.abs(freq - p) < 4 * 4 * se + 0.002), np.max(np.abs(freq - p) / se)
    assert sm.moves["graft"] > 200 and sm.moves["merge"] == sm.moves["split"] == 0


def test_the_head_of_an_impure_chain_beside_a_chain_of_its_cluster_is_grafted():
    """Cluster X (4 items an epoch, epochs 0-5) is held by chain a, but at epochs 0-2 half of
    its items are in chain b, which continues as cluster Y at epochs 3-5: the whole merge of a
    and b is rejected (their union mixes X and Y: ratio below e⁻²⁰); the graft of b's head
    (epochs 0-2) into a has an MH ratio above 1, leaves X in one chain and Y in another, and
    raises the log joint."""
    rng = np.random.default_rng(2)
    T = 6
    ex, ey = np.repeat(np.arange(T), 4), np.repeat(np.arange(3, T), 4)
    x = np.concatenate([3.0 + 0.3 * rng.normal(size=ex.size), -3.0 + 0.3 * rng.normal(size=12)])
    epochs = np.concatenate([ex, ey])
    z = np.zeros(len(x), int)
    z[ex.size:] = 1
    z[:ex.size][(np.arange(ex.size) % 4 < 2) & (ex < 3)] = 1
    s = sampler(x, epochs, RCRPPrior(1.0, 1, 0.8))
    restore_labels(s, z)
    sm = s.splitmerge
    i, j = 2, 0  # epoch 0: i in a, j in b
    assert s.z[i] == 0 and s.z[j] == 1
    A, B = sm.members(s.state, 0), sm.members(s.state, 1)
    items = sort_items(s.model, np.concatenate([A, B]))
    _, logq = sm.allocate(s.state, items, i, j, None, np.isin(items, A))
    assert sm.log_ratio(s.state, items, A, B) + logq < -20
    assert (1, 3) in cut_options(s.model, s.state, i, j)
    moved, target, ratio = graft(sm, s.state, i, j, 1, 3)
    assert ratio > 0
    before = s.log_joint()
    sm.move(s.state, moved, target, [0, 1], rng)
    assert np.all(s.z[:ex.size] == s.z[0]) and np.all(s.z[ex.size:] == s.z[ex.size])
    assert s.z[0] != s.z[ex.size]
    assert s.log_joint() > before


# ---------------------------------------------------------------- text: multinomial documents

# six documents of 4-7 words over 4 words, two epochs: two word patterns, so that the labellings
# that split or join them differ in weight
DOCS6 = np.array([[4, 1, 0, 0], [3, 1, 1, 0], [0, 0, 3, 3], [5, 0, 1, 0], [0, 1, 2, 4],
                  [1, 0, 3, 2]], dtype=float)
TEXT_SIGMA, TEXT_RHO = 4.0, 0.5


def text_chain_log_marginal(emission: TextEmission, items, epochs) -> float:
    """log p̃(x_block) of one chain: the pseudo-observations of its epochs' documents
    (``group_pseudo_obs``) integrated against the random walk's prior over its occupied epochs
    as one dense Gaussian per word, Cov(φ_a, φ_b) = σ + ρ (min(t_a, t_b) − born) + δ_ab r_a,
    plus the expansions' constants: independent of the Kalman filter and of the moves."""
    order = np.argsort(epochs[items], kind="stable")
    items = np.asarray(items)[order]
    ep = epochs[items]
    starts = np.flatnonzero(np.diff(ep, prepend=-1))
    y, r, log_c = emission.group_pseudo_obs(items, starts)
    t = ep[starts].astype(float)
    prior = TEXT_SIGMA + TEXT_RHO * (np.minimum.outer(t, t) - t[0])
    return float(log_c.sum()) + sum(
        float(multivariate_normal(np.zeros(len(t)), prior + np.diag(r[:, w])).logpdf(y[:, w]))
        for w in range(y.shape[1]))


@pytest.mark.slow
def test_text_split_merge_alone_visits_the_labellings_in_proportion_to_their_weight():
    """Multinomial documents (TextEmission): split-merge proposals alone, from every document
    apart, visit each labelling in proportion to P(z) Π_k p̃(x_k), p̃ the chains' marginals
    over the expansions' Gaussian pseudo-observations (the target the moves are built for;
    an approximation of the posterior, as the item moves' Laplace marginals are), within the
    same tolerances as the Gaussian case."""
    epochs = np.array([0, 0, 0, 1, 1, 1])
    prior = RCRPPrior(alpha=1.0, window=1, decay=0.8)
    emission = TextEmission(sp.csr_matrix(DOCS6))
    T = 2
    keys, logw = [], []
    for part in set_partitions(list(range(6))):
        counts = np.zeros((T, len(part)))
        z = np.empty(6, int)
        for k, b in enumerate(part):
            np.add.at(counts[:, k], epochs[b], 1)
            z[b] = k
        logw.append(log_prior(counts, prior.window, prior.decay, prior.alpha)
                    + sum(text_chain_log_marginal(emission, b, epochs) for b in part))
        keys.append(tuple(relabel(z, epochs).tolist()))
    p = np.exp(np.array(logw) - logsumexp(logw))
    exact = dict(zip(keys, p.tolist(), strict=True))
    assert p.max() < 0.5 and np.sum(p > 0.01) >= 8  # the test discriminates
    rng = np.random.default_rng(12)
    s = ChainSampler(epochs, T, emission, RandomWalk(TEXT_SIGMA, TEXT_RHO), prior)
    n = len(epochs)
    s.restore({"z": np.arange(n), "labels": np.arange(n), "first": epochs, "last": epochs,
               "phi": rng.normal(size=(n, 4))})
    sm = s.splitmerge
    sm.attempts = 1
    visits_match(s, exact, rng)
