"""Out of core, measured: a corpus several times the memory a Dask cluster is given, fitted
with the plain `bnpmix fit` while driver, scheduler and workers share one hard memory cap.

1. A dense corpus (--rows x --dim float64, --clusters diagonal Gaussians, seed --seed) written
   to a .npy a chunk at a time (never held whole), or with --kind text a bag-of-words corpus
   (--rows documents of --words words over --vocab, one of --clusters topics each) written a
   partition at a time by ingest's corpus writer; a dense one is ingested with `bnpmix ingest`
   (default partitions), the source then removed. Its size on disk must be at least --ratio
   times the cap.
2. A memory cgroup of its own (v1 ``memory.limit_in_bytes`` or v2 ``memory.max``, whichever the
   machine mounts; root needed), created here with the cap (--cap-mib) and removed at the end.
   A `dask scheduler`, --workers `dask worker` processes of --threads threads (none with
   --workers 0: the driver's own threads, as a plain `bnpmix fit` runs; no nanny; by default
   no --memory-limit, so each process sizes its budgets from the cgroup's cap; with
   --worker-allocators on, the default, the environment docs/user_guide/dask.rst recommends for
   workers: one malloc arena, Arrow on it) and the driver,
   `bnpmix fit CORPUS --scheduler ADDRESS` with no other option, all start inside it. Every
   process's resident memory (RSS, and PSS, which counts a shared page once) is sampled every
   0.2 s (psutil); the cgroup's own peak (which v1 charges with page cache too) and its
   OOM-kill count are read at the end.
3. The same plain fit, in memory with local threads and no cap, of a --subsample-row sample
   drawn uniformly from the corpus (the reference a user could afford).

Printed (and with --json kept in benchmarks/results/out_of_core.json, one run per --kind): the
corpus on disk against the cap, the peak of the summed RSS and PSS and of each process, laps, K,
seconds per lap and the ELBO per item of both fits, and whether the run converged.

    python benchmarks/speed/out_of_core.py [--kind dense|text] [--rows N] [--dim 32] [--cap-mib
        1536]
        [--workers 2] [--worker-memory 0] [--scales per-cluster|shared] [--ratio 5]
        [--json [PATH]]

A worker's --memory-limit, where given, must leave room above what bnpmix needs of it (`bnpmix
fit` prints it), as Dask pauses a worker past 80 % of its limit: with 500MB, the workers here
(180 MB to start, a cache of 60 MB, glibc's kept 64 MiB) sat near 390 MB and the fit stalled.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import ENV, RESULTS, WORK, LocalDaskCluster

BIN = Path(sys.executable).parent
# a worker's environment as docs/user_guide/dask.rst recommends (what the bnpmix command gives
# its own process: pipeline/malloc.process_allocators), or as it is
WORKER_ALLOCATORS = {"on": {"MALLOC_ARENA_MAX": "1", "ARROW_DEFAULT_MEMORY_POOL": "system"},
                     "off": {}}
CHUNK = 500_000


def write_npy(path: Path, rows: int, dim: int, clusters: int, seed: int, shared: bool) -> None:
    """Clustered rows written CHUNK at a time through a memory map: diagonal Gaussians whose
    scales are drawn per cluster, or with ``shared`` one draw for all (every --obs candidate
    then holds the truth)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=4.0, size=(clusters, dim))
    scales = rng.uniform(0.5, 1.5, size=(1 if shared else clusters, dim))
    scales = np.broadcast_to(scales, (clusters, dim))
    weights = rng.dirichlet(np.full(clusters, 2.0))
    X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(rows, dim))
    for s in range(0, rows, CHUNK):
        m = min(CHUNK, rows - s)
        z = rng.choice(clusters, size=m, p=weights)
        X[s:s + m] = means[z] + scales[z] * rng.normal(size=(m, dim))
        X.flush()
    del X


def write_bow_corpus(corpus: Path, vocab: int, parts) -> None:
    """CSR partitions (an iterable, one at a time) written as a corpus by the writer `bnpmix
    ingest` uses."""
    from bnpmix.storage.corpus import Manifest
    from bnpmix.storage.writer import new_corpus

    with new_corpus(corpus, Manifest(kind="bow", dim=vocab, dtype="int32")) as writer:
        for part in parts:
            writer.add_bow(part.indptr, part.indices, part.data.astype(np.int64))


