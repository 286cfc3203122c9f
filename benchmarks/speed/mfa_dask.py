"""`--obs mfa` on Dask against local threads (issue 45: a 100,000 x 128 corpus on Dask equals
threads to 1e-9), measured in one run on this machine.

N = 100,000 items in D = 128 drawn in code from --seed: a mixture of 8 factor analysers, each
a mean, a loading matrix of rank 4..8 and one diagonal noise shared by all components, ingested
with the installed `bnpmix ingest X.npy CORPUS` (its default partitioning: 10,000 rows at D =
128, 10 partitions). The same `bnpmix fit CORPUS --obs mfa --laps L --seed 0` (memo with its
default moves: births, merges, deletes; from one component) runs twice as a subprocess: on
local threads (the default executor) and against a Dask cluster of two single-threaded workers
started here (--scheduler tcp://127.0.0.1:PORT). L = 10 by default, a cap: at the defaults the
fit converges after 4 laps, K = 1, 7, 8, 8 after each (births in laps 2 and 3, a last lap
that moves nothing), so the comparison covers a converged run with the moves that made it; the
whole script then takes 5-7 minutes on 2 shared cores (--laps 3 stops before convergence, at
K = 7, in under a minute). Printed:
- each run's K, ELBO per item, laps, wall seconds (the subprocess's, and summary.json's), and
  the ARI of its assignments against the true components; its K and seconds after each lap
  (trace.csv's lap-end rows);
- every array of the two model.npz files (same keys and shapes; max abs difference, max
  relative difference elementwise |a - b| / max(|a|, |b|), and the max abs difference over the
  array's largest finite entry), summary.json's ELBO, ELBO per item and weights, every numeric
  column of trace.csv except its wall-clock seconds, and the assignments (cluster and prob,
  sorted by item);
- PASS when every elementwise relative difference is at most --rtol (1e-9), else FAIL; either
  with the worst key and its difference.

Every scheduler and worker process is started here on 127.0.0.1 and ended by its PID. Corpus
and runs are written under a temporary directory (BNPMIX_BENCH_KEEP=1 keeps it).

    python benchmarks/speed/mfa_dask.py [--n 100000] [--dim 128] [--components 8] [--laps 10]
                                  [--seed 0] [--rtol 1e-9] [--json [PATH]]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import ENV, RESULTS, WORK, LocalDaskCluster
from bnpmix.algorithms.metrics import adjusted_rand_index

BNPMIX = str(Path(sys.executable).parent / "bnpmix")  # the installed console script
WALL_CLOCK = {"seconds"}  # trace.csv's columns that are wall-clock times, not compared


def mfa_data(n: int, D: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """n items (n, D) from K equally likely factor analysers and their labels: component k is
    x = μ_k + W_k z + ε, z ~ N(0, I_{q_k}), q_k uniform in 4..8, ε ~ N(0, diag ψ) with one ψ
    (uniform in [0.25, 1] per dimension) shared by all components; μ_k ~ N(0, 2² I) and W_k's
    entries N(0, 1), so a component's factors stand well above the noise."""
    rng = np.random.default_rng(seed)
    ranks = rng.integers(4, 9, size=K).tolist()
    means = 2.0 * rng.normal(size=(K, D))
    loadings = [rng.normal(size=(D, q)) for q in ranks]
    psi = rng.uniform(0.25, 1.0, size=D)
    labels = rng.integers(K, size=n)
    X = means[labels] + np.sqrt(psi) * rng.normal(size=(n, D))
    for k in range(K):
        rows = np.flatnonzero(labels == k)
        X[rows] += rng.normal(size=(len(rows), ranks[k])) @ loadings[k].T
    return X, labels, ranks


def run(*args: str) -> tuple[float, str]:
    """Run the bnpmix console script; its wall seconds and stderr (its report)."""
    t = time.perf_counter()
    res = subprocess.run([BNPMIX, *args], capture_output=True, text=True, env=ENV)
    seconds = time.perf_counter() - t
    if res.returncode != 0:
        raise RuntimeError(f"bnpmix {' '.join(args)} failed ({res.returncode}):\n{res.stderr}")
    return seconds, res.stdout + res.stderr


