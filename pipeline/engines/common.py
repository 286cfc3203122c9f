"""What the variational engines (memo, vb, sovb) share: the partition visit, a full pass, the
initial model, and the checkpoint codecs of their models and summaries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from bnpmix.algorithms.adf import adf_pass
from bnpmix.algorithms.alloc.base import VariationalAllocation
from bnpmix.algorithms.alloc.nrm import NRM
from bnpmix.algorithms.mixture import Mixture, log_marginals, optimal_elbo
from bnpmix.algorithms.obs.base import ObsModel
from bnpmix.algorithms.summary import Reorder, Summary
from bnpmix.algorithms.vb.init import hard_summary, seeded_summary
from bnpmix.algorithms.vb.local import BatchResult, Globals, Plan, batch_step
from bnpmix.storage import Batch, BnpmixError
from bnpmix.storage.arrays import ArrayFile

from ..options import opt
from ..runtime.context import FitContext
from ..runtime.executors import Executor
from ..runtime.models import read_model

Items = Iterator[tuple[str, np.ndarray]]
# rounds of (learn the prior, global update) at a lap end: at most LEARN_ROUNDS, until one gains
# less than LEARN_TOL per item (one round a lap left ν0 creeping up for tens of laps on blobs)
LEARN_ROUNDS = 50
LEARN_TOL = 1e-8
# the one-pass start's threshold for a new component: 0.01, not ADF's default 0.1, which on
# 1,200 docstrings started from 121 components and ended below ADF's held-out after 16 laps;
# from 125 the run ended 2 nats a document above it after 9
# (benchmarks/acceptance/text_docstrings.py)
ONE_PASS_EPSILON = 0.01


@dataclass(frozen=True)
class LapsConfig:
    """What every variational engine takes: the initial K and the passes through the data."""

    K: int = opt(1, "initial number of components", within="[1, inf)")
    laps: int = opt(20, "passes through the data", within="[1, inf)")


def visit(batch: Batch, obs: ObsModel, g: Globals, plan: Plan | None = None) -> BatchResult:
    """One partition visit, as run by an executor (in a thread or on a Dask worker)."""
    return batch_step(batch.X, obs, g, plan)


def full_pass(ctx: FitContext, model: Mixture) -> Summary:
    """Local steps on every batch under the same globals; their sum, in partition order."""
    return corpus_summary(ctx.executor, ctx.corpus.n_partitions, ctx.obs, model)


PASS_WAVE = 4  # partitions per executor slot in flight at once during a full pass


def corpus_summary(executor: Executor, n_partitions: int, obs: ObsModel,
                   model: Mixture) -> Summary:
    """Local steps (Eq. 9) on every partition under ``model``'s globals, their summaries
    (Eq. 7) summed in partition order. The partitions go PASS_WAVE x parallelism at a time and
    each wave is summed before the next starts, so the driver holds that many batch results,
    not one per partition of the corpus (the same sum, in the same order)."""
    g = model.globals()
    total = Summary.zeros(model.uids, obs.stat_shapes(), obs.shared_shapes())
    wave = PASS_WAVE * max(1, executor.parallelism)
    for start in range(0, n_partitions, wave):
        for res in executor.map(visit, range(start, min(start + wave, n_partitions)), obs, g):
            total = total + res.summary
    return total


def started_from(ctx: FitContext, model: Mixture) -> Mixture:
    """``model`` as the run's start: the context takes its prior, and new component ids
    continue after its own."""
    ctx.obs = model.obs
    ctx.next_uid = int(model.uids.max()) + 1 if model.K else 0
    return model


def initial_model(ctx: FitContext, K: int) -> Mixture:
    """K = 1; K k-means++ seeds from a sample; K = 0: a one-pass start for bag-of-words models
    (one_pass_summary), one component otherwise; or a previous run's model (warm start), whose
    component ids the new ones continue after; or the context's start_model (its q and
    prior)."""
    if ctx.start_model is not None:
        return started_from(ctx, ctx.start_model.copy())
    if ctx.warm_start:
        model = read_model(ctx.warm_start)
        if not isinstance(model, Mixture):
            raise BnpmixError(f"{ctx.warm_start}: a {type(model).__name__} cannot warm-start a "
                              "variational engine (warm-start adf from it instead)")
        if model.obs.name != ctx.obs.name:
            raise BnpmixError(f"{ctx.warm_start}: warm start from a {model.obs.name} model into "
                              f"{ctx.obs.name}")
        try:
            model.obs.check_data(ctx.source.sample(10, ctx.rng.init))
        except ValueError as exc:
            raise BnpmixError(f"{ctx.warm_start}: its model does not fit {ctx.corpus.path}: "
                              f"{exc}") from None
        return started_from(ctx, model)
    if K == 0 and ctx.obs.text:
        S = one_pass_summary(ctx)
    elif K <= 1:
        S = Summary.zeros(ctx.new_uids(1), ctx.obs.stat_shapes(), ctx.obs.shared_shapes())
    else:
        sample = ctx.source.sample(ctx.init_sample, ctx.rng.init)
        S = seeded_summary(sample, ctx.obs, K, ctx.new_uids(K), ctx.rng.init)
    return Mixture.from_summary(ctx.obs, ctx.alloc, S)


def mass_order(obs: ObsModel, alloc: VariationalAllocation, S: Summary) -> Reorder | None:
    """The move that sorts the components by decreasing mass, if it raises the optimal ELBO,
    else None: under stick-breaking an emptied component ahead of full ones keeps a stick whose
    KL costs nats (a few per empty stick) that no global update can recover."""
    order = np.argsort(-S.N, kind="stable")
    if np.array_equal(order, np.arange(S.K)):
        return None
    move = Reorder(tuple(int(u) for u in S.uids[order]))
    marginals = log_marginals(obs, S)  # the candidate's are the same, reordered
    better = optimal_elbo(obs, alloc, move.apply(S), None if marginals is None
                          else marginals[order]) > optimal_elbo(obs, alloc, S, marginals)
    return move if better else None


def one_pass_summary(ctx: FitContext) -> Summary:
    """The init sample's items taken in order, each wholly into its most probable component
    under the DP's predictive rule given those before it (N_k p(x | items in k) against
    alpha0 p(x | prior): ADF's pass under a DP(alpha0) prior, a component created when the
    new one's probability exceeds ONE_PASS_EPSILON), as the hard summary of the sample: the
    components the variational fit starts from (its laps are the model's own VB)."""
    X = ctx.source.sample(ctx.init_sample, ctx.rng.init)
    prior = NRM(a=float(ctx.alloc.params().get("alpha0", 1.0)))
    _, qs = adf_pass(ctx.obs, prior, X, ONE_PASS_EPSILON)
    labels = np.array([int(np.argmax(q)) for q in qs], dtype=np.int64)
    used, labels = np.unique(labels, return_inverse=True)
    return hard_summary(X, ctx.obs, labels, ctx.new_uids(len(used)))


def learn_prior(ctx: FitContext, model: Mixture, S: Summary) -> Mixture:
    """When the run learns its prior: rounds of (the prior learned from the components,
    ObsModel.learn_prior, bounded by the run's initial prior; the global update (Eq. 10) of S
    under it), each raising the ELBO, until a round gains less than LEARN_TOL per item or
    LEARN_ROUNDS are done (no data pass: O(K D³) a round); the context's observation model is
    the last one learned. Otherwise, or if nothing was learned, ``model`` itself."""
    if not ctx.learn_prior:
        return model
    elbo = None
    for _ in range(LEARN_ROUNDS):
        obs = ctx.obs.learn_prior(model.post, ctx.prior_base or ctx.obs)
        if obs is ctx.obs:
            break
        ctx.obs = obs
        model = model.refit(S, obs)
        before, elbo = elbo, model.elbo(S, at_optimum=True)
        if before is not None and elbo - before < LEARN_TOL * ctx.corpus.n_items:
            break
    return model


def summary_items(prefix: str, S: Summary | None) -> Items:
    if S is not None:
        for k, v in S.to_arrays().items():
            yield f"{prefix}/{k}", v


def summary_from(arrays: ArrayFile, prefix: str) -> Summary | None:
    group = arrays.group(prefix)
    return Summary.from_arrays(group) if group else None


def model_items(prefix: str, model: Mixture) -> Items:
    """The model's arrays, and its description as a JSON byte array under ``meta``."""
    arrays, meta = model.to_arrays()
    yield f"{prefix}/meta", np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
    for k, v in arrays.items():
        yield f"{prefix}/{k}", v


def model_from(arrays: ArrayFile, prefix: str, ctx: FitContext) -> Mixture:
    """A checkpointed model, over the context's (restored) observation model when it has the
    same prior (a model kept from before the prior was last learned has its own)."""
    group = arrays.group(prefix)
    meta = json.loads(group.pop("meta").tobytes().decode("utf-8"))
    same = meta.get("obs") == ctx.obs.name and meta.get("prior") == ctx.obs.prior()
    return Mixture.from_arrays(group, meta, obs=ctx.obs if same else None)
