"""Speed of streaming ADF and EP for NRM mixtures (Tank, Foti & Fox 2015) on this machine.

The paper's Python took 220 s per ADF pass over KOS (3,430 documents). Measured here, each with
the `adf` / `ep` engines through ``bnpmix.pipeline.fit.fit``:

kos: one ADF pass over ``nrm_data.kos_like(seed)`` (3,430 documents, V = 6,906, ~136 tokens a
  document; 500 documents a partition), --prior dp and ig, with bnpmix's default NRM
  hyperparameters (a = 1, tau = 1) and with the paper's (DP a = 100; IG a = 10, tau = 100). The
  pass's seconds are the engine's own: the trace's ``seconds`` at the pass's last partition
  (from the fit's start: reading the partitions included, process start-up, ingest and writing
  the assignments excluded); wall_seconds (the whole fit, assignments included) beside it. Best
  of --repeat runs; the ratio is 220 s over it.
nyt: one ADF pass (--prior dp) over an NYT-shaped corpus: ``kos_like(seed, n=--nyt-docs
  (266,000), V=7,841, mean_length=230)`` (NYT: ~230 tokens a document), 10,000 documents a
  partition, in a child process (local threads, the default executor), with the default partition
  cache (partitions kept in memory for later passes, up to 2 GB) and with --cache-bytes 0: the
  pass's seconds and documents/s, and the child's peak RSS (its own VmHWM) at the end of the pass
  and at the end of the fit (after writing the assignments, which score every document against
  every cluster).
ep: ``kos_like(seed)`` with 20 % held out at random (8 training partitions); an ADF pass then
  --passes EP passes with local threads (2), one Dask worker and two single-threaded Dask workers
  (a real ``dask scheduler`` and ``dask worker --nthreads 1`` processes on 127.0.0.1, started here
  and stopped by PID; one ADF pass first to warm them up), at waves W = 1, 2, 4: seconds per pass
  (EP passes timed between pass ends, the held-out scoring excluded) and the held-out
  log-likelihood per document after every pass (``score_samples`` of the engine's model at the
  pass's end: ``bnpmix evaluate``'s figure, checked against ``bnpmix.pipeline.evaluate.evaluate``
  on the finished run).

Prints tables and writes every figure as JSON (--json; default benchmarks/results/nrm_speed.json,
nrm_speed_quick.json with --quick, a small smoke version). Run it with PYTHONPATH pointing at
another copy of bnpmix to measure that copy (the Dask workers inherit the environment).

    python benchmarks/speed/nrm_speed.py [--quick] [--nyt-docs 266000] [--passes 5] [--repeat 3]
        [--skip nyt|ep|kos ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
import bnpmix
import bnpmix.algorithms.adf as adf
import nrm_data
from _common import ENV, WORK, LocalDaskCluster
from bnpmix.pipeline.evaluate import evaluate
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import Corpus

PAPER_SECONDS = 220.0  # Tank et al.'s Python, one ADF pass over KOS
RESULTS = Path(__file__).resolve().parents[1] / "results"
HYPER = {"default": {"dp": {}, "ig": {}},
         "paper": {"dp": {"nrm_a": 100.0}, "ig": {"nrm_a": 10.0, "nrm_tau": 100.0}}}

CHILD = """
import json, sys, time
from bnpmix.pipeline.fit import fit, job_config
corpus, out, prior, cache = sys.argv[1:5]
options = {'cache_bytes': int(cache)} if cache else {}
def hwm():
    return int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024
marks = {}
def on_step(engine, step):
    if step.lap_end and 'pass_peak_rss_mb' not in marks:
        marks['pass_peak_rss_mb'] = hwm()
t = time.perf_counter()
summary = fit(corpus, out, job_config(algorithm='adf', nrm_prior=prior, **options),
              on_step=on_step)
marks['fit_seconds'] = time.perf_counter() - t
marks['fit_peak_rss_mb'] = hwm()
marks['K'] = summary['K']
print(json.dumps(marks))
"""


def pass_seconds(run: Path) -> list[float]:
    """The engine's seconds at the end of each pass (trace rows of lap p: the last one)."""
    trace = pd.read_csv(run / "trace.csv")
    return trace.groupby("lap")["seconds"].max().sort_index().tolist()


# KOS: one ADF pass ------------------------------------------------------------------------