def difference(a: np.ndarray, b: np.ndarray) -> dict:
    """Max abs difference, max elementwise relative difference (|a - b| / max(|a|, |b|), 0 where
    both are equal, infinities and NaNs included) and the max abs difference over the arrays'
    largest finite magnitude."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore"):
        gap = np.where(same, 0.0, np.abs(a - b))
        gap = np.where(np.isnan(gap), np.inf, gap)  # NaN against a number
        scale = np.maximum(np.abs(a), np.abs(b))
        rel = np.where(same, 0.0, gap / np.where(scale > 0, scale, 1.0))
    finite = np.abs(np.concatenate([a[np.isfinite(a)], b[np.isfinite(b)]]))
    top = float(finite.max()) if finite.size else 0.0
    max_abs = float(gap.max()) if gap.size else 0.0
    return {"max_abs": max_abs, "max_rel": float(rel.max()) if rel.size else 0.0,
            "rel_to_max": max_abs / top if top > 0 else (0.0 if max_abs == 0 else np.inf),
            "differing": int((~same).sum())}


def mismatch(why: str) -> dict:
    return {"max_abs": np.inf, "max_rel": np.inf, "rel_to_max": np.inf, "differing": -1,
            "note": why}


def compare(a: Path, b: Path) -> dict[str, dict]:
    """Every compared quantity of runs a and b by key."""
    out: dict[str, dict] = {}
    with np.load(a / "model.npz", allow_pickle=False) as ma, \
            np.load(b / "model.npz", allow_pickle=False) as mb:
        for key in sorted(set(ma.files) | set(mb.files)):
            name = f"model.npz:{key}"
            if key not in ma.files or key not in mb.files:
                out[name] = mismatch("in one run only")
            elif ma[key].shape != mb[key].shape:
                out[name] = mismatch(f"shapes {ma[key].shape} vs {mb[key].shape}")
            else:
                out[name] = {**difference(ma[key], mb[key]), "shape": list(ma[key].shape)}
    sa, sb = (json.loads((r / "summary.json").read_text()) for r in (a, b))
    for key in ("K", "laps", "elbo", "elbo_per_item", "weights"):
        va, vb = np.asarray(sa[key], dtype=float), np.asarray(sb[key], dtype=float)
        out[f"summary:{key}"] = (difference(va, vb) if va.shape == vb.shape
                                 else mismatch(f"shapes {va.shape} vs {vb.shape}"))
    ta, tb = pd.read_csv(a / "trace.csv"), pd.read_csv(b / "trace.csv")
    for col in ta.columns:
        if col in WALL_CLOCK or not pd.api.types.is_numeric_dtype(ta[col]):
            continue
        name = f"trace.csv:{col}"
        if col not in tb.columns or len(ta) != len(tb):
            out[name] = mismatch(f"rows {len(ta)} vs {len(tb)}" if col in tb.columns
                                 else "in one run only")
        else:
            out[name] = difference(ta[col].to_numpy(), tb[col].to_numpy())
    xa, xb = (pd.read_parquet(r / "assignments").sort_values("item", ignore_index=True)
              for r in (a, b))
    for col in ("item", "cluster", "prob"):
        name = f"assignments:{col}"
        out[name] = (difference(xa[col].to_numpy(), xb[col].to_numpy()) if len(xa) == len(xb)
                     else mismatch(f"rows {len(xa)} vs {len(xb)}"))
    return out


def figures(name: str, out: Path, seconds: float, labels: np.ndarray) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    ends = pd.read_csv(out / "trace.csv").query("batch < 0").drop_duplicates("lap")
    assigned = pd.read_parquet(out / "assignments").sort_values("item")["cluster"].to_numpy()
    return {"run": name, "K": summary["K"], "K_effective": summary["K_effective"],
            "elbo_per_item": summary["elbo_per_item"], "laps": summary["laps"],
            "converged": summary["converged"], "seconds": seconds,
            "fit_wall_seconds": summary["wall_seconds"], "executor": summary["executor"],
            "ari": adjusted_rand_index(labels, assigned),
            "lap_K": ends["K"].tolist(),
            "lap_seconds": np.diff(ends["seconds"].to_numpy(), prepend=0.0).tolist()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--components", type=int, default=8)
    p.add_argument("--laps", type=int, default=10,
                   help="most laps of each fit (bnpmix fit --laps; memo stops on converging)")
    p.add_argument("--seed", type=int, default=0, help="the data's seed (the fits use --seed 0)")
    p.add_argument("--rtol", type=float, default=1e-9)
    p.add_argument("--json", nargs="?", const=str(RESULTS / "mfa_dask.json"), default=None)
    args = p.parse_args(argv)

    X, labels, ranks = mfa_data(args.n, args.dim, args.components, args.seed)
    np.save(WORK / "X.npy", X)
    corpus = WORK / "corpus"
    ingest_s, _ = run("ingest", str(WORK / "X.npy"), str(corpus))
    manifest = json.loads((corpus / "manifest.json").read_text())
    del X
    print(f"corpus: N={args.n}, D={args.dim}, {args.components} factor analysers of ranks "
          f"{ranks}, one shared diagonal noise; {len(manifest['partitions'])} partitions "
          f"(ingest {ingest_s:.1f} s)", flush=True)
    fit = ("fit", str(corpus), "--obs", "mfa", "--laps", str(args.laps), "--seed", "0")
    print(f"bnpmix {' '.join((*fit[:1], 'CORPUS', *fit[2:]))} --out RUN "
          f"[--scheduler tcp://127.0.0.1:PORT]", flush=True)

    runs = {"threads": WORK / "run-threads", "dask": WORK / "run-dask"}
    seconds = {"threads": run(*fit, "--out", str(runs["threads"]))[0]}
    print(f"  threads: done in {seconds['threads']:.1f} s", flush=True)
    cluster = LocalDaskCluster(2)
    try:
        seconds["dask"] = run(*fit, "--out", str(runs["dask"]), "--scheduler",
                              cluster.address)[0]
    finally:
        cluster.close()
    print(f"  dask (2 workers x 1 thread): done in {seconds['dask']:.1f} s", flush=True)

    results = [figures(name, out, seconds[name], labels) for name, out in runs.items()]
    print(f"\n{'run':<8} {'K':>3} {'K_eff':>5} {'ELBO/item':>14} {'laps':>4} {'conv':>5} "
          f"{'wall s':>7} {'fit s':>7} {'ARI':>6}")
    for r in results:
        print(f"{r['run']:<8} {r['K']:>3} {r['K_effective']:>5} {r['elbo_per_item']:>14.8f} "
              f"{r['laps']:>4} {r['converged']!s:>5} {r['seconds']:>7.1f} "
              f"{r['fit_wall_seconds']:>7.1f} {r['ari']:>6.3f}")
    for r in results:
        print(f"  {r['run']}: K after each lap {r['lap_K']}, seconds per lap "
              + " ".join(f"{t:.1f}" for t in r["lap_seconds"]))

    diffs = compare(runs["threads"], runs["dask"])
    print(f"\n{'threads vs dask':<28} {'max abs':>10} {'max rel':>10} {'abs/max':>10} "
          f"{'differ':>8}")
    for key, d in diffs.items():
        print(f"{key:<28} {d['max_abs']:>10.2e} {d['max_rel']:>10.2e} {d['rel_to_max']:>10.2e} "
              f"{d['differing']:>8}" + (f"  ({d['note']})" if "note" in d else ""))
    worst = max(diffs, key=lambda k: diffs[k]["max_rel"])
    ok = diffs[worst]["max_rel"] <= args.rtol
    print(f"\n{'PASS' if ok else 'FAIL'}: worst relative difference {diffs[worst]['max_rel']:.2e} "
          f"at {worst} (max abs {diffs[worst]['max_abs']:.2e}; criterion <= {args.rtol:g})")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"n": args.n, "dim": args.dim, "components": args.components, "ranks": ranks,
             "data_seed": args.seed, "laps": args.laps, "partitions": len(manifest["partitions"]),
             "rtol": args.rtol, "runs": results, "differences": diffs, "worst": worst,
             "pass": ok}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
