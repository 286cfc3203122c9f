"""Membership stability (Ahmed & Xing 2008, Sec. 9.2; ``algorithms/tdpm/persistence.py``): is
each id's probability of staying recovered, are the stays found, and what does it cost?

Data: ``bnpmix.datasets.tdpm_persistent``: the Sec. 7 chains (α = 2.5, W = 1, λ = 0.8, σ = 10,
ρ = 0.1, Σ = 0.1 I, D = 2), --epochs epochs of --per-epoch items drawn from --ids persistent
ids whose stickiness ρ_u is drawn uniform on (0, 1) (data seed --data-seed). Two samplers with
the true hyperparameters and the same seed, --burn-in sweeps then --samples kept every --thin:
the plain TDPM (every row its own item) and the TDPM with membership stability (Beta(1, 1)
prior, the engine's default). Reported: correlation (Pearson, Spearman) and mean absolute
error of E[ρ_u | data] (averaged over kept samples) against the true ρ_u, against the same for
the ids' observed stay rate under the truth (the best any method can do from one realisation:
(1 + stays)/(2 + coins), coins counted on the true labels); the stay indicators' mean over kept
samples on the items that truly stayed and on those that did not; GVI / LVI of both samplers
against the true labels; seconds per sweep of both.

    python benchmarks/reproductions/tdpm_persistence.py [--quick] [--ids 120] [--epochs 20]
        [--per-epoch 80]
        [--burn-in 100] [--samples 10] [--thin 10] [--data-seed 0] [--seed 1] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from bnpmix.algorithms.metrics import global_and_local_vi
from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.emission import GaussianEmission
from bnpmix.algorithms.tdpm.gibbs import ChainSampler, RCRPPrior
from bnpmix.algorithms.tdpm.persistence import Persistence
from bnpmix.datasets import tdpm_persistent

RESULTS = Path(__file__).resolve().parents[1] / "results"
HYPER = {"alpha": 2.5, "window": 1, "decay": 0.8, "birth_var": 10.0, "drift_var": 0.1,
         "noise_var": 0.1}


def true_coins(P: Persistence, labels: np.ndarray, epochs: np.ndarray, T: int,
               stays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heads and tails per id on the true labels and stays."""
    s = ChainSampler(epochs, T, GaussianEmission(np.zeros((len(labels), 1)), 1.0),
                     RandomWalk(1.0, 1.0), RCRPPrior(HYPER["alpha"], HYPER["window"],
                                                     HYPER["decay"]), P)
    K = int(labels.max()) + 1
    first = np.array([epochs[labels == k].min() for k in range(K)])
    last = np.array([epochs[labels == k].max() for k in range(K)])
    s.restore({"z": labels, "labels": np.arange(K), "first": first, "last": last,
               "phi": np.zeros((int(np.sum(last - first + 1)), 1)), "stay": stays})
    return s.heads.copy(), s.tails.copy()


