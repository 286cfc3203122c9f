"""A sizing model from measured costs (issue 46 item 3): memo's costs measured on this machine,
fitted to the cost model of ``bnpmix.pipeline.sizing``, checked against real 1- and 2-worker
laps, and projected to corpora too large for it.

1. The engine's own code paths, timed inside real fits (``pipeline.fit``, scheduler
   synchronous, in this process: timers wrap memo's partition visit, its driver-side
   ``_apply``, ``_wave_globals``, ``end_lap`` and the runtime's checkpoint): the worker's local
   step + summary of a partition (run under one BLAS thread, as a `dask worker`'s nanny sets)
   against rows, D (dense) or non-zeros (text) and K; the driver's visit (S0 − old + new, the
   global update, the ELBO), the wave's globals, the lap end (verification, deletes, merges,
   reordering, the prior, births' creation) and the checkpoint against K, D or V and the
   partitions. Models: the full and the diagonal Gaussian (what ``--obs auto`` races besides
   tied-gauss on dense data; the full one is also the dense default without auto) on Gaussian
   clusters, and the multinomial (text's default, sparse summaries) on topic documents; for
   the Gaussians also the task and the driver's visit called directly at D = 64 and 128 and K
   up to 200 (the projections' scale, where whole fits would take hours here). Also
   the bytes of a batch summary, of S0 and of q, the seconds to read and decode a partition and
   to spill and reload a summary (StateStore beyond its budget).
2. The scheduler: a `dask scheduler` and two single-threaded `dask worker` processes on
   127.0.0.1; the executor's overhead per task over 100 to 5,000 trivial tasks (a no-op on
   every partition of a corpus of that many, partitions cached), and a wave's round trip
   (memo's unit: one submit of W tasks sharing one argument) against W and the shared bytes.
3. Least squares (non-negative; errors relative to the cost, or to 10 ms below it) of each
   cost on the model's terms;
   ``--coefficients`` writes them to ``pipeline/sizing.json``, which `bnpmix plan` reads.
4. The check, on corpora and K the fits did not see: `bnpmix fit` processes (memo, its default
   moves, W = 4) against 1 and 2 single-threaded workers on 2,000,000 x 32 Gaussian clusters
   (40 partitions, the full Gaussian from K = 12) and 100,000 topic documents (V = 7,841, 20
   partitions, from K = 30); the median seconds of the laps after the first against the
   model's prediction at each lap's K; target within 25 %. The driver's peak RSS beside the
   model's driver memory.
5. Projections: PubMed-shaped text (8.2M documents, V = 141,043, 483,450,157 non-zeros, K = 500)
   and 100M x 128 dense (K = 200) on 8, 64 and 512 workers, at the default wave (4) and at a
   wave as wide as the workers (one wave ahead), by the same function `bnpmix plan` calls.

Every scheduler and worker process is started here on 127.0.0.1 and ended by its PID; the load
average is recorded beside every measurement.

    python benchmarks/speed/sizing.py --json --coefficients [--quick] [--skip-check]
    python benchmarks/speed/sizing.py --refit benchmarks/results/sizing.json [--recheck] --json
        --coefficients
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import nnls

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import ENV, WORK, LocalDaskCluster, corpus_of, json_option
from bnpmix.algorithms.vb.birth import BirthConfig
from bnpmix.algorithms.vb.delete import DeleteConfig
from bnpmix.datasets import gaussian_clusters
from bnpmix.pipeline import sizing
from bnpmix.pipeline.fit import fit, job_config
from speed.scaling import lap_seconds
from speed.text_scale import PeakRSS, topic_documents

BNPMIX = [sys.executable, "-m", "bnpmix"]
BIRTH = BirthConfig()  # memo's defaults: targets a lap, rows collected for each
COEFFICIENTS = Path(__file__).resolve().parents[2] / "pipeline" / "sizing.json"
STRUCTURE = {"gauss": "full", "diag-gauss": "diag", "mult": "text"}
PARTS = ("task", "visit", "globals", "lap_end", "birth", "checkpoint")

# (obs, D or V, rows per partition, partitions, K, laps); topics: mean document length 90
DENSE_GRID = [(8, 20_000, 8, 8), (8, 5_000, 8, 30), (24, 10_000, 8, 8), (24, 10_000, 8, 30),
              (48, 5_000, 8, 10), (48, 10_000, 6, 25), (16, 40_000, 6, 16), (16, 5_000, 6, 80)]
TEXT_GRID = [(2_000, 5_000, 8, 10), (2_000, 5_000, 8, 40), (20_000, 5_000, 8, 20),
             (20_000, 10_000, 6, 60), (50_000, 5_000, 6, 100), (8_000, 2_000, 6, 150)]


def load() -> float:
    return os.getloadavg()[0]


class Probe:
    """Timers around memo's own code paths while a real fit runs in this process."""

    def __init__(self, nnz: list[float]) -> None:
        self.nnz = nnz  # each partition's non-zeros (dense: rows x D)
        self.rec: dict[str, list[dict]] = {p: [] for p in (*PARTS, "memory")}

    def __enter__(self) -> Probe:
        from threadpoolctl import threadpool_limits

        from bnpmix.pipeline.engines import memo
        from bnpmix.pipeline.runtime import checkpoint

        E, probe = memo.MemoEngine, self
        self.saved = [(memo, "visit", memo.visit), (E, "_apply", E._apply),
                      (E, "_wave_globals", E._wave_globals), (E, "end_lap", E.end_lap),
                      (checkpoint, "save", checkpoint.save), (memo, "create", memo.create)]
        visit, apply_, wave_globals, end_lap, save, create = (s[2] for s in self.saved)

        def lap_of(engine) -> int:
            return engine.s.lap.lap if engine.s.lap is not None else -1

        def timed_visit(batch, obs, g, plan=None):
            X = batch.X
            with threadpool_limits(1):  # a dask worker's BLAS (its nanny sets one thread)
                t = time.perf_counter()
                res = visit(batch, obs, g, plan)
                dt = time.perf_counter() - t
            probe.rec["task"].append({"rows": X.shape[0], "nnz": float(X.nnz if sp.issparse(X)
                                                                        else X.size),
                                      "K": len(g.uids), "seconds": dt, "lap": probe.lap})
            return res

        def timed_apply(engine, b, res):
            K = engine.s.model.K
            adopting = float(engine.s.lap.S_prime is not None)
            t = time.perf_counter()
            apply_(engine, b, res)
            probe.rec["visit"].append({"K": K, "nnz": probe.nnz[b], "lap": probe.lap,
                                       "adopting": adopting,
                                       "seconds": time.perf_counter() - t,
                                       "summary_bytes": res.summary.without_pairs().nbytes})

        def timed_globals(engine, batches):
            probe.lap = lap_of(engine)
            t = time.perf_counter()
            g = wave_globals(engine, batches)
            probe.rec["globals"].append({"K": engine.s.model.K, "W": len(batches),
                                         "nnz": float(np.mean([probe.nnz[b] for b in batches])),
                                         "seconds": time.perf_counter() - t, "lap": probe.lap,
                                         "bytes": sum(v.nbytes for v in g.post.values())})
            return g

        def timed_create(X, *args, **kw):
            t = time.perf_counter()
            out = create(X, *args, **kw)
            probe.rec["birth"].append({"n": float(X.shape[0]), "seconds": time.perf_counter() - t,
                                       "nnz_n": float(X.nnz if sp.issparse(X) else X.size)})
            return out

        def timed_end(engine):
            K = engine.s.model.K
            post = sum(np.asarray(v).nbytes for v in engine.s.model.post.values())
            probe.rec["memory"].append({"K": K, "S0": engine.s.S0.nbytes, "post": post})
            before = len(probe.rec["birth"])
            t = time.perf_counter()
            end_lap(engine)
            seconds = time.perf_counter() - t
            births = sum(r["seconds"] for r in probe.rec["birth"][before:])
            probe.rec["lap_end"].append({"K": K, "seconds": seconds - births,
                                         "with_births": seconds})

        def timed_save(run, engine, *args, **kw):
            t = time.perf_counter()
            save(run, engine, *args, **kw)
            probe.rec["checkpoint"].append({"K": engine.s.model.K,
                                            "seconds": time.perf_counter() - t})

        self.lap = 0
        memo.visit, E._apply, E._wave_globals = timed_visit, timed_apply, timed_globals
        E.end_lap, checkpoint.save, memo.create = timed_end, timed_save, timed_create
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, value in self.saved:
            setattr(owner, name, value)


