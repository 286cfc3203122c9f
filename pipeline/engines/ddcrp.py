"""The sequential distance-dependent CRP by variational inference (Bartunov & Vetrov 2014;
``algorithms/ddcrp``): every sequence of the corpus is an independent problem, fitted as one task
on the executor from ``restarts`` starts (``--starts``: DP VB tables, drawn, or both in turn),
the best ELBO kept. A task reads one partition (a worker caches it) and fits the rows of its
sequence; a corpus without a sequence column is one sequence in stored order, which the driver
gathers and fits itself (VI on one sequence is O(N²) in time, so such a corpus is small). Where
the sequences and their positions come from: ``ddcrp_sequences.py``.

The engine is an adapter: its state is the list of finished sequences' ``SequenceResult``
values, its checkpoint those values field by field (``write_results`` / ``read_results``). One
step is a wave of sequences; summary.json's ``elbo`` is the sum over sequences;
sequences.parquet holds each sequence's ELBO, iterations, tables and every restart's ELBO,
links.parquet each item's most probable link.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from bnpmix.algorithms.ddcrp.fit import ROUNDS, STARTS, default_starts, fit_restarts
from bnpmix.algorithms.ddcrp.links import DECAYS, decay
from bnpmix.algorithms.ddcrp.model import SequenceMixture
from bnpmix.algorithms.obs.base import Arrays, Data, ObsModel, stack_rows
from bnpmix.storage import BnpmixError
from bnpmix.storage.arrays import ArrayFile
from bnpmix.storage.corpus import Batch

from ..declared import SEQUENCES_PANEL, Declared
from ..options import opt, string
from ..runtime.engine import Engine, Fitted, State, Step, register
from .ddcrp_sequences import gather, sequence_tasks

WAVE = 32  # sequences per step
STARTS_BY_NAME = {"mixed": STARTS, "vb": ("vb",), "drawn": ("drawn",)}


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class DDCRPConfig:
    sequence_column: str | None = opt(None, "the corpus column holding each item's integer "
                                      "sequence id (default: `sequence` if the corpus has it, "
                                      "else the corpus is one sequence in stored order)",
                                      parse=string, choices=("sequence", "time"))
    position_column: str | None = opt(None, "the corpus column holding each item's position "
                                      "(distances are differences of positions; default: the "
                                      "item's index in its sequence)", parse=string,
                                      choices=("time",))
    decay: str = opt("none", "f(d), the weight of a link over distance d: none (f = 1, the "
                     "sequential CRP), window 1[d < a], exponential exp(-d/a), logistic "
                     "exp(a-d)/(1+exp(a-d))", choices=DECAYS)
    decay_a: float = opt(10.0, "a, the decay's scale", within="(0, inf)")
    alpha: float = opt(1.0, "concentration: the weight of a new table (ddcrp: of a self-link; "
                       "tdpm: of a new chain)", within="(0, inf)")
    window: int | None = opt(None, "link only to the W most recent customers (default: all); a "
                             "step then costs O(N (W + K)) instead of O(N^2)",
                             parse=_int_or_none, within="[1, inf)")
    prune: float = opt(1e-6, "close a table whose self-link probability falls below this",
                       within="[0, 0.5]")
    iterations: int = opt(200, "coordinate-ascent iterations per start at most",
                          within="[1, inf)")
    rel_tol: float = opt(1e-7, "stop a start when the ELBO changes by less than this fraction "
                     "(0: run every iteration)", within="[0, inf)")
    starts: str = opt("auto", "ddcrp's starts: the tables of a DP VB fit of the sequence (vb), "
                      "drawn in one pass (drawn), the two in turn (mixed), or auto: vb with "
                      "--decay none and no --window (the order then carries no information), "
                      "else mixed",
                      choices=("auto", *STARTS_BY_NAME))
    table_rounds: int = opt(ROUNDS, "rounds of moves over whole tables (merges, splits: each "
                            "kept only if the exact bound rises) after each start's ascent "
                            "(0: none)", within="[0, inf)")


def starts_of(name: str, decay_name: str, window: int | None) -> tuple[str, ...]:
    """The kinds of start of ``--starts`` (auto: ``fit.default_starts`` for the decay and
    window)."""
    return default_starts(decay_name, window) if name == "auto" else STARTS_BY_NAME[name]


def _per(dims: str) -> dict[str, str]:
    return {"dims": dims}


@dataclass(frozen=True, eq=False)
class SequenceResult:
    """One sequence's best fit, what the engine keeps and checkpoints: scalars (JSON), the
    items' arrays (``dims`` "n": one entry per item, "n k": Z's N × K block, "k": the tables'
    posteriors, one row per table), each written and read by its field (``write_results``)."""

    sequence: int
    elbo: float
    iterations: int
    converged: bool
    n_tables: float
    seconds: float
    restart_elbos: list[float]
    Z: np.ndarray = field(metadata=_per("n k"))
    positions: np.ndarray = field(metadata=_per("n"))
    rows: np.ndarray = field(metadata=_per("n"))
    link: np.ndarray = field(metadata=_per("n"))
    link_prob: np.ndarray = field(metadata=_per("n"))
    self_prob: np.ndarray = field(metadata=_per("n"))
    post: Arrays = field(metadata=_per("k"))


SCALARS = tuple(f.name for f in fields(SequenceResult) if "dims" not in f.metadata)


def write_results(results: list[SequenceResult]) -> State:
    """The results as a checkpoint: each scalar field a JSON list over the sequences, each
    array field one array of the sequences' entries in turn (a dict field one array per key,
    ``name/key``), and each sequence's Z shape (``shapes``) to cut them apart again."""
    meta: dict[str, Any] = {"done": len(results)}
    for name in SCALARS:  # numpy scalars and lists as JSON's numbers and lists
        meta[name] = [np.asarray(getattr(r, name)).tolist() for r in results]
    meta["shapes"] = [list(r.Z.shape) for r in results]

    def arrays() -> Iterator[tuple[str, np.ndarray]]:
        for f in fields(SequenceResult):
            if f.metadata.get("dims") in ("n", "n k"):
                yield f.name, (np.concatenate([np.ravel(getattr(r, f.name)) for r in results])
                               if results else np.zeros(0))
            elif f.metadata.get("dims") == "k":
                for k in (getattr(results[0], f.name) if results else {}):
                    yield f"{f.name}/{k}", np.concatenate([getattr(r, f.name)[k]
                                                          for r in results])
    return meta, arrays()