def write_bow(corpus: Path, docs: int, vocab: int, topics: int, words: int, seed: int) -> None:
    """``docs`` documents of ``words`` words, each from one of ``topics`` topics (Dir(0.05)
    over the vocabulary), made and written a partition (ingest's DOCUMENTS_PER_PARTITION) at a
    time: a docword file of 10^9 triples would take longer to format and parse than the fit."""
    import scipy.sparse as sp

    from bnpmix.storage import DOCUMENTS_PER_PARTITION as step

    rng = np.random.default_rng(seed)
    cdf = np.cumsum(rng.dirichlet(np.full(vocab, 0.05), topics), axis=1)

    def parts():
        for s in range(0, docs, step):
            m = min(step, docs - s)
            z = rng.integers(0, topics, m)
            u = rng.random((m, words))
            ids = np.empty((m, words), dtype=np.int64)
            for k in range(topics):
                ids[z == k] = np.searchsorted(cdf[k], u[z == k])
            ids = np.minimum(ids, vocab - 1)
            key, counts = np.unique((np.arange(m)[:, None] * vocab + ids).ravel(),
                                    return_counts=True)
            doc, word = np.divmod(key, vocab)
            yield sp.csr_matrix((counts, (doc, word)), shape=(m, vocab))

    write_bow_corpus(corpus, vocab, parts())


def subsample(corpus: Path, out: Path, rows: int, seed: int) -> None:
    """``rows`` rows drawn uniformly from the corpus, a partition at a time, ingested as the
    corpus ``out`` (dense: through a .npy and `bnpmix ingest`; text: by the corpus writer)."""
    import scipy.sparse as sp

    from bnpmix.algorithms.obs.base import stack_rows
    from bnpmix.storage import DOCUMENTS_PER_PARTITION, Corpus

    c = Corpus(corpus)
    n = c.n_items
    keep = np.sort(np.random.default_rng(seed).choice(n, size=min(rows, n), replace=False))
    picked, start = [], 0
    for i in range(c.n_partitions):
        X = c.read(i).X
        mine = keep[(keep >= start) & (keep < start + X.shape[0])] - start
        picked.append(X[mine])
        start += X.shape[0]
    X = stack_rows(picked)
    if sp.issparse(X):  # as write_bow writes it
        X, step = X.tocsr(), DOCUMENTS_PER_PARTITION
        write_bow_corpus(out, X.shape[1], (X[s:s + step] for s in range(0, X.shape[0], step)))
        return
    source = out.with_suffix(".npy")
    np.save(source, X)
    subprocess.run([str(BIN / "bnpmix"), "ingest", str(source), str(out)], check=True,
                   env=ENV, stdout=subprocess.DEVNULL)


class Cgroup:
    """A memory cgroup of ``limit`` bytes (v1 or v2), removed by ``close``."""

    def __init__(self, name: str, limit: int) -> None:
        v1 = Path("/sys/fs/cgroup/memory")
        if v1.is_dir():
            self.path, files = v1 / name, ("memory.limit_in_bytes", "memory.max_usage_in_bytes",
                                           "memory.oom_control")
        elif Path("/sys/fs/cgroup/cgroup.controllers").exists():
            self.path, files = (Path("/sys/fs/cgroup") / name,
                                ("memory.max", "memory.peak", "memory.events"))
        else:
            raise SystemExit("out_of_core: no memory cgroup controller on this machine")
        self.limit_file, self.peak_file, self.events_file = files
        self.path.mkdir()
        (self.path / self.limit_file).write_text(str(limit))

    def join(self) -> None:
        """Move the calling process into the group (a Popen preexec_fn: the child joins)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def peak(self) -> int:
        try:
            return int((self.path / self.peak_file).read_text())
        except (OSError, ValueError):
            return -1

    def oom_kills(self) -> int:
        text = (self.path / self.events_file).read_text()
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def close(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


class RssSampler:
    """Resident memory of the given processes (and their children), every ``every`` s: RSS,
    which counts a shared library's pages in every process that maps it, and PSS, which
    splits shared pages among the processes sharing them (summed, what they hold together)."""

    def __init__(self, pids: dict[str, int], every: float = 0.2) -> None:
        import psutil

        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peaks = dict.fromkeys(pids, 0)
        self.peak_sum = self.peak_pss_sum = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def add(self, name: str, pid: int) -> None:
        import psutil

        self.procs[name] = psutil.Process(pid)
        self.peaks[name] = 0

    def _memory(self, proc) -> tuple[int, int]:
        """(RSS, PSS) of a process and its children."""
        import psutil

        try:
            info = [p.memory_full_info() for p in [proc, *proc.children(recursive=True)]]
        except psutil.Error:
            return 0, 0
        return sum(i.rss for i in info), sum(i.pss for i in info)

    def _run(self, every: float) -> None:
        while not self._stop.is_set():
            now = {name: self._memory(p) for name, p in list(self.procs.items())}
            for name, (rss, _) in now.items():
                self.peaks[name] = max(self.peaks[name], rss)
            self.peak_sum = max(self.peak_sum, sum(r for r, _ in now.values()))
            self.peak_pss_sum = max(self.peak_pss_sum, sum(p for _, p in now.values()))
            time.sleep(every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_info(run: Path) -> dict:
    """Laps, K, ELBO per item, converged, seconds and --obs auto's race of a finished run."""
    summary = json.loads((run / "summary.json").read_text())
    trace = (run / "trace.csv").read_text().splitlines()
    return {key: summary.get(key) for key in ("K", "K_effective", "laps", "converged",
                                              "elbo_per_item", "obs", "wall_seconds",
                                              "obs_auto")} | {"trace_rows": len(trace) - 1}


