"""Speed of the temporal DP mixture's Gibbs sampler (``bnpmix.algorithms.tdpm.gibbs``) on this
machine, on data from ``bnpmix.datasets.tdpm_gaussian`` with the Sec. 7 hyperparameters
(α = 2.5, W = 1, λ = 0.8, σ = 10, ρ = 0.1, Σ = 0.1 I, D = 2) and the sampler at the true ones.

sizes: 3,000 items (30 epochs x 100) and 30,000 items in two shapes (30 x 1000 and 300 x 100):
the first sweep (sequential seating) timed alone, then --sweeps further sweeps, each timed:
seconds a sweep (mean and best), sweeps a second, microseconds per item per sweep.
window: the cost per sweep against W in --windows (1, 2, 4) on 30 x 100 items, the sampler's
W (λ = 0.8) on (a) the same data (drawn at W = 1) and (b) data drawn at that W: seconds per
sweep per item and its ratio to W = 1 (the paper, Sec. 6: one sweep is O(n W)), with the mean
number of places an item's conditional scores (counted in one more, untimed sweep) and the mean
number of alive chains per epoch.

Prints tables; writes JSON (--json, default benchmarks/results/tdpm_speed.json).

    python benchmarks/speed/tdpm_speed.py [--sweeps 3] [--windows 1 2 4] [--seed 0] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from bnpmix.algorithms.tdpm import item_step
from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.emission import GaussianEmission
from bnpmix.algorithms.tdpm.gibbs import ChainSampler, RCRPPrior, alive_per_epoch
from bnpmix.datasets import tdpm_gaussian

RESULTS = Path(__file__).resolve().parents[1] / "results"
HYPER = {"alpha": 2.5, "window": 1, "decay": 0.8, "birth_var": 10.0, "drift_var": 0.1,
         "noise_var": 0.1}


def places_in_sweep(s: ChainSampler, rng: np.random.Generator) -> int:
    """The places every item's conditional scores in one (untimed) sweep: item_step's
    conditional counted while the sweep runs."""
    scored = item_step.conditional
    places = 0

    def counting(*args):
        nonlocal places
        options = scored(*args)
        places += len(options)
        return options

    item_step.conditional = counting
    try:
        s.sweep(rng)
    finally:
        item_step.conditional = scored
    return places


def timed(T: int, per: int, data_window: int, window: int, sweeps: int, seed: int,
          count: bool = False) -> dict:
    X, epochs, _, _ = tdpm_gaussian(n_epochs=T, per_epoch=per, **{**HYPER,
                                                                  "window": data_window},
                                    seed=seed)
    s = ChainSampler(epochs, T, GaussianEmission(X, HYPER["noise_var"]),
            RandomWalk(HYPER["birth_var"], HYPER["drift_var"]),
            RCRPPrior(HYPER["alpha"], window, HYPER["decay"]))
    rng = np.random.default_rng(seed + 1)
    t0 = time.perf_counter()
    s.sweep(rng)
    first = time.perf_counter() - t0
    times = []
    for _ in range(sweeps):
        t0 = time.perf_counter()
        s.sweep(rng)
        times.append(time.perf_counter() - t0)
    n = len(X)
    out = {"epochs": T, "per_epoch": per, "items": n, "data_window": data_window,
           "window": window, "first_sweep_s": first, "sweep_s": times,
           "mean_s": float(np.mean(times)), "best_s": float(np.min(times)),
           "sweeps_per_s": float(1 / np.mean(times)),
           "us_per_item": float(np.mean(times) / n * 1e6),
           "chains": len(np.unique(s.z)),
           "alive_per_epoch": float(np.mean(alive_per_epoch(s.z, epochs, T, window)))}
    if count:
        out["places_per_item"] = places_in_sweep(s, rng) / n
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sweeps", type=int, default=3, help="timed sweeps after the first")
    p.add_argument("--windows", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=RESULTS / "tdpm_speed.json")
    args = p.parse_args()
    wall = time.perf_counter()
    print(f"seed {args.seed} (data), {args.seed + 1} (sampler); {args.sweeps} timed sweeps "
          "after the first", flush=True)

    sizes = []
    for T, per in [(30, 100), (30, 1000), (300, 100)]:
        r = timed(T, per, 1, 1, args.sweeps, args.seed)
        sizes.append(r)
        print(f"  {T} x {per}: first {r['first_sweep_s']:.2f} s, then {r['mean_s']:.2f} s a "
              f"sweep", flush=True)
    print("\nsizes (W = 1)")
    print(f"{'items':>8}{'shape':>12}{'first s':>9}{'s/sweep':>9}{'best':>8}{'sweeps/s':>10}"
          f"{'us/item':>9}{'chains':>8}{'alive/ep':>9}")
    for r in sizes:
        print(f"{r['items']:>8}{r['epochs']:>6} x {r['per_epoch']:<4}{r['first_sweep_s']:>9.2f}"
              f"{r['mean_s']:>9.2f}{r['best_s']:>8.2f}{r['sweeps_per_s']:>10.3f}"
              f"{r['us_per_item']:>9.0f}{r['chains']:>8}{r['alive_per_epoch']:>9.1f}")

    windows = {"same_data": [], "data_at_w": []}
    for key, matched in [("same_data", False), ("data_at_w", True)]:
        for W in args.windows:
            r = timed(30, 100, W if matched else 1, W, args.sweeps, args.seed, count=True)
            windows[key].append(r)
            print(f"  {key} W = {W}: {r['mean_s']:.2f} s a sweep", flush=True)
    for key, rows in windows.items():
        base = rows[0]["us_per_item"]
        title = ("the same 30 x 100 data (drawn at W = 1)" if key == "same_data"
                 else "30 x 100 data drawn at the sampler's W")
        print(f"\ncost against the sampler's W, {title}")
        print(f"{'W':>3}{'s/sweep':>9}{'best':>8}{'us/item':>9}{'ratio':>7}{'ratio/W':>8}"
              f"{'places/item':>12}{'alive/ep':>9}{'chains':>8}")
        for r in rows:
            r["ratio"] = r["us_per_item"] / base
            print(f"{r['window']:>3}{r['mean_s']:>9.2f}{r['best_s']:>8.2f}"
                  f"{r['us_per_item']:>9.0f}{r['ratio']:>7.2f}{r['ratio'] / r['window']:>8.2f}"
                  f"{r['places_per_item']:>12.1f}{r['alive_per_epoch']:>9.1f}{r['chains']:>8}")

    result = {"settings": {**HYPER, "dim": 2, "seed": args.seed, "sweeps": args.sweeps,
                           "windows": args.windows},
              "machine": {"python": platform.python_version(), "numpy": np.__version__,
                          "processor": platform.processor() or platform.machine()},
              "sizes": sizes, "windows": windows, "wall_seconds": time.perf_counter() - wall}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print(f"\nwrote {args.json}; wall {result['wall_seconds']:.0f} s")


if __name__ == "__main__":
    main()