def read_results(meta: dict[str, Any], arrays: ArrayFile) -> list[SequenceResult]:
    """The inverse of ``write_results`` (each array read once)."""
    flat = {f.name: np.asarray(arrays[f.name]) for f in fields(SequenceResult)
            if f.metadata.get("dims") in ("n", "n k")}
    groups = {f.name: arrays.group(f.name) for f in fields(SequenceResult)
              if f.metadata.get("dims") == "k"}
    out, offset = [], {"n": 0, "n k": 0, "k": 0}
    for i in range(int(meta["done"])):
        n, k = meta["shapes"][i]
        size = {"n": n, "n k": n * k, "k": k}
        values: dict[str, Any] = {}
        for f in fields(SequenceResult):
            dims = f.metadata.get("dims")
            at = slice(offset.get(dims, 0), offset.get(dims, 0) + size.get(dims, 0))
            if dims is None:
                values[f.name] = meta[f.name][i]
            elif dims == "k":
                values[f.name] = {name: v[at] for name, v in groups[f.name].items()}
            else:
                values[f.name] = flat[f.name][at].reshape((n, k) if dims == "n k" else n)
        out.append(SequenceResult(**values))
        offset = {d: offset[d] + size[d] for d in offset}
    return out


def fit_one(X: Data, positions: np.ndarray, obs: ObsModel, params: dict[str, Any],
            seed: np.random.SeedSequence, sequence: int, rows: np.ndarray) -> SequenceResult:
    """The best of ``restarts`` VI fits of one sequence (``fit.fit_restarts``), the sequence's
    id and corpus rows beside it."""
    started = time.perf_counter()
    f = decay(params["decay"], params["decay_a"])
    best, elbos = fit_restarts(X, positions, obs, params["alpha"], f, seed, params["restarts"],
                               params["iterations"], params["tol"], params["window"],
                               params["prune"], starts_of(params["starts"], params["decay"],
                                                         params["window"]),
                               params["table_rounds"])
    q = best.links.q
    d = q.argmax(1)
    return SequenceResult(
        sequence, best.elbo, best.iterations, best.converged, best.n_tables,
        time.perf_counter() - started, elbos, best.links.responsibilities, positions, rows,
        np.arange(len(d)) - d, q[np.arange(len(d)), d], q[:, 0].copy(), best.post)


