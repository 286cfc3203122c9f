"""The search moves of memoized VB beyond the paper's: several proposals per birth target, the
verification that settles a kept family, retried births before convergence, the delete move
(exact, accepted only when the full-data ELBO rises), partition independence and resuming
a run stopped in a deleting lap.

Every engine test runs on a real corpus written to tmp_path, as in test_memo.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp

from bnpmix.algorithms.alloc import StickBreaking
from bnpmix.algorithms.memo import lap as memo_lap
from bnpmix.algorithms.memo import lapend
from bnpmix.algorithms.memo.lap import still_failed
from bnpmix.algorithms.mixture import optimal_elbo
from bnpmix.algorithms.obs import obs_class
from bnpmix.algorithms.sparse_stats import dense
from bnpmix.algorithms.summary import Delete, Merge, Summary
from bnpmix.algorithms.vb import birth, init
from bnpmix.algorithms.vb.local import summarize, truncate
from bnpmix.pipeline.engines.memo import SUMMARIES
from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.storage import ingest_array, ingest_docword
from helpers import blobs, engine_for, run_lap, run_to_end, write_docword


def assert_summary_close(got: Summary, want: Summary, rtol: float) -> None:
    np.testing.assert_array_equal(got.uids, want.uids)
    assert got.n_items == want.n_items
    for name, g, w in [("N", got.N, want.N), ("H", got.H, want.H),
                       *((k, dense(got.stats[k]), dense(want.stats[k])) for k in want.stats)]:
        scale = max(float(np.max(np.abs(w), initial=0.0)), 1.0)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=name)


def blob_data(seed: int, n: int = 600, centres=((0, 0), (9, 0), (0, 9))) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = np.asarray(centres, float)
    return c[rng.integers(0, len(c), n)] + rng.standard_normal((n, 2))


# ------------------------------------------------------------------------- proposals

def test_two_means_in_the_whitened_space_splits_parallel_elongated_clusters():
    """A birth's target, two long clusters side by side (sd 10 along x, 0.5 along y, 3 apart
    in y), inside a corpus that spreads alike in x and y (sd 10): in the prior's units (scaled
    to the corpus) 2-means cuts across the long axis (the larger spread), while in the
    target's own whitened space every direction has unit variance and the split along the
    bimodal short axis is the one that lowers the within-cluster sum of squares most."""
    rng = np.random.default_rng(0)
    z = rng.integers(0, 2, 2000)
    X = np.c_[10 * rng.standard_normal(2000), 3.0 * z + 0.5 * rng.standard_normal(2000)]
    corpus = np.r_[X, 10 * rng.standard_normal((2000, 2))]
    F = obs_class("gauss").default(corpus).features(X)
    agree = lambda labels: max(np.mean(labels == z), np.mean(labels != z))  # noqa: E731
    whitened, _ = init.proposal_splits(F, np.random.default_rng(1))
    assert agree(whitened) > 0.99
    assert agree(init.two_means(F, np.random.default_rng(1))) < 0.8  # unwhitened: the long axis


def test_principal_axes_are_the_covariance_eigenpairs_for_dense_and_sparse_rows():
    """Within its rank, on all rows, the randomised subspace iteration is exact: the variances
    are the sample covariance's eigenvalues, Z the centred rows' coordinates on its eigenvectors
    (up to each column's sign), the same from a CSR matrix as from the dense one; a repeated
    column is dropped (rank deficiency)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(2)
    F = rng.standard_normal((900, 5)) @ rng.standard_normal((5, 5)) + 5.0
    F = np.c_[F, F[:, 0]]  # rank 5 in 6 columns
    lam_want, V = np.linalg.eigh(np.cov(F.T))
    lam_want, V = lam_want[::-1][:5], V[:, ::-1][:, :5]
    Z_want = (F - F.mean(0)) @ V
    for rows in (F, sp.csr_matrix(F)):
        Z, lam = init.principal_axes(rows, np.random.default_rng(0))
        np.testing.assert_allclose(lam, lam_want, rtol=1e-9)
        signs = np.sign((Z * Z_want).sum(0))
        np.testing.assert_allclose(Z * signs, Z_want, atol=1e-8 * np.abs(Z_want).max())
        np.testing.assert_allclose(np.cov((Z / np.sqrt(lam)).T), np.eye(5), atol=1e-9)
    # beyond its rank: the top directions of a clear spectrum (variances 100 ... 1, then 0.01)
    scales = np.r_[np.geomspace(100, 1, 4), np.full(40, 0.1)]
    G = rng.standard_normal((2000, 44)) * scales
    _, lam = init.principal_axes(G, np.random.default_rng(1), rank=4, sample=len(G))
    np.testing.assert_allclose(lam, np.sort(np.linalg.eigvalsh(np.cov(G.T)))[::-1][:4],
                               rtol=1e-3)


def test_create_keeps_the_proposal_with_the_highest_fresh_elbo(monkeypatch):
    """create evaluates every proposal's fresh ELBO (the amplified statistics' optimum) and
    returns the kept components of the best among those with two or more, amplified. Two blobs
    4 sd apart: the K' seeds' run ends with a third component, below the 2-way proposals."""
    X = blob_data(3, n=900, centres=((0, 0), (4, 0)))
    obs, alloc = obs_class("gauss").default(X), StickBreaking(1.0)
    cfg = birth.BirthConfig(fresh_K=5)
    seen: list[Summary] = []
    propose = birth.propose

    def recorded(*args, **kwargs):
        out = propose(*args, **kwargs)
        seen.extend(out)
        return out

    monkeypatch.setattr(birth, "propose", recorded)
    scale = 1.5
    S = birth.create(X, obs, alloc, np.arange(100, 110), cfg, np.random.default_rng(1), scale,
                     attempts=1)
    assert len(seen) == 3
    elbos = [optimal_elbo(obs, alloc, c.scaled(scale)) for c in seen]
    assert elbos[0] < max(elbos) - 10  # the choice matters here
    valid = [i for i, c in enumerate(seen) if (cfg.prune_fraction * len(X) <= c.N).sum() > 1]
    best = seen[max(valid, key=lambda i: elbos[i])]
    keep = np.flatnonzero(cfg.prune_fraction * len(X) <= best.N)
    keep = keep[np.argsort(-best.N[keep], kind="stable")]
    np.testing.assert_allclose(S.N, scale * best.N[keep], rtol=1e-12)
    np.testing.assert_allclose(S.stats["xxT"], scale * best.stats["xxT"][keep], rtol=1e-12)
    np.testing.assert_array_equal(S.uids, np.arange(100, 100 + len(keep)))


# ------------------------------------------------------------------------- deletes

def fresh_without(X, obs, g, uid) -> Summary:
    """A batch's summary with component ``uid`` removed, from the data: the log
    responsibilities of the other components renormalised (the unfused path), truncated at the
    model's floor as every local step is (Mult)."""
    keep = g.uids != uid
    log_r = (obs.E_loglik(X, g.post) + g.Elogw)[:, keep]
    log_r -= logsumexp(log_r, axis=1, keepdims=True)
    R = np.exp(log_r)
    if obs.responsibility_floor:
        R, log_r = truncate(R, log_r, obs.responsibility_floor)
    return summarize(X, obs, R, log_r, g.uids[keep])


@pytest.mark.parametrize("obs", ["gauss", "diag-gauss", "tied-gauss", "mult"])
def test_a_delete_is_exact_and_accepted_only_when_the_elbo_rises(obs, tmp_path):
    """Clusters fitted from K = 6 seeds with deletes alone (every component a candidate, three
    a lap): every visit's summary without each planned component equals the one recomputed
    from the data under the globals the visit was given (whichever way it was computed); at
    the lap's end the deletion whose recomputed sum has the highest optimal ELBO is accepted
    exactly when that exceeds S^0's, and then S^0 and every stored summary are the recomputed
    ones; deletions that do not raise it are refused."""
    if obs == "mult":
        from bnpmix.datasets import bag_of_words_topics
        from bnpmix.storage import ingest_docword
        from helpers import write_docword

        X = bag_of_words_topics(600, V=60, K=3, min_len=20, max_len=40, seed=4)[0]
        write_docword(tmp_path / "docword.t.txt", X)
        ingest_docword(tmp_path / "docword.t.txt", tmp_path / "c", partition_rows=150)
    else:
        ingest_array(blob_data(4), tmp_path / "c", partition_rows=150)
    run = engine_for(tmp_path / "c", obs=obs, algorithm="memo", K=6, laps=8, moves="delete",
                     delete_max_share=10.0, delete_per_lap=3, seed=3, tol=0)
    visits: dict[int, tuple] = {}
    run.on_visit = lambda lap, b, g, res: visits.__setitem__(b, (g, res))
    ctx, outcomes = run.ctx, {"accepted": 0, "refused": 0}
    while not run.done:
        visits.clear()
        run.step()  # the lap's first wave: lap_state now says what it deletes
        planned = run.s.lap.deletes
        while run.s.lap.pos < len(run.s.lap.order):
            run.step()
        if not planned:
            run.step()
            continue
        before = optimal_elbo(ctx.obs, ctx.alloc, run.s.S0)
        fresh, gains = {}, {}
        for uid in planned:
            fresh[uid] = {b: fresh_without(ctx.source.get(b), ctx.obs, g, uid)
                          for b, (g, _) in visits.items()}
            for b, (_, res) in visits.items():
                changed = Delete(uid).apply(res.summary.without_pairs()) + res.delete_changes[uid]
                assert_summary_close(changed, fresh[uid][b], rtol=1e-9)
            keys = sorted(fresh[uid])
            total = sum((fresh[uid][b] for b in keys[1:]), fresh[uid][keys[0]])
            gains[uid] = optimal_elbo(ctx.obs, ctx.alloc, total) - before
        assert all(abs(v) > 1e-9 * abs(before) for v in gains.values())  # no ties
        run.step()  # the lap's end
        # two deletions may tie to rounding (two components holding the same documents): the
        # engine may take either of them
        top = max(gains.values())
        tied = [u for u, g in gains.items() if g >= top - 1e-12 * abs(before)]
        best = next((u for u in tied if u not in run.s.S0.uids), tied[0])
        for uid, gain in gains.items():
            if uid == best and gain > 0:
                assert uid not in run.s.S0.uids
                outcomes["accepted"] += 1
                for b in fresh[uid]:  # reordered by mass since: compared in the engine's order
                    assert_summary_close(run.store.get(b), fresh[uid][b].over(run.s.S0.uids),
                                         rtol=1e-9)
            else:
                assert uid in run.s.S0.uids
                assert (uid in run.s.kept) == (gain <= 0)
                outcomes["refused"] += gain <= 0
    assert outcomes["accepted"] and outcomes["refused"], outcomes


# ------------------------------------------------------------------------- convergence

def test_every_component_fails_two_births_from_new_seeds_before_the_run_converges(
        tmp_path, monkeypatch):
    """Three blobs from K = 1: the run converges only after every final component holding at
    least 2 K' items has failed 1 + retries rounds of fresh VB (each round from its own state
    of the birth stream, so new seeds; after a settled lap a birth makes its retries' rounds at
    once) since its last successful birth."""
    from bnpmix.pipeline.engines import memo

    calls: list[list[str]] = []  # per creation: the birth stream's state at each round run
    create, propose = memo.create, birth.propose

    def recorded(*args):
        calls.append([])
        return create(*args)

    def round_run(X, repeated, obs, alloc, cfg, rng, scale):
        calls[-1].append(str(rng.bit_generator.state))
        return propose(X, repeated, obs, alloc, cfg, rng, scale)

    monkeypatch.setattr(memo, "create", recorded)
    monkeypatch.setattr(birth, "propose", round_run)
    ingest_array(blob_data(6, n=900), tmp_path / "c", partition_rows=150)
    run = engine_for(tmp_path / "c", obs="gauss", algorithm="memo", K=1, laps=60, seed=2)
    rounds: dict[int, list[str]] = {}  # target -> the rounds it failed since its last success
    while not run.done:
        before = len(calls)
        run_lap(run)
        made = [b for b in run.s.births if b.n]  # created in this order at the lap end
        assert len(made) == len(calls) - before
        for b, states in zip(made, calls[before:], strict=True):
            rounds[b.target] = [] if b.S_new is not None else rounds.get(b.target, []) + states
    assert run.s.stopped.startswith("converged"), run.s.stopped
    floor = 2 * run.cfg.birth.fresh_K
    checked = 0
    for u, n in zip(run.s.S0.uids.tolist(), run.s.S0.N, strict=True):
        if n < floor:
            continue
        mine = rounds.get(u, [])
        assert len(mine) >= 1 + run.cfg.birth.retries, (u, len(mine))
        assert len(set(mine)) == len(mine)  # a new seed each round
        mass, _, count = run.s.failed[u]
        assert count >= 1 + run.cfg.birth.retries and abs(n - mass) <= 0.1 * mass
        checked += 1
    assert checked == 3


def twelve_clusters(path) -> None:
    """Twelve round clusters far apart, in six partitions."""
    rng = np.random.default_rng(4)
    centres = rng.normal(0, 30, (12, 2))
    ingest_array(centres[rng.integers(0, 12, 1200)] + rng.normal(size=(1200, 2)), path,
                 partition_rows=200)


def test_births_after_a_settled_lap_make_their_retries_at_once(tmp_path, monkeypatch):
    """Births targeted after a settled lap (it moved nothing) would collect the same rows a lap
    later, so when their own lap's end moves nothing either their creation tries every retry's
    round now (attempts_at(K) x (1 + retries)) and a failure closes its component at once;
    births of other laps try attempts_at(K) rounds, and a first failure leaves the component
    open for its retry. From K = 12 seeds on twelve clusters, one target a lap until settled."""
    from bnpmix.pipeline.engines import memo

    seen: list[int] = []
    create = memo.create

    def recorded(X, obs, alloc, new_uids, cfg, rng, scale, attempts):
        seen.append(attempts)
        return create(X, obs, alloc, new_uids, cfg, rng, scale, attempts)

    monkeypatch.setattr(memo, "create", recorded)
    twelve_clusters(tmp_path / "c")
    run = engine_for(tmp_path / "c", obs="gauss", algorithm="memo", K=12, laps=60, seed=0,
                     birth_per_lap=1)
    retries = run.cfg.birth.retries
    failures = {True: 0, False: 0}  # after a settled lap, after others
    while not run.done:
        settled, before = run.s.settled, len(seen)
        counts = {u: f[2] for u, f in run.s.failed.items()}
        run_lap(run)
        made = [b for b in run.s.births if b.n]
        tries = 1 + retries if settled else 1  # this run's settled laps' ends move nothing
        assert seen[before:] == [run.cfg.birth.attempts_at(run.s.S0.K) * tries] * len(made)
        for b in made:
            if b.S_new is not None:
                continue
            mass, lap, count = run.s.failed[b.target]
            assert lap == run.s.next_lap - 1 and mass == run.s.mass(b.target)
            assert count in (counts.get(b.target, 0) + tries, tries)  # the same mass, or new
            closed = still_failed(run.s, run.env(), b.target, mass, run.s.next_lap)
            if settled:
                assert closed
            elif b.target not in counts:
                assert not closed  # its retry comes next lap
            failures[settled] += 1
    assert run.s.stopped.startswith("converged"), run.s.stopped
    assert failures[True] and failures[False], failures


def test_a_lap_end_that_moves_keeps_the_retries_for_later(tmp_path, monkeypatch):
    """After a settled lap, a lap end whose merge (forced here) joins a birth target and another
    component gives the merged one rows its collection lacks: the birth, moved to the merged
    component, tries attempts_at(K) rounds, and a failure leaves that component open for its
    retry."""
    from bnpmix.pipeline.engines import memo

    seen: list[int] = []
    create, merge_round = memo.create, lapend.merge_round
    forced: dict[str, int] = {}

    def recorded(X, obs, alloc, new_uids, cfg, rng, scale, attempts):
        seen.append(attempts)
        return create(X, obs, alloc, new_uids, cfg, rng, scale, attempts)

    def forcing(obs, alloc, S, rng, cfg):  # merge the first pair joining a target to another
        targets = {b.target for b in run.s.births}
        if run.s.settled and not forced:
            for a, b in S.pairs.tolist():
                if (a in targets) != (b in targets):
                    forced.update(a=a, b=b, lap=run.s.lap.lap)
                    move = Merge(a, b)
                    return move.apply(S), [move], 0.0
        return merge_round(obs, alloc, S, rng, cfg)

    monkeypatch.setattr(memo, "create", recorded)
    monkeypatch.setattr(lapend, "merge_round", forcing)
    twelve_clusters(tmp_path / "c")
    run = engine_for(tmp_path / "c", obs="gauss", algorithm="memo", K=12, laps=60, seed=0,
                     birth_per_lap=1, birth_settled_per_lap=6)  # targets and others
    while not run.done and not forced:
        before = len(seen)
        run_lap(run)
    assert forced, "no lap after a settled one"
    assert seen[before:] and set(seen[before:]) == {run.cfg.birth.attempts_at(run.s.S0.K)}
    kept = forced["a"]
    assert any(b.target == kept for b in run.s.births)  # the target's birth, moved to a
    if kept in run.s.failed:
        assert not still_failed(run.s, run.env(), kept, run.s.mass(kept), run.s.next_lap)


def test_newborns_are_birth_targets_in_their_adoption_lap(tmp_path):
    """From K = 1 the first adoption lap's only old component is the origin, which takes no
    item then: the lap's birth targets are newborns, chosen at the mass S' gives them (in S^0
    they start empty), so the next births are created at its end rather than a lap later."""
    rng = np.random.default_rng(0)
    centres = np.array([[x, y] for x in (0, 12, 24) for y in (0, 12, 24)][:8], float)
    ingest_array(centres[rng.integers(0, 8, 1600)] + rng.normal(size=(1600, 2)),
                 tmp_path / "c", partition_rows=200)
    run = engine_for(tmp_path / "c", obs="gauss", algorithm="memo", K=1, laps=20, seed=0,
                     learn_prior=False)
    run_lap(run)
    run.step()  # lap 2's first wave: the lap adopts lap 1's birth
    st = run.s.lap
    newborns = {u for _, family in st.families for u in family}
    assert [origin for origin, _ in st.families] == [int(run.s.S0.uids[0])] and newborns
    assert st.targets  # newborns, the lap's only components that may be targets
    run_lap(run)
    assert run.s.births and all(b.n for b in run.s.births)  # collected during the adoption lap


def test_births_of_newborns_whose_family_is_undone_are_dropped(tmp_path, monkeypatch):
    """A newborn targeted in its adoption lap is gone when verification undoes its family:
    the birth collected for it is dropped with it (its rows were its parent's, whose birth just
    failed), so no later lap adopts a family whose origin does not exist. Births here propose
    wedges (each target's rows cut at its first coordinate's median), which verification undoes
    on these three round blobs."""
    from bnpmix.algorithms.vb.init import hard_summary
    from bnpmix.pipeline.engines import memo

    def wedges(X, obs, alloc, new_uids, cfg, rng, scale, attempts):
        labels = (X[:, 0] > np.median(X[:, 0])).astype(int)
        return hard_summary(X, obs, labels, new_uids[:2]).scaled(scale)

    monkeypatch.setattr(memo, "create", wedges)
    ingest_array(blobs(1200, 2)[0], tmp_path / "c", partition_rows=200)
    run = engine_for(tmp_path / "c", obs="gauss", algorithm="memo", K=3, laps=10, seed=0,
                     moves="birth", learn_prior=False)
    dropped = 0
    while not run.done:
        run.step()  # the lap's first wave: its targets are chosen
        st = run.s.lap
        newborn_targets = [t for t in st.targets if any(t in f for _, f in st.families)]
        run_lap(run)
        assert all(b.target in run.s.S0.uids for b in run.s.births)
        dropped += sum(t not in run.s.S0.uids for t in newborn_targets)
    assert run.s.stopped.startswith("converged"), run.s.stopped
    assert dropped, "no targeted newborn was undone"


# ------------------------------------------------------------------------- partitions

@pytest.mark.slow  # fits to convergence on 1 and 6 partitions
def test_one_and_six_partitions_of_the_same_rows_reach_the_same_k_and_elbo(tmp_path):
    """Seven full-covariance clusters in 4-D, two of them overlapping: with one partition the
    adoption lap is a single visit, with six it is six. Both runs end at the same K and the
    same ELBO to 1e-3 per item. (Before births adopted with their origin absent, the one-
    partition run kept the two overlapping clusters as one: K = 6, 0.016 per item lower.)"""
    from bnpmix.datasets import gaussian_clusters

    X, _ = gaussian_clusters(n=1500, D=4, separated=5, overlapping=2, seed=0)
    out = {}
    for P in (1, 6):
        ingest_array(X, tmp_path / f"c{P}", partition_rows=-(-len(X) // P))
        out[P] = fit(tmp_path / f"c{P}", tmp_path / f"r{P}",
                     job_config(seed=0, scheduler="synchronous"))
    assert out[1]["stopped"].startswith("converged") and out[6]["stopped"].startswith("converged")
    assert out[1]["K"] == out[6]["K"] == 7
    assert abs(out[1]["elbo_per_item"] - out[6]["elbo_per_item"]) < 1e-3


# ------------------------------------------------------------------------- resume

def test_a_run_stopped_in_a_deleting_lap_resumes_exactly(tmp_path):
    """Stopped after a mid-lap checkpoint while a deletion is being tried (some batches'
    changes stored, others not), the resumed run ends as the uninterrupted one, step for
    step."""
    ingest_array(blob_data(7, n=900), tmp_path / "c", partition_rows=150)
    options = {"obs": "gauss", "K": 5, "laps": 6, "seed": 1, "checkpoint_every": 1,
               "scheduler": "synchronous", "delete_max_share": 10.0}
    seen = []

    def stop(engine, step):
        st = engine.s.lap
        if st is not None and st.deletes and 0 < st.pos < len(st.order) - 1:
            seen.append((st.deletes, sum(len(a) for a in engine.delete_changes.values())))
            raise KeyboardInterrupt  # after this visit's checkpoint

    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path / "c", tmp_path / "run", job_config(**options), on_step=stop)
    assert seen and seen[0][1] > 0
    resumed = resume(tmp_path / "run")
    whole = fit(tmp_path / "c", tmp_path / "whole", job_config(**options))
    assert resumed["elbo"] == whole["elbo"] and resumed["K"] == whole["K"]
    a = pd.read_csv(tmp_path / "run" / "trace.csv")
    b = pd.read_csv(tmp_path / "whole" / "trace.csv")
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))