def table_row(figures: dict) -> dict:
    """One line of the docs' table: the corpus against the cap, the capped run's memory and
    result, and the subsample's result."""
    a, c, s, mib = figures["args"], figures["capped"], figures["subsample"], 2 ** 20
    race = c.get("obs_auto") or {}
    return {
        "kind": a["kind"], "items": a["rows"], "corpus_gib": figures["disk_bytes"] / 2 ** 30,
        "cap_mib": figures["cap_bytes"] // mib,
        "corpus_over_cap": figures["disk_bytes"] / figures["cap_bytes"],
        "processes": (f"scheduler + {a['workers']} worker(s) x {a['threads']} threads + driver"
                      if a["workers"] else "bnpmix fit on its own threads"),
        "peak_rss_sum_mib": c["peak_rss_sum"] / mib,
        "peak_pss_sum_mib": c["peak_pss_sum"] / mib,
        "oom_kills": c["oom_kills"], "obs": c["obs"], "laps": c["laps"],
        "converged": c["converged"], "K": c["K"], "K_effective": c["K_effective"],
        "elbo_per_item": c["elbo_per_item"], "minutes": c["seconds"] / 60,
        "race_minutes": race.get("seconds", 0) / 60,
        "subsample_items": a["subsample_rows"], "subsample_K": s["K"],
        "subsample_elbo_per_item": s["elbo_per_item"],
        "elbo_gap": c["elbo_per_item"] - s["elbo_per_item"]}


def write_json(path: Path, figures: dict) -> None:
    """Keep one run per kind in ``path`` (``runs``), this one replacing its kind's."""
    runs = json.loads(path.read_text())["runs"] if path.exists() else []
    runs = [r for r in runs if r["args"]["kind"] != figures["args"]["kind"]]
    runs.append(figures | {"row": table_row(figures)})
    path.write_text(json.dumps({"runs": sorted(runs, key=lambda r: r["args"]["kind"])},
                               indent=1, default=str) + "\n")