def engine_run(corpus: Path, obs: str, K: int, laps: int, name: str) -> dict[str, list[dict]]:
    """One synchronous fit under the probe: its records, each with the corpus's sizes."""
    from bnpmix.storage import Corpus

    m = Corpus(corpus).manifest
    nnz = [float(p.nnz) if m.kind == "bow" else float(p.rows * m.dim) for p in m.partitions]
    # a checkpoint at every lap end: with the shipped interval (10 s) a quick fit on an idle
    # machine wrote none, and the checkpoint's cost had no point to be fitted on
    with Probe(nnz) as probe, dask.config.set({"bnpmix.checkpoint-interval": 0}):
        fit(corpus, WORK / f"run-{name}", job_config(algorithm="memo", obs=obs, K=K, laps=laps,
                                                       scheduler="synchronous", seed=0))
    P, D = len(m.partitions), m.dim
    rows = m.n_items / P
    for records in probe.rec.values():
        for r in records:
            r.setdefault("rows", rows)
            r.setdefault("nnz", float(np.mean(nnz)))
            r.setdefault("n", 0.0)
            r.setdefault("adopting", 0.0)
            r.setdefault("K", 0.0)  # a birth's creation: fresh_K components whatever K
            r.update(D=float(D), P=float(P), W=float(r.get("W", 4)), name=name, load=load())
    return probe.rec