def test_deletions_changes_share_the_summaries_budget(tmp_path):
    """Each deletion tried keeps a change per batch, as big as a batch summary: the lap's
    deletions' stores and the batch summaries' store hold at most summary_bytes between them.
    (With a budget each, up to delete.per_lap + 1 times it was held, a change per partition
    below it: on 4,000,000 x 32 in partitions of 40,000 rows that was up to 50 stores of 100
    changes growing with the corpus.) Spilling changes no number: the run is the one with an
    ample budget, row for row."""
    ingest_array(blob_data(7, n=900), tmp_path / "c", partition_rows=150)
    options = {"obs": "gauss", "K": 5, "laps": 6, "seed": 1, "scheduler": "synchronous",
               "delete_max_share": 10.0}
    sizes: list[int] = []

    def measure(engine, step):
        sizes.extend(SUMMARIES.nbytes(S) for _, S in engine.store.items())

    ample = fit(tmp_path / "c", tmp_path / "ample", job_config(**options), on_step=measure)
    budget = 3 * max(sizes)  # half of the six batches' summaries
    held: list[tuple[int, int]] = []

    def check(engine, step):
        stores = [engine.store, *engine.delete_changes.values()]
        held.append((sum(s._held for s in stores), sum(len(s) for s in stores[1:])))

    tight = fit(tmp_path / "c", tmp_path / "tight",
                job_config(**options, summary_bytes=budget), on_step=check)
    assert any(changes for _, changes in held)  # deletions were tried with changes stored
    assert max(h for h, _ in held) <= budget
    assert tight["elbo"] == ample["elbo"] and tight["K"] == ample["K"]
    a = pd.read_csv(tmp_path / "ample" / "trace.csv")
    b = pd.read_csv(tmp_path / "tight" / "trace.csv")
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))


