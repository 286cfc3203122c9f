"""ADF and EP for NRM mixtures (Tank, Foti & Fox 2015): the single-worker streaming path and
memoized parallel EP.

``adf`` visits the corpus's partitions in order, one task at a time (each partition's items are
absorbed on the worker that holds it, against the clusters so far), and stops after one pass.
Warm-started from an ``adf`` model it absorbs only the partitions that model has not seen, so a
scheduled run continues the stream. ``ep`` starts with the same ADF pass, keeping every item's
responsibilities as its site (per partition, in the driver's StateStore), then runs EP passes in
waves of W partitions, each swept in parallel against the same global state; the driver
replaces each partition's old site sum by its new one in partition order, names the clusters
the partitions created, and removes clusters with S_k < ε (a move replayed on the stored sites).
W = 1 with one partition is the paper's sequential EP; W > 1 is beyond the paper.

Both optionally merge clusters whose posterior-mean word distributions are close (Hellinger
distance below ``merge_threshold``) after each pass, and by default on dense models pool pairs
while the partition's log evidence rises (``merges``, algorithms/nrm_merge.py): S and λ add
(sites too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from bnpmix.algorithms.alloc import NRM
from bnpmix.algorithms.ep import OnSites, Sites, SweepResult, sweep
from bnpmix.algorithms.nrm_merge import evidence_merges
from bnpmix.algorithms.nrm_mixture import NRMMixture, hellinger_pairs
from bnpmix.algorithms.obs.base import ObsModel
from bnpmix.algorithms.summary import Delete, Pool, Summary
from bnpmix.storage import Batch, BnpmixError
from bnpmix.storage.arrays import ArrayFile

from ..declared import Declared
from ..options import number, opt
from ..runtime.context import FitContext
from ..runtime.engine import Engine, Fitted, State, Step, TuneFlag, register
from ..runtime.models import read_model
from ..runtime.store import Codec, StateStore
from .common import Items, summary_from, summary_items

SIGMA = {"dp": 0.0, "ig": 0.5}
SITES: Codec[Sites] = Codec(Sites.to_arrays, Sites.from_arrays)


@dataclass(frozen=True)
class NRMConfig:
    """The NRM prior and the thresholds ADF and EP share."""

    nrm_prior: str = opt("dp", "NRM prior over the weights: dp (sigma 0), ig (inverse-Gaussian, "
                         "sigma 0.5) or nggp (sigma from --nrm-sigma)",
                         choices=("dp", "ig", "nggp"))
    nrm_a: float = opt(1.0, "NRM mass a (the DP's concentration)", within="(0, inf)")
    nrm_tau: float = opt(1.0, "NRM tilt tau (ig, nggp)", within="[0, inf)")
    nrm_sigma: float | None = opt(None, "NRM discount sigma of an nggp prior", parse=number,
                                  within="(0, 1)")
    epsilon: float | None = opt(None, "create a cluster when an item's new-cluster probability "
                                "exceeds this, remove one whose mass falls below it (at least "
                                "sigma; default: max(sigma, 0.1))", parse=number,
                                within="(0, 1)")
    merge_threshold: float = opt(0.0, "after each pass merge clusters whose posterior-mean word "
                                 "distributions are closer than this Hellinger distance (0: no "
                                 "merges; mult models only)", within="[0, 1]")
    merges: str = opt("auto", "after each pass pool pairs of clusters while the log evidence of "
                      "the partition and the data rises (algorithms/nrm_merge.py): auto (dense "
                      "models), evidence (every model) or none",
                      choices=("auto", "evidence", "none"))

    def __post_init__(self) -> None:
        if self.nrm_prior == "nggp" and self.nrm_sigma is None:
            raise ValueError("nrm_prior nggp needs nrm_sigma")
        if self.nrm_prior != "nggp" and self.nrm_sigma is not None:
            raise ValueError(f"nrm_sigma is set by nrm_prior {self.nrm_prior} "
                             f"(sigma {SIGMA[self.nrm_prior]}); give it only with nggp")
        if self.epsilon is not None and self.epsilon < self.sigma:
            raise ValueError(f"epsilon ({self.epsilon}) must be at least sigma ({self.sigma})")

    @property
    def sigma(self) -> float:
        return SIGMA.get(self.nrm_prior, self.nrm_sigma or 0.0)

    def prior(self) -> NRM:
        return NRM(self.nrm_a, self.nrm_tau, self.sigma)

    def eps(self) -> float:
        return self.epsilon if self.epsilon is not None else max(self.sigma, 0.1)


@dataclass(frozen=True)
class ADFConfig(NRMConfig):
    expected_k: str = opt("count", "E[K] in the density of U: count (K, the clusters so far) or "
                          "exact (K minus the chance of each cluster being empty, supplement "
                          "Eq. 18)", choices=("count", "exact"))


@dataclass(frozen=True)
class EPConfig(NRMConfig):
    passes: int = opt(10, "EP passes after the initial ADF pass", within="[0, inf)")
    damping: float = opt(1.0, "EP's step eta: a partition's sites become old + eta (new - old) "
                         "(1: none; below 1 can steady parallel waves, --wave > 1)",
                         within="(0, 1]")


def observation_model(ctx: FitContext) -> ObsModel:
    """The observation model, with its prior, that ADF and EP absorb every item with: chosen
    once when a run starts (not warm-started) and kept in ctx.obs, which checkpoints, the model
    and summary.json carry: on dense data under ``--obs auto`` the prior the winning
    candidate's memo run on the corpus learned (pipeline.auto), otherwise the prior
    make_context scaled to that sample (``obs_class(name).default(sample)``, overridable by
    ``[prior]``)."""
    return ctx.obs


def visit(batch: Batch, old: Sites | None, obs: ObsModel, prior: NRM, eps: float,
          total: Summary, m: int, v: float, logP: np.ndarray | None) -> SweepResult:
    """One partition's sweep, as run by an executor (ADF when ``old`` is None; ``logP``: the
    clusters' log P_k for the exact E[K'])."""
    return sweep(batch.X, obs, prior, eps, total, old, m, v, logP)


class NRMEngine(Engine):
    """What ADF and EP share: the global sums, the ADF pass over partitions not yet absorbed,
    the driver's combination of a sweep, merges and the fitted model."""

    mixes_obs = True
    keep_sites = False
    exact_k = False  # Û from the exact E[K'] (adf's expected_k = "exact")
    random = False  # items are absorbed in corpus order: the seed changes nothing
    declared = Declared(objective="loglik", objective_label="training predictive log-likelihood",
                        trace_per_partition=True)
    tuner = "bnpmix.pipeline.engines.nrm_tune:tune"
    prior_alias = "nrm_prior"  # --prior ig: the NRM prior, as the paper names it
    tune_flags = (TuneFlag("a_grid", "--a-grid", "values of a (default 1,10,100,1000)",
                           metavar="A,A,..."),
                  TuneFlag("tau_grid", "--tau-grid", "values of tau (default "
                           "0.1,1,10,100,1000; ignored for dp)", metavar="T,T,..."),
                  TuneFlag("sigma", "--nrm-sigma", "discount sigma of an nggp prior",
                           grid=False),
                  TuneFlag("epsilon", "--epsilon", "cluster creation threshold (default: "
                           "max(sigma, 0.1))", grid=False))

    def start(self) -> None:
        ctx = self.ctx
        self.store: StateStore[Sites] = StateStore(SITES, ctx.summary_bytes)
        self.prior, self.eps = self.cfg.prior(), self.cfg.eps()
        if self.cfg.merge_threshold > 0 and ctx.obs.name != "mult":
            raise BnpmixError(f"merge_threshold: merges compare word distributions; the "
                              f"{ctx.obs.name} model has none (use 0)")
        self.total = Summary.zeros(np.zeros(0, np.int64), ctx.obs.stat_shapes(),
                                   ctx.obs.shared_shapes())
        self.m, self.v, self.absorbed = 0, 0.0, []
        self.logP = np.zeros(0) if self.exact_k else None
        if ctx.warm_start:
            self._warm_start()  # the model's own observation prior
        else:
            ctx.obs = observation_model(ctx)
        keys = self._keys()
        self.todo = [p for p in range(ctx.corpus.n_partitions) if keys[p] not in self.absorbed]
        self.pos, self.pass_, self.loglik, self.pass_loglik, self.merged = 0, 0, 0.0, 0.0, 0
        self.path: list[list[float]] = []  # the ADF pass item by item (_follow)

    def _keys(self) -> list[list[str]]:
        return [[p.file, p.sha256] for p in self.ctx.corpus.manifest.partitions]

    def _warm_start(self) -> None:
        ctx = self.ctx
        model = read_model(ctx.warm_start)
        if not isinstance(model, NRMMixture) or model.obs.name != ctx.obs.name:
            kind = "an adf/ep" if isinstance(model, NRMMixture) else "a variational"
            raise BnpmixError(f"{ctx.warm_start}: warm start of {self.name} needs an adf model "
                              f"with {ctx.obs.name} observations, not {kind} model with "
                              f"{model.obs.name} observations")
        if self.keep_sites:
            raise BnpmixError(f"{ctx.warm_start}: ep keeps every item's site and cannot start "
                              "from a model; warm-start adf instead")
        ctx.obs = model.obs
        self.total, self.m, self.v = model.sums, model.m, model.v
        if self.exact_k and model.logP is None:
            raise BnpmixError(f"{ctx.warm_start}: the model has no log P_k (fitted with "
                              "expected_k count); warm-start it with expected_k count")
        self.logP = model.logP if self.exact_k else None
        self.absorbed = [list(k) for k in model.info.get("partitions", [])]
        ctx.next_uid = int(self.total.uids.max()) + 1 if self.total.K else 0

    # the ADF pass ---------------------------------------------------------------------------

    def adf_step(self) -> Step:
        p = self.todo[self.pos]
        res = self.ctx.executor.map(visit, [p], self.ctx.obs, self.prior, self.eps, self.total,
                                    self.m, self.v, self.logP, payloads=[None])[0]
        self._combine(p, res)
        self.m += res.sites.n
        self.absorbed.append(self._keys()[p])
        self.pos += 1
        end = self.pos == len(self.todo)
        if end:
            self._end_pass()
        return Step(visits=1, lap_end=end)

    def _combine(self, p: int, res: SweepResult) -> None:
        """Name the sweep's new clusters, replace the partition's old site sum by the new one,
        store the sites (EP), and remove clusters lighter than ε (EP)."""
        sites = res.sites.named(self.ctx.new_uids(res.created)[0] if res.created else 0)
        old = self.store.get(p) if self.keep_sites else None
        if old is not None and self.cfg.damping < 1:
            sites = old.blend(sites, self.cfg.damping)
        new_ids = sites.summary.uids[~np.isin(sites.summary.uids, self.total.uids)]
        uids = np.concatenate([self.total.uids, new_ids])
        total = self.total.over(uids) + sites.summary.over(uids)
        if old is not None:
            total = total - old.summary.over(uids)
        self.total, self.v = total, res.v
        if self.exact_k:  # the sweep's clusters: the total's, then its new ones, as in uids
            self.logP = res.logP
        if res.path is not None:
            self._follow(res.path)
        self.loglik += res.loglik
        self.trace.append(self.ctx.row(self.pass_, p, self.total.K, loglik=res.loglik / max(
            sites.n, 1), U=float(np.exp(res.v)) if np.isfinite(res.v) else float("nan")))
        if self.keep_sites:
            self.store.put(p, sites)
            if old is not None:
                for u in self.total.uids[self.eps > self.total.N].tolist():
                    self._move(Delete(u))

    def _follow(self, path: np.ndarray) -> None:
        """The ADF pass's rows within a partition (SweepResult.path): items absorbed (a warm
        start's included), K, and the Σ log density and the items of the pass so far, from which
        result() gives the pass's predictive log-likelihood per item up to each row: what a
        report draws of a pass over few partitions, whose trace has a row per partition only."""
        done = self.path[-1][3] if self.path else 0.0
        for items, K, loglik in path.tolist():
            self.path.append([self.m + items, K, self.loglik + loglik, done + items])

    def _move(self, move: Delete | Pool) -> None:
        if self.logP is not None:  # a pooled cluster is empty only if both were: P = P_a P_b
            logP = dict(zip(self.total.uids.tolist(), self.logP.tolist(), strict=True))
            logP[move.a] += logP.pop(move.b)
        self.total = move.apply(self.total)
        if self.logP is not None:
            self.logP = np.array([logP[u] for u in self.total.uids.tolist()])
        if self.keep_sites:
            self.store.log(OnSites(move))

    def _end_pass(self) -> None:
        """Merges (Hellinger when asked; by the evidence unless ``merges`` says none, for dense
        models under auto) and the pass's trace."""
        if self.cfg.merge_threshold > 0 and self.total.K > 1:
            means = self.ctx.obs.means(self.ctx.obs.post(self.total.N, self.total.obs_stats))
            uids = self.total.uids.copy()  # the pairs' positions: each merge removes a row
            touched: set[int] = set()
            for i, j, _ in hellinger_pairs(means, self.cfg.merge_threshold):
                a, b = int(uids[i]), int(uids[j])
                if a not in touched and b not in touched:
                    touched.update((a, b))
                    self._move(Pool(a, b))
                    self.merged += 1
        merges = self.cfg.merges
        if merges == "evidence" or (merges == "auto" and self.ctx.obs.name != "mult"):
            EK = None if self.logP is None else self.total.K - float(np.exp(self.logP).sum())
            w_new = self.prior.predictive(self.total.N, self.m, EK, v0=self.v)[1]
            for move in evidence_merges(self.ctx.obs, self.prior.sigma, float(np.log(w_new)),
                                        self.total):
                self._move(move)
                self.merged += 1
        self.pass_loglik, self.loglik = self.loglik, 0.0
        self.pass_ += 1

    # results and checkpoints ----------------------------------------------------------------

    def model(self) -> NRMMixture:
        return NRMMixture(self.ctx.obs, self.prior, self.total, self.m, self.v, self.logP,
                          {"partitions": self.absorbed})

    def result(self) -> Fitted:
        ep = self.pass_ - 1  # pass 0 is the ADF pass
        info = {"stopped": "the ADF pass" + (f" and {ep} EP pass{'es' if ep != 1 else ''}"
                                             if self.keep_sites else ""),
                "merges": str(self.merged)}
        path = np.array(self.path, float).reshape(-1, 4)
        progress = pa.table({"items": path[:, 0].astype(np.int64), "K": path[:, 1].astype(
            np.int64), self.declared.objective: path[:, 2] / np.maximum(path[:, 3], 1)})
        return Fitted(self.model(), {self.declared.objective: self.pass_loglik}, info,
                      {"progress": progress} if len(path) else {})

    def status(self) -> str:
        return (f"pass {self.pass_}  partition {self.pos}/{len(self.todo)}  K={self.total.K}")

    def state(self) -> State:
        meta = {"m": self.m, "v": None if not np.isfinite(self.v) else self.v,
                "absorbed": self.absorbed, "todo": self.todo, "pos": self.pos,
                "pass": self.pass_, "loglik": self.loglik, "merged": self.merged,
                "pass_loglik": self.pass_loglik, "stored": self.store.keys(), "path": self.path}
        return meta, self._arrays()

    def _arrays(self) -> Items:
        yield from summary_items("total", self.total)
        if self.logP is not None:
            yield "logP", self.logP
        for key, sites in self.store.items():
            for k, v in sites.to_arrays().items():
                yield f"store/{key}/{k}", v

    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        self.prior, self.eps = self.cfg.prior(), self.cfg.eps()
        self.total = summary_from(arrays, "total")
        self.logP = np.asarray(arrays["logP"], float) if self.exact_k else None
        self.m = int(meta["m"])
        self.v = float("nan") if meta["v"] is None else float(meta["v"])
        self.absorbed = [list(k) for k in meta["absorbed"]]
        self.todo, self.pos, self.pass_ = list(meta["todo"]), int(meta["pos"]), int(meta["pass"])
        self.loglik, self.merged = float(meta["loglik"]), int(meta["merged"])
        self.pass_loglik = float(meta["pass_loglik"])
        self.path = [list(row) for row in meta.get("path", [])]  # (checkpoints from before it)
        self.store = StateStore(SITES, self.ctx.summary_bytes)
        for key in meta["stored"]:
            self.store.put(int(key), Sites.from_arrays(arrays.tree(f"store/{key}")))

    def close(self) -> None:
        self.store.close()


