"""The full-mean Gaussian observation model on N = 200,000, D = 10: 20 well-separated and 5
overlapping clusters (bnpmix.datasets.gaussian_clusters). memo with births and merges from
K = 1; K and ARI against the truth, next to the ARI of the true parameters' own assignments.

    python benchmarks/acceptance/gauss_full.py [--n 200000] [--laps 30] [--seed 0] [--json [PATH]]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import corpus_of, json_option, run_fit, write_json
from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.datasets import gaussian_clusters
from bnpmix.pipeline.fit import job_config


def oracle(X: np.ndarray, labels: np.ndarray, K: int) -> float:
    """ARI of assignment to the true cluster with the highest likelihood (moments from labels)."""
    logp = np.empty((len(X), K))
    for k in range(K):
        Xk = X[labels == k]
        L = np.linalg.cholesky(np.cov(Xk.T))
        Z = np.linalg.solve(L, (X - Xk.mean(0)).T)
        logp[:, k] = -0.5 * (Z**2).sum(0) - np.log(np.diag(L)).sum()
    return adjusted_rand_index(labels, logp.argmax(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--laps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--partitions", type=int, default=100)
    json_option(ap, "gauss_full")
    args = ap.parse_args()
    X, labels = gaussian_clusters(args.n, seed=0)
    corpus = corpus_of(X, labels, args.partitions, "gauss-full")
    best = oracle(X, labels, 25)
    print(f"full-mean Gaussian: N={args.n}, D=10, 25 true clusters (20 separated, 5 overlapping), "
          f"{args.partitions} partitions; ARI of the true parameters: {best:.4f}")
    cfg = job_config(algorithm="memo", obs="gauss", K=1, laps=args.laps, moves=("birth", "merge"),
                    seed=args.seed, birth_per_lap=2)
    r = run_fit(corpus, cfg, "memo-bm")
    print(f"memo + births + merges from K=1, {args.laps} laps, 2 births per lap: K={r['K']} "
          f"(K>1%: {r['K_eff']}), ARI {r['ari']:.4f} (oracle {best:.4f}), NMI {r['nmi']:.4f}, "
          f"{r['seconds']:.1f} s")
    write_json(args.json, {"args": vars(args), "oracle_ari": best,
                           "memo": {k: v for k, v in r.items() if k != "run"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
