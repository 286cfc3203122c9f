"""The default fit with the observation prior learned from the components (empirical Bayes, the
default) against the fixed default prior (learn_prior = false), per data set and seed.

Data: scikit-learn's wine, iris, breast cancer and digits (standardised, 80/20 split per seed, as
benchmarks/real_data.py splits them) and right_k.py's blobs4, patches8 and scales6 (drawn once,
80/20 split per seed). For each setting: K, the ARI of the test items' clusters against their
labels, the held-out posterior predictive log-likelihood per test item, and the learned prior's
figures (summary.json's ``prior``).

    python benchmarks/learned_prior.py [--seeds 3] [--sets wine,iris,...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from real_data import bnpmix_fit, split
from right_k import PROBLEMS

from bnpmix.algorithms.metrics import adjusted_rand_index

REAL = ("wine", "iris", "breast_cancer", "digits")
SYNTHETIC = ("blobs4", "patches8", "scales6")


def synthetic_split(name: str, seed: int):
    """right_k's problem ``name`` (one draw), 80/20 split by the seed."""
    X, y = PROBLEMS[name][1]()
    X = np.asarray(X, float)
    order = np.random.default_rng(seed).permutation(len(X))
    cut = int(0.8 * len(X))
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]


def one(name: str, seed: int, learn: bool) -> dict:
    Xtr, _, Xte, yte = (split if name in REAL else synthetic_split)(name, seed)
    summary, model = bnpmix_fit(Xtr, name, seed, learn_prior=learn)
    return {"seed": seed, "learn": learn, "K": summary["K"],
            "ari": adjusted_rand_index(yte, model.predict(Xte)),
            "heldout": float(model.score(Xte)), "laps": summary["laps"],
            "prior": summary.get("prior", {}).get("final")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sets", default=",".join(REAL + SYNTHETIC))
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    out = {}
    for name in args.sets.split(","):
        rows = [one(name, seed, learn) for seed in range(args.seeds) for learn in (False, True)]
        out[name] = rows
        print(f"\n{name}: seed  fixed prior: K  ARI  held-out | learned prior: K  ARI  held-out"
              "  (kappa0, nu0 or a0 range, scale)")
        for seed in range(args.seeds):
            f, e = (next(r for r in rows if r["seed"] == seed and r["learn"] is v)
                    for v in (False, True))
            p = e["prior"] or {}
            shape = (f"nu0 {p['nu0']:.4g}" if "nu0" in p
                     else f"a0 {p.get('a0_min', 0):.3g}..{p.get('a0_max', 0):.3g}")
            print(f"  {seed:>4}  {f['K']:>15} {f['ari']:.3f} {f['heldout']:>9.3f} |"
                  f" {e['K']:>17} {e['ari']:.3f} {e['heldout']:>9.3f}  (kappa0 "
                  f"{p.get('kappa0', float('nan')):.3g}, {shape}, scale {p.get('scale', 0):.3g})",
                  flush=True)
        for learn in (False, True):
            sel = [r for r in rows if r["learn"] is learn]
            mean = {k: np.mean([r[k] for r in sel]) for k in ("K", "ari", "heldout")}
            print(f"  mean {'learned' if learn else 'fixed  '}: K {mean['K']:.1f}  ARI "
                  f"{mean['ari']:.3f}  held-out {mean['heldout']:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
