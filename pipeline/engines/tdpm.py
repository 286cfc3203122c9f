"""The temporal DP mixture (Ahmed & Xing 2008): chains of clusters born, drifting and dying over
epochs, by Gibbs sampling (``algorithms/tdpm``): Gaussian chains (Sec. 7) for dense corpora,
logistic-normal topic chains (Sec. 8) for bag-of-words ones; ``--fixed-k K`` runs the paper's
baseline, K Kalman-filter chains that never die, through the same sampler.

Epochs come from the corpus's integer ``time`` column: epoch t holds the items with time
min + t (a time with no items is an epoch without data: chains only drift through it). The
sampler runs on the driver, which holds every item (N × D floats) and the sample; one step is
one sweep. Kept samples (after ``burn_in``, every ``thin`` sweeps) give samples.parquet; the
final sample gives the model, the chains' states per epoch (chains.parquet: their posterior
means and variances given the final labels) and the alive chains
per epoch (epochs.parquet).

Warm-started from a tdpm model over a corpus that has grown by new epochs (``schedule run``),
the run is online (beyond the paper): the earlier items keep their chains, and the sweeps cover
only the last W epochs before the new ones and the new ones (the chains' states are redrawn
whole), so a daily job costs O(new items), not a refit of the history.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.emission import GaussianEmission
from bnpmix.algorithms.tdpm.gibbs import (
    ChainSampler,
    FixedKPrior,
    RCRPPrior,
    alive_per_epoch,
    relabel,
)
from bnpmix.algorithms.tdpm.model import TemporalMixture
from bnpmix.algorithms.tdpm.persistence import Persistence, same_epoch
from bnpmix.algorithms.tdpm.text import TextEmission
from bnpmix.storage import BnpmixError
from bnpmix.storage.arrays import ArrayFile

from ..declared import CHAINS_PANEL, Declared
from ..options import number, opt, string
from ..runtime.engine import Engine, Fitted, State, Step, register
from ..runtime.models import read_model
from ..runtime.progress import format_seconds
from .tdpm_kept import KeptSamples
from .tdpm_tables import (
    chains_table,
    epochs_table,
    persistence_table,
    samples_table,
    stability,
)

MAX_EPOCHS = 100_000


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class TDPMConfig:
    time_column: str = opt("time", "the corpus column holding each item's integer epoch",
                           choices=("time", "label", "sequence"))
    window: int = opt(1, "W: epochs a chain lives on without members (0: an independent DP per "
                      "epoch)", within="[0, inf)")
    decay: float = opt(0.8, "lambda: counts h epochs back weigh exp(-h/lambda) (inf: no decay)",
                       within="(0, inf]")
    alpha: float = opt(1.0, "concentration: the weight of a new chain", within="(0, inf)")
    sweeps: int = opt(200, "Gibbs sweeps (the first seats the items epoch by epoch)",
                      within="[1, inf)")
    burn_in: int = opt(100, "sweeps before samples are kept", within="[0, inf)")
    thin: int = opt(10, "keep every T-th sweep after the burn-in", within="[1, inf)")
    birth_var: float | None = opt(None, "sigma: variance of a new chain's state per dimension "
                                  "(default: the data's variance per dimension)", parse=number,
                                  within="(0, inf)")
    drift_var: float | None = opt(None, "rho: variance of a chain's drift per epoch (default: "
                                  "sampled, from an inverse-gamma prior with mean the starting "
                                  "noise variance)", parse=number, within="(0, inf)")
    noise_var: float | None = opt(None, "Sigma: variance of an item around its chain's state "
                                  "(default: sampled, from an inverse-gamma prior with mean the "
                                  "data's variance per dimension / 25)", parse=number,
                                  within="(0, inf)")
    fixed_k: int | None = opt(None, "run the baseline instead: K chains alive at every epoch, "
                              "weights Dirichlet(previous epoch's counts + alpha/K) (the "
                              "paper's Eq. 4.5)", parse=_int_or_none,
                              within="[1, inf)")
    id_column: str | None = opt(None, "membership stability (Sec. 9.2): the corpus column "
                                "holding each item's persistent id, at most once per epoch; a "
                                "returning item stays in its previous chain with a learned "
                                "probability (default: off)", parse=string,
                                choices=("item", "label", "sequence"))
    stickiness_a: float = opt(1.0, "a of the Beta(a, b) prior of each id's probability of "
                              "staying", within="(0, inf)")
    stickiness_b: float = opt(1.0, "b of the Beta(a, b) prior of each id's probability of "
                              "staying", within="(0, inf)")


def hyperparameters(cfg: TDPMConfig, X: Any, text: bool) -> dict[str, Any]:
    """The run's hyperparameters. Gaussian chains, scaled to the data's variance per dimension
    v: σ = v; Σ and ρ, unless given, are sampled with the chains (``learn``: inverse-gamma
    priors IG(2, Σ_0), mean Σ_0 = v / 25, both), starting at Σ_0. Text chains (natural
    parameters): σ = 10, as the paper's Sec. 8; ρ, unless given, sampled from IG(2, 0.1)."""
    common = {"id_column": cfg.id_column, "stickiness": [cfg.stickiness_a, cfg.stickiness_b]}
    if text:
        drift = cfg.drift_var if cfg.drift_var is not None else 0.1
        return common | {"alpha": cfg.alpha, "window": cfg.window, "decay": cfg.decay,
                "birth_var": cfg.birth_var if cfg.birth_var is not None else 10.0,
                "drift_var": drift, "noise_var": None, "fixed_k": cfg.fixed_k,
                "emission": "text",
                "learn": {} if cfg.drift_var is not None else {"drift_var": [2.0, drift]}}
    v = float(np.mean(np.var(X, axis=0))) if len(X) > 1 else 1.0
    v = v if v > 0 else 1.0
    noise = cfg.noise_var if cfg.noise_var is not None else v / 25
    learn = {name: [2.0, noise] for name in ("noise_var", "drift_var")
             if getattr(cfg, name) is None}
    return common | {"alpha": cfg.alpha, "window": cfg.window, "decay": cfg.decay,
            "birth_var": cfg.birth_var if cfg.birth_var is not None else v,
            "drift_var": cfg.drift_var if cfg.drift_var is not None else noise,
            "noise_var": noise, "fixed_k": cfg.fixed_k, "emission": "gauss", "learn": learn}