def fit_in_partition(batch: Batch, task: tuple[int, int], obs: ObsModel,
                     params: dict[str, Any]) -> SequenceResult:
    """Fit the sequence ``task = (id, ordinal)`` of one partition (its rows in stored order)."""
    sequence, ordinal = task
    rows = np.flatnonzero(batch.columns[params["column"]] == sequence)
    X = batch.X[rows]
    pos = (np.arange(len(rows), dtype=float) if params["position_column"] is None
           else np.asarray(batch.columns[params["position_column"]][rows], float))
    return fit_one(X, pos, obs, params, np.random.SeedSequence([params["seed"], ordinal]),
                   sequence, batch.start + rows)


@register
class DDCRPEngine(Engine):
    name = "ddcrp"
    Config = DDCRPConfig
    summary = ("sequential distance-dependent CRP (clusters that follow the order of each "
               "sequence), variational inference, one task per sequence")
    restarts_within = True
    default_restarts = 10  # the bound has many local optima (the paper restarts 300 times)
    small_options: ClassVar[dict[str, Any]] = {"iterations": 20, "restarts": 2}
    declared = Declared(weights_are="fractions of all training items",
                        weight_label="fraction of the items", local_to="sequence",
                        component_noun="table", panels=(SEQUENCES_PANEL,))

    def _params(self) -> dict[str, Any]:
        cfg = self.cfg
        return {"column": self.column, "position_column": cfg.position_column,
                "decay": cfg.decay, "decay_a": cfg.decay_a, "alpha": cfg.alpha,
                "window": cfg.window, "prune": cfg.prune, "iterations": cfg.iterations,
                "tol": cfg.rel_tol, "restarts": self.ctx.restarts, "seed": self.ctx.seed,
                "starts": cfg.starts, "table_rounds": cfg.table_rounds}

    def start(self) -> None:
        if self.ctx.obs.shared_shapes():
            raise BnpmixError(f"ddcrp fits each table's parameters on its own; the "
                              f"{self.ctx.obs.name} model's components share parameters "
                              "(choose gauss, zm-gauss, diag-gauss or mult)")
        if not self.ctx.obs.exact_evidence:
            raise BnpmixError(f"ddcrp's link moves need each table's exact evidence; the "
                              f"{self.ctx.obs.name} model has only a bound from an iterative "
                              "fit (choose gauss, zm-gauss, diag-gauss or mult)")
        self.column, self.tasks = sequence_tasks(self.ctx.corpus, self.ctx.executor,
                                                 self.cfg.sequence_column,
                                                 self.cfg.position_column)
        self.results: list[SequenceResult] = []

    @property
    def total(self) -> int:
        return len(self.tasks) if self.column is not None else 1

    @property
    def done(self) -> bool:
        return len(self.results) >= self.total

    def step(self) -> Step:
        params = self._params()
        if self.column is None:
            blocks = self.ctx.executor.map(gather, range(self.ctx.corpus.n_partitions),
                                           self.cfg.position_column)
            X = stack_rows([b[0] for b in blocks])
            pos = (np.arange(X.shape[0], dtype=float) if self.cfg.position_column is None
                   else np.concatenate([b[1] for b in blocks]))
            wave = [fit_one(X, pos, self.ctx.obs, params,
                            np.random.SeedSequence([self.ctx.seed, 0]), 0,
                            np.arange(X.shape[0]))]
        else:
            todo = self.tasks[len(self.results):len(self.results) + WAVE]
            wave = self.ctx.executor.map(fit_in_partition, [p for p, _, _ in todo],
                                         self.ctx.obs, params,
                                         payloads=[(s, k) for _, s, k in todo])
        self.results += wave
        elbo = float(sum(r.elbo for r in self.results))
        K = int(sum(r.Z.shape[1] for r in self.results))
        self.trace.append(self.ctx.row(len(self.results) / self.total, -1, K, elbo=elbo,
                                       sequences=len(self.results)))
        return Step(visits=len(wave), lap_end=self.done)

    def status(self) -> str:
        row = self.trace[-1] if self.trace else {}
        return (f"sequences {len(self.results)}/{self.total}  tables={row.get('K', '?')}  "
                f"ELBO={row.get('elbo', float('nan')):.6g}")

    # ---- results -----------------------------------------------------------------------------

    def _model(self) -> SequenceMixture:
        res = self.results
        sizes = [len(r.positions) for r in res]
        tables = [r.Z.shape[1] for r in res]
        post = {k: np.concatenate([r.post[k] for r in res]) for k in res[0].post}
        hyper = {"alpha": self.cfg.alpha, "decay": self.cfg.decay, "decay_a": self.cfg.decay_a,
                 "window": self.cfg.window, "sequence_column": self.column,
                 "position_column": self.cfg.position_column}
        return SequenceMixture(
            self.ctx.obs, post, np.arange(sum(tables), dtype=np.int64),
            np.array([r.sequence for r in res], np.int64),
            np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            np.concatenate([[0], np.cumsum(tables)]).astype(np.int64),
            np.concatenate([r.positions for r in res]),
            np.concatenate([r.rows for r in res]).astype(np.int64),
            np.concatenate([r.Z.ravel() for r in res]), hyper,
            {"restarts": self.ctx.restarts})

    def result(self) -> Fitted:
        model, res = self._model(), self.results
        elbo = float(sum(r.elbo for r in res))
        converged = int(sum(r.converged for r in res))
        info = {"sequences": len(res), "sequences_converged": converged,
                "iterations_mean": float(np.mean([r.iterations for r in res])),
                "tables_expected": float(sum(r.n_tables for r in res)),
                "restarts_per_sequence": self.ctx.restarts}
        per_sequence = {k: [getattr(r, k) for r in res] for k in SCALARS if k != "restart_elbos"}
        per_sequence["items"] = [len(r.positions) for r in res]
        per_sequence["tables"] = [r.Z.shape[1] for r in res]
        tables = per_sequence["tables"]
        info["per_group"] = {"groups": len(res), "min": min(tables), "max": max(tables),
                             "mean": float(np.mean(tables))}  # (declared.local_note)
        per_sequence["restart_elbos"] = [list(map(float, r.restart_elbos)) for r in res]
        rows = np.concatenate([r.rows for r in res]).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum([len(r.rows) for r in res])])
        links = {"item": rows, "sequence": np.repeat(model.sequences, np.diff(offsets)),
                 "link": np.concatenate([r.rows[r.link] for r in res]).astype(np.int64),
                 "link_prob": np.concatenate([r.link_prob for r in res]),
                 "self_prob": np.concatenate([r.self_prob for r in res])}
        return Fitted(model, {"elbo": elbo}, info,
                      {"sequences": pa.table(per_sequence), "links": pa.table(links)},
                      converged=converged == len(res))

    # ---- checkpoints: the results, field by field (write_results) -----------------------------

    def state(self) -> State:
        return write_results(self.results)

    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        self.start()
        self.results = read_results(meta, arrays)