@register
class ADFEngine(NRMEngine):
    name = "adf"
    Config = ADFConfig
    summary = "one-pass streaming ADF for NRM mixtures (DP, IG, NGGP)"
    streams = True

    @classmethod
    def stream_start(cls, model: NRMMixture) -> NRMMixture:
        """One more ADF pass over the next block (a new corpus): none of its partitions is
        absorbed yet."""
        model.info = {**model.info, "partitions": []}
        return model

    @property
    def exact_k(self) -> bool:
        return self.cfg.expected_k == "exact"

    @property
    def done(self) -> bool:
        return self.pos >= len(self.todo)

    def step(self) -> Step:
        return self.adf_step()


@register
class EPEngine(NRMEngine):
    name = "ep"
    Config = EPConfig
    summary = "ADF then memoized parallel EP passes for NRM mixtures"
    keep_sites = True
    small_options: ClassVar[dict[str, Any]] = {"passes": 2}

    @property
    def done(self) -> bool:
        return self.pass_ > self.cfg.passes or (self.pass_ > 0 and not self.todo)

    def step(self) -> Step:
        if self.pass_ == 0:
            return self.adf_step()
        ctx = self.ctx
        if self.pos == len(self.todo):
            self.pos = 0
        wave = self.todo[self.pos:self.pos + (ctx.wave or self.default_wave)]
        results = ctx.executor.map(visit, wave, ctx.obs, self.prior, self.eps, self.total,
                                   self.m, self.v, None,
                                   payloads=[self.store.get(p) for p in wave])
        for p, res in zip(wave, results, strict=True):
            self._combine(p, res)
        self.pos += len(wave)
        end = self.pos == len(self.todo)
        if end:
            self._end_pass()
        return Step(visits=len(wave), lap_end=end)