def run(X, epochs, T, P: Persistence | None, args, labels) -> dict:
    s = ChainSampler(epochs, T, GaussianEmission(X, HYPER["noise_var"]),
                     RandomWalk(HYPER["birth_var"], HYPER["drift_var"]),
                     RCRPPrior(HYPER["alpha"], HYPER["window"], HYPER["decay"]), P)
    rng = np.random.default_rng(args.seed)
    total = args.burn_in + args.samples * args.thin
    rho, stay, gvi, lvi = [], [], [], []
    start = time.perf_counter()
    for sweep in range(1, total + 1):
        s.sweep(rng)
        if sweep > args.burn_in and (sweep - args.burn_in) % args.thin == 0:
            g, loc = global_and_local_vi(labels, s.canonical(), epochs)
            gvi.append(g)
            lvi.append(loc)
            if P is not None:
                rho.append(P.rho_mean(s.heads, s.tails))
                stay.append(s.y.copy())
    seconds = time.perf_counter() - start
    out = {"seconds_per_sweep": seconds / total, "gvi": float(np.mean(gvi)),
           "lvi": float(np.mean(lvi)), "chains": int(s.active.sum())}
    if P is not None:
        out["rho"], out["stay"] = np.mean(rho, axis=0), np.mean(stay, axis=0)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small smoke run (< 30 s)")
    p.add_argument("--ids", type=int, default=120)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--per-epoch", type=int, default=80)
    p.add_argument("--burn-in", type=int, default=100)
    p.add_argument("--samples", type=int, default=10)
    p.add_argument("--thin", type=int, default=10)
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    if args.quick:
        args.ids, args.epochs, args.per_epoch = 40, 8, 30
        args.burn_in, args.samples, args.thin = 10, 3, 2
    if args.json is None:
        args.json = (Path(tempfile.gettempdir()) / "tdpm_persistence_quick.json" if args.quick
                     else RESULTS / "tdpm_persistence.json")
    wall = time.perf_counter()
    true_rho = np.random.default_rng([args.data_seed, 7]).uniform(size=args.ids)
    X, epochs, labels, _, ids, stays = tdpm_persistent(
        true_rho, n_epochs=args.epochs, per_epoch=args.per_epoch, seed=args.data_seed, **HYPER)
    T = args.epochs
    P = Persistence.from_ids(ids, epochs)
    rho_true = true_rho[np.unique(ids)]
    heads, tails = true_coins(P, labels, epochs, T, stays)
    oracle = P.rho_mean(heads, tails)
    print(f"data: {args.epochs} epochs x {args.per_epoch} items of {args.ids} ids (rho ~ U(0, 1)),"
          f" {len(X)} items, {labels.max() + 1} chains, {stays.sum()} stays, "
          f"{int(heads.sum() + tails.sum())} coins", flush=True)
    plain = run(X, epochs, T, None, args, labels)
    print(f"[plain TDPM] GVI {plain['gvi']:.3f}  LVI {plain['lvi']:.3f}  "
          f"{plain['seconds_per_sweep']:.2f} s/sweep", flush=True)
    sticky = run(X, epochs, T, P, args, labels)
    est = sticky.pop("rho")
    stay_rate = sticky.pop("stay")

    def score(values: np.ndarray) -> dict:
        return {"pearson": float(np.corrcoef(values, rho_true)[0, 1]),
                "spearman": float(spearmanr(values, rho_true).statistic),
                "mae": float(np.mean(np.abs(values - rho_true)))}

    result = {
        "settings": {**vars(args), "json": str(args.json), **HYPER},
        "machine": {"python": platform.python_version(), "numpy": np.__version__},
        "plain": plain,
        "stability": {**sticky, "rho": score(est), "rho_from_true_coins": score(oracle),
                      "stay_rate_on_true_stays": float(stay_rate[stays].mean()),
                      "stay_rate_on_true_moves": float(stay_rate[~stays & (P.prev >= 0)].mean())},
        "overhead": sticky["seconds_per_sweep"] / plain["seconds_per_sweep"],
        "wall_seconds": time.perf_counter() - wall}
    st = result["stability"]
    print(f"[stability] GVI {st['gvi']:.3f}  LVI {st['lvi']:.3f}  "
          f"{st['seconds_per_sweep']:.2f} s/sweep ({result['overhead']:.2f}x the plain sampler)")
    print(f"E[rho_u] vs true rho_u: Pearson {st['rho']['pearson']:.3f}, Spearman "
          f"{st['rho']['spearman']:.3f}, MAE {st['rho']['mae']:.3f}; from the true coins: "
          f"Pearson {st['rho_from_true_coins']['pearson']:.3f}, MAE "
          f"{st['rho_from_true_coins']['mae']:.3f}")
    print(f"stay indicator, mean over samples: {st['stay_rate_on_true_stays']:.3f} on items that "
          f"stayed, {st['stay_rate_on_true_moves']:.3f} on returning items that did not")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.json}; wall {result['wall_seconds']:.0f} s")


if __name__ == "__main__":
    main()