def test_a_checkpoint_with_whole_alternatives_restores_to_the_same_changes(tmp_path):
    """A checkpoint written while batches' whole summaries without each planned deletion were
    kept (``alternatives``) restores to the changes the engine keeps now: each alternative less
    Delete(uid) of the stored summary."""
    from bnpmix.pipeline.engines.common import summary_items
    from bnpmix.storage.arrays import read_arrays, write_arrays_atomic

    ingest_array(blob_data(7, n=900), tmp_path / "c", partition_rows=150)
    options = {"K": 5, "laps": 6, "seed": 1, "delete_max_share": 10.0,
               "scheduler": "synchronous"}
    run = engine_for(tmp_path / "c", **options)
    while not (run.s.lap is not None and run.s.lap.deletes and run.s.lap.pos > 1):
        run.step()
    meta, items = run.state()
    arrays = {k: v for k, v in items if not k.startswith("delete_changes/")}
    meta["alternatives"] = meta.pop("delete_changes")
    for uid, store in run.delete_changes.items():
        for key, change in store.items():
            alt = Delete(uid).apply(run.store.get(key).without_pairs()) + change
            arrays.update(summary_items(f"alternatives/{uid}/{key}", alt))
    write_arrays_atomic(tmp_path / "old.npz", {"format": "t", "version": 1, "state": meta},
                        arrays.items())
    old = read_arrays(tmp_path / "old.npz", "t", 1)
    back = engine_for(tmp_path / "c", **options)
    back.restore(old.meta["state"], old)
    assert back.delete_changes.keys() == run.delete_changes.keys()
    for uid, store in run.delete_changes.items():
        assert back.delete_changes[uid].keys() == store.keys()
        for key, change in store.items():
            assert_summary_close(back.delete_changes[uid].get(key), change, rtol=1e-9)


