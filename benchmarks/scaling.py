"""Scaling of the distributed memo driver, measured in one run on this machine.

N = 1,000,000 toy patches (D = 25), 100 partitions, memo without moves from K = 25 k-means++
seeds (the full Gaussian). Printed:
- seconds per lap (the second lap: partitions are cached by then) and the ELBO per item after it,
  for the threaded local executor, one Dask worker, and two single-threaded Dask workers with
  waves W = 1 and W = 2 (what W gains in time and costs in ELBO per lap);
- the executor's overhead per task (a no-op over every partition, partitions already cached);
- the driver's peak RSS (a separate `bnpmix fit` process against the two-worker cluster) for
  N = 250,000 and N = 1,000,000: the data stays on the workers, so it must not grow with N.

Every scheduler and worker process is started here on 127.0.0.1 and ended by its PID.

    python benchmarks/scaling.py [--n 1000000] [--laps 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _common import WORK
from bnpmix.datasets import toy_patches
from bnpmix.pipeline.config import JobConfig
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.pipeline.runtime.executors import DaskExecutor, LocalExecutor
from bnpmix.storage import Corpus, ingest_array

DASK = str(Path(sys.executable).parent / "dask")
ENV = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "5s"}


def make_corpus(n: int, name: str) -> Path:
    out = WORK / name
    X, labels = toy_patches(n, seed=0)
    ingest_array(X, out, partition_rows=n // 100, columns={"label": labels})
    return out


class Cluster:
    def __init__(self, workers: int) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{port}"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": ENV}
        self.procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port",
                                        str(port), "--dashboard-address", "127.0.0.1:0"], **quiet)]
        self.procs += [subprocess.Popen([DASK, "worker", self.address, "--nthreads", "1", "--host",
                                         "127.0.0.1", "--no-dashboard"], **quiet)
                       for _ in range(workers)]
        from distributed import Client

        deadline = time.time() + 60
        while True:
            try:
                self.client = Client(self.address, timeout="5s")
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        self.client.wait_for_workers(workers, timeout=60)

    def close(self) -> None:
        self.client.close()
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(timeout=20)


def lap_seconds(run: Path) -> tuple[float, float]:
    trace = pd.read_csv(run / "trace.csv")
    ends = trace.groupby(np.ceil(trace["lap"] - 1e-9))["seconds"].max().to_numpy()
    last = trace.iloc[-1]
    return float(ends[-1] - ends[-2]), float(last["elbo"])


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--laps", type=int, default=2)
    args = ap.parse_args()
    corpus = make_corpus(args.n, "big")
    print(f"corpus: N={args.n}, D=25, 100 partitions; memo without moves, K=25, "
          f"{args.laps} laps (times of the last lap)")
    print(f"{'executor':<36} {'s/lap':>7} {'ELBO/item':>10} {'task overhead':>14}")

    def cfg(**kw) -> JobConfig:
        return job_config(algorithm="memo", obs="gauss", K=25, laps=args.laps, **kw)

    out = WORK / "threads"
    fit(corpus, out, cfg(scheduler="threads"))
    secs, elbo = lap_seconds(out)
    local = LocalExecutor(Corpus(corpus), "threads", 2)
    print(f"{'local threads (2), W=1':<36} {secs:>7.2f} {elbo / args.n:>10.5f} "
          f"{task_overhead(local, 100) * 1e3:>11.2f} ms")
    local.close()

    for workers, waves in ((1, (1,)), (2, (1, 2))):
        cluster = Cluster(workers)
        try:
            for w in waves:
                out = WORK / f"dask{workers}-w{w}"
                fit(corpus, out, cfg(scheduler=cluster.address, wave=w))
                secs, elbo = lap_seconds(out)
                ov = task_overhead(DaskExecutor(cluster.client, Corpus(corpus)), 100)
                print(f"{f'dask, {workers} worker(s) x 1 thread, W={w}':<36} {secs:>7.2f} "
                      f"{elbo / args.n:>10.5f} {ov * 1e3:>11.2f} ms")
            if workers == 2:
                small = make_corpus(args.n // 4, "quarter")
                rss_small = driver_rss(small, cluster.address, WORK / "rss-small")
                rss_big = driver_rss(corpus, cluster.address, WORK / "rss-big")
        finally:
            cluster.close()
    print(f"\ndriver peak RSS (2 dask workers): N={args.n // 4}: {rss_small:.0f} MB, "
          f"N={args.n}: {rss_big:.0f} MB (ratio {rss_big / rss_small:.2f}; "
          f"{'does not grow' if rss_big < 1.15 * rss_small else 'GROWS'} with N)")
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"this process's peak RSS: {own:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
