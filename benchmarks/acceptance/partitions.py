"""Does memo's result depend on how the corpus is partitioned? The same rows, ingested as one
partition and as six, fitted with the plain defaults (the seed the only option set): K and the
ELBO per item of each, and whether they agree (same K, ELBO within 1e-3 per item).

Problems:
- breast_cancer: scikit-learn's breast cancer data (569 x 30), each column standardised;
- gauss7: 1,500 items from 7 full-covariance Gaussians in 4-D, two of them overlapping
  (bnpmix.datasets.gaussian_clusters(1500, D=4, separated=5, overlapping=2, seed=0), the data of
  tests/pipeline/engines/test_memo_moves.py's partition test).

    python benchmarks/acceptance/partitions.py [--seeds 5] [--problems breast_cancer,gauss7]
        [--json out]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK
from bnpmix.datasets import gaussian_clusters
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array


def breast_cancer() -> np.ndarray:
    from sklearn.datasets import load_breast_cancer

    X = load_breast_cancer().data
    return (X - X.mean(0)) / X.std(0)


PROBLEMS = {
    "breast_cancer": breast_cancer,
    "gauss7": lambda: gaussian_clusters(n=1500, D=4, separated=5, overlapping=2, seed=0)[0],
}
PARTITIONS = (1, 6)


def run_problem(name: str, seeds: int) -> dict:
    X = PROBLEMS[name]()
    corpora = {}
    for P in PARTITIONS:
        corpora[P] = WORK / f"{name}-{P}"
        ingest_array(X, corpora[P], partition_rows=-(-len(X) // P))
    rows = []
    for seed in range(seeds):
        row = {"seed": seed}
        for P in PARTITIONS:
            t = time.perf_counter()
            s = fit(corpora[P], WORK / f"run-{name}-{P}-{seed}", job_config(seed=seed))
            row[P] = {"K": s["K"], "elbo_per_item": s["elbo_per_item"], "laps": s["laps"],
                      "seconds": time.perf_counter() - t}
        a, b = (row[P] for P in PARTITIONS)
        row["same"] = a["K"] == b["K"] and abs(a["elbo_per_item"] - b["elbo_per_item"]) < 1e-3
        rows.append(row)
    return {"problem": name, "n": len(X), "runs": rows, "same": sum(r["same"] for r in rows)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    results = []
    for name in args.problems.split(","):
        r = run_problem(name, args.seeds)
        results.append(r)
        for row in r["runs"]:
            parts = "  ".join(f"{P} partition{'s' * (P > 1)}: K={row[P]['K']} ELBO/item "
                              f"{row[P]['elbo_per_item']:.4f} ({row[P]['laps']} laps, "
                              f"{row[P]['seconds']:.1f} s)" for P in PARTITIONS)
            print(f"{name:<14} seed {row['seed']}  {parts}  {'same' if row['same'] else 'DIFFER'}",
                  flush=True)
        print(f"{name:<14} the same on {PARTITIONS} partitions in {r['same']}/{args.seeds} seeds",
              flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