def test_a_lap_end_checkpoint_holds_the_model_once_and_restores_it_bit_for_bit(tmp_path):
    """At a lap end whose state is the best so far, a checkpoint holds the model's arrays once
    (no copy as the best model, and for text no ψ(λ), recomputed from λ); restored, the model
    and the best model are the saved ones bit for bit, and the run goes on as the original."""
    from bnpmix.algorithms.obs import obs_from_prior
    from bnpmix.datasets import bag_of_words_topics
    from bnpmix.storage import ingest_docword
    from bnpmix.storage.arrays import read_arrays, write_arrays_atomic
    from helpers import write_docword

    X = bag_of_words_topics(300, V=60, K=3, min_len=20, max_len=40, seed=5)[0]
    write_docword(tmp_path / "d.txt", X)
    ingest_docword(tmp_path / "d.txt", tmp_path / "c", partition_rows=100)
    options = {"laps": 8, "seed": 2, "scheduler": "synchronous"}
    run = engine_for(tmp_path / "c", **options)
    run_lap(run)
    while run.s.best.lap != run.s.next_lap:  # until the best lap end is the last one
        run_lap(run)
    meta, items = run.state()
    arrays = dict(items)
    assert meta["best"]["model"] == {"$": "ref", "to": "model"}  # the model's own
    assert not any(k.startswith("best/") for k in arrays) and "model/post_dig" not in arrays
    write_arrays_atomic(tmp_path / "ck.npz", {"format": "t", "version": 1}, arrays.items())
    back = engine_for(tmp_path / "c", **options)
    back.ctx.rng.set_states(run.ctx.rng.states())  # what checkpoint.restore does besides
    back.ctx.next_uid, back.trace = run.ctx.next_uid, list(run.trace)
    back.ctx.obs = obs_from_prior(run.ctx.obs.name, run.ctx.obs.prior())  # the learned λ0
    back.restore(meta, read_arrays(tmp_path / "ck.npz", "t", 1))
    for model, want in ((back.s.model, run.s.model), (back.s.best.fitted(), run.s.best.fitted())):
        assert model.post.keys() == want.post.keys()
        for k, v in want.post.items():
            np.testing.assert_array_equal(model.post[k], v)
    run_lap(run)
    run_lap(back)
    for got, want in zip(back.trace, run.trace, strict=True):
        assert {**got, "seconds": 0} == {**want, "seconds": 0}


