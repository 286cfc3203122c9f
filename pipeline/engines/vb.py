"""Full-dataset coordinate-ascent VB for a DP mixture (Hughes & Sudderth 2013, Sec. 2.2): every
local step under the same globals, then the global update (Eq. 10), then (when the run learns
it) the prior learned from the components and the global update under it. One step is one lap. At
convergence the components are sorted by mass if that raises the ELBO, and the laps go on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bnpmix.algorithms.mixture import Mixture
from bnpmix.storage.arrays import ArrayFile

from ..options import opt
from ..runtime.engine import Engine, Fitted, State, Step, register
from .common import (
    LapsConfig,
    full_pass,
    initial_model,
    learn_prior,
    mass_order,
    model_from,
    model_items,
    summary_from,
    summary_items,
)


@dataclass(frozen=True)
class VBConfig(LapsConfig):
    K: int = opt(10, "truncation: the components the fit may use, seeded by k-means++ on a "
                 "sample (scikit-learn's n_components); VB empties the ones the data do not "
                 "need", within="[1, inf)")
    laps: int = opt(500, "most passes through the data (a run stops earlier on convergence)",
                    within="[1, inf)")
    tol: float = opt(1e-6, "converged when a lap changes the ELBO by less than this per item "
                     "(0: run every lap)", within="[0, inf)")


@register
class VBEngine(Engine):
    name = "vb"
    mixes_obs = True
    truncated = True
    Config = VBConfig
    summary = "full-data coordinate-ascent VB"
    small_options: ClassVar[dict[str, Any]] = {"laps": 3, "K": 3}

    def start(self) -> None:
        self.model = initial_model(self.ctx, self.cfg.K)
        self.S = None
        self.laps_done = 0
        self.stopped = ""

    @property
    def done(self) -> bool:
        return self.laps_done >= self.cfg.laps or bool(self.stopped)

    def step(self) -> Step:
        ctx = self.ctx
        self.S = full_pass(ctx, self.model)
        self.model = learn_prior(ctx, Mixture.from_summary(ctx.obs, ctx.alloc, self.S), self.S)
        self.laps_done += 1
        elbo = self.model.elbo(self.S)
        if self.trace and self.cfg.tol > 0:
            change = abs(elbo - self.trace[-1]["elbo"]) / ctx.corpus.n_items
            if change < self.cfg.tol and not self._sorted():
                self.stopped = (f"converged at lap {self.laps_done}: ELBO change {change:.3g} "
                                f"per item < tol {self.cfg.tol:g}")
            elbo = self.model.elbo(self.S)
        self.trace.append(ctx.trace_row(self.laps_done, ctx.corpus.n_partitions - 1, elbo,
                                        self.model.K))
        return Step(visits=ctx.corpus.n_partitions, lap_end=True)

    def _sorted(self) -> bool:
        """At convergence, the components sorted by decreasing mass when that raises the ELBO
        (mass_order), and the laps go on from there: a start that left emptied components ahead
        of the clusters in the stick-breaking order otherwise converges a few nats per such
        component below the same partition's bound."""
        move = mass_order(self.ctx.obs, self.ctx.alloc, self.S)
        if move is not None:
            self.S = move.apply(self.S)
            self.model = Mixture.from_summary(self.ctx.obs, self.ctx.alloc, self.S)
        return move is not None

    def status(self) -> str:
        return f"lap {self.laps_done}/{self.cfg.laps}  " + super().status()

    def result(self) -> Fitted:
        stopped = self.stopped or f"the maximum of {self.cfg.laps} laps"
        return Fitted(self.model, {"elbo": self.model.elbo(self.S)}, {"stopped": stopped},
                      converged=bool(self.stopped))

    def state(self) -> State:
        items = [*model_items("model", self.model), *summary_items("S", self.S)]
        return {"laps_done": self.laps_done, "stopped": self.stopped}, iter(items)

    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        self.model = model_from(arrays, "model", self.ctx)
        self.S = summary_from(arrays, "S")
        self.laps_done = int(meta["laps_done"])
        self.stopped = meta["stopped"]
