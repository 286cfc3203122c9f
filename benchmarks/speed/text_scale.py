"""Text at corpus scale: bag-of-words memo on a Dask cluster, then one PubMed-shaped visit,
measured in one run on this machine.

Part 1, NYT-shaped: 266,000 documents over V = 7,841 words from 100 topics (one topic per
document, topics θ_k ~ Dir(0.05) over a Zipfian base measure, lengths log-normal around 230
words), in 100 partitions, plus 10,000 held-out documents. A `dask scheduler` and two
single-threaded `dask worker` processes on 127.0.0.1; `bnpmix fit` with the default settings
(memo from its one-pass start, births, merges and deletes, W = 4, no waves ahead) in its own
process, and vb at the true K = 100 for reference. Printed: K, held-out log-likelihood per
document (`bnpmix evaluate --heldout`), laps, seconds per lap, documents per second, and the
peak RSS of the driver and of each worker (psutil, every 0.2 s). Target: driver ≤ 1 GiB.

Part 2, PubMed-shaped (V = 141,043, K = 500; 10,000 documents of about 90 words): the visit a
driver and a worker make in a run's second lap. Printed: the batch summary's bytes against a
dense K × V summary (target ≤ 5 %), the bytes shipped per task (E[log θ] on the wave's words,
pickled as Dask sends it, shared by the wave's W tasks), the worker's local step, and the
driver's seconds per visit (S^0 − old + new in place, the global update on the batch's words,
the ELBO, the next wave's globals; target ≤ 0.1 s). Then a projection of one PubMed lap (8.2M
documents: 820 such batches) on 2 and on 100 cores from these figures.

    python benchmarks/speed/text_scale.py [--docs 266000] [--skip-nyt] [--skip-pubmed] [--json
        [PATH]]

--json writes the printed figures to PATH (alone: benchmarks/results/text_scale.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK, LocalDaskCluster, corpus_of, json_option

BNPMIX = [sys.executable, "-m", "bnpmix"]
GIB = 1 << 30


def topic_documents(n: int, V: int, K: int, mean_len: float, seed: int
                    ) -> tuple[sp.csr_matrix, np.ndarray]:
    """n documents, each from one of K topics θ_k ~ Dir(0.05 · V · base) with a Zipfian base
    measure (word frequencies fall as 1/rank), lengths log-normal with the given mean."""
    rng = np.random.default_rng(seed)
    base = 1.0 / np.arange(1, V + 1)
    base = rng.permutation(base / base.sum())
    topics = rng.dirichlet(0.05 * V * base, size=K)
    labels = rng.integers(0, K, n)
    lengths = np.maximum(5, rng.lognormal(np.log(mean_len) - 0.125, 0.5, n)).astype(np.int64)
    cdf = np.cumsum(topics, axis=1)
    cdf[:, -1] = 1.0
    rows, cols = [], []
    for k in range(K):  # each topic's tokens at once: searchsorted on its cumulative sums
        docs = np.flatnonzero(labels == k)
        tokens = np.searchsorted(cdf[k], rng.random(int(lengths[docs].sum())), side="right")
        rows.append(np.repeat(docs, lengths[docs]))
        cols.append(tokens)
    X = sp.csr_matrix((np.ones(sum(len(r) for r in rows)),
                       (np.concatenate(rows), np.concatenate(cols))), shape=(n, V))
    X.sum_duplicates()
    return X, labels


class PeakRSS:
    """The largest resident set of each watched process with its descendants (a `dask worker`
    runs its worker in a child process under a nanny), sampled every 0.2 s."""

    def __init__(self, pids: dict[str, int]) -> None:
        import psutil

        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peak = dict.fromkeys(pids, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, p in self.procs.items():
                with contextlib.suppress(Exception):  # an ended process: its peak stands
                    rss = p.memory_info().rss + sum(c.memory_info().rss
                                                    for c in p.children(recursive=True))
                    self.peak[name] = max(self.peak[name], rss)
            time.sleep(0.2)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        return self.peak


def cli_fit(corpus: Path, out: Path, cluster: LocalDaskCluster, *flags: str) -> dict:
    """`bnpmix fit` in its own process on the cluster: wall seconds, peak RSS, summary."""
    t = time.perf_counter()
    proc = subprocess.Popen([*BNPMIX, "fit", str(corpus), "--out", str(out), "--scheduler",
                             cluster.address, *flags], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    rss = PeakRSS({"driver": proc.pid, **{f"worker {i}": w.pid
                                          for i, w in enumerate(cluster.workers)}})
    _, err = proc.communicate()
    peaks = rss.stop()
    if proc.returncode:
        raise SystemExit(f"bnpmix fit failed: {err}")
    summary = json.loads((out / "summary.json").read_text())
    return {"seconds": time.perf_counter() - t, "rss": peaks, "summary": summary}


def heldout(run: Path, test: Path) -> float:
    """Held-out log-likelihood per document (the token sequence's, as the ELBO's)."""
    from bnpmix.pipeline.evaluate import evaluate

    return float(evaluate(run, test)["heldout_loglik_per_item"])


def lap_seconds(run: Path) -> tuple[int, float]:
    """Laps and the median seconds per lap from trace.csv (lap ends: integer lap values)."""
    import pandas as pd

    trace = pd.read_csv(run / "trace.csv")
    ends = trace.groupby(np.ceil(trace["lap"] - 1e-9))["seconds"].max().to_numpy()
    return len(ends), float(np.median(np.diff(np.r_[0.0, ends])))


def nyt(args: argparse.Namespace) -> dict:
    n, V, K = args.docs, 7_841, 100
    t = time.perf_counter()
    X, labels = topic_documents(n + 10_000, V, K, 230.0, seed=0)
    train = corpus_of(X[:n], labels[:n], 100, "nyt")
    test = corpus_of(X[n:], labels[n:], 4, "nyt-test")
    print(f"NYT-shaped: {n:,} documents (+10,000 held out), V={V:,}, {K} topics, "
          f"{X[:n].nnz:,} non-zeros, 100 partitions; made in {time.perf_counter() - t:.0f} s")
    cluster = LocalDaskCluster(2)
    try:
        runs = {"memo (defaults)": cli_fit(train, WORK / "nyt-memo", cluster),
                "vb at K=100": cli_fit(train, WORK / "nyt-vb", cluster, "--algorithm", "vb",
                                       "--K", "100")}
    finally:
        cluster.close()
    out = {}
    for name, r in runs.items():
        run = WORK / ("nyt-memo" if name.startswith("memo") else "nyt-vb")
        laps, per_lap = lap_seconds(run)
        s = r["summary"]
        score = heldout(run, test)
        rss = ", ".join(f"{k} {v / GIB:.2f} GiB" for k, v in r["rss"].items())
        print(f"  {name:16s} K={s['K']:4d}  held-out {score:9.2f} per doc  "
              f"{laps} laps, {per_lap:.2f} s/lap, {n / per_lap:,.0f} docs/s, "
              f"{r['seconds']:.0f} s in all; {s['stopped']}")
        print(f"  {'':16s} peak RSS: {rss}; driver target <= 1 GiB: "
              f"{'PASS' if r['rss']['driver'] <= GIB else 'FAIL'}")
        out[name] = {"K": s["K"], "heldout": score, "laps": laps, "seconds_per_lap": per_lap,
                     "seconds": r["seconds"], "stopped": s["stopped"],
                     "peak_rss_gib": {k: v / GIB for k, v in r["rss"].items()}}
    return {"docs": n, "V": V, "topics": K, "fits": out}


def pubmed(args: argparse.Namespace) -> dict:
    from bnpmix.algorithms.alloc import StickBreaking
    from bnpmix.algorithms.mixture import Mixture
    from bnpmix.algorithms.obs.mult import Mult
    from bnpmix.algorithms.summary import Summary
    from bnpmix.algorithms.vb.local import batch_step

    V, K, n = 141_043, 500, 10_000
    # 500 topics; S^0 of a corpus already visited: each component the counts of 100 of its
    # documents scaled to the 8.2M documents' share (16,400 each)
    X, labels = topic_documents(50_000 + n, V, K, 90.0, seed=1)
    X, seen, labels = X[:n], X[n:], labels[n:]
    obs, alloc = Mult(V, 0.1), StickBreaking(1.0)
    onehot = sp.csr_matrix((np.full(len(labels), 164.0), (labels, np.arange(len(labels)))),
                           shape=(K, len(labels)))
    S0 = Summary(np.arange(K), np.asarray(onehot.sum(1)).ravel(),
                 {"wc": (onehot @ seen).toarray()}, np.zeros(K))
    model = Mixture.from_summary(obs, alloc, S0)
    model_is_S0 = True
    cols = obs.batch_columns(X)
    g = model.globals(cols)
    t = time.perf_counter()
    res = batch_step(X, obs, g)
    worker = time.perf_counter() - t
    new = res.summary
    old = new.scaled(0.9)  # the batch's summary from the previous lap (the same pattern)
    S0.add_in_place(old)
    model = Mixture.from_summary(obs, alloc, S0)

    def driver_visit() -> tuple[float, float]:
        """One visit's driver work: Eq. 11 in place, the global update on the changed entries,
        the ELBO; and, apart, the next wave's shipped globals (per wave, not per visit)."""
        nonlocal model
        t = time.perf_counter()
        S0.add_in_place(old, -1.0)
        S0.add_in_place(new)
        changed = (new.changed_pattern() + old.changed_pattern()).sign()
        model = model.updated(S0, changed)
        model.elbo(S0, at_optimum=model_is_S0)
        visit = time.perf_counter() - t
        t = time.perf_counter()
        model.globals(cols)  # the next wave's (another batch of the same shape)
        wave = time.perf_counter() - t
        S0.add_in_place(new, -1.0)  # back, for the next repeat
        S0.add_in_place(old)
        return visit, wave

    times = np.array([driver_visit() for _ in range(5)])
    driver, per_wave = float(np.median(times[:, 0])), float(np.median(times[:, 1]))
    dense_bytes = K * V * 8
    summary_bytes = new.nbytes
    shipped = len(pickle.dumps(model.globals(cols), protocol=5))
    full_bytes = len(pickle.dumps(model.globals(), protocol=5))
    print(f"\nPubMed-shaped visit: {n:,} documents, V={V:,}, K={K}, "
          f"{len(cols):,} distinct words ({len(cols) / V:.1%} of V), {X.nnz:,} non-zeros")
    print(f"  batch summary: {summary_bytes / 1e6:.1f} MB vs dense {dense_bytes / 1e6:.0f} MB "
          f"= {summary_bytes / dense_bytes:.2%} (target <= 5%: "
          f"{'PASS' if summary_bytes <= 0.05 * dense_bytes else 'FAIL'})")
    print(f"  shipped per task (W = 1): {shipped / 1e6:.1f} MB of E[log θ] on the batch's "
          f"words, vs {full_bytes / 1e6:.0f} MB for the whole E[log θ]; a wave of W batches "
          "ships the union of their words once")
    print(f"  worker local step: {worker:.2f} s;  driver per visit: {driver:.3f} s "
          f"(target <= 0.1 s: {'PASS' if driver <= 0.1 else 'FAIL'}); building a wave's "
          f"shipped E[log θ]: {per_wave:.3f} s per wave")
    batches = 820  # 8.2M documents in batches of 10,000
    two = batches * (worker / 2 + driver + per_wave / 2)  # W = 2: both cores; driver shares
    hundred = batches / 100 * max(worker, 100 * driver + per_wave)  # W = 100, ahead 1
    print(f"  projected PubMed lap ({batches} batches): 2 cores {two / 60:.0f} min "
          f"(= {batches} x (worker/2 + driver + wave/2)); 100 cores {hundred / 60:.1f} min "
          f"(= {batches}/100 waves x max(worker, 100 x driver + wave): the driver applies a wave "
          "while the next computes), before network transfer")
    return {"docs": n, "V": V, "K": K, "summary_bytes": summary_bytes, "dense_bytes": dense_bytes,
            "shipped_bytes": shipped, "worker_seconds": worker, "driver_seconds": driver,
            "wave_seconds": per_wave, "projected_lap_minutes": {"2 cores": two / 60,
                                                                "100 cores": hundred / 60}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=266_000)
    ap.add_argument("--skip-nyt", action="store_true")
    ap.add_argument("--skip-pubmed", action="store_true")
    json_option(ap, "text_scale")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"load average {load:.2f} on {os.cpu_count()} cores")
    figures = {"load_average": load, "cores": os.cpu_count()}
    if not args.skip_nyt:
        figures["nyt"] = nyt(args)
    if not args.skip_pubmed:
        figures["pubmed"] = pubmed(args)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
