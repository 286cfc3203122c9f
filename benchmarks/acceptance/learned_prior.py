"""The default fit with the observation prior learned from the components (empirical Bayes, the
default) against the fixed default prior (learn_prior = false), per data set and seed.

Data: real_data.py's sets, split and prepared as it does (80/20 per seed; iris, wine,
breast_cancer, digits standardised, ...; its corpora: the default partition size unless the set
names its partitions), and right_k.py's problems (drawn once, 80/20 split per seed, 20
partitions as right_k.py ingests them). For each setting: K, the ARI of the test items'
clusters against their labels, the held-out posterior predictive log-likelihood per test item,
the laps, and the learned prior's figures (summary.json's ``prior``).

    python benchmarks/acceptance/learned_prior.py [--seeds 3] [--sets iris,wine,...,blobs4,...]
                                       [--obs diag-gauss] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK
from acceptance.real_data import SETS, split
from acceptance.right_k import PROBLEMS
from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array

DEFAULT_SETS = ("wine", "iris", "breast_cancer", "digits", "blobs4", "patches8", "scales6")
SYNTHETIC_PARTITIONS = 20  # right_k.py's


def synthetic_split(name: str, seed: int):
    """right_k's problem ``name`` (one draw), 80/20 split by the seed."""
    X, y = PROBLEMS[name][1]()
    X = np.asarray(X, float)
    order = np.random.default_rng(seed).permutation(len(X))
    cut = int(0.8 * len(X))
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]


def corpus(name: str, seed: int, Xtr: np.ndarray):
    out = WORK / f"lp-{name}-{seed}"
    if not out.exists():
        parts = SETS[name].partitions if name in SETS else SYNTHETIC_PARTITIONS
        ingest_array(Xtr, out, partition_rows=parts and -(-len(Xtr) // parts))
    return out


def one(name: str, seed: int, learn: bool, obs: str | None) -> dict:
    Xtr, _, Xte, yte = (split if name in SETS else synthetic_split)(name, seed)
    options = {"learn_prior": learn, **({"obs": obs} if obs else {})}
    out = WORK / f"lp-run-{name}-{seed}-{learn}-{obs}"
    summary = fit(corpus(name, seed, Xtr), out, job_config(seed=seed, **options))
    model = load(out)
    return {"seed": seed, "learn": learn, "K": summary["K"],
            "ari": None if yte is None else adjusted_rand_index(yte, model.predict(Xte)),
            "heldout": float(model.score(Xte)), "laps": summary["laps"],
            "prior": summary.get("prior", {}).get("final")}


def fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sets", default=",".join(DEFAULT_SETS))
    ap.add_argument("--obs", help="the observation model (default: gauss, as `bnpmix fit`)")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    out = {}
    for name in args.sets.split(","):
        rows = [one(name, seed, learn, args.obs) for seed in range(args.seeds)
                for learn in (False, True)]
        out[name] = rows
        print(f"\n{name}: seed  fixed prior: K  ARI  held-out | learned prior: K  ARI  held-out"
              "  (kappa0, nu0 or a0 range, scale)")
        for seed in range(args.seeds):
            f, e = (next(r for r in rows if r["seed"] == seed and r["learn"] is v)
                    for v in (False, True))
            p = e["prior"] or {}
            shape = (f"nu0 {p['nu0']:.4g}" if "nu0" in p
                     else f"a0 {p.get('a0_min', 0):.3g}..{p.get('a0_max', 0):.3g}")
            print(f"  {seed:>4}  {f['K']:>15} {fmt(f['ari'])} {f['heldout']:>9.3f} |"
                  f" {e['K']:>17} {fmt(e['ari'])} {e['heldout']:>9.3f}  (kappa0 "
                  f"{p.get('kappa0', float('nan')):.3g}, {shape}, scale {p.get('scale', 0):.3g})",
                  flush=True)
        for learn in (False, True):
            sel = [r for r in rows if r["learn"] is learn]
            mean = {k: np.mean([r[k] for r in sel]) if sel[0][k] is not None else None
                    for k in ("K", "ari", "heldout", "laps")}
            print(f"  mean {'learned' if learn else 'fixed  '}: K {mean['K']:.1f}  ARI "
                  f"{fmt(mean['ari'])}  held-out {mean['heldout']:.3f}  laps {mean['laps']:.1f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
