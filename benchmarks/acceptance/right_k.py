"""Does `bnpmix fit CORPUS --out RUN`, with no other option, find the right number of clusters?

Well-specified synthetic problems generated in code, each fitted with the plain defaults over
several seeds (the seed is the only option set):
- blobs4: 12,000 points from 4 unit-variance 2-D Gaussians at (0,0), (8,0), (0,8), (8,8);
- gauss16: 16 full-covariance Gaussians in 25-D, 4 of them overlapping, N = 100,000;
- patches8: 8 zero-mean 5x5 edge patches (Hughes & Sudderth Sec. 4.1), N = 20,000;
- topics20: 20 multinomial topics, 20,000 documents, V = 2,000;
- scales6: 6 diagonal Gaussians in 6-D whose dimensions span scales 0.01 to 100 (means at
  distinct sign patterns ±4 scales, standard deviations 0.5 to 1 scale), N = 30,000.
For each: K found per seed (pass: the true K in at least 9 of 10 seeds), the ELBO per item
against that of full VB started from the true labels (pass: no lower than it minus 1e-3), the
laps until the run stopped, and the wall time per fit. Figures go to stdout and, with --json,
to a file (--json alone: benchmarks/results/right_k.json).

    python benchmarks/acceptance/right_k.py [--seeds 10] [--problems blobs4,gauss16,...] [--json
        [PATH]]
                                 [--set birth_tol=1e-4 ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK, converge, corpus_of, json_option
from bnpmix.algorithms.vb.local import summarize
from bnpmix.datasets import bag_of_words_topics, gaussian_clusters, toy_patches
from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import fit, job_config


def blobs4(seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, 12_000)
    return np.array([[0, 0], [8, 0], [0, 8], [8, 8]], float)[y] + rng.normal(size=(12_000, 2)), y


def scales6(seed: int = 0):
    rng = np.random.default_rng(seed)
    scale = np.logspace(-2, 2, 6)  # per dimension
    signs = np.array([[(k >> d) & 1 for d in range(6)] for k in (3, 12, 48, 21, 42, 63)]) * 2 - 1
    means = 4.0 * signs * scale  # distinct sign patterns: any two differ by 8 scales somewhere
    sd = rng.uniform(0.5, 1.0, (6, 6)) * scale
    y = rng.integers(0, 6, 30_000)
    return means[y] + sd[y] * rng.normal(size=(30_000, 6)), y


PROBLEMS = {
    "blobs4": (4, blobs4),
    "gauss16": (16, lambda: gaussian_clusters(n=100_000, D=25, separated=12, overlapping=4)),
    "patches8": (8, lambda: toy_patches(n=20_000, seed=0)),
    "topics20": (20, lambda: bag_of_words_topics(20_000, V=2_000, K=20, seed=0)[:2]),
    "scales6": (6, scales6),
}


def oracle_elbo(X, labels: np.ndarray, obs, alloc, max_iter: int = 500) -> float:
    """ELBO per item of full VB started from the true labels, under the run's own prior (the
    default prior is scaled to a sample the seed draws, so each seed has its own)."""
    _, y = np.unique(labels, return_inverse=True)
    R = np.eye(y.max() + 1)[y]
    S = summarize(X, obs, R, None, np.arange(R.shape[1]))
    return converge(X, obs, alloc, S, tol=1e-10, max_iter=max_iter)[2] / X.shape[0]


def run_problem(name: str, seeds: int, options: dict | None = None) -> dict:
    true_K, make = PROBLEMS[name]
    X, labels = make()
    corpus = corpus_of(X, labels, 20, name)
    Xf = sp.csr_matrix(X, dtype=float) if sp.issparse(X) else np.asarray(X, float)
    rows = []
    for seed in range(seeds):
        t = time.perf_counter()
        run = WORK / f"{name}-{seed}"
        summary = fit(corpus, run, job_config(seed=seed, **(options or {})))
        seconds = time.perf_counter() - t
        model = load(run).model
        oracle = oracle_elbo(Xf, labels, model.obs, model.alloc)
        rows.append({"seed": seed, "K": summary["K"], "K_effective": summary["K_effective"],
                     "elbo_per_item": summary["elbo_per_item"], "oracle_elbo_per_item": oracle,
                     "gap": summary["elbo_per_item"] - oracle, "laps": summary["laps"],
                     "seconds": seconds, "stopped": summary.get("stopped", "")})
    right = sum(r["K"] == true_K for r in rows)
    return {"problem": name, "true_K": true_K, "n": X.shape[0], "runs": rows,
            "right_K": right, "pass_K": right >= int(np.ceil(0.9 * seeds)),
            "pass_elbo": all(r["gap"] >= -1e-3 for r in rows),
            "worst_elbo_gap": min(r["gap"] for r in rows)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    json_option(ap, "right_k")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an option as in job files, to try a non-default setting")
    args = ap.parse_args()
    options = dict(kv.split("=", 1) for kv in args.set)
    results = []
    ok = True
    for name in args.problems.split(","):
        r = run_problem(name, args.seeds, options)
        results.append(r)
        ks = " ".join(str(x["K"]) for x in r["runs"])
        secs = np.median([x["seconds"] for x in r["runs"]])
        laps = " ".join(str(x["laps"]) for x in r["runs"])
        print(f"{name:<9} true K={r['true_K']:<3} K per seed: {ks}  right {r['right_K']}/"
              f"{args.seeds} {'PASS' if r['pass_K'] else 'FAIL'}; ELBO/item worst - oracle "
              f"{r['worst_elbo_gap']:+.4f} ({'PASS' if r['pass_elbo'] else 'FAIL'}); laps {laps}; "
              f"median {secs:.1f} s per fit",
              flush=True)
        ok = ok and r["pass_K"] and r["pass_elbo"]
    if args.json:
        args.json.write_text(json.dumps({"seeds": args.seeds, "options": options,
                                         "problems": results}, indent=1))
    print("ALL PASS" if ok else "SOME FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