def dense_corpus(D: int, rows: int, P: int, K: int, name: str, seed: int = 0) -> Path:
    X, labels = gaussian_clusters(rows * P, D, separated=K, overlapping=0, seed=seed)
    return corpus_of(X, labels, P, name)


def text_corpus(V: int, rows: int, P: int, K: int, name: str, seed: int = 0) -> Path:
    X, labels = topic_documents(rows * P, V, K, 90.0, seed=seed)
    return corpus_of(X, labels, P, name)


def measure_engine(args: argparse.Namespace) -> dict[str, dict[str, list[dict]]]:
    out: dict[str, dict[str, list[dict]]] = {}
    grids = {"gauss": DENSE_GRID, "diag-gauss": DENSE_GRID, "mult": TEXT_GRID}
    for obs, grid in grids.items():
        recs: dict[str, list[dict]] = {p: [] for p in (*PARTS, "memory")}
        for i, (dim, rows, P, K) in enumerate(grid[:3] if args.quick else grid):
            name = f"{obs}-{dim}-{rows}-{P}-{K}"
            make = text_corpus if obs == "mult" else dense_corpus
            corpus = make(dim, rows, P, K, name, seed=i)
            t = time.perf_counter()
            for part, r in engine_run(corpus, obs, K, args.laps, name).items():
                recs[part] += r
            print(f"  {name}: {time.perf_counter() - t:.0f} s (load {load():.2f})", flush=True)
        out[obs] = recs
    return out


# (D, K, rows) of the direct measurements at the projections' scale (whole fits there would
# take hours here): the local step's K D² (full) and K D (diagonal) terms only show beyond the
# fits' sizes, where the responsibilities' r K no longer dominate
SCALE_POINTS = [(64, 50, 4_000), (64, 150, 4_000), (128, 60, 3_000), (128, 200, 3_000)]


