"""Full-dataset VB (Sec. 2.2) and stochastic online VB (Sec. 2.3), over the same batch visit."""

from __future__ import annotations

import numpy as np

from bnpmix.algorithms.mixture import DPMixture
from bnpmix.algorithms.summary import Summary

from .context import FitContext
from .memo import visit


def full_pass(ctx: FitContext, model: DPMixture) -> Summary:
    """Local steps on every batch under the same globals; their sum, in partition order."""
    results = ctx.executor.map(visit, range(ctx.corpus.n_partitions), ctx.obs, model.globals(),
                               None, (), 0.0)
    total = Summary.zeros(model.uids, ctx.obs.stat_shapes())
    for res in results:
        total = total + res.summary
    return total


def run_vb(ctx: FitContext, model: DPMixture) -> tuple[DPMixture, Summary, list[dict]]:
    """Coordinate ascent: all local steps, then the global update (Eq. 10), once per lap."""
    trace = []
    S = None
    for lap in range(ctx.cfg.laps):
        S = full_pass(ctx, model)
        model = DPMixture.from_summary(ctx.obs, ctx.alloc, S)
        trace.append(ctx.trace_row(lap + 1, ctx.corpus.n_partitions - 1, model.elbo(S), model.K))
    return model, S, trace


def run_sovb(ctx: FitContext, model: DPMixture) -> tuple[DPMixture, Summary, list[dict]]:
    """Natural-gradient steps with rho_t = (t + delay)^-kappa on batch summaries amplified to the
    full data, S <- (1 - rho) S + rho (N / |B|) S_b; the global parameters are affine in S, so
    this is the interpolation of lambda of Sec. 2.3. The ELBO is measured by a full pass per lap."""
    cfg = ctx.cfg
    n_total = ctx.corpus.n_items
    S = S_eval = None
    t = 0
    trace = []
    for lap in range(cfg.laps):
        for b in ctx.rng.order.permutation(ctx.corpus.n_partitions):
            (res,) = ctx.executor.map(visit, [int(b)], ctx.obs, model.globals(), None, (), 0.0)
            S_b = res.summary.scaled(n_total / res.summary.n_items)
            t += 1
            rho = (t + cfg.sovb_delay) ** -cfg.sovb_kappa
            S = S_b if S is None else S.scaled(1.0 - rho) + S_b.scaled(rho)
            model = DPMixture.from_summary(ctx.obs, ctx.alloc, S)
        S_eval = full_pass(ctx, model)
        trace.append(ctx.trace_row(lap + 1, -1, model.elbo(S_eval), model.K,
                                   effective_K=int(np.sum(0.01 * n_total < S_eval.N))))
    return model, S_eval, trace
