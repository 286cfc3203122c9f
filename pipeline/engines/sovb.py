"""Stochastic online VB (Hughes & Sudderth 2013, Sec. 2.3), the baseline: natural-gradient steps
with learning rate rho_t = (t + delay)^-kappa. The paper's schedules are (kappa, delay) =
a (0.5, 10), b (0.5, 100), c (0.9, 10). One step is one batch visit, or the end of a lap, where
a full pass measures the ELBO."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from bnpmix.algorithms.mixture import Mixture
from bnpmix.storage.arrays import ArrayFile

from ..options import opt
from ..runtime.engine import Engine, Fitted, State, Step, register
from .common import (
    LapsConfig,
    full_pass,
    initial_model,
    learn_prior,
    model_from,
    model_items,
    summary_from,
    summary_items,
    visit,
)

SCHEDULES = {"a": (0.5, 10.0), "b": (0.5, 100.0), "c": (0.9, 10.0)}  # (kappa, delay), Sec. 4


@dataclass(frozen=True)
class SOVBConfig(LapsConfig):
    K: int = opt(10, "truncation: the components the fit may use, seeded by k-means++ on a "
                 "sample; the stochastic steps empty the ones the data do not need",
                 within="[1, inf)")
    sovb_kappa: float = opt(0.5, "sovb learning-rate decay kappa in (t + delay)^-kappa "
                            "(schedules a, b: 0.5; c: 0.9; Robbins-Monro needs (0.5, 1])",
                            within="[0.5, 1]")
    sovb_delay: float = opt(10.0, "sovb learning-rate delay (schedules a, c: 10; b: 100)",
                            within="[0, inf)")


@register
class SOVBEngine(Engine):
    name = "sovb"
    mixes_obs = True
    truncated = True
    Config = SOVBConfig
    summary = "stochastic online VB (baseline)"
    small_options: ClassVar[dict[str, Any]] = {"laps": 3, "K": 3}

    def start(self) -> None:
        self.model = initial_model(self.ctx, self.cfg.K)
        self.S = self.S_eval = None
        self.t = 0
        self.lap = 0
        self.order: np.ndarray | None = None
        self.pos = 0

    @property
    def done(self) -> bool:
        return self.lap >= self.cfg.laps

    def step(self) -> Step:
        """S <- (1 - rho) S + rho (N / |B|) S_b: the global parameters are affine in S, so this
        is the interpolation of lambda of Sec. 2.3."""
        ctx, n = self.ctx, self.ctx.corpus.n_partitions
        if self.order is None:
            self.order = ctx.rng.order.permutation(n)
            self.pos = 0
        if self.pos == n:
            return self._end_lap()
        (res,) = ctx.executor.map(visit, [int(self.order[self.pos])], ctx.obs,
                                  self.model.globals())
        S_b = res.summary.scaled(ctx.corpus.n_items / res.summary.n_items)
        self.t += 1
        rho = (self.t + self.cfg.sovb_delay) ** -self.cfg.sovb_kappa
        self.S = S_b if self.S is None else self.S.scaled(1.0 - rho) + S_b.scaled(rho)
        self.model = Mixture.from_summary(ctx.obs, ctx.alloc, self.S)
        self.pos += 1
        return Step(visits=1)

    def _end_lap(self) -> Step:
        """The prior learned from the components (when the run learns it; q is then the update
        of the running S under it, as the next lap's steps would make it), and the ELBO of the
        current q, measured by a full pass."""
        ctx = self.ctx
        if self.S is not None:
            self.model = learn_prior(ctx, self.model, self.S)
        self.S_eval = full_pass(ctx, self.model)
        self.lap += 1
        self.order = None
        self.trace.append(ctx.trace_row(
            self.lap, -1, self.model.elbo(self.S_eval), self.model.K,
            effective_K=int(np.sum(0.01 * ctx.corpus.n_items < self.S_eval.N))))
        return Step(visits=ctx.corpus.n_partitions, lap_end=True)

    def status(self) -> str:
        where = "" if self.order is None else f" batch {self.pos}/{len(self.order)}"
        return f"lap {self.lap + 1}/{self.cfg.laps}{where}  K={self.model.K}"

    def result(self) -> Fitted:
        return Fitted(self.model, {"elbo": self.model.elbo(self.S_eval)})

    def state(self) -> State:
        meta = {"t": self.t, "lap": self.lap, "pos": self.pos, "order": self.order is not None}
        items = [*model_items("model", self.model), *summary_items("S", self.S),
                 *summary_items("S_eval", self.S_eval)]
        if self.order is not None:
            items.append(("order", self.order))
        return meta, iter(items)

    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        self.model = model_from(arrays, "model", self.ctx)
        self.S = summary_from(arrays, "S")
        self.S_eval = summary_from(arrays, "S_eval")
        self.t, self.lap, self.pos = int(meta["t"]), int(meta["lap"]), int(meta["pos"])
        self.order = arrays["order"] if meta["order"] else None
