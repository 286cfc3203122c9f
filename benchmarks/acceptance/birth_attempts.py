"""What retrying failed births costs and buys once the model has grown: bnpmix's default fit
(``birth_attempts_grown`` = 1: one fresh VB run a birth once K > 1) against three runs (as many
as a birth tries while K = 1, ``birth_attempts`` = 3), on scikit-learn's iris, wine, breast
cancer and digits, standardised and raw, full and diagonal Gaussians, three seeds: the final
ELBO per item, K and seconds of each, and the difference in ELBO per item (positive: one run
ended higher).

    python benchmarks/acceptance/birth_attempts.py [--seeds 3] [--data
        iris,wine,breast_cancer,digits] [--json [PATH]]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn import datasets

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
import bnpmix
from _common import json_option, write_json


def fit(X: np.ndarray, obs: str, seed: int, grown: int) -> tuple[float, int, float]:
    t = time.perf_counter()
    est = bnpmix.BayesianMixture(random_state=seed, obs=obs, birth_attempts_grown=grown).fit(X)
    return est.lower_bound_ / len(X), est.n_components_, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--data", default="iris,wine,breast_cancer,digits")
    json_option(ap, "birth_attempts")
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # scikit-learn-style ConvergenceWarnings of small fits
    diffs, seconds, rows = [], {1: 0.0, 3: 0.0}, []
    print(f"{'data':<14} {'scale':<4} {'obs':<10} seed | one run: K ELBO/item s | "
          "three runs: K ELBO/item s | ELBO/item, one - three")
    for name in args.data.split(","):
        X, _ = getattr(datasets, f"load_{name}")(return_X_y=True)
        sd = X.std(axis=0)
        for scale, data in (("std", (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)),
                            ("raw", X.astype(float))):
            for obs in ("gauss", "diag-gauss"):
                for seed in range(args.seeds):
                    one, three = fit(data, obs, seed, 1), fit(data, obs, seed, 3)
                    diffs.append(one[0] - three[0])
                    seconds[1] += one[2]
                    seconds[3] += three[2]
                    rows.append({"data": name, "scale": scale, "obs": obs, "seed": seed,
                                 **{f"{k}_{n}": v for n, r in (("one", one), ("three", three))
                                    for k, v in zip(("elbo_per_item", "K", "seconds"), r,
                                                    strict=True)}})
                    print(f"{name:<14} {scale:<4} {obs:<10} {seed:>4} | {one[1]:>3} "
                          f"{one[0]:>9.3f} {one[2]:>5.1f} | {three[1]:>3} {three[0]:>9.3f} "
                          f"{three[2]:>5.1f} | {diffs[-1]:+.3f}", flush=True)
    d = np.array(diffs)
    print(f"\n{len(d)} fits each: one run higher in {(d > 1e-3).sum()}, lower in "
          f"{(d < -1e-3).sum()}, within 1e-3 in {(abs(d) <= 1e-3).sum()}; ELBO/item difference "
          f"mean {d.mean():+.3f}, median {np.median(d):+.3f}; seconds in all {seconds[1]:.1f} "
          f"(one run) against {seconds[3]:.1f} (three)")
    write_json(args.json, {"args": vars(args), "fits": rows, "seconds": seconds})
    return 0


if __name__ == "__main__":
    sys.exit(main())