@pytest.mark.parametrize(("n", "seed"), [(3000, 25), (4000, 13)])
def test_a_kept_birth_never_lowers_the_lap_end_elbo_on_one_partition(n, seed, tmp_path):
    """Five 3-D Gaussians in one partition: the adoption lap's one visit runs under the
    globals of S^0 + S', so undoing a family (MergeGroup) does not give back the state the
    adoption replaced: the newborns' items, neighbours' included, go to the origin, tens of
    nats below the previous lap end. Verification judged a family only against that undone
    state, and kept births whose lap end fell below the previous one (3,000 rows: at lap 3,
    K = 6, 10.9 nats lower; 4,000 rows: at laps 3, 4 and 6, up to 863 nats lower; 12,000 rows
    of such data: K wandered for 80 laps). A family is now kept only
    if the lap end with it also beats the previous lap end. The lap-end ELBO may then fall
    only at the end of an adoption lap whose every family was undone; visits with W = 1
    (coordinate ascent, Eq. 11), merges, deletions, the prior learned and reordering never
    lower it. The fit converges at K = 5."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=5, size=(5, 3))
    y = rng.integers(0, 5, n)
    X = centres[y] + rng.uniform(0.5, 1.5, size=(5, 3))[y] * rng.normal(size=(n, 3))
    ingest_array(X, tmp_path / "c", partition_rows=n)
    run = engine_for(tmp_path / "c", algorithm="memo", obs="gauss", seed=3,
                     scheduler="synchronous", laps=40)
    previous, kept = None, 0
    while not run.done:
        adopting = run.s.lap is not None and len(run.s.lap.groups) > 0
        if not run.step().lap_end:
            continue
        elbo, births = run.trace[-1]["elbo"], run.s.recent[-1]["births"]
        kept += births
        if previous is not None and (births or not adopting):
            assert elbo >= previous - 1e-9 * abs(previous), (run.s.recent[-1], elbo - previous)
        previous = elbo
    assert kept > 0 and run.s.stopped.startswith("converged") and run.s.model.K == 5


def test_births_whose_targets_merged_into_one_adopt_one_family(tmp_path, monkeypatch):
    """Two births of one lap whose targets a merge joined at its end share their origin; only
    the first family is adopted and verified (verifying both undid or deleted the origin once
    and then found no group entropy for the second: "no merge entropy recorded for group").
    The sample of test_fit's clusters under tied-gauss with its fixed prior, seed 2, is such a
    run (with κ0 learned it takes another path)."""
    from bnpmix.pipeline.runtime.data import BatchSource
    from bnpmix.storage import Corpus

    rng = np.random.default_rng(0)
    centers = rng.normal(0, 6, (3, 2))
    y = rng.integers(0, 3, 900)
    ingest_array(centers[y] + rng.normal(size=(900, 2)), tmp_path / "c", partition_rows=150)
    sample = BatchSource(Corpus(tmp_path / "c"), None).sample(10_000, np.random.default_rng(2))
    ingest_array(np.asarray(sample), tmp_path / "s", partition_rows=len(sample))
    shared, origins = [], []
    adopt, verify = memo_lap.adopt, lapend.verify

    def adopting(state, env):
        targets = [b.target for b in state.births if b.S_new is not None]
        shared.append(len(targets) > len(set(targets)))
        return adopt(state, env)

    def verifying(obs, alloc, S, families, drop_origins=False, replaced=None):
        origins.append([origin for origin, _ in families])
        return verify(obs, alloc, S, families, drop_origins, replaced)

    monkeypatch.setattr(memo_lap, "adopt", adopting)
    monkeypatch.setattr(lapend, "verify", verifying)
    run = run_to_end(engine_for(tmp_path / "s", obs="tied-gauss", algorithm="memo", seed=2,
                                scheduler="synchronous", laps=30, learn_prior=False))
    assert any(shared)  # the case arose
    assert all(len(o) == len(set(o)) for o in origins)
    assert run.done


def test_a_text_fits_word_lists_share_the_summaries_budget(tmp_path):
    """A Mult batch's words (what its wave's globals are cut to) are kept per batch, so their
    number grows with the partitions: they count in summary_bytes beside the summaries and are
    spilled with them. A tight budget changes no number: the run is the ample one, row for
    row."""
    rng = np.random.default_rng(3)
    topics = rng.dirichlet(np.full(150, 0.05), 3)
    X = sp.csr_matrix(np.stack([rng.multinomial(40, topics[i % 3]) for i in range(600)])
                      .astype(float))
    write_docword(tmp_path / "docword.t.txt", X)
    ingest_docword(tmp_path / "docword.t.txt", tmp_path / "c", partition_rows=100)
    options = {"K": 3, "laps": 4, "seed": 2, "scheduler": "synchronous"}
    ample = fit(tmp_path / "c", tmp_path / "ample", job_config(**options))
    held: list[tuple[int, int]] = []

    def check(engine, step):
        held.append((engine.columns._held, engine.store.budget.held))

    tight = fit(tmp_path / "c", tmp_path / "tight", job_config(**options, summary_bytes=4000),
                on_step=check)
    assert any(h > 0 for h, _ in held) and max(total for _, total in held) <= 4000
    assert tight["elbo"] == ample["elbo"] and tight["K"] == ample["K"]
    a = pd.read_csv(tmp_path / "ample" / "trace.csv")
    b = pd.read_csv(tmp_path / "tight" / "trace.csv")
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))


def test_births_collected_rows_share_the_summaries_budget(tmp_path):
    """The rows a lap collects for its births (up to birth.max_collect per target, many
    targets a lap: on text that was the driver's largest holding) are kept within
    summary_bytes beside the summaries and spilled beyond it until their births are created
    at the lap's end, when they are all released. Spilling changes no number: the run is the
    ample one, row for row."""
    ingest_array(blob_data(7, n=900), tmp_path / "c", partition_rows=150)
    options = {"obs": "gauss", "K": 1, "laps": 6, "seed": 1, "scheduler": "synchronous"}
    ample = fit(tmp_path / "c", tmp_path / "ample", job_config(**options))
    budget = 6000
    seen: list[tuple[int, int, int]] = []

    def check(engine, step):
        rows = sum(b.n for b in engine.s.births) * 2 * 8  # held or spilled: 2 columns of float64
        seen.append((len(engine.collected), engine.collected._held, rows))
        assert engine.store.budget.held <= budget
        if step.lap_end:
            assert len(engine.collected) == 0  # created (or dropped) at the lap's end

    tight = fit(tmp_path / "c", tmp_path / "tight", job_config(**options, summary_bytes=budget),
                on_step=check)
    assert any(held < rows for _, held, rows in seen)  # some collected rows were spilled
    assert any(n and held for n, held, _ in seen)  # and some held
    assert ample["K"] > 1  # births were adopted
    assert tight["elbo"] == ample["elbo"] and tight["K"] == ample["K"]
    a = pd.read_csv(tmp_path / "ample" / "trace.csv")
    b = pd.read_csv(tmp_path / "tight" / "trace.csv")
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"))
