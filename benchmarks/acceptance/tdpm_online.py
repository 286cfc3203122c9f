"""tdpm's online mode: seconds per new epoch against a full refit, and how the new epochs'
clustering compares.

Data: the Sec. 7 generator (``bnpmix.datasets.tdpm_gaussian``: α = 2.5, W = 1, λ = 0.8, σ = 10,
ρ = 0.1, Σ = 0.1, D = 2), 100 points per epoch. A run is fitted to the first ``--history``
epochs; then, one epoch at a time, the next epoch is appended (a new corpus with the same first
partitions, as ``ingest --append`` makes) and fitted twice: online (warm-started from the
previous run: only the last W epochs and the new one are swept) and from scratch (every epoch).
Both use the same sweeps and the plain defaults otherwise (variances sampled). Printed per new
epoch: seconds of each, and the local VI (the new epoch's VI against the truth) of each.

    python benchmarks/acceptance/tdpm_online.py [--history 20] [--new 3] [--sweeps 60] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bnpmix.algorithms.metrics import global_and_local_vi, variation_of_information
from bnpmix.datasets import tdpm_gaussian
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import RunDir, ingest_array

PER = 100


def corpus_of(X, epoch, epochs: int, path: Path) -> Path:
    keep = epoch < epochs
    ingest_array(X[keep], path, partition_rows=PER,
                 columns={"time": epoch[keep].astype(np.int64)})
    return path


def labels_of(run: Path) -> np.ndarray:
    return RunDir(run).load_assignments().sort_values("item")["cluster"].to_numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--history", type=int, default=20)
    ap.add_argument("--new", type=int, default=3)
    ap.add_argument("--sweeps", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default="benchmarks/results/tdpm_online.json")
    a = ap.parse_args()
    X, E, Z, _ = tdpm_gaussian(n_epochs=a.history + a.new, per_epoch=PER, seed=a.seed)
    work = Path(tempfile.mkdtemp(prefix="tdpm-online-"))
    job = job_config(algorithm="tdpm", sweeps=a.sweeps, burn_in=a.sweeps // 2, thin=5,
                     seed=a.seed)
    try:
        t0 = time.perf_counter()
        prev = work / f"run-{a.history}"
        fit(corpus_of(X, E, a.history, work / f"c{a.history}"), prev, job)
        rows = [{"epochs": a.history, "history_fit_s": time.perf_counter() - t0}]
        print(f"history: {a.history} epochs, {a.history * PER} items, {a.sweeps} sweeps in "
              f"{rows[0]['history_fit_s']:.1f} s")
        print(f"{'epoch':>5} {'online s':>9} {'refit s':>8} {'ratio':>6} "
              f"{'online VI':>10} {'refit VI':>9} {'refit GVI':>9} {'online GVI':>10}")
        for T in range(a.history + 1, a.history + a.new + 1):
            corpus = corpus_of(X, E, T, work / f"c{T}")
            t0 = time.perf_counter()
            fit(corpus, work / f"online-{T}", job.replace(run_warm_start=str(prev)))
            t_online = time.perf_counter() - t0
            t0 = time.perf_counter()
            fit(corpus, work / f"refit-{T}", job)
            t_refit = time.perf_counter() - t0
            keep, new = E < T, E == T - 1
            on, re = labels_of(work / f"online-{T}"), labels_of(work / f"refit-{T}")
            row = {"epochs": T, "online_s": t_online, "refit_s": t_refit,
                   "ratio": t_refit / t_online,
                   "online_new_epoch_vi": variation_of_information(Z[new], on[new[keep]]),
                   "refit_new_epoch_vi": variation_of_information(Z[new], re[new[keep]]),
                   "online_gvi": global_and_local_vi(Z[keep], on, E[keep])[0],
                   "refit_gvi": global_and_local_vi(Z[keep], re, E[keep])[0]}
            rows.append(row)
            print(f"{T - 1:>5} {t_online:>9.1f} {t_refit:>8.1f} {row['ratio']:>6.1f} "
                  f"{row['online_new_epoch_vi']:>10.3f} {row['refit_new_epoch_vi']:>9.3f} "
                  f"{row['refit_gvi']:>9.3f} {row['online_gvi']:>10.3f}")
            prev = work / f"online-{T}"
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"settings": vars(a), "rows": rows}, indent=1))
        print(f"wrote {a.json}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