def fit(corpus: Path, run: Path, *args: str, preexec_fn=None) -> tuple[subprocess.Popen, float]:
    start = time.time()
    proc = subprocess.Popen([str(BIN / "bnpmix"), "fit", str(corpus), "--out", str(run), *args],
                            env=ENV, preexec_fn=preexec_fn, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return proc, start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=["dense", "text"], default="dense")
    ap.add_argument("--rows", type=int, default=None,
                    help="items (default: dense 31,500,000; text 1,000,000 documents)")
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--clusters", type=int, default=12, help="clusters (text: topics)")
    ap.add_argument("--vocab", type=int, default=3000, help="text: vocabulary size")
    ap.add_argument("--words", type=int, default=60, help="text: words per document")
    ap.add_argument("--scales", choices=["per-cluster", "shared"], default="per-cluster",
                    help="dense: each cluster's diagonal scales drawn on its own, or one draw "
                    "for all (then tied-gauss is not misspecified: with per-cluster scales its "
                    "K grows with N, to 370 on 10.6M rows, and --obs auto's race pays for it)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cap-mib", type=int, default=1536)
    ap.add_argument("--ratio", type=float, default=5.0,
                    help="the least corpus size on disk over the cap")
    ap.add_argument("--workers", type=int, default=2,
                    help="Dask workers (0: the plain command on its own threads, no cluster)")
    ap.add_argument("--threads", type=int, default=1, help="threads per worker")
    ap.add_argument("--worker-memory", default="0",
                    help="each worker's --memory-limit (default 0: none, so Dask never pauses "
                    "it; bnpmix then sizes the worker's budgets from the cgroup's cap)")
    ap.add_argument("--worker-allocators", choices=sorted(WORKER_ALLOCATORS), default="on",
                    help="start workers with one malloc arena and Arrow on it (on), or with "
                         "the environment as it is (off)")
    ap.add_argument("--subsample-rows", type=int, default=1_000_000)
    ap.add_argument("--json", nargs="?", const=str(RESULTS / "out_of_core.json"),
                    help="write the figures (alone: benchmarks/results/out_of_core.json)")
    args = ap.parse_args()
    # SIGTERM as an exit, so that the cluster, the driver and the cgroup are ended and removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    text = args.kind == "text"
    if args.rows is None:
        args.rows = 1_000_000 if text else 31_500_000
    corpus = WORK / "corpus"
    t0 = time.time()
    if text:
        write_bow(corpus, args.rows, args.vocab, args.clusters, args.words, args.seed)
    else:
        source = WORK / "x.npy"
        write_npy(source, args.rows, args.dim, args.clusters, args.seed,
                  args.scales == "shared")
        subprocess.run([str(BIN / "bnpmix"), "ingest", str(source), str(corpus)], check=True,
                       env=ENV, stdout=subprocess.DEVNULL)
        source.unlink()
    disk = sum(f.stat().st_size for f in corpus.iterdir())
    cap = args.cap_mib * 2 ** 20
    shape = f"{args.rows:,} documents over {args.vocab:,} words" if text else (
        f"{args.rows:,} x {args.dim}")
    print(f"corpus: {shape}, {disk / 2**30:.2f} GiB on disk "
          f"({disk / cap:.1f}x the cap of {args.cap_mib} MiB); written and ingested in "
          f"{time.time() - t0:.0f} s", flush=True)
    if disk < args.ratio * cap:
        raise SystemExit(f"the corpus is under {args.ratio}x the cap: raise --rows")

    group = Cgroup(f"bnpmix-ooc-{os.getpid()}", cap)
    cluster = proc = None
    try:
        where: tuple[str, ...] = ()  # --workers 0: the driver's own threads
        sampler = RssSampler({})
        if args.workers:
            cluster = LocalDaskCluster(args.workers, args.threads,
                                       ("--no-nanny", "--memory-limit", args.worker_memory),
                                       group.join, WORKER_ALLOCATORS[args.worker_allocators])
            sampler.add("scheduler", cluster.scheduler.pid)
            for i, w in enumerate(cluster.workers):
                sampler.add(f"worker {i}", w.pid)
            where = ("--scheduler", cluster.address)
        run = WORK / "run-capped"
        proc, start = fit(corpus, run, *where, preexec_fn=group.join)
        sampler.add("driver", proc.pid)
        out, _ = proc.communicate()
        wall = time.time() - start
        sampler.stop()
        print(out[-3000:])
        if proc.returncode != 0:
            raise SystemExit(f"the capped fit failed (exit {proc.returncode}); OOM kills in "
                             f"the group: {group.oom_kills()}")
        capped = run_info(run) | {"seconds": wall, "peak_rss_sum": sampler.peak_sum,
                                  "peak_pss_sum": sampler.peak_pss_sum,
                                  "peak_rss": sampler.peaks, "cgroup_peak": group.peak(),
                                  "oom_kills": group.oom_kills()}
    finally:
        if proc is not None and proc.poll() is None:  # interrupted: end the driver we started
            proc.kill()
            proc.wait()
        if cluster is not None:
            cluster.close()
        group.close()

    subsample(corpus, WORK / "sub", args.subsample_rows, args.seed + 1)
    proc, start = fit(WORK / "sub", WORK / "run-sub")
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the subsample fit failed:\n{out[-2000:]}")
    reference = run_info(WORK / "run-sub") | {"seconds": time.time() - start}

    mib = 2 ** 20
    print(f"capped run ({args.workers} workers, cap {args.cap_mib} MiB): peak summed RSS "
          f"{capped['peak_rss_sum'] / mib:.0f} MiB, of PSS {capped['peak_pss_sum'] / mib:.0f} "
          f"MiB "
          f"({', '.join(f'{k} {v / mib:.0f}' for k, v in capped['peak_rss'].items())}); "
          f"cgroup peak {capped['cgroup_peak'] / mib:.0f} MiB (with page cache); OOM kills "
          f"{capped['oom_kills']}")
    for name, r in (("out of core", capped), ("subsample in memory", reference)):
        per_lap = r["seconds"] / max(r["laps"] or 1, 1)
        print(f"{name:>20}: obs {r['obs']}, K {r['K']} ({r['K_effective']} effective), "
              f"{r['laps']} laps, converged {r['converged']}, ELBO/item "
              f"{r['elbo_per_item']:.4f}, {r['seconds']:.0f} s ({per_lap:.1f} s a lap)")
    under = capped["peak_rss_sum"] < cap
    print(f"ratios: corpus/cap {disk / cap:.2f} (target >= {args.ratio}); peak RSS/cap "
          f"{capped['peak_rss_sum'] / cap:.2f} (target < 1: {under}); ELBO/item out of core "
          f"minus subsample {capped['elbo_per_item'] - reference['elbo_per_item']:+.4f}")
    if args.json:
        write_json(Path(args.json), {"args": vars(args), "disk_bytes": disk, "cap_bytes": cap,
                                     "capped": capped, "subsample": reference})


if __name__ == "__main__":
    main()
