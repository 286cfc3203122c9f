"""The sequential distance-dependent CRP by variational inference (Bartunov & Vetrov 2014;
``algorithms/ddcrp``): every sequence of the corpus is an independent problem, fitted as one task
on the executor from ``restarts`` starts (``--starts``: DP VB tables, drawn, or both in turn),
the best ELBO kept.

Where sequences come from: the corpus's ``sequence`` column (or the column ``sequence_column``
names). Ingestion keeps a sequence whole in one partition (``ingest --sequence-column``), so a
task reads one partition (a worker caches it) and fits the rows of its sequence; a corpus whose
sequence id appears in two partitions (built some other way) is refused, naming both. A corpus
without the column is one sequence in stored order: the driver gathers its partitions and fits
it itself (VI on one sequence is O(N²) in time, so such a corpus is small).

Distances d_ij = position_i − position_j, positions from ``position_column`` (``time``) or each
item's index in its sequence. One step is a wave of sequences; summary.json's ``elbo`` is the sum
over sequences; sequences.parquet holds each sequence's ELBO, iterations, tables and every
restart's ELBO, links.parquet each item's most probable link.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from bnpmix.algorithms.ddcrp.fit import ROUNDS, STARTS, default_starts, fit_restarts
from bnpmix.algorithms.ddcrp.links import DECAYS, decay
from bnpmix.algorithms.ddcrp.model import SequenceMixture
from bnpmix.algorithms.obs.base import Data, ObsModel, stack_rows
from bnpmix.storage import BnpmixError
from bnpmix.storage.arrays import ArrayFile
from bnpmix.storage.corpus import Batch

from ..declared import SEQUENCES_PANEL, Declared
from ..options import opt, string
from ..runtime.engine import Engine, Fitted, State, Step, register

WAVE = 32  # sequences per step
STARTS_BY_NAME = {"mixed": STARTS, "vb": ("vb",), "drawn": ("drawn",)}
SCALARS = ("sequence", "elbo", "iterations", "converged", "n_tables", "seconds")


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


def sequence_layout(batch: Batch, column: str, position_column: str | None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The sequence ids of one partition in order of first appearance, and their sizes; each
    sequence's positions checked (``checked_positions``)."""
    values = batch.columns[column]
    ids, first, counts = np.unique(values, return_index=True, return_counts=True)
    order = np.argsort(first)
    if position_column is not None:
        for s in ids[order].tolist():
            rows = np.flatnonzero(values == s)
            checked_positions(batch.columns[position_column][rows], batch.start + rows,
                              position_column, s)
    return ids[order], counts[order]


def position_ends(batch: Batch, position_column: str) -> tuple[float, float]:
    """A partition's first and last positions, its own positions checked (a corpus that is one
    sequence; the driver checks that partitions follow one another)."""
    pos = checked_positions(batch.columns[position_column],
                            batch.start + np.arange(len(batch)), position_column, None)
    return (float(pos[0]), float(pos[-1])) if len(pos) else (np.inf, -np.inf)


def checked_positions(values: np.ndarray, rows: np.ndarray, column: str,
                      sequence: int | None) -> np.ndarray:
    """A sequence's positions as floats: finite and non-decreasing (a customer links back in
    the stored order, d_ij = position_i − position_j >= 0), else an error naming the row."""
    pos = np.asarray(values, float)
    where = "the corpus" if sequence is None else f"sequence {sequence}"
    bad = np.flatnonzero(~np.isfinite(pos))
    if len(bad):
        raise BnpmixError(f"{where}: {column!r} is {pos[bad[0]]} at row {int(rows[bad[0]])}: "
                          "positions must be finite numbers")
    back = np.flatnonzero(np.diff(pos) < 0)
    if len(back):
        r = back[0] + 1
        raise BnpmixError(f"{where}: {column!r} goes back from {pos[r - 1]:g} (row "
                          f"{int(rows[r - 1])}) to {pos[r]:g} (row {int(rows[r])}): positions "
                          "must not decrease in the stored order of a sequence")
    return pos


def gather(batch: Batch, position_column: str | None) -> tuple[Data, np.ndarray | None]:
    """One partition's rows and positions, for a corpus that is one sequence."""
    return batch.X, (None if position_column is None
                     else np.asarray(batch.columns[position_column], float))


