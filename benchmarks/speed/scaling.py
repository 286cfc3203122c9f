"""Scaling of the distributed memo driver, measured in one run on this machine.

N = 1,000,000 toy patches (D = 25) in partitions of the ingest default (50,000 rows: 20
partitions) or --partition-rows; memo with its default moves (birth, merge, delete) from K = 25
k-means++ seeds (the full Gaussian), run until it converges or --laps laps, at memo's default
wave (W = 4, none ahead, whatever the executor: every run gives the same model) or --wave W.
Printed, for local threads, one single-threaded Dask worker, one with as many threads as cores
(what `dask worker` starts by default) and two single-threaded workers:
- seconds per lap, the median over laps 2.. (partitions are cached by then): the whole lap, and
  its partition visits alone (the rest is the lap-end moves, on the driver whatever the
  executor);
- the laps run and the ELBO per item at the end;
- from summary.json: the partition caches' hit rate after each partition's first read
  (warm_hit_rate) and the share of tasks that ran on their partition's home worker;
- the CPU seconds per visit of each process (the fit's CPU over its visits, lap ends included):
  the driver (this process: for local threads it includes the visits' computation), the
  scheduler and the workers; from the single-threaded worker's figures, the most two workers
  could gain on this machine's cores (a lap cannot take less than its CPU over the cores);
- the ratios against the targets: two workers >= 1.7x faster per lap than one; one Dask worker
  within 1.2x of local threads (single-threaded, and with the default threads); every final
  ELBO within 1e-3 per item of the paper's schedule (one more threads run at W = 1 with no
  wave ahead, unless the runs are that already);
- the executor's overhead per task (a no-op over every partition, partitions already cached);
- the driver's peak RSS (a separate `bnpmix fit` process against the two-worker cluster) for
  N / 4 and N in partitions of the same size: the data stays on the workers, so it must not
  grow with N.

Every scheduler and worker process is started here on 127.0.0.1 and ended by its PID.

    python benchmarks/speed/scaling.py [--n 1000000] [--partition-rows N] [--laps 100] [--wave W]
        [--json [PATH]]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
from distributed import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import ENV, WORK, LocalDaskCluster, json_option, write_json
from bnpmix.datasets import toy_patches
from bnpmix.pipeline.config import JobConfig
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.pipeline.runtime.executors import DaskExecutor, LocalExecutor
from bnpmix.storage import Corpus, ingest_array


def make_corpus(n: int, rows: int | None, name: str) -> Path:
    out = WORK / name
    X, labels = toy_patches(n, seed=0)
    ingest_array(X, out, partition_rows=rows, columns={"label": labels})
    return out


def lap_seconds(trace: pd.DataFrame) -> tuple[float, float]:
    """Median seconds of the laps after the first: whole (lap end to lap end) and their visits
    alone (lap end to the next lap's last visit), from trace.csv (lap-end rows have batch -1)."""
    ends = trace[trace["batch"] < 0].set_index("lap")["seconds"]
    visits = trace[trace["batch"] >= 0].groupby(np.ceil(trace["lap"] - 1e-9))["seconds"].max()
    laps = [lap for lap in ends.index if lap - 1 in ends.index] or list(ends.index)
    start = {lap: ends.get(lap - 1, 0.0) for lap in laps}
    return (float(np.median([ends[lap] - start[lap] for lap in laps])),
            float(np.median([visits[lap] - start[lap] for lap in laps])))


def noop(batch, *_):
    return len(batch)


def task_overhead(executor, n_partitions: int) -> float:
    executor.map(noop, range(n_partitions))  # warm the partition caches
    t = time.perf_counter()
    executor.map(noop, range(n_partitions))
    return (time.perf_counter() - t) / n_partitions


HWM = ("import sys; from bnpmix.pipeline.cli import main; rc = main(sys.argv[1:]); "
       "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0], file=sys.stderr);"
       " sys.exit(rc)")


def driver_rss(corpus: Path, address: str, out: Path) -> float:
    """Peak RSS (MB) of a `bnpmix fit` driver process running against the cluster, read from
    the child's own VmHWM (ru_maxrss would carry this process's peak across fork + exec)."""
    res = subprocess.run([sys.executable, "-c", HWM, "fit", str(corpus), "--out", str(out),
                          "--K", "25", "--laps", "1", "--scheduler", address],
                         capture_output=True, text=True, env=ENV)
    if res.returncode != 0:
        raise RuntimeError(res.stderr)
    return int(res.stderr.strip().splitlines()[-1]) / 1024


class Result(NamedTuple):
    name: str
    wave: int
    ahead: int | None
    laps: int
    lap: float
    visits: float
    elbo: float
    warm_hit_rate: float | None
    home_rate: float | None
    cpu: dict[str, float]  # CPU seconds per visit by process


def measure(name: str, corpus: Path, job: JobConfig,
            cluster: LocalDaskCluster | None = None) -> Result:
    """One fit's figures; W as the run resolved it (summary.json's config)."""
    out = WORK / name.replace(" ", "-").replace(",", "")
    before = (time.process_time(), cluster.cpu_seconds() if cluster else {})
    summary = fit(corpus, out, job)
    after = (time.process_time(), cluster.cpu_seconds() if cluster else {})
    trace = pd.read_csv(out / "trace.csv")
    n_visits = int((trace["batch"] >= 0).sum())
    cpu = {"driver": (after[0] - before[0]) / n_visits,
           **{k: (v - before[1][k]) / n_visits for k, v in after[1].items()}}
    lap, visits = lap_seconds(trace)
    cache = summary["cache"]
    return Result(name, summary["config"]["run"]["wave"],
                  summary["config"]["engine"].get("ahead"), summary["laps"], lap, visits,
                  summary["elbo_per_item"], cache["warm_hit_rate"], cache["home_rate"], cpu)


def ceiling(one: Result, workers: int, cores: int, partitions: int) -> float:
    """An estimate of the most ``workers`` single-threaded workers could gain per lap over
    ``one``: each visit still costs the CPU ``one`` measured (driver, scheduler, worker), and a
    lap cannot take less than that CPU spread over the cores, nor less than the workers' share.
    The CPU is averaged over the whole fit and the lap time is a median over laps 2.., so on a
    few short laps the estimate can fall below what a run achieves."""
    total = sum(one.cpu.values()) * partitions
    work = sum(v for k, v in one.cpu.items() if k.startswith("worker")) * partitions
    return one.lap / max(total / cores, work / workers)


def rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--laps", type=int, default=100, help="most laps (memo stops on converging)")
    ap.add_argument("--partition-rows", type=int, default=None,
                    help="rows per partition (default: the ingest default, 50,000 at D = 25)")
    ap.add_argument("--wave", type=int, default=None,
                    help="W for every run (default: each executor's own)")
    json_option(ap, "scaling")
    args = ap.parse_args()
    corpus = make_corpus(args.n, args.partition_rows, "big")
    partitions = Corpus(corpus).manifest.partitions
    P = len(partitions)
    print(f"corpus: N={args.n}, D=25, {P} partitions; memo (birth, merge, delete) from K=25, "
          f"until it converges or {args.laps} laps; W {args.wave or 'by default'}", flush=True)

    def cfg(**kw) -> JobConfig:
        return job_config(algorithm="memo", obs="gauss", K=25, laps=args.laps, **kw)

    wave = {} if args.wave is None else {"wave": args.wave}
    results = [measure("local threads (2)", corpus, cfg(scheduler="threads", **wave))]
    local = LocalExecutor(Corpus(corpus), "threads", 2)
    overheads = {results[0].name: task_overhead(local, P)}
    local.close()
    cores = os.cpu_count() or 1
    for workers, threads in ((1, 1), (1, cores), (2, 1)):
        cluster = LocalDaskCluster(workers, threads)
        try:
            name = (f"dask, {workers} worker{'s' * (workers > 1)} x {threads} "
                    f"thread{'s' * (threads > 1)}")
            results.append(measure(name, corpus, cfg(scheduler=cluster.address, **wave), cluster))
            with Client(cluster.address) as client:
                overheads[name] = task_overhead(DaskExecutor(client, Corpus(corpus)), P)
            if workers == 2:
                small = make_corpus(args.n // 4, partitions[0].rows, "quarter")
                rss_small = driver_rss(small, cluster.address, WORK / "rss-small")
                rss_big = driver_rss(corpus, cluster.address, WORK / "rss-big")
        finally:
            cluster.close()
    reference = results[0]
    if (reference.wave, reference.ahead) != (1, 0):
        reference = measure("local threads (2), W=1, A=0", corpus,
                            cfg(scheduler="threads", wave=1, ahead=0))

    print(f"\n{'executor':<30} {'W':>2} {'A':>2} {'laps':>4} {'s/lap':>7} {'visits':>7} "
          f"{'ELBO/item':>10} {'warm hits':>9} {'home':>6} {'per task':>9}")
    for r in [*results, *([reference] if reference not in results else [])]:
        task = f"{overheads[r.name] * 1e3:>6.2f} ms" if r.name in overheads else ""
        print(f"{r.name:<30} {r.wave:>2} {r.ahead:>2} {r.laps:>4} {r.lap:>7.2f} {r.visits:>7.2f} "
              f"{r.elbo:>10.5f} {rate(r.warm_hit_rate):>9} {rate(r.home_rate):>6} {task:>9}")
    print("\nCPU seconds per visit (ms; the fit's CPU over its visits, lap ends included):")
    for r in results:
        print(f"  {r.name:<30} " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in r.cpu.items()))
    threads, one, one_default, two = results
    speedup, visits_speedup = one.lap / two.lap, one.visits / two.visits
    print("\ntargets (s/lap; visits alone in brackets):")
    print(f"  2 workers vs 1: {speedup:.2f}x faster [{visits_speedup:.2f}x] (target >= 1.7x): "
          f"{verdict(speedup >= 1.7)}; the estimated ceiling on {cores} cores at one "
          f"worker's CPU per visit: {ceiling(one, 2, cores, P):.2f}x")
    for r in (one, one_default):
        slowdown, visits_slowdown = r.lap / threads.lap, r.visits / threads.visits
        print(f"  {r.name} vs local threads: {slowdown:.2f}x the time "
              f"[{visits_slowdown:.2f}x] (target <= 1.2x): {verdict(slowdown <= 1.2)}")
    for r in results:
        gap = r.elbo - reference.elbo
        print(f"  ELBO/item of {r.name} (W={r.wave}) minus the W=1, A=0 run's: {gap:+.2e} "
              f"(target: within 1e-3): {verdict(abs(gap) <= 1e-3)}")

    print(f"\ndriver peak RSS (2 dask workers): N={args.n // 4}: {rss_small:.0f} MB, "
          f"N={args.n}: {rss_big:.0f} MB (ratio {rss_big / rss_small:.2f}; "
          f"{'does not grow' if rss_big < 1.15 * rss_small else 'GROWS'} with N)")
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"this process's peak RSS: {own:.0f} MB")
    write_json(args.json, {
        "args": vars(args), "partitions": P, "cores": cores,
        "runs": [r._asdict() | {"task_overhead": overheads.get(r.name)}
                 for r in [*results, *([reference] if reference not in results else [])]],
        "speedup_2_workers": speedup, "visits_speedup_2_workers": visits_speedup,
        "driver_rss_mb": {"small": rss_small, "big": rss_big}, "own_rss_mb": own})
    return 0


if __name__ == "__main__":
    sys.exit(main())