def scale_points(obs_name: str, repeat: int = 3) -> dict[str, list[dict]]:
    """A partition's task (batch_step with a lap's planned pairs, one BLAS thread) and the
    driver's visit (S0 − old + new, the global update, the ELBO: what memo's _apply runs for
    dense statistics), called directly at large D and K; medians of ``repeat``."""
    from threadpoolctl import threadpool_limits

    from bnpmix.algorithms.alloc import StickBreaking
    from bnpmix.algorithms.mixture import Mixture
    from bnpmix.algorithms.obs import obs_class
    from bnpmix.algorithms.vb.init import seeded_summary
    from bnpmix.algorithms.vb.local import Plan, batch_step
    from bnpmix.algorithms.vb.merge import MergeConfig, plan_pairs

    out: dict[str, list[dict]] = {"task": [], "visit": []}
    for D, K, rows in SCALE_POINTS:
        X, _ = gaussian_clusters(rows, D, separated=min(K, 40), overlapping=0, seed=D + K)
        obs, alloc = obs_class(obs_name).default(X), StickBreaking(1.0)
        S = seeded_summary(X, obs, K, np.arange(K), np.random.default_rng(0))
        model = Mixture.from_summary(obs, alloc, S)
        plan = Plan(plan_pairs(obs, S, MergeConfig()), np.zeros((0, 0), np.int64))
        g = model.globals()
        times = []
        for _ in range(repeat):
            with threadpool_limits(1):
                t = time.perf_counter()
                new = batch_step(X, obs, g, plan).summary.without_pairs()
                times.append(time.perf_counter() - t)
        base = {"rows": float(rows), "nnz": float(rows * D), "K": float(K), "D": float(D),
                "P": 1.0, "W": 4.0, "n": 0.0, "adopting": 0.0, "lap": 1, "load": load(),
                "name": f"{obs_name}-scale-{D}-{K}-{rows}"}
        out["task"].append({**base, "seconds": float(np.median(times))})
        S0, old = new.scaled(20.0), new.scaled(0.9)
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            S0.add_in_place(old, -1.0)
            S0.add_in_place(new)
            Mixture.from_summary(obs, alloc, S0).elbo(S0)
            times.append(time.perf_counter() - t)
            S0.add_in_place(new, -1.0)
            S0.add_in_place(old)
        out["visit"].append({**base, "seconds": float(np.median(times)),
                             "summary_bytes": float(new.nbytes)})
        print(f"  {obs_name} D={D} K={K} rows={rows}: task {out['task'][-1]['seconds']:.3f} s, "
              f"driver visit {out['visit'][-1]['seconds']:.4f} s (load {load():.2f})", flush=True)
    return out


# below this many seconds a cost's errors count in seconds, above it relative to the cost: a
# sizing cares about the costs that add up to minutes, and sub-millisecond points (a birth that
# aborts at once, a tiny lap end) would otherwise pull every term towards zero
FLOOR = 0.01


def nnls_fit(rows: list[dict[str, float]], y: np.ndarray,
             floor: float = FLOOR) -> tuple[dict[str, float], float]:
    """Non-negative coefficients minimising the errors relative to max(y, floor); the median
    relative error."""
    names = list(rows[0])
    A = np.array([[r[n] for n in names] for r in rows], dtype=float)
    scale = A.max(0)
    scale[scale == 0] = 1.0
    w = 1.0 / np.maximum(y, floor)
    x, _ = nnls((A / scale) * w[:, None], y * w)
    coef = {n: float(v / s) for n, v, s in zip(names, x, scale, strict=True)}
    pred = A @ np.array([coef[n] for n in names])
    return coef, float(np.median(np.abs(pred / y - 1)))


def sizes(r: dict) -> dict[str, float]:
    out = {k: float(r[k]) for k in ("rows", "K", "D", "P", "nnz", "W", "n", "adopting")}
    if "nnz_n" in r:  # a birth's collected rows: their non-zeros as n x nnz / rows
        out["nnz"], out["rows"] = r["nnz_n"], r["n"]
    return out


def fit_model(obs: str, recs: dict[str, list[dict]]) -> tuple[dict, dict]:
    """Coefficients of each part (visits of the first lap left out: no ELBO before every batch
    has a summary, and the partitions are read), and each fit's median relative error."""
    structure = STRUCTURE[obs]
    model: dict = {"structure": structure}
    errors = {}
    for part in PARTS:
        records = [r for r in recs[part] if r.get("lap", 1) != 0]
        terms = [sizing.features(structure, sizes(r))[part] for r in records]
        coef, err = nnls_fit(terms, np.array([r["seconds"] for r in records]))
        model[part], errors[part] = coef, err
    model["memory"] = {}
    summaries = [{**r, "bytes": r["summary_bytes"]} for r in recs["visit"]]
    for part, records, key in (("summary", summaries, "bytes"), ("S0", recs["memory"], "S0"),
                               ("post", recs["memory"], "post")):
        terms = [sizing.MEMORY_FEATURES[structure][part](sizes(r)) for r in records]
        model["memory"][part], errors[f"bytes:{part}"] = nnls_fit(
            terms, np.array([float(r[key]) for r in records]), floor=1.0)
    return model, errors