def fit_one(X: Data, positions: np.ndarray, obs: ObsModel, params: dict[str, Any],
            seed: np.random.SeedSequence) -> dict[str, Any]:
    """The best of ``restarts`` VI fits of one sequence, as arrays and scalars."""
    started = time.perf_counter()
    f = decay(params["decay"], params["decay_a"])
    best, elbos = fit_restarts(X, positions, obs, params["alpha"], f, seed, params["restarts"],
                               params["iterations"], params["tol"], params["window"],
                               params["prune"], starts_of(params["starts"], params["decay"],
                                                         params["window"]),
                               params["table_rounds"])
    q = best.links.q
    d = q.argmax(1)
    return {"Z": best.links.responsibilities, "post": best.post, "positions": positions,
            "link": np.arange(len(d)) - d, "link_prob": q[np.arange(len(d)), d],
            "self_prob": q[:, 0].copy(), "elbo": best.elbo, "iterations": best.iterations,
            "converged": best.converged, "n_tables": best.n_tables, "restart_elbos": elbos,
            "seconds": time.perf_counter() - started}


def fit_in_partition(batch: Batch, task: tuple[int, int], obs: ObsModel,
                     params: dict[str, Any]) -> dict[str, Any]:
    """Fit the sequence ``task = (id, ordinal)`` of one partition (its rows in stored order)."""
    sequence, ordinal = task
    rows = np.flatnonzero(batch.columns[params["column"]] == sequence)
    X = batch.X[rows]
    pos = (np.arange(len(rows), dtype=float) if params["position_column"] is None
           else np.asarray(batch.columns[params["position_column"]][rows], float))
    out = fit_one(X, pos, obs, params, np.random.SeedSequence([params["seed"], ordinal]))
    return out | {"rows": batch.start + rows, "sequence": sequence}


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

    def _layout(self) -> None:
        """The sequences: (partition, id, ordinal) per sequence, or one gathered sequence."""
        corpus, cfg = self.ctx.corpus, self.cfg
        columns = corpus.manifest.columns
        for option, name in (("sequence_column", cfg.sequence_column),
                             ("position_column", cfg.position_column)):
            if name is not None and name not in columns:
                raise BnpmixError(f"{corpus.path}: {option} {name!r}: the corpus has "
                                  f"{list(columns) or 'no optional columns'}")
        self.column = cfg.sequence_column or ("sequence" if "sequence" in columns else None)
        self.tasks: list[tuple[int, int, int]] = []
        if self.column is None:
            self._check_one_sequence()
            return
        layouts = self.ctx.executor.map(sequence_layout, range(corpus.n_partitions),
                                        self.column, cfg.position_column)
        home: dict[int, int] = {}
        for p, (ids, _) in enumerate(layouts):
            for s in ids.tolist():
                if s in home:
                    raise BnpmixError(
                        f"{corpus.path}: sequence {s} lies in partitions {home[s]} and {p}; a "
                        "sequence must be whole in one partition (ingest --sequence-column "
                        "keeps it so)")
                home[s] = p
                self.tasks.append((p, s, len(self.tasks)))

    def _check_one_sequence(self) -> None:
        """Positions of a corpus that is one sequence: finite and non-decreasing across the
        partitions too."""
        column = self.cfg.position_column
        if column is None:
            return
        ends = self.ctx.executor.map(position_ends, range(self.ctx.corpus.n_partitions), column)
        row, last = 0, -np.inf
        for p, (lo, hi) in enumerate(ends):
            if lo < last:
                raise BnpmixError(f"the corpus: {column!r} goes back from {last:g} (row "
                                  f"{row - 1}) to {lo:g} (row {row}, the first of partition "
                                  f"{p}): positions must not decrease in the stored order")
            row += self.ctx.corpus.manifest.partitions[p].rows
            last = max(last, hi)

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
        self._layout()
        self.results: list[dict[str, Any]] = []

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
            wave = [fit_one(X, pos, self.ctx.obs, params, np.random.SeedSequence(
                [self.ctx.seed, 0])) | {"rows": np.arange(X.shape[0]), "sequence": 0}]
        else:
            todo = self.tasks[len(self.results):len(self.results) + WAVE]
            wave = self.ctx.executor.map(fit_in_partition, [p for p, _, _ in todo],
                                         self.ctx.obs, params,
                                         payloads=[(s, k) for _, s, k in todo])
        self.results += wave
        elbo = float(sum(r["elbo"] for r in self.results))
        K = int(sum(r["Z"].shape[1] for r in self.results))
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
        sizes = [len(r["positions"]) for r in res]
        tables = [r["Z"].shape[1] for r in res]
        post = {k: np.concatenate([r["post"][k] for r in res]) for k in res[0]["post"]}
        hyper = {"alpha": self.cfg.alpha, "decay": self.cfg.decay, "decay_a": self.cfg.decay_a,
                 "window": self.cfg.window, "sequence_column": self.column,
                 "position_column": self.cfg.position_column}
        return SequenceMixture(
            self.ctx.obs, post, np.arange(sum(tables), dtype=np.int64),
            np.array([r["sequence"] for r in res], np.int64),
            np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            np.concatenate([[0], np.cumsum(tables)]).astype(np.int64),
            np.concatenate([r["positions"] for r in res]),
            np.concatenate([r["rows"] for r in res]).astype(np.int64),
            np.concatenate([r["Z"].ravel() for r in res]), hyper,
            {"restarts": self.ctx.restarts})

    def result(self) -> Fitted:
        model, res = self._model(), self.results
        elbo = float(sum(r["elbo"] for r in res))
        converged = int(sum(r["converged"] for r in res))
        info = {"sequences": len(res), "sequences_converged": converged,
                "iterations_mean": float(np.mean([r["iterations"] for r in res])),
                "tables_expected": float(sum(r["n_tables"] for r in res)),
                "restarts_per_sequence": self.ctx.restarts}
        per_sequence = {k: [r[k] for r in res] for k in SCALARS}
        per_sequence["items"] = [len(r["positions"]) for r in res]
        per_sequence["tables"] = [r["Z"].shape[1] for r in res]
        tables = per_sequence["tables"]
        info["per_group"] = {"groups": len(res), "min": min(tables), "max": max(tables),
                             "mean": float(np.mean(tables))}  # (declared.local_note)
        per_sequence["restart_elbos"] = [list(map(float, r["restart_elbos"])) for r in res]
        rows = np.concatenate([r["rows"] for r in res]).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum([len(r["rows"]) for r in res])])
        links = {"item": rows, "sequence": np.repeat(model.sequences, np.diff(offsets)),
                 "link": np.concatenate([r["rows"][r["link"]] for r in res]).astype(np.int64),
                 "link_prob": np.concatenate([r["link_prob"] for r in res]),
                 "self_prob": np.concatenate([r["self_prob"] for r in res])}
        return Fitted(model, {"elbo": elbo}, info,
                      {"sequences": pa.table(per_sequence), "links": pa.table(links)},
                      converged=converged == len(res))

    # ---- checkpoints -------------------------------------------------------------------------

    def state(self) -> State:
        res = self.results
        meta = {"done": len(res), **{k: [r[k] for r in res] for k in SCALARS},
                "restart_elbos": [list(map(float, r["restart_elbos"])) for r in res],
                "shapes": [list(r["Z"].shape) for r in res]}

        def arrays():
            for name in ("Z", "positions", "rows", "link", "link_prob", "self_prob"):
                yield name, (np.concatenate([np.ravel(r[name]) for r in res]) if res
                             else np.zeros(0))
            for k in (res[0]["post"] if res else {}):
                yield f"post/{k}", np.concatenate([r["post"][k] for r in res])
        return meta, arrays()

    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        self._layout()
        self.results = []
        n_off = z_off = k_off = 0
        post = arrays.group("post")
        for i in range(int(meta["done"])):
            n, k = meta["shapes"][i]
            r = {name: meta[name][i] for name in SCALARS}
            r["restart_elbos"] = meta["restart_elbos"][i]
            r["Z"] = np.asarray(arrays["Z"][z_off:z_off + n * k]).reshape(n, k)
            for name in ("positions", "rows", "link", "link_prob", "self_prob"):
                r[name] = np.asarray(arrays[name][n_off:n_off + n])
            r["post"] = {name: v[k_off:k_off + k] for name, v in post.items()}
            self.results.append(r)
            n_off, z_off, k_off = n_off + n, z_off + n * k, k_off + k
