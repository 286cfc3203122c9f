"""Which observation model does plain `bnpmix fit CORPUS --out RUN` choose (``--obs auto``) for
sixteen overlapping full-covariance classes in 25-D, and what does the run find?

The data: bnpmix.datasets.overlapping_covariances (N = 25,000 by default, D = 25, K = 16: means
within N(0, 0.6² I) of each other, each class its own random anisotropic covariance; the true
parameters' assignments have ARI 0.998, the true means with only the covariances' diagonals
0.80), ingested with `bnpmix ingest --format npy` (its default partitioning). Then
`bnpmix fit CORPUS --out RUN` with no option, in a subprocess (the installed console script),
timed: the chosen structure, each candidate's bound per item (summary.json's obs_candidates)
and, where the run records the race (obs_auto), its laps, K, seconds and result; K, ARI of the
run's assignments against the classes, converged, laps, wall seconds. With --bgm, scikit-learn's
BayesianGaussianMixture(n_components=25, weight_concentration_prior_type="dirichlet_process",
random_state=0) on the same array: ARI, components used, converged, seconds. Figures go to
stdout and, with --json, to a file (--json alone: benchmarks/results/auto_obs.json).

    python benchmarks/acceptance/auto_obs.py [--n 25000] [--seed 0] [--bgm] [--json [PATH]]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import ENV, WORK, json_option
from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.datasets import overlapping_covariances
from bnpmix.storage import RunDir


def bnpmix_fit(X: np.ndarray, y: np.ndarray) -> dict:
    bnpmix = str(Path(sys.executable).parent / "bnpmix")
    np.save(WORK / "X.npy", X)
    corpus, run = WORK / "corpus", WORK / "run"
    subprocess.run([bnpmix, "ingest", WORK / "X.npy", corpus, "--format", "npy"], check=True,
                   env=ENV, capture_output=True)
    started = time.perf_counter()
    done = subprocess.run([bnpmix, "fit", corpus, "--out", run], env=ENV, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(done.stderr)
    summary = json.loads((run / "summary.json").read_text())
    assigned = RunDir(run).load_assignments().sort_values("item")["cluster"].to_numpy()
    shutil.rmtree(run)
    return {"obs": summary["obs"], "candidates": summary.get("obs_candidates"),
            "race": (summary.get("obs_auto") or {}).get("candidates"), "K": summary["K"],
            "K_effective": summary["K_effective"], "ari": adjusted_rand_index(y, assigned),
            "converged": summary["converged"], "laps": summary["laps"],
            "elbo_per_item": summary["elbo_per_item"], "seconds": seconds,
            "stderr_auto": [s for s in done.stderr.splitlines() if "--obs auto" in s]}


def sklearn_bgm(X: np.ndarray, y: np.ndarray) -> dict:
    from sklearn.mixture import BayesianGaussianMixture

    started = time.perf_counter()
    bgm = BayesianGaussianMixture(n_components=25,
                                  weight_concentration_prior_type="dirichlet_process",
                                  random_state=0).fit(X)
    seconds = time.perf_counter() - started
    pred = bgm.predict(X)
    return {"ari": adjusted_rand_index(y, pred), "K_used": len(np.unique(pred)),
            "converged": bool(bgm.converged_), "n_iter": int(bgm.n_iter_), "seconds": seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=25_000)
    ap.add_argument("--seed", type=int, default=0, help="the data set's seed")
    ap.add_argument("--bgm", action="store_true", help="also scikit-learn's BGM")
    json_option(ap, "auto_obs")
    args = ap.parse_args()
    X, y = overlapping_covariances(args.n, seed=args.seed)
    print(f"overlapping_covariances: N = {args.n}, D = 25, 16 classes (seed {args.seed})")
    ours = bnpmix_fit(X, y)
    for line in ours["stderr_auto"]:
        print("  " + line)
    print(f"bnpmix fit (defaults): obs {ours['obs']}, K = {ours['K']} "
          f"({ours['K_effective']} > 1 %), ARI {ours['ari']:.4f}, converged {ours['converged']} "
          f"after {ours['laps']} laps, ELBO {ours['elbo_per_item']:.4f} per item, "
          f"{ours['seconds']:.1f} s")
    for name, bound in (ours["candidates"] or {}).items():
        race = (ours["race"] or {}).get(name)
        more = (f", {race['laps']} laps, K = {race['K']}, {race['seconds']:.1f} s: "
                f"{race['result']}" if race else "")
        print(f"  {name:<11} {bound:.4f} per item{more}")
    result = {"n": args.n, "seed": args.seed, "bnpmix": ours}
    if args.bgm:
        bgm = sklearn_bgm(X, y)
        result["sklearn_bgm"] = bgm
        print(f"BayesianGaussianMixture(25, dirichlet_process): ARI {bgm['ari']:.4f}, "
              f"{bgm['K_used']} components used, converged {bgm['converged']} after "
              f"{bgm['n_iter']} iterations, {bgm['seconds']:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