def read_and_spill() -> dict:
    """Seconds per decoded byte to read a partition (bytes checked, Parquet decoded), dense and
    bag-of-words, and to spill a summary and load it back (StateStore with no budget)."""
    from bnpmix.algorithms.summary import Summary
    from bnpmix.pipeline.engines.memo import SUMMARIES
    from bnpmix.pipeline.runtime.store import StateStore
    from bnpmix.storage import Corpus

    out = {"read_seconds_per_byte": {}}
    for kind, corpus in (("dense", dense_corpus(32, 40_000, 2, 4, "read-dense")),
                         ("bow", text_corpus(20_000, 10_000, 2, 10, "read-bow"))):
        c = Corpus(corpus)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            batch = c.read(1)
            times.append(time.perf_counter() - t)
        X = batch.X
        nbytes = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes if sp.issparse(X)
                  else X.nbytes)
        out["read_seconds_per_byte"][kind] = float(np.median(times)) / nbytes
    S = Summary(np.arange(50), np.ones(50), {"x": np.ones((50, 32)),
                                             "xxT": np.ones((50, 32, 32))}, np.zeros(50))
    store: StateStore[Summary] = StateStore(SUMMARIES, 1)
    times = []
    for i in range(5):
        t = time.perf_counter()
        store.put(i, S)
        store.get(i)
        times.append(time.perf_counter() - t)
    store.close()
    out["spill_seconds_per_byte"] = float(np.median(times)) / (2 * S.nbytes)
    return out


# the tasks' functions live here: Dask pickles __main__'s by value (a worker cannot import
# the benchmarks' modules, so scaling's no-op would not reach it)
def noop(batch, *_):
    return 0


def noop_shared(batch, shared):
    return 0