def kos_adf(args: argparse.Namespace) -> list[dict[str, Any]]:
    docs = nrm_data.kos_like(args.seed, n=args.kos_docs)
    corpus = WORK / "kos"
    nrm_data.write_corpus(docs, corpus, 500)
    print(f"\nkos: one ADF pass, {docs.X.shape[0]} documents, V = {docs.X.shape[1]}, "
          f"{docs.X.sum() / docs.X.shape[0]:.0f} tokens a document, 500 a partition; best of "
          f"{args.repeat}")
    print(f"{'prior':<6} {'hyperparameters':<18} {'K':>4} {'pass s':>8} {'wall s':>8} "
          f"{'x faster than 220 s':>20} {'loglik/doc':>11}")
    rows = []
    for hyper in ("default", "paper"):
        for prior in args.priors:
            runs = []
            for r in range(args.repeat):
                out = WORK / f"kos-{prior}-{hyper}-{r}"
                summary = fit(corpus, out, job_config(algorithm="adf", nrm_prior=prior,
                                                      **HYPER[hyper][prior]))
                runs.append({"pass_seconds": pass_seconds(out)[0],
                             "wall_seconds": summary["wall_seconds"], "K": summary["K"],
                             "loglik_per_item": summary["loglik_per_item"]})
                shutil.rmtree(out)
            best = min(runs, key=lambda x: x["pass_seconds"])
            row = {"prior": prior, "hyperparameters": hyper, **HYPER[hyper][prior],
                   "n_docs": int(docs.X.shape[0]), **best,
                   "all_pass_seconds": [x["pass_seconds"] for x in runs],
                   "speedup_vs_paper": PAPER_SECONDS / best["pass_seconds"]}
            rows.append(row)
            label = ", ".join(f"{k[4:]}={v:g}" for k, v in HYPER[hyper][prior].items())
            print(f"{prior:<6} {label or 'a=1, tau=1':<18} {row['K']:>4} "
                  f"{row['pass_seconds']:>8.3f} {row['wall_seconds']:>8.3f} "
                  f"{row['speedup_vs_paper']:>19.0f}x {row['loglik_per_item']:>11.2f}")
    return rows


# NYT-shaped: one ADF pass in a child process --------------------------------------------------

def nyt_adf(args: argparse.Namespace) -> dict[str, Any]:
    t = time.perf_counter()
    docs = nrm_data.kos_like(args.seed, n=args.nyt_docs, V=7_841, mean_length=230)
    n, V, nnz, tokens = docs.X.shape[0], docs.X.shape[1], docs.X.nnz, float(docs.X.sum())
    corpus = WORK / "nyt"
    nrm_data.write_corpus(docs, corpus, 10_000)
    del docs
    made = time.perf_counter() - t
    row = {"prior": args.nyt_prior, "n_docs": n, "V": V, "tokens_per_doc": tokens / n,
           "distinct_words_per_doc": nnz / n, "partition_docs": 10_000, "corpus_seconds": made,
           "runs": []}
    print(f"\nnyt-shaped: kos_like(n={n}, V={V}, mean_length=230): {row['tokens_per_doc']:.0f} "
          f"tokens, {row['distinct_words_per_doc']:.0f} distinct words a document, 10,000 a "
          f"partition; one ADF pass (--prior {args.nyt_prior}) in a child process")
    print(f"{'partition cache':<26} {'K':>4} {'pass s':>8} {'docs/s':>8} {'peak RSS MB: pass':>18} "
          f"{'fit':>6} {'fit s':>7}")
    for label, cache in (("default (2 GB, kept)", ""), ("--cache-bytes 0", "0")):
        out = WORK / "nyt-run"
        res = subprocess.run([sys.executable, "-c", CHILD, str(corpus), str(out),
                              args.nyt_prior, cache], capture_output=True, text=True, env=ENV)
        if res.returncode != 0:
            raise RuntimeError(res.stderr)
        marks = json.loads(res.stdout.strip().splitlines()[-1])
        seconds = pass_seconds(out)[0]
        run = {"cache": label, "pass_seconds": seconds, "docs_per_second": n / seconds,
               "wall_seconds": json.loads((out / "summary.json").read_text())["wall_seconds"],
               **marks}
        row["runs"].append(run)
        print(f"{label:<26} {run['K']:>4} {seconds:>8.2f} {run['docs_per_second']:>8,.0f} "
              f"{run['pass_peak_rss_mb']:>18,.0f} {run['fit_peak_rss_mb']:>6,.0f} "
              f"{run['wall_seconds']:>7.1f}")
        shutil.rmtree(out)
    print("  (fit s and its peak include writing the assignments: every document scored against "
          "every cluster)")
    shutil.rmtree(corpus)
    return row


# EP: seconds per pass and held-out log-likelihood against W -----------------------------------

