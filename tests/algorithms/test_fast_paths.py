"""The faster paths of the local step, the merge moves and the births' proposals give the
numbers of the direct computations (issue 34: memo on text within 3x ADF's time): bit for bit
where the arithmetic is the same, to 1e-12 against the formulas otherwise."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp

from bnpmix.algorithms import sparse_stats as ss
from bnpmix.algorithms.alloc import StickBreaking
from bnpmix.algorithms.alloc.base import VariationalAllocation
from bnpmix.algorithms.mixture import log_marginals, optimal_elbo
from bnpmix.algorithms.obs.diag_gauss import DiagGauss
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.obs.mult import Mult, as_csr, held_columns
from bnpmix.algorithms.obs.tied_gauss import TiedGauss
from bnpmix.algorithms.summary import Delete, Merge, MergeGroup
from bnpmix.algorithms.vb import init
from bnpmix.algorithms.vb.birth import settle_family, verify
from bnpmix.algorithms.vb.local import logsumexp_rows, summarize
from bnpmix.algorithms.vb.merge import allocation_terms, merge_move


def test_logsumexp_rows_is_scipys():
    """Ties at the maximum, an absent component's -1e30, one column, wide rows: scipy's
    logsumexp to 1e-15 (its bits, since scipy 1.15 separates the maximum the same way), and
    the shifted direct sum; rows with a non-finite entry (scipy's own rules) go to scipy."""
    rng = np.random.default_rng(0)
    for n, K in [(50, 10), (400, 139), (7, 1), (30, 2)]:
        A = rng.normal(size=(n, K)) * 30
        A[0] = 5.0
        A[1, 0] = -1e30
        A[2, : K // 2] = A[2, -1]
        np.testing.assert_allclose(logsumexp_rows(A), logsumexp(A, axis=1, keepdims=True),
                                   rtol=1e-15, atol=0)
        direct = np.log(np.exp(A - A.max(1, keepdims=True)).sum(1, keepdims=True))
        np.testing.assert_allclose(logsumexp_rows(A), direct + A.max(1, keepdims=True),
                                   rtol=1e-15, atol=0)
    B = np.array([[0.0, -np.inf], [-np.inf, -np.inf], [np.inf, 1.0]])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(logsumexp_rows(B), logsumexp(B, axis=1, keepdims=True))


def test_stick_breaking_terms_of_many_rows_are_each_rows_own():
    """optimal_terms over the rows of N equals elbo(n, post(n)) row by row, bit for bit (the
    interface's default), and the closed form Σ_k log B(a1_k, a0_k) - K log B(1, α0)."""
    from scipy.special import betaln

    rng = np.random.default_rng(1)
    for alpha0 in (0.3, 1.0, 7.5):
        alloc = StickBreaking(alpha0)
        for M, K in [(1, 1), (5, 9), (40, 140)]:
            N = rng.gamma(0.5, 20.0, (M, K))
            N[rng.random((M, K)) < 0.2] = 0.0
            got = alloc.optimal_terms(N)
            np.testing.assert_array_equal(got, VariationalAllocation.optimal_terms(alloc, N))
            post = [alloc.post(n) for n in N]
            closed = [np.sum(betaln(p["a1"], p["a0"])) - K * betaln(1.0, alpha0) for p in post]
            np.testing.assert_allclose(got, closed, rtol=1e-11)


@pytest.mark.parametrize("density", [0.02, 0.3, 1.0])
def test_held_columns_are_scipys_csc_of_the_positive_counts(density):
    rng = np.random.default_rng(2)
    wc = np.where(rng.random((9, 57)) < density, rng.gamma(0.5, 3.0, (9, 57)), 0.0)
    wc[0, 1], wc[3, 2] = -1.0, 1e-300
    want = sp.csr_matrix(np.where(wc > 0, wc, 0))
    want.eliminate_zeros()
    want = want.tocsc()
    for given in (wc, sp.csr_matrix(wc)):
        got = held_columns(given)
        for name in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


def test_mult_merge_gains_are_eq_12_through_either_path():
    """Pairs sharing many words (the word path) and few (the pair path): each gain is log
    M(S_a + S_b) - log M(S_a) - log M(S_b) from Mult.log_marginal."""
    rng = np.random.default_rng(3)
    V, K = 200, 12
    obs = Mult(V, rng.uniform(0.05, 0.5, V))
    for density in (0.9, 0.05):
        wc = np.where(rng.random((K, V)) < density, rng.gamma(0.5, 4.0, (K, V)), 0.0)
        a, b = np.triu_indices(K, k=1)
        N = wc.sum(1)
        gains = obs.merge_gains(N, {"wc": wc}, a, b)
        merged = obs.log_marginal(N[a] + N[b], {"wc": wc[a] + wc[b]})
        single = obs.log_marginal(N, {"wc": wc})
        np.testing.assert_allclose(gains, merged - single[a] - single[b], rtol=1e-10, atol=1e-9)


IDS = np.array([0, 1, 2, 3, 7, 8, 9, 10, 11])
FAMILIES = [(0, (7, 8, 9)), (1, (10, 11))]


def test_both_paths_of_the_merge_gains_give_the_shared_words_terms():
    """The word path (every two holders of a word) and the pair path (the two rows' held
    masks and-ed) each sum Eq. 12's terms over exactly the words both components hold."""
    rng = np.random.default_rng(7)
    V, K = 150, 9
    obs = Mult(V, rng.uniform(0.05, 0.5, V))
    wc = np.where(rng.random((K, V)) < 0.4, rng.gamma(0.5, 4.0, (K, V)), 0.0)
    a, b = np.triu_indices(K, k=1)
    want = [sum(obs._shared(np.array([w]), wc[i, w], wc[j, w])[0]
                for w in range(V) if wc[i, w] > 0 and wc[j, w] > 0)
            for i, j in zip(a, b, strict=True)]
    np.testing.assert_allclose(obs._gains_by_pair(wc, a, b), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(obs._gains_by_word(held_columns(wc), a, b), want, rtol=1e-12,
                               atol=1e-12)
    some = np.arange(0, len(a), 3)  # the word path keeps only the pairs asked for
    np.testing.assert_allclose(obs._gains_by_word(held_columns(wc), a[some], b[some]),
                               np.array(want)[some], rtol=1e-12, atol=1e-12)


def test_a_folded_dense_statistic_is_the_fold_then_the_selection():
    rng = np.random.default_rng(8)
    v = rng.normal(size=(7, 5))
    for keep, gone in ((2, [5]), (6, [0, 3]), (0, [1])):
        kept = ~np.isin(np.arange(7), gone)
        np.testing.assert_array_equal(ss.folded_rows(v, keep, gone, kept),
                                      ss.rows(ss.fold(v, keep, gone), kept))
        sparse = ss.folded_rows(sp.csr_matrix(v), keep, gone, kept)
        np.testing.assert_array_equal(sparse.toarray(), ss.rows(ss.fold(v, keep, gone), kept))
    X = sp.csr_matrix(np.eye(3))
    assert as_csr(X) is X
    assert as_csr(X.astype(np.float32)) is not X


def family_summary(obs_name: str, seed: int = 4):
    """Two births after their adoption lap: origin 0 (emptied) whose newborns hold two real
    clusters, one of them cut in two (7 | 8 + 9), and origin 1 (emptied) whose newborns 10,
    11 cut one large cluster at random (undone: a large component last in the stick-breaking
    order costs more than the merge entropy saves); components 2 and 3 hold clusters of
    their own. Planned pairs: all; groups: the families."""
    rng = np.random.default_rng(seed)
    n, C = 600, 5  # clusters: A (7), B (8 | 9), the one of 10/11 (large), those of 2 and 3
    z = rng.choice(C, n, p=[0.1, 0.1, 0.6, 0.1, 0.1])
    owner = np.array([7, 8, 10, 2, 3])[z]
    cut = rng.random(n) < 0.5
    owner[(z == 1) & cut], owner[(z == 2) & cut] = 9, 11
    if obs_name == "mult":
        topics = rng.dirichlet(np.full(60, 0.1), C)
        X = sp.csr_matrix(np.stack([rng.multinomial(30, topics[k]) for k in z]).astype(float))
        obs = Mult.default(X, lam0=0.2)
    else:
        X = rng.normal(size=(n, 3)) + rng.normal(0, 6, (C, 3))[z]
        cls = {"gauss": Gauss, "diag-gauss": DiagGauss, "tied-gauss": TiedGauss}[obs_name]
        obs = cls.default(X)
    R = rng.dirichlet(np.full(len(IDS), 0.05), n) * 0.02
    R[np.arange(n), np.searchsorted(IDS, owner)] += 0.98
    R[:, :2] = 0.0  # the origins took no item
    R /= R.sum(1, keepdims=True)
    iu, ju = np.triu_indices(len(IDS), k=1)
    pairs = np.stack([IDS[iu], IDS[ju]], axis=1)
    groups = np.array([[0, 7, 8, 9], [1, 10, 11, -1]])
    return obs, summarize(X, obs, R, None, IDS, pairs, groups)


@pytest.mark.parametrize("name", ["mult", "gauss", "diag-gauss", "tied-gauss"])
def test_carried_log_marginals_are_the_moved_summarys_own(name):
    """After a Merge, a MergeGroup and a Delete, the values carried from the summary before
    (recomputed only for the changed rows) equal log_marginal of the moved summary bit for
    bit; a model whose components share a parameter has none (its log evidence is not their
    sum)."""
    obs, S = family_summary(name)
    lm = log_marginals(obs, S)
    if name == "tied-gauss":
        assert lm is None
        return
    np.testing.assert_array_equal(lm, obs.log_marginal(S.N, S.obs_stats))
    for move, fresh in ((Merge(8, 9), (8,)), (MergeGroup(0, (7, 8, 9)), (0,)), (Delete(0), ())):
        moved = move.apply(S)
        carried = log_marginals(obs, moved, (S.uids, lm), fresh)
        np.testing.assert_array_equal(carried, obs.log_marginal(moved.N, moved.obs_stats))
        assert optimal_elbo(obs, StickBreaking(1.0), moved, carried) == optimal_elbo(
            obs, StickBreaking(1.0), moved)


def reference_verify(obs, alloc, S, families):
    """verify as specified (origins dropped), every ELBO from the whole summary."""
    moves = []
    for origin, newborns in families:
        undone = MergeGroup(origin, newborns).apply(S)
        kept, merges = Delete(origin).apply(S), []
        elbo = optimal_elbo(obs, alloc, kept)
        members = list(newborns)
        while True:
            best, best_elbo = None, elbo
            for a, b in [(a, b) for i, a in enumerate(members) for b in members[i + 1:]]:
                if kept.pair_entropy(a, b) is None:
                    continue
                larger = kept.N[kept.index(a)] >= kept.N[kept.index(b)]
                move = Merge(a, b) if larger else Merge(b, a)
                cand = optimal_elbo(obs, alloc, move.apply(kept))
                if cand > best_elbo:
                    best, best_elbo = move, cand
            if best is None:
                break
            kept, elbo = best.apply(kept), best_elbo
            merges.append(best)
            members.remove(best.b)
        if optimal_elbo(obs, alloc, undone) >= elbo:
            S = undone
            moves.append(MergeGroup(origin, newborns))
        else:
            S = kept
            moves.extend([Delete(origin), *merges])
    return S, moves


@pytest.mark.parametrize("name", ["mult", "gauss", "tied-gauss"])
@pytest.mark.parametrize("alpha0", [0.5, 5.0])
def test_verify_with_carried_evidence_decides_as_the_whole_summary_does(name, alpha0):
    """The first family is kept with 8 and 9 merged, the second undone: the same moves and
    summary as every ELBO computed from the whole summary."""
    obs, S = family_summary(name, seed=5)
    alloc = StickBreaking(alpha0)
    got_S, got = verify(obs, alloc, S, FAMILIES, drop_origins=True)
    want_S, want = reference_verify(obs, alloc, S, FAMILIES)
    assert want == [Delete(0), Merge(8, 9), MergeGroup(1, (10, 11))]
    assert got == want
    np.testing.assert_array_equal(got_S.uids, want_S.uids)
    np.testing.assert_array_equal(got_S.N, want_S.N)
    kept, merges, elbo = settle_family(obs, alloc, Delete(0).apply(S), (7, 8, 9))
    assert merges == [Merge(8, 9)]
    np.testing.assert_allclose(elbo, optimal_elbo(obs, alloc, kept), rtol=1e-12)


def test_merge_move_keeps_the_larger_component():
    _, S = family_summary("mult")
    for at in range(len(S.pairs)):
        move = merge_move(S, at)
        assert {move.a, move.b} == set(S.pairs[at].tolist())
        assert S.N[S.index(move.a)] >= S.N[S.index(move.b)]
    assert allocation_terms(StickBreaking(1.0), S.N) == StickBreaking(1.0).optimal_terms(
        S.N[None])[0]


def test_kmeans_with_kept_norms_and_fast_rows_is_the_plain_one():
    """Squared norms passed in and rows read off the CSR arrays: the same distances, seeds
    and labels (and random draws) as computing them afresh."""
    rng = np.random.default_rng(6)
    X = sp.random(60, 300, density=0.05, random_state=rng, format="csr")
    F = Mult.default(X).features(X)
    f2 = init.sq_norms(F)
    np.testing.assert_array_equal(f2, np.asarray(F.multiply(F).sum(1)).ravel())
    for i in (0, 17, 59):
        np.testing.assert_array_equal(init._row(F, i), F[i].toarray())
    C = F[[3, 9]].toarray()
    np.testing.assert_array_equal(init.sq_distances(F, C, f2), init.sq_distances(F, C))
    direct = ((F.toarray()[:, None, :] - C[None]) ** 2).sum(-1)
    np.testing.assert_allclose(init.sq_distances(F, C), direct, rtol=1e-10, atol=1e-12)
    a, b = np.random.default_rng(1), np.random.default_rng(1)
    np.testing.assert_array_equal(init.nearest_seed(F, 5, a, f2), init.nearest_seed(F, 5, b))
    assert a.random() == b.random()
    unsorted = F.copy()
    unsorted.has_canonical_format = False
    np.testing.assert_array_equal(init._row(unsorted, 5), F[5].toarray())


def test_positions_of_ids_and_the_pair_entropies_that_read_them():
    """positions (the merge entropies' and Summary.positions's lookup) against a dict, on ids
    in no order; an id that is not there is a KeyError; H_ab from it against the direct sum."""
    from bnpmix.algorithms.summary import positions
    from bnpmix.algorithms.vb.local import entropies, pair_entropies

    rng = np.random.default_rng(9)
    uids = rng.permutation(np.arange(100, 140))
    ids = rng.choice(uids, 25)
    where = {int(u): i for i, u in enumerate(uids)}
    np.testing.assert_array_equal(positions(uids, ids), [where[int(u)] for u in ids])
    with pytest.raises(KeyError):
        positions(uids, np.array([5]))
    R = rng.dirichlet(np.full(len(uids), 0.2), 50)
    pairs = np.stack([ids[:12], ids[12:24]], axis=1)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    H = entropies(R, np.log(R))
    got = pair_entropies(R, H, uids, pairs)
    for (a, b), h in zip(pairs, got, strict=True):
        s = R[:, where[int(a)]] + R[:, where[int(b)]]
        assert h == pytest.approx(-np.sum(s * np.log(s)), rel=1e-12)


@pytest.mark.parametrize("held", [1, 3, 40])
def test_pair_entropies_on_sparse_and_dense_responsibilities(held):
    """H_ab for every pair against the direct sum, where each item holds ``held`` of the 40
    components (few: the shared-parts path, which pairs each item's held components; all: the
    direct path); the entries below PAIR_FLOOR that the shared parts leave out included."""
    from bnpmix.algorithms.vb.local import PAIR_FLOOR, entropies, pair_entropies

    rng = np.random.default_rng(held)
    n, K = 300, 40
    R = np.zeros((n, K))
    for row in R:
        row[rng.choice(K, held, replace=False)] = rng.dirichlet(np.ones(held))
    R = np.where(R > 0, R, PAIR_FLOOR / 10)  # the floor's own tail: under 4e-14 an item
    R /= R.sum(axis=1, keepdims=True)
    uids = np.arange(K) + 7
    iu, ju = np.triu_indices(K, k=1)
    pairs = np.stack([uids[iu], uids[ju]], axis=1)
    got = pair_entropies(R, entropies(R, np.log(R)), uids, pairs)
    S = R[:, iu] + R[:, ju]
    np.testing.assert_allclose(got, -np.sum(S * np.log(S), axis=0), rtol=1e-12, atol=n * 4e-14)
