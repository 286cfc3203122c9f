"""What every engine starts from: the corpus's batches, the models, the seeded random streams and
the initial global parameters."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bnpmix.algorithms.allocation import StickBreaking
from bnpmix.algorithms.init import seeded_summary
from bnpmix.algorithms.mixture import DPMixture
from bnpmix.algorithms.obs import ObsModel, obs_class, obs_from_prior
from bnpmix.algorithms.summary import Summary
from bnpmix.storage import BnpmixError, Corpus, RunDir

from .batches import BatchSource
from .config import FitConfig
from .executors import Executor


@dataclass
class Streams:
    """Independent random streams, so that e.g. the batch order does not depend on births."""

    init: np.random.Generator
    order: np.random.Generator
    birth: np.random.Generator
    merge: np.random.Generator

    @classmethod
    def from_seed(cls, seed: int) -> Streams:
        return cls(*(np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)))


@dataclass
class FitContext:
    corpus: Corpus
    cfg: FitConfig
    executor: Executor
    source: BatchSource
    obs: ObsModel
    alloc: StickBreaking
    rng: Streams
    started: float = field(default_factory=time.perf_counter)
    next_uid: int = 0

    def new_uids(self, n: int) -> np.ndarray:
        uids = np.arange(self.next_uid, self.next_uid + n, dtype=np.int64)
        self.next_uid += n
        return uids

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def trace_row(self, lap: float, batch: int, elbo: float, K: int, **extra: Any) -> dict:
        return {"lap": lap, "batch": batch, "elbo": elbo, "K": K,
                "seconds": round(self.elapsed(), 6), **extra}


def default_obs_name(corpus: Corpus) -> str:
    return "mult" if corpus.kind == "bow" else "gauss"


def make_context(corpus: Corpus, cfg: FitConfig, executor: Executor) -> FitContext:
    """Models with priors scaled to a sample of the data (overridable through cfg.prior)."""
    if cfg.obs is None:
        cfg.obs = default_obs_name(corpus)
    if (cfg.obs == "mult") != (corpus.kind == "bow"):
        raise BnpmixError(f"{corpus.path}: observation model {cfg.obs!r} does not fit a "
                          f"{corpus.kind} corpus")
    source = BatchSource(corpus, cfg.cache_bytes)
    rng = Streams.from_seed(cfg.seed)
    sample = source.sample(cfg.init_sample, np.random.default_rng(cfg.seed))
    obs = obs_class(cfg.obs).default(sample, **cfg.prior)
    return FitContext(corpus, cfg, executor, source, obs, StickBreaking(cfg.alpha0), rng)


def initial_model(ctx: FitContext) -> DPMixture:
    """K = 1; K k-means++ seeds from a sample; or a previous run's model (warm start)."""
    cfg = ctx.cfg
    if cfg.warm_start:
        model = load_model(cfg.warm_start, ctx)
        try:
            ctx.obs.check_data(ctx.source.sample(10, ctx.rng.init))
        except ValueError as exc:
            raise BnpmixError(f"{cfg.warm_start}: its model does not fit {ctx.corpus.path}: "
                              f"{exc}") from None
        return model
    if cfg.K == 1:
        S = Summary.zeros(ctx.new_uids(1), ctx.obs.stat_shapes())
    else:
        sample = ctx.source.sample(cfg.init_sample, ctx.rng.init)
        S = seeded_summary(sample, ctx.obs, cfg.K, ctx.new_uids(cfg.K), ctx.rng.init)
    return DPMixture.from_summary(ctx.obs, ctx.alloc, S)


def load_model(run_dir: str, ctx: FitContext | None = None) -> DPMixture:
    """The model saved in a run directory; with ``ctx``, uids continue after the saved ones."""
    arrays, meta = RunDir(run_dir).load_model()
    obs = obs_from_prior(meta["obs"], meta["prior"])
    post = {k.removeprefix("post_"): v for k, v in arrays.items() if k.startswith("post_")}
    model = DPMixture(obs, StickBreaking(meta["alpha0"]), arrays["uids"], post, arrays["a1"],
                      arrays["a0"])
    if ctx is not None:
        if obs.name != ctx.obs.name:
            raise BnpmixError(f"{run_dir}: warm start from a {obs.name} model into {ctx.obs.name}")
        ctx.obs = obs
        ctx.next_uid = int(model.uids.max()) + 1 if model.K else 0
    return model