def measure_dask(args: argparse.Namespace, cluster: LocalDaskCluster) -> dict:
    """Per-task overhead over 100..5,000 no-op tasks, and a wave's round trip."""
    from distributed import Client

    from bnpmix.pipeline.runtime.executors import DaskExecutor
    from bnpmix.storage import Corpus, ingest_array

    sweep = []
    counts = [100, 500, 1000] if args.quick else [100, 500, 1000, 2000, 5000]
    with Client(cluster.address) as client:
        for P in counts:
            corpus = WORK / f"tiny-{P}"
            ingest_array(np.zeros((2 * P, 2)), corpus, partition_rows=2)
            ex = DaskExecutor(client, Corpus(corpus))
            ex.map(noop, range(P))  # every partition cached on its worker
            times = []
            for _ in range(3):
                t = time.perf_counter()
                ex.map(noop, range(P))
                times.append((time.perf_counter() - t) / P)
            sweep.append({"partitions": P, "seconds_per_task": float(np.median(times)),
                          "load": load()})
            print(f"  {P:5d} no-op tasks: {sweep[-1]['seconds_per_task'] * 1e3:.2f} ms per task "
                  f"(load {load():.2f})", flush=True)
        ex = DaskExecutor(client, Corpus(WORK / f"tiny-{counts[-1]}"))
        waves = []
        for W in (1, 2, 4, 8, 16):
            for nbytes in (0, 1 << 20, 8 << 20, 32 << 20):
                payload = np.zeros(nbytes // 8)
                ex.map(noop_shared, range(W), payload)
                times = []
                for _ in range(5):
                    t = time.perf_counter()
                    ex.submit(noop_shared, list(range(W)), payload).result()
                    times.append(time.perf_counter() - t)
                waves.append({"W": W, "bytes": nbytes, "seconds": float(np.median(times)),
                              "load": load()})
    coef, err = nnls_fit([{"per_wave": 1.0, "per_task": w["W"], "per_byte": w["bytes"]}
                          for w in waves], np.array([w["seconds"] for w in waves]), floor=1e-4)
    print(f"  a wave's round trip: {coef['per_wave'] * 1e3:.2f} ms + {coef['per_task'] * 1e3:.2f}"
          f" ms per task + {coef['per_byte'] * 1e9:.2f} s per GB (median error {err:.0%})")
    return {"sweep": sweep, "waves": waves, "coefficients": coef, "error": err}


def base_bytes(cluster: LocalDaskCluster) -> dict:
    """A driver's peak RSS on a tiny fit (interpreter, libraries, Dask client), and an idle
    worker's RSS (with its nanny)."""
    import psutil

    from speed.scaling import driver_rss

    X, labels = gaussian_clusters(2_000, 4, separated=3, overlapping=0)
    corpus = corpus_of(X, labels, 2, "tiny-driver")
    driver = driver_rss(corpus, cluster.address, WORK / "rss-tiny") * (1 << 20)
    proc = psutil.Process(cluster.workers[0].pid)
    worker = sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    return {"driver": float(driver), "worker": float(worker)}


def cli_run(corpus: Path, cluster: LocalDaskCluster, name: str, *flags: str) -> dict:
    out = WORK / name
    proc = subprocess.Popen([*BNPMIX, "fit", str(corpus), "--out", str(out), "--scheduler",
                             cluster.address, *flags], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    rss = PeakRSS({"driver": proc.pid})
    _, err = proc.communicate()
    peak = rss.stop()["driver"]
    if proc.returncode:
        raise SystemExit(f"bnpmix fit failed: {err}")
    return {"trace": pd.read_csv(out / "trace.csv"), "driver_rss": peak}


def lap_ks(trace: pd.DataFrame) -> list[int]:
    """The K each lap's visits ran with (their median), for the laps after the first."""
    lap = np.ceil(trace["lap"] - 1e-9)
    visits = trace[trace["batch"] >= 0]
    return [round(visits[lap[trace["batch"] >= 0] == n]["K"].median())
            for n in sorted(set(lap[trace["batch"] >= 0]))[1:]]


def predicted_laps(coef: dict, obs: str, shape: sizing.Shape, Ks: list[int], workers: int,
                   laps: int) -> float:
    """The model's median seconds over laps 2.. at each one's K (memo creates births at the end
    of lap n only while n <= laps - 2, later ones could not be adopted and judged, and adopts
    them in the next lap)."""
    out = [sizing.project(coef, obs, shape, K, workers, births=n <= laps - 2,
                          adopting=n <= laps - 1)["seconds"]["lap"]
           for n, K in enumerate(Ks, start=2)]
    return float(np.median(out))


def check_corpora(args: argparse.Namespace) -> dict[str, Path]:
    """The check's corpora (made once a run: --recheck reads their shapes first)."""
    if (WORK / "check-dense").exists():
        return {"gauss": WORK / "check-dense", "mult": WORK / "check-text"}
    return {"gauss": dense_corpus(32, 50_000 if not args.quick else 10_000, 40, 12,
                                  "check-dense", seed=7),
            "mult": text_corpus(7_841, 5_000 if not args.quick else 2_000, 20, 40, "check-text",
                                seed=7)}


def predict_check(coef: dict, row: dict, shape: sizing.Shape, laps: int) -> dict:
    """A check row's predictions from its measured K per lap."""
    pred = predicted_laps(coef, row["obs"], shape, row["K_per_lap"], row["workers"], laps)
    memory = sizing.project(coef, row["obs"], shape, max(row["K_per_lap"]),
                            row["workers"])["bytes"]
    return {"predicted_s": pred, "ratio": pred / row["measured_s"],
            "within_25pct": bool(abs(pred / row["measured_s"] - 1) <= 0.25),
            "predicted_driver_mib": memory["driver"] / 2**20,
            "predicted_driver_peak_mib": memory["driver_peak"] / 2**20}


def check(args: argparse.Namespace, coef: dict) -> list[dict]:
    corpora = check_corpora(args)
    rows = []
    for workers in (1, 2):
        cluster = LocalDaskCluster(workers)
        try:
            for obs, K in (("gauss", 12), ("mult", 30)):
                before = load()
                r = cli_run(corpora[obs], cluster, f"check-{obs}-{workers}", "--obs", obs,
                            "--K", str(K), "--laps", str(args.check_laps))
                shape = sizing.Shape.of_corpus(str(corpora[obs]))
                row = {"obs": obs, "workers": workers, "items": shape.items, "dim": shape.dim,
                       "partitions": shape.partitions, "K_per_lap": lap_ks(r["trace"]),
                       "measured_s": lap_seconds(r["trace"])[0],
                       "driver_rss_mib": r["driver_rss"] / 2**20, "load_before": before,
                       "load_after": load()}
                row.update(predict_check(coef, row, shape, args.check_laps))
                rows.append(row)
                print(f"  {obs:5s} {workers} worker{'s' * (workers > 1)}: measured "
                      f"{row['measured_s']:.2f} s/lap, predicted {row['predicted_s']:.2f} "
                      f"(ratio {row['ratio']:.2f}); K per lap {row['K_per_lap']}; driver "
                      f"{row['driver_rss_mib']:.0f} MiB, predicted "
                      f"{row['predicted_driver_mib']:.0f} (peak "
                      f"{row['predicted_driver_peak_mib']:.0f}); load {before:.2f} -> "
                      f"{load():.2f}", flush=True)
        finally:
            cluster.close()
    return rows


PROJECTIONS = [("bow:8200000:141043:483450157", "mult", 500),
               ("dense:100000000:128", "gauss", 200), ("dense:100000000:128", "diag-gauss", 200)]


def projections(coef: dict) -> list[dict]:
    rows = []
    for spec, obs, K in PROJECTIONS:
        shape = sizing.Shape.described(spec, None)
        for workers in (8, 64, 512):
            for wave, ahead in ((4, 0), (workers, 1)):
                p = sizing.project(coef, obs, shape, K, workers, wave=wave, ahead=ahead)
                rows.append({
                    "corpus": spec, "obs": obs, "K": K, "workers": workers, "wave": wave,
                    "ahead": ahead, "lap_min": p["seconds"]["lap"] / 60,
                    "task_s": p["seconds"]["task"], "visit_s": p["seconds"]["visit"],
                    "lap_end_s": p["seconds"]["lap_end"],
                    "driver_gib": p["bytes"]["driver"] / 2**30,
                    "worker_gib": p["bytes"]["worker"] / 2**30, "bound": p["bound"],
                    "command": f"bnpmix plan --shape {spec} --obs {obs} --K {K} --workers "
                               f"{workers}" + (f" --wave {wave} --ahead {ahead}" if ahead else "")})
    return rows


def fit_all(recs: dict, coef: dict) -> list[dict]:
    """Every model's coefficients into coef["models"]; the table of the fits."""
    fits = []
    for obs, r in recs.items():
        model, errors = fit_model(obs, r)
        coef["models"][obs] = model
        for part in PARTS:
            fits.append({"obs": obs, "part": part, "points": len(r[part]),
                         "median_error": errors[part],
                         "terms": {k: float(f"{v:.4g}") for k, v in model[part].items()}})
            print(f"  {obs:10s} {part:10s} median error {errors[part]:5.1%}  "
                  + ", ".join(f"{k} {v:.3g}" for k, v in model[part].items()), flush=True)
    return fits


def check_medians(runs: list[dict]) -> list[dict]:
    """Per model and number of workers: the medians over the check's repeats (measured and
    predicted seconds per lap; their ratio), with each repeat's load."""
    out = []
    for obs, workers in dict.fromkeys((r["obs"], r["workers"]) for r in runs):
        mine = [r for r in runs if (r["obs"], r["workers"]) == (obs, workers)]
        measured = float(np.median([r["measured_s"] for r in mine]))
        predicted = float(np.median([r["predicted_s"] for r in mine]))
        out.append({"obs": obs, "workers": workers, "repeats": len(mine),
                    "items": mine[0]["items"], "dim": mine[0]["dim"],
                    "partitions": mine[0]["partitions"],
                    "K_per_lap": [r["K_per_lap"] for r in mine],
                    "measured_each_s": [r["measured_s"] for r in mine],
                    "measured_s": measured, "predicted_s": predicted,
                    "ratio": predicted / measured,
                    "within_25pct": bool(abs(predicted / measured - 1) <= 0.25),
                    "driver_rss_mib": max(r["driver_rss_mib"] for r in mine),
                    "predicted_driver_mib": mine[0]["predicted_driver_mib"],
                    "predicted_driver_peak_mib": mine[0]["predicted_driver_peak_mib"],
                    "load": [[round(r["load_before"], 2), round(r["load_after"], 2)]
                             for r in mine]})
    return out


def refit(args: argparse.Namespace) -> int:
    """The fits of an earlier --json file's records again (after a change of the model's terms
    or of the fitting), its check's predictions and the projections from them; its
    measurements (records, scheduler, check laps) are kept as they were."""
    figures = json.loads(args.refit.read_text(encoding="utf-8"))
    coef = figures["coefficients"]
    coef["models"] = {}
    figures["fits"] = fit_all(figures["records"], coef)
    corpora = check_corpora(args)
    runs = figures.get("check_runs", figures.get("check", []))
    for row in runs:
        row.update(predict_check(coef, row, sizing.Shape.of_corpus(str(corpora[row["obs"]])),
                                 args.check_laps))
        print(f"  check {row['obs']:5s} {row['workers']}: measured {row['measured_s']:.2f} s/lap,"
              f" predicted {row['predicted_s']:.2f} (ratio {row['ratio']:.2f})")
    if args.recheck:  # the check's fits once more, beside the earlier ones
        print("the check again:", flush=True)
        runs += check(args, coef)
    figures["check_runs"], figures["check"] = runs, check_medians(runs)
    figures["projections"] = projections(coef)
    figures["refit"] = f"refitted {time.strftime('%Y-%m-%d')} from the records measured then"
    if args.coefficients:
        args.coefficients.write_text(json.dumps(coef, indent=1) + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--laps", type=int, default=5, help="laps of each measuring fit (births "
                    "are created at the ends of all but the last two)")
    ap.add_argument("--check-laps", type=int, default=8, help="laps of each check fit")
    ap.add_argument("--quick", action="store_true", help="a few points of each grid (a trial)")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--refit", type=Path, metavar="JSON",
                    help="measure nothing: fit the records of an earlier --json file again and "
                    "recompute its check's predictions and the projections")
    ap.add_argument("--recheck", action="store_true",
                    help="with --refit: run the check's fits again, beside the earlier ones (the "
                    "check reports medians over them)")
    ap.add_argument("--reuse", type=Path, metavar="JSON",
                    help="fit the engine's costs recorded in an earlier --json file instead of "
                    "measuring them again (to try other terms)")
    json_option(ap, "sizing")
    ap.add_argument("--coefficients", nargs="?", type=Path, const=COEFFICIENTS,
                    help="write the fitted coefficients here (alone: pipeline/sizing.json, "
                    "what `bnpmix plan` reads)")
    args = ap.parse_args()
    if args.refit:
        return refit(args)
    figures: dict = {"cores": os.cpu_count(), "load_start": load()}
    print(f"load average {load():.2f} on {os.cpu_count()} cores\n1. the engine's costs "
          "(synchronous fits, timed inside):", flush=True)
    if args.reuse:  # the records of an earlier run: the fits again, nothing measured
        recs = json.loads(args.reuse.read_text(encoding="utf-8"))["records"]
    else:
        recs = measure_engine(args)
        print("   and at the projections' scale (direct calls):", flush=True)
        for obs in ("gauss", "diag-gauss"):
            for part, records in scale_points(obs, 1 if args.quick else 3).items():
                recs[obs][part] += records
    coef: dict = {"machine": {"cores": os.cpu_count(), "measured": time.strftime("%Y-%m-%d"),
                              "load": load()},
                  "models": {}, "birth": {"per_lap": BIRTH.per_lap,
                                          "max_collect": BIRTH.max_collect},
                  "delete_per_lap": DeleteConfig().per_lap}
    fits = fit_all(recs, coef)
    coef.update(read_and_spill())
    print("\n2. the scheduler (2 single-threaded workers):", flush=True)
    cluster = LocalDaskCluster(2)
    try:
        dask = measure_dask(args, cluster)
        coef["base_bytes"] = base_bytes(cluster)
    finally:
        cluster.close()
    coef["dask"] = dask["coefficients"]
    if args.coefficients:
        args.coefficients.write_text(json.dumps(coef, indent=1) + "\n", encoding="utf-8")
    figures.update({"records": recs, "fits": fits, "dask_sweep": dask["sweep"],
                    "dask_waves": dask["waves"],
                    "dask": dask["coefficients"], "read_and_spill": {
                        k: coef[k] for k in ("read_seconds_per_byte", "spill_seconds_per_byte")},
                    "base_bytes": coef["base_bytes"], "coefficients": coef})
    if not args.skip_check:
        print("\n4. the check (bnpmix fit processes, W = 4):", flush=True)
        figures["check_runs"] = check(args, coef)
        figures["check"] = check_medians(figures["check_runs"])
    print("\n5. projections:")
    figures["projections"] = projections(coef)
    for p in figures["projections"]:
        print(f"  {p['corpus']:30s} {p['obs']:10s} K={p['K']:3d} {p['workers']:3d} workers W="
              f"{p['wave']:3d} A={p['ahead']}: {p['lap_min']:8.1f} min/lap, driver "
              f"{p['driver_gib']:.1f} GiB, worker {p['worker_gib']:.1f} GiB; {p['bound']}")
    figures["load_end"] = load()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