def ep_corpora(args: argparse.Namespace) -> tuple[Path, Path, Any]:
    docs = nrm_data.kos_like(args.seed, n=args.kos_docs)
    n = docs.X.shape[0]
    order = np.random.default_rng(args.seed).permutation(n)
    test, train = np.sort(order[:n // 5]), np.sort(order[n // 5:])
    paths = []
    for name, rows, size in (("ep-train", train, -(-len(train) // 8)),
                             ("ep-heldout", test, len(test))):
        part = nrm_data.Docs(docs.X[rows], docs.labels[rows], docs.topics)
        nrm_data.write_corpus(part, WORK / name, size)
        paths.append(WORK / name)
    return paths[0], paths[1], docs.X[test]


def ep_run(train: Path, heldout: Path, X_test: Any, scheduler: str, wave: int,
           args: argparse.Namespace, name: str) -> dict[str, Any]:
    ends: list[float] = []  # pass ends, less the time spent scoring before them
    held: list[float] = []
    Ks: list[int] = []
    scoring = 0.0

    def on_step(engine, step) -> None:
        nonlocal scoring
        if not step.lap_end:
            return
        now = time.perf_counter()
        ends.append(now - scoring)
        model = engine.model()
        held.append(float(model.score_samples(X_test).mean()))
        Ks.append(model.K)
        scoring += time.perf_counter() - now

    out = WORK / f"ep-{name}-w{wave}"
    fit(train, out, job_config(algorithm="ep", nrm_prior=args.ep_prior, passes=args.passes,
                               wave=wave, scheduler=scheduler), on_step=on_step)
    adf = pass_seconds(out)[0]
    ep = np.diff(ends).tolist()
    check = evaluate(out, heldout)["heldout_loglik_per_item"]
    shutil.rmtree(out)
    return {"executor": name, "W": wave, "adf_pass_seconds": adf, "ep_pass_seconds": ep,
            "mean_ep_pass_seconds": float(np.mean(ep)) if ep else None,
            "heldout_loglik_per_pass": held, "K_per_pass": Ks,
            "evaluate_heldout_loglik": check, "evaluate_agrees": bool(abs(check - held[-1])
                                                                      <= 1e-9 * abs(check))}


def ep_speed(args: argparse.Namespace) -> list[dict[str, Any]]:
    train, heldout, X_test = ep_corpora(args)
    n_train = Corpus(train).n_items
    print(f"\nep: kos_like({args.seed}), {n_train} training documents in 8 partitions, "
          f"{X_test.shape[0]} held out; --prior {args.ep_prior}, an ADF pass then {args.passes} "
          f"EP passes")
    print(f"{'executor':<30} {'W':>2} {'ADF s':>7} {'EP s/pass':>10}  held-out loglik/doc after "
          f"ADF, EP 1, 2, ...")
    rows = []
    executors: list[tuple[str, int]] = [("local threads (2)", 0), ("dask, 1 worker x 1 thread", 1),
                                        ("dask, 2 workers x 1 thread", 2)]
    for name, workers in executors:
        cluster = LocalDaskCluster(workers) if workers else None
        try:
            scheduler = cluster.address if cluster else "threads"
            warm = WORK / "ep-warm-up"  # workers import bnpmix and read partitions on first use
            fit(train, warm, job_config(algorithm="ep", nrm_prior=args.ep_prior, passes=0,
                                        scheduler=scheduler))
            shutil.rmtree(warm)
            for wave in args.waves:
                row = ep_run(train, heldout, X_test, scheduler, wave, args,
                             f"{workers}w" if workers else "threads")
                row["executor"] = name
                rows.append(row)
                curve = " ".join(f"{h:.2f}" for h in row["heldout_loglik_per_pass"])
                print(f"{name:<30} {wave:>2} {row['adf_pass_seconds']:>7.3f} "
                      f"{row['mean_ep_pass_seconds'] or float('nan'):>10.3f}  {curve}"
                      f"{'' if row['evaluate_agrees'] else '  (evaluate DISAGREES)'}")
        finally:
            if cluster is not None:
                cluster.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a small smoke version")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="KOS ADF runs (the best is kept)")
    ap.add_argument("--nyt-docs", type=int, default=266_000)
    ap.add_argument("--nyt-prior", default="dp", choices=("dp", "ig"))
    ap.add_argument("--passes", type=int, default=5, help="EP passes after the ADF pass")
    ap.add_argument("--ep-prior", default="ig", choices=("dp", "ig"))
    ap.add_argument("--skip", nargs="*", default=[], choices=("kos", "nyt", "ep"))
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    args.priors, args.kos_docs, args.waves = ("dp", "ig"), 3430, (1, 2, 4)
    if args.quick:
        args.kos_docs, args.repeat, args.passes, args.waves = 800, 1, 2, (1, 2)
        args.nyt_docs = min(args.nyt_docs, 5_000)
    out = args.json or RESULTS / ("nrm_speed_quick.json" if args.quick else "nrm_speed.json")
    results: dict[str, Any] = {
        "paper_seconds_per_adf_pass": PAPER_SECONDS,
        "args": {k: (list(v) if isinstance(v, tuple) else str(v) if isinstance(v, Path) else v)
                 for k, v in vars(args).items()},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "numpy": np.__version__, "scipy": scipy.__version__,
                    "platform": platform.platform(), "bnpmix": str(Path(bnpmix.__file__).parent),
                    "adf_module": adf.__file__,
                    "load_average_at_start": list(os.getloadavg())}}
    try:
        if "kos" not in args.skip:
            results["kos_adf"] = kos_adf(args)
        if "nyt" not in args.skip:
            results["nyt_adf"] = nyt_adf(args)
        if "ep" not in args.skip:
            results["ep"] = ep_speed(args)
    finally:
        results["machine"]["load_average_at_end"] = list(os.getloadavg())
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        print(f"\nfigures written to {out}")
        shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