@register
class TDPMEngine(Engine):
    name = "tdpm"
    Config = TDPMConfig
    summary = "temporal DP mixture (recurrent CRP) of drifting Gaussian chains, Gibbs sampling"
    small_options: ClassVar[dict[str, Any]] = {"sweeps": 6, "burn_in": 2, "thin": 1}
    declared = Declared(objective="log_joint", objective_label="log joint",
                        weights_are="next-epoch chain probabilities (0 for a chain dead by then)",
                        weight_label="fraction of the items", plots_fractions=True,
                        panels=(CHAINS_PANEL,))

    # ---- data and sampler ------------------------------------------------------------------

    def _load(self) -> None:
        """Every item (X, item ids, times) on the driver, in corpus order."""
        corpus, col = self.ctx.corpus, self.cfg.time_column
        self.text = corpus.kind == "bow"
        if self.text and self.cfg.noise_var is not None:
            raise BnpmixError(f"{corpus.path}: noise_var applies to Gaussian chains; this corpus "
                              "is bag-of-words (documents are multinomial draws)")
        if col not in corpus.manifest.columns:
            raise BnpmixError(f"{corpus.path}: tdpm needs a {col!r} column (epochs); the corpus "
                              f"has {list(corpus.manifest.columns) or 'no optional columns'}")
        ids_col = self.cfg.id_column
        if ids_col is not None and self.cfg.fixed_k is not None:
            raise BnpmixError("id_column (membership stability) needs the recurrent CRP; "
                              "fixed_k runs the baseline without it")
        if ids_col is not None and ids_col not in corpus.manifest.columns:
            raise BnpmixError(f"{corpus.path}: id_column {ids_col!r} is not a column of the "
                              f"corpus (it has {list(corpus.manifest.columns) or 'none'})")
        X, items, times, ids, self.rows = [], [], [], [], []
        for p in range(corpus.n_partitions):
            batch = corpus.read(p)
            X.append(batch.X.astype(float) if self.text else np.asarray(batch.X, float))
            items.append(np.asarray(batch.columns.get("item",
                                                      batch.start + np.arange(len(batch)))))
            t = np.asarray(batch.columns[col])
            if not np.issubdtype(t.dtype, np.integer):
                raise BnpmixError(f"{corpus.path}: partition {p}: column {col!r} must hold "
                                  f"integers (epochs), not {t.dtype}")
            times.append(t.astype(np.int64))
            self.rows.append(len(t))
            if ids_col is not None:
                ids.append(np.asarray(batch.columns[ids_col]))
        self.X = sp.vstack(X, format="csr") if self.text else np.concatenate(X)
        self.items = np.concatenate(items)
        self.ids = np.concatenate(ids) if ids_col is not None else None
        times_all = np.concatenate(times)
        self.t0 = int(times_all.min())
        T = int(times_all.max()) - self.t0 + 1
        if T > MAX_EPOCHS:
            raise BnpmixError(f"{corpus.path}: column {col!r} spans {T} epochs (times "
                              f"{self.t0}..{times_all.max()}); at most {MAX_EPOCHS}: number "
                              "the epochs consecutively")
        self.epochs = times_all - self.t0
        self.T = T

    def _sampler(self) -> ChainSampler:
        """A sampler of the loaded items with the run's hyperparameters, every item unseated."""
        h = self.hyper
        prior = (FixedKPrior(h["fixed_k"], h["alpha"]) if h["fixed_k"]
                 else RCRPPrior(h["alpha"], h["window"], h["decay"]))
        emission = (TextEmission(self.X) if self.text
                    else GaussianEmission(self.X, h["noise_var"]))
        return ChainSampler(self.epochs, self.T, emission,
                            RandomWalk(h["birth_var"], h["drift_var"]), prior,
                            self._persistence())

    def _persistence(self) -> Persistence | None:
        """The ids' appearances, or None without membership stability; an id twice in one
        epoch is an error naming both rows."""
        if self.hyper.get("id_column") is None:
            return None
        pair = same_epoch(self.ids, self.epochs)
        if pair is not None:
            where = [self._where(i) for i in pair]
            raise BnpmixError(f"{self.ctx.corpus.path}: {where[0]} and {where[1]} have the same "
                              f"{self.hyper['id_column']} {self.ids[pair[0]]!r} and the same "
                              f"{self.cfg.time_column} {self.t0 + self.epochs[pair[0]]}: a "
                              "persistent id appears at most once per epoch")
        return Persistence.from_ids(self.ids, self.epochs, *self.hyper["stickiness"])

    def _where(self, i: int) -> str:
        """Item i's place in the corpus: partition and row."""
        ends = np.cumsum(self.rows)
        p = int(np.searchsorted(ends, i, side="right"))
        return f"partition {p} row {i - (ends[p] - self.rows[p])}"

    def start(self) -> None:
        """The items loaded, the hyperparameters scaled to them, an empty sample (fixed K: the
        K chains at K items drawn with the run's stream; warm start: the model's chains)."""
        self._load()
        self.hyper = hyperparameters(self.cfg, self.X, self.text)
        self.sampler = self._sampler()
        self.sweep, self.start_epoch = 0, 0
        self.taken_up = (0, time.perf_counter())  # (sweep, when): the pace status reports
        persist = self.sampler.model.persist
        self.kept = KeptSamples(self.ctx.chunks, np.zeros(persist.n_ids if persist else 0))
        rng = self.ctx.rng.init
        if self.hyper["fixed_k"]:
            K = self.hyper["fixed_k"]
            rows = rng.choice(self.X.shape[0], size=K, replace=self.X.shape[0] < K)
            picks = self.X[rows]
            if self.text:  # a document's smoothed log word frequencies
                counts = picks.toarray() + 0.5
                picks = np.log(counts / counts.sum(1, keepdims=True))
            self.sampler.init_fixed(np.repeat(picks[:, None, :], self.T, axis=1))
        if self.ctx.warm_start:
            self._warm_start()

    def _warm_start(self) -> None:
        """Online mode: the earlier items keep the warm-start model's chains."""
        model = read_model(self.ctx.warm_start)
        if not isinstance(model, TemporalMixture) or model.hyper.get("fixed_k"):
            raise BnpmixError(f"{self.ctx.warm_start}: warm start of tdpm needs a tdpm model")
        if model.obs.text != self.text:
            raise BnpmixError(f"{self.ctx.warm_start}: a {model.obs.name} model cannot continue "
                              f"on a {self.ctx.corpus.kind} corpus")
        n_old, T_old = len(model.labels), len(model.times)
        if n_old > self.X.shape[0] or model.times[0] != self.t0 or T_old > self.T:
            raise BnpmixError(f"{self.ctx.warm_start}: the corpus is not the model's corpus "
                              "with epochs appended")
        if np.any(self.epochs[:n_old] >= T_old) or np.any(self.epochs[n_old:] < T_old):
            raise BnpmixError(f"{self.ctx.warm_start}: the appended partitions must hold only "
                              f"epochs after the model's last ({model.times[-1]})")
        self.hyper = {"id_column": None, "stickiness": [1.0, 1.0]} | dict(model.hyper)
        if self.hyper["id_column"] != self.cfg.id_column:
            raise BnpmixError(f"{self.ctx.warm_start}: the model was fitted with id_column "
                              f"{self.hyper['id_column']!r}, this run asks for "
                              f"{self.cfg.id_column!r}")
        self.sampler = self._sampler()
        z = np.full(self.X.shape[0], -1, np.int64)
        z[:n_old] = model.labels
        stays = np.zeros(len(z), bool)
        if model.stays is not None:
            stays[:n_old] = model.stays
        self.sampler.restore({"z": z, "labels": np.arange(model.K), "first": model.first,
                              "last": model.last, "phi": model.states, "stay": stays})
        self.start_epoch = max(0, T_old - self.hyper["window"])

    # ---- steps -------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.sweep >= self.cfg.sweeps

    def step(self) -> Step:
        """One sweep, Σ and ρ drawn when learnt, the sample kept after the burn-in every thin
        sweeps, a trace row."""
        s, learn = self.sampler, self.hyper["learn"]
        s.sweep(self.ctx.rng.init, self.start_epoch)
        if learn:
            s.resample_variances(self.ctx.rng.init, learn.get("noise_var"),
                                 learn.get("drift_var"))
            self.hyper.update(drift_var=s.state.walk.drift_var)
            if "noise_var" in learn:
                self.hyper.update(noise_var=s.model.emission.noise_var)
        self.sweep += 1
        if self.sweep > self.cfg.burn_in and (self.sweep - self.cfg.burn_in) % self.cfg.thin == 0:
            P, coins = s.model.persist, s.state.coins
            self.kept.keep(relabel(s.state.z, self.epochs), None if coins is None else coins.y,
                           None if P is None else P.rho_mean(coins.heads, coins.tails))
        alive = alive_per_epoch(s.state.z, self.epochs, self.T, self.hyper["window"])
        extra = {} if s.state.coins is None else {"stayers": int(s.state.coins.y.sum())}
        self.trace.append(self.ctx.row(self.sweep, -1, int(s.state.active.sum()),
                                       log_joint=s.log_joint(), alive_last=int(alive[-1]),
                                       noise_var=self.hyper["noise_var"],
                                       drift_var=self.hyper["drift_var"], **extra))
        return Step(visits=self.ctx.corpus.n_partitions, lap_end=True)

    def status(self) -> str:
        """Sweeps done, chains, log p, and the pace since this process took the run up: sweeps
        a second and the time left at it."""
        row = self.trace[-1] if self.trace else {}
        text = (f"sweep {self.sweep}/{self.cfg.sweeps}  chains={row.get('K', '?')}  "
                f"log p={row.get('log_joint', float('nan')):.6g}")
        done, seconds = self.sweep - self.taken_up[0], time.perf_counter() - self.taken_up[1]
        if done > 0 and seconds > 0:
            rate = done / seconds
            text += (f"  {rate:.3g} sweeps/s, "
                     f"{format_seconds((self.cfg.sweeps - self.sweep) / rate)} left")
        return text

    # ---- results -----------------------------------------------------------------------------

    def result(self) -> Fitted:
        """The final sample as a TemporalMixture (chains numbered canonically, states smoothed
        given its labels) and the run's tables."""
        s = self.sampler.state
        z = relabel(s.z, self.epochs)
        order = [int(s.z[np.flatnonzero(z == j)[0]]) for j in range(z.max() + 1)]
        first, last = s.first[order], s.last[order]
        counts = np.zeros((self.T, len(order)), np.int64)
        np.add.at(counts, (self.epochs, z), 1)
        kept = self.kept.labels or [z.astype(np.int32)]
        smoothed = self.sampler.smoothed_states()
        smooth = [smoothed[k] for k in order]
        model = TemporalMixture(
            np.arange(len(order)), first, last, np.concatenate([m for m, _ in smooth]),
            np.concatenate([v for _, v in smooth]), counts, self.t0 + np.arange(self.T), z,
            stability(z, kept), self.hyper,
            {"sweeps": self.sweep, "kept_samples": len(self.kept.labels),
             "online_from_epoch": self.start_epoch},
            None if s.coins is None else s.coins.y.copy())
        info = {"stopped": f"{self.sweep} sweeps", "kept_samples": len(self.kept.labels)}
        key = self.declared.objective
        return Fitted(model, {key: float(self.trace[-1][key])}, info,
                      self._tables(model, kept))

    def _tables(self, model: TemporalMixture, kept: list[np.ndarray]) -> dict[str, pa.Table]:
        """samples, chains and epochs (``tdpm_tables``); persistence with membership
        stability, E[ρ_u] averaged over the kept samples (the final sample's without any)."""
        P, coins = self.sampler.model.persist, self.sampler.state.coins
        tables = {}
        stays = None
        if P is not None and coins is not None:
            stays = self.kept.stays or [coins.y]
            rho = (self.kept.rho_sum / len(self.kept.labels) if self.kept.labels
                   else P.rho_mean(coins.heads, coins.tails))
            tables["persistence"] = persistence_table(P, self.ids, np.mean(stays, axis=0), rho)
        vocab = self.ctx.corpus.manifest.vocab if self.text else None
        return tables | {"samples": samples_table(self.items, kept, stays),
                         "chains": chains_table(model, vocab),
                         "epochs": epochs_table(model, kept, self.epochs, self.hyper["window"])}

    # ---- checkpoints -------------------------------------------------------------------------

    def state(self) -> State:
        """The sampler's state (``ChainSampler.to_arrays``) and the kept samples not yet in
        chunk files."""
        meta = {"sweep": self.sweep, "start_epoch": self.start_epoch, "hyper": self.hyper,
                **self.kept.meta()}

        def arrays():
            yield from self.sampler.to_arrays().items()
            yield from self.kept.arrays()
        return meta, arrays()

    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        """The run as ``state`` left it: the items reloaded, the sample and the kept samples."""
        self._load()
        self.hyper = dict(meta["hyper"])
        self.sampler = self._sampler()
        self.sampler.restore(arrays)
        self.sweep, self.start_epoch = int(meta["sweep"]), int(meta["start_epoch"])
        self.taken_up = (self.sweep, time.perf_counter())
        P = self.sampler.model.persist
        self.kept = KeptSamples.restore(self.ctx.chunks, P.n_ids if P else 0, P is not None,
                                        meta, arrays)
