"""Bag-of-words summaries sparse in (component, word) (issue 15, item 1): the sparse
statistics' algebra equals the dense one, the responsibility floor's loss is within its bound, a
task gets E[log θ] only on its wave's words, q(θ) is updated only where a visit changed it, and
a memo run through all of it equals the dense path's (the same model with every sparse hook
turned off, the same floor)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp

from bnpmix.algorithms.obs.base import ObsModel
from bnpmix.algorithms.obs.mult import Mult
from bnpmix.algorithms.sparse_stats import add, add_into, dense, fold, rows, stack, zero_rows
from bnpmix.algorithms.summary import Delete, Insert, Merge, Reorder, Summary
from bnpmix.algorithms.vb.local import Globals, batch_step, responsibilities, summarize
from bnpmix.pipeline.fit import job_config
from bnpmix.pipeline.runtime.context import make_context
from bnpmix.pipeline.runtime.engine import engine_class
from bnpmix.pipeline.runtime.executors import LocalExecutor
from bnpmix.storage import Corpus, ingest_docword
from helpers import random_counts, run_to_end, write_docword


def random_sparse(rng: np.random.Generator, K: int, V: int, density: float) -> sp.csr_matrix:
    return sp.random(K, V, density=density, format="csr", random_state=rng)


# ------------------------------------------------------------------ the sparse algebra

def test_sparse_statistics_operations_equal_their_dense_counterparts():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = random_sparse(rng, 4, 30, 0.2), random_sparse(rng, 4, 30, 0.3)
        A, B = dense(a), dense(b)
        np.testing.assert_allclose(dense(add(a, b)), A + B, rtol=1e-15)
        np.testing.assert_allclose(dense(add(a, b, -1.0)), A - B, rtol=1e-15)
        assert sp.issparse(add(a, b))
        D = rng.normal(size=(4, 30))
        assert isinstance(add(D, a), np.ndarray) and isinstance(add(a, D), np.ndarray)
        np.testing.assert_array_equal(add(D, a), D + A)
        np.testing.assert_array_equal(add(D, a, -1.0), D - A)
        np.testing.assert_array_equal(add(a, D, -1.0), A - D)
        out = D.copy()
        add_into(out, a, -2.0)
        np.testing.assert_array_equal(out, D - 2.0 * A)
        np.testing.assert_array_equal(dense(rows(a, np.array([2, 0]))), A[[2, 0]])
        np.testing.assert_array_equal(dense(rows(a, np.array([True, False, True, False]))),
                                      A[[0, 2]])
        folded = A.copy()
        folded[1] += A[[0, 3]].sum(0)
        np.testing.assert_allclose(dense(fold(a, 1, [0, 3])), folded, rtol=1e-15)
        np.testing.assert_array_equal(dense(a), A)  # fold copied
        np.testing.assert_array_equal(dense(stack(a, rows(b, np.arange(2)))),
                                      np.vstack([A, B[:2]]))
        np.testing.assert_array_equal(dense(stack(a, zero_rows(a, 3))),
                                      np.vstack([A, np.zeros((3, 30))]))


# ------------------------------------------------------------------ a batch's summary

def problem(seed: int = 0, n: int = 80, V: int = 200, K: int = 5):
    rng = np.random.default_rng(seed)
    X = random_counts(rng, n, V, density=0.03)
    R = rng.dirichlet(np.full(K, 0.5), size=n)
    return X, Mult(V, 0.1), R, rng


def test_batch_stats_are_sparse_and_equal_the_dense_statistics():
    X, model, R, _ = problem()
    R[R < 0.05] = 0.0  # responsibilities with exact zeros, as the floor leaves them
    R /= R.sum(1, keepdims=True)
    wc = model.batch_stats(X, R)["wc"]
    assert sp.issparse(wc) and wc.shape == (5, 200)
    np.testing.assert_allclose(dense(wc), model.stats(X, R)["wc"], rtol=1e-14, atol=1e-14)
    assert wc.nnz == np.count_nonzero(model.stats(X, R)["wc"])  # nothing but the non-zeros


def test_the_floor_truncates_the_local_step_within_its_bound():
    """Responsibilities below Mult's floor are exactly 0, each row still sums to 1, and the
    ELBO of the truncated q(z) is below the exact local step's by at most K·floor per item."""
    rng = np.random.default_rng(7)
    K, V = 50, 300
    model = Mult(V, 0.1)
    topics = rng.dirichlet(np.full(V, 0.05), K)
    z = rng.integers(0, K, 400)
    X = sp.csr_matrix(np.stack([rng.multinomial(60, topics[k]) for k in z]).astype(float))
    wc = np.stack([np.asarray(X[z == k].sum(0)).ravel() for k in range(K)])
    post = model.post(np.bincount(z, minlength=K), {"wc": wc})
    g = Globals(np.arange(K), post, np.log(np.full(K, 1.0 / K)))
    R, log_r = responsibilities(X, model, g)
    exact = model.E_loglik(X, post) + g.Elogw
    exact -= logsumexp(exact, axis=1, keepdims=True)
    assert (R == 0).mean() > 0.5 and np.all((R == 0) | (model.responsibility_floor <= R))
    np.testing.assert_allclose(R.sum(1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(R[R > 0], np.exp(log_r[R > 0]), rtol=1e-12)

    def local_elbo(R_, log_R):  # Σ_n Σ_k r_nk (log p(x_n, k) - log r_nk): the terms q(z) moves
        joint = model.E_loglik(X, post) + g.Elogw
        return float(np.sum(np.where(R_ > 0, R_ * (joint - log_R), 0.0)))

    loss = local_elbo(np.exp(exact), exact) - local_elbo(R, log_r)
    assert 0 <= loss <= X.shape[0] * K * model.responsibility_floor


def test_summaries_with_sparse_statistics_add_move_and_round_trip_like_dense_ones():
    X, model, R, rng = problem(1)
    R[R < 0.1] = 0.0
    R /= R.sum(1, keepdims=True)
    uids = np.array([4, 0, 9, 2, 7])
    pairs = np.array([[0, 4], [2, 9]])
    parts = np.array_split(rng.permutation(X.shape[0]), 3)
    sums = [summarize(X[p], model, R[p], None, uids, pairs) for p in parts]
    total = sums[0] + sums[1] + sums[2]
    assert sp.issparse(total.stats["wc"])
    np.testing.assert_allclose(dense(total.stats["wc"]), model.stats(X, R)["wc"], rtol=1e-12)
    S0 = Summary.zeros(uids, model.stat_shapes())
    for s in sums:
        S0.add_in_place(s.without_pairs())
    S0.add_in_place(sums[1].without_pairs(), -1.0)
    np.testing.assert_allclose(S0.stats["wc"], dense((sums[0] + sums[2]).stats["wc"]),
                               rtol=1e-12, atol=1e-12)
    pattern = sums[1].changed_pattern()
    np.testing.assert_array_equal(dense(pattern), dense(sums[1].stats["wc"]) != 0)
    for move in (Merge(0, 4), Insert((11, 12)), Delete(12), Reorder((9, 11, 2, 7, 0))):
        s_dense = Summary(total.uids, total.N, {"wc": dense(total.stats["wc"])}, total.H,
                          total.n_items, total.pairs, total.Hpair)
        total, s_dense = move.apply(total), move.apply(s_dense)
        assert sp.issparse(total.stats["wc"])
        np.testing.assert_allclose(dense(total.stats["wc"]), s_dense.stats["wc"], rtol=1e-15)
    back = Summary.from_arrays(total.to_arrays())
    assert sp.issparse(back.stats["wc"])
    np.testing.assert_array_equal(dense(back.stats["wc"]), dense(total.stats["wc"]))


# ------------------------------------------------------------------ the sparse global path

def test_restricted_E_loglik_equals_the_full_one_exactly():
    X, model, R, _ = problem(3)
    post = model.post(R.sum(0), model.stats(X, R))
    part = X[:10]
    cols = model.batch_columns(part)
    small = model.restrict(post, cols)
    assert small["Elogtheta"].shape == (5, len(cols))
    np.testing.assert_array_equal(model.E_loglik(part, small), model.E_loglik(part, post))
    more = np.union1d(cols, [0, 1, 199])  # a wave's union: a superset works too
    np.testing.assert_array_equal(model.E_loglik(part, model.restrict(post, more)),
                                  model.E_loglik(part, post))
    with pytest.raises(ValueError, match="outside the columns"):
        model.E_loglik(X, small)


def test_post_update_on_changed_entries_equals_the_whole_update():
    X, model, R, rng = problem(4)
    S = model.stats(X, R)["wc"]
    post = model.post(R.sum(0), {"wc": S})
    for _ in range(30):  # a long run of visits: the kept sums must not drift
        changed = random_sparse(rng, 5, 200, 0.05)
        changed.data[:] = 1.0
        k, w = changed.nonzero()
        S = S.copy()
        S[k, w] = np.abs(S[k, w] + rng.normal(size=len(k)))
        post = model.post_update(post, R.sum(0), {"wc": S}, changed)
    want = model.post(R.sum(0), {"wc": S})
    for key in want:
        np.testing.assert_allclose(post[key], want[key], rtol=1e-12, err_msg=key)
    np.testing.assert_allclose(model.elbo_at_optimum(R.sum(0), {"wc": S}, post),
                               model.elbo(R.sum(0), {"wc": S}, want), rtol=1e-12)
    # a post read from an older model file (λ only) gives the same numbers
    np.testing.assert_allclose(model.E_loglik(X, {"lam": want["lam"]}),
                               model.E_loglik(X, want), rtol=1e-13)


def test_batch_step_on_restricted_globals_equals_the_full_one():
    X, model, R, _ = problem(5)
    post = model.post(R.sum(0), model.stats(X, R))
    uids = np.arange(5)
    Elogw = np.log(np.full(5, 0.2))
    full = batch_step(X[:30], model, Globals(uids, post, Elogw)).summary
    small = batch_step(X[:30], model, Globals(
        uids, model.restrict(post, model.batch_columns(X[:30])), Elogw)).summary
    np.testing.assert_array_equal(small.N, full.N)
    np.testing.assert_array_equal(small.H, full.H)
    np.testing.assert_array_equal(dense(small.stats["wc"]), dense(full.stats["wc"]))


# ------------------------------------------------------------------ memo: sparse = dense path

class DenseMult(Mult):
    """Mult with every sparse hook off: dense K x V summaries, whole q(θ) shipped to every
    task and recomputed at every visit, the ELBO from the whole formula."""

    batch_stats = Mult.stats
    batch_columns = ObsModel.batch_columns
    restrict = ObsModel.restrict
    post_update = ObsModel.post_update
    elbo_at_optimum = ObsModel.elbo_at_optimum

    def post(self, N, stats):
        lam = self.lam0 + stats["wc"]
        return {"lam": lam}


def text_corpus(tmp_path, seed: int = 0, n: int = 600, V: int = 2000, K: int = 4):
    """Documents from K topics on their own blocks of words (a few words shared)."""
    rng = np.random.default_rng(seed)
    blocks = np.array_split(rng.permutation(V), K)
    topics = np.full((K, V), 0.01)
    for k, words in enumerate(blocks):
        topics[k, words] = 1.0
    topics /= topics.sum(1, keepdims=True)
    z = rng.integers(0, K, n)
    X = sp.csr_matrix(np.stack([rng.multinomial(40, topics[k]) for k in z]))
    write_docword(tmp_path / "docword.t.txt", X)
    ingest_docword(tmp_path / "docword.t.txt", tmp_path / "c", partition_rows=50)
    return tmp_path / "c"


def memo_engine(corpus, obs_cls, **options):
    job = job_config(algorithm="memo", **options)
    c = Corpus(corpus)
    ctx = make_context(c, job.run, job.model, LocalExecutor(c, "synchronous"))
    ctx.obs = obs_cls(ctx.obs.V, ctx.obs.lam0)
    engine = engine_class("memo")(ctx, job.engine)
    engine.start()
    return engine


@pytest.mark.parametrize("wave,ahead", [(1, 0), (3, 1)])
def test_memo_on_the_sparse_path_equals_the_dense_path(tmp_path, wave, ahead):
    corpus = text_corpus(tmp_path)
    opts = {"K": 1, "laps": 8, "seed": 3, "wave": wave, "ahead": ahead}
    shipped = []
    sparse = memo_engine(corpus, Mult, **opts)
    sparse.on_visit = lambda lap, b, g, res: shipped.append((lap, g.post))
    run_to_end(sparse)
    dense_run = run_to_end(memo_engine(corpus, DenseMult, **opts))
    ts, td = sparse.trace, dense_run.trace
    assert [r["K"] for r in ts] == [r["K"] for r in td]
    assert max(r["K"] for r in ts) > 1  # births happened: the moves ran on both paths
    assert [r["batch"] for r in ts] == [r["batch"] for r in td]
    es, ed = np.array([r["elbo"] for r in ts]), np.array([r["elbo"] for r in td])
    np.testing.assert_allclose(es, ed, rtol=1e-9, equal_nan=True)
    np.testing.assert_allclose(sparse.s.model.post["lam"], dense_run.s.model.post["lam"], rtol=1e-9)
    np.testing.assert_allclose(sparse.s.S0.stats["wc"], dense_run.s.S0.stats["wc"], rtol=1e-9,
                               atol=1e-9)
    # after the first lap every wave got E[log θ] on its batches' words only, never λ or ψ(λ)
    later = [post for lap, post in shipped if lap >= 1]
    assert later and all(set(post) == {"cols", "Elogtheta"} for post in later)
    assert all(post["Elogtheta"].shape[1] == len(post["cols"]) < 2000 for post in later)


def test_an_adoption_laps_q_is_updated_in_place_and_equals_the_whole_update(tmp_path):
    """During a lap adopting births, q(θ) is the global update of S^0 + S' (Eq. 10 with the
    newborns' S'), updated in place on the entries a visit changed (memo.model_is_prime): after
    every visit it equals the update recomputed from scratch, to rounding."""
    from bnpmix.algorithms.mixture import Mixture

    engine = memo_engine(text_corpus(tmp_path), Mult, K=1, laps=6, seed=3, wave=1)
    checked, lam_ids = 0, set()
    while not engine.done:
        engine.step()
        st = engine.s.lap
        if st is None or st.S_prime is None or st.pos in (0, len(st.order)):
            continue
        assert engine.s.model_is_prime and not engine.s.model_is_S0
        whole = Mixture.from_summary(engine.ctx.obs, engine.ctx.alloc, engine.s.S0 + st.S_prime)
        for k in ("lam", "dig", "lam_sum", "gl_sum"):
            np.testing.assert_allclose(engine.s.model.post[k], whole.post[k], rtol=1e-12,
                                       err_msg=k)
        for k in whole.alloc_post:
            np.testing.assert_array_equal(engine.s.model.alloc_post[k], whole.alloc_post[k])
        lam_ids.add((st.lap, id(engine.s.model.post["lam"])))
        checked += 1
    assert checked >= 4  # visits inside adoption laps were checked
    laps = {lap for lap, _ in lam_ids}
    assert len(lam_ids) == len(laps)  # one λ array per adoption lap: written in place
