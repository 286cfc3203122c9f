"""The temporal DP mixture's chain moves: how often a short run ends with one cluster
held as two parallel chains, and what a sweep costs on a tiny corpus.

Parallel chains. Data of Ahmed & Xing (2008) Sec. 7 (``bnpmix.datasets.tdpm_gaussian``: 30
epochs x 100 points, α = 2.5, W = 1, λ = 0.8, σ = 10, ρ = Σ = 0.1, D = 2, data seed 0; the
sampler given the true hyperparameters, as ``benchmarks/reproductions/tdpm_sec7.py``). --runs runs
(sampler
seeds 0..) of --sweeps sweeps each from the empty start; a run *ends with a cluster held by two
parallel chains* if its last sample has two chains a ≠ b and a true chain k such that at two
or more epochs both a and b hold items of k and k is the majority of each one's items there.
--data engine-test: the tdpm engine test's corpus instead (8 epochs x 40 points, three
clusters; the engine's default hyperparameters, Σ and ρ learnt). Printed (and in the JSON):
the share of such runs, the number of such pairs per run, GVI and LVI of the last samples,
the accepted split-merge and cut moves by kind, with the moves
(``algorithms/tdpm/splitmerge.py``) and without (--moves off: ``split_merge=False``: item
moves and relinking only). Each pair's profile is in the JSON and summarised: the size of
its smaller chain, and whether the whole merge of the two has an MH ratio above 1 (joint gain
+ the reverse split's log q, anchors the two chains' first items).

--start truth: runs start at the true labels and states instead of the empty start. The data
are drawn from the model the sampler targets, so the truth is an exact draw from the posterior
given them, and so is every later sample of an exact sampler: what these runs show is what the
posterior itself holds, which no correct move can remove. --start both runs from each start;
the docs' Benchmarks page shows the committed results/tdpm_chains.json.

Speed. 21,000 sweeps of the enumeration tests' corpus (``tests/algorithms/test_tdpm_gibbs.py``:
6 items over 2 epochs, 1-D, σ = 4, ρ = 0.3, Σ = 0.5, α = 1, W = 1, λ = 0.8) as 3 chains of 7,000
sweeps in --jobs processes: the wall time, and the CPU seconds (the processes' own time, which a
shared machine inflates less than the wall's).

    python benchmarks/acceptance/tdpm_chains.py [--data sec7] [--runs 40] [--sweeps 12] [--moves
        both]
        [--start empty|truth|both] [--jobs 2] [--skip-parallel] [--skip-speed] [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from bnpmix.algorithms.metrics import global_and_local_vi
from bnpmix.algorithms.tdpm.cuts import sort_items
from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.emission import GaussianEmission
from bnpmix.algorithms.tdpm.gibbs import ChainSampler, RCRPPrior
from bnpmix.algorithms.tdpm.splitmerge import SplitMerge
from bnpmix.datasets import tdpm_gaussian
from bnpmix.pipeline.engines.tdpm import TDPMConfig, hyperparameters
from reproductions.tdpm_sec7 import set_state

RESULTS = Path(__file__).resolve().parents[1] / "results"
SEC7 = {"alpha": 2.5, "window": 1, "decay": 0.8, "birth_var": 10.0, "drift_var": 0.1,
        "noise_var": 0.1}


def parallel_pairs(z: np.ndarray, truth: np.ndarray, epochs: np.ndarray
                   ) -> dict[tuple[int, int, int], int]:
    """The (true chain k, chains a < b) with two or more epochs where both a and b hold items
    of k and k is the majority of each one's items at that epoch, and how many such epochs."""
    shared: dict[tuple[int, int, int], int] = {}
    for t in np.unique(epochs):
        at = epochs == t
        chains, zi = np.unique(z[at], return_inverse=True)
        ks, ki = np.unique(truth[at], return_inverse=True)
        C = np.zeros((len(chains), len(ks)), int)
        np.add.at(C, (zi, ki), 1)
        major = C.sum(1, keepdims=True) <= 2 * C
        for k in range(len(ks)):
            held = np.flatnonzero((C[:, k] > 0) & major[:, k])
            for u, a in enumerate(held):
                for b in held[u + 1:]:
                    key = (int(ks[k]), int(chains[a]), int(chains[b]))
                    shared[key] = shared.get(key, 0) + 1
    return {key: n for key, n in shared.items() if n >= 2}


def pair_profile(s: ChainSampler, truth: np.ndarray) -> list[dict]:
    """Each parallel pair of the sampler's state: the two chains' sizes and spans (larger
    first), the epochs shared, the log joint gain of merging the two whole chains and the log
    probability of the reverse split's allocation (anchors: each chain's first item)."""
    sm = s.splitmerge or SplitMerge(s.model)
    rows = []
    for (k, a, b), shared in parallel_pairs(s.z, truth, s.epochs).items():
        A, B = sm.members(s.state, a), sm.members(s.state, b)
        if len(A) < len(B):
            A, B = B, A
        items = sort_items(s.model, np.concatenate([A, B]))
        gain = logq = None
        if sm.valid(items):
            gain = sm.log_ratio(s.state, items, A, B)
            logq = sm.allocate(s.state, items, int(A[0]), int(B[0]), None, np.isin(items, A))[1]
        rows.append({"true_chain": k, "sizes": [len(A), len(B)],
                     "spans": [[int(s.epochs[A].min()), int(s.epochs[A].max())],
                               [int(s.epochs[B].min()), int(s.epochs[B].max())]],
                     "shared_epochs": shared, "merge_gain": gain, "split_log_q": logq})
    return rows


def engine_test_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tdpm engine test's corpus (``tests/pipeline/engines/test_tdpm_engine.py``): 8 epochs x 40
    points in 2-D, cluster 0 throughout, 1 at epochs 0-3, 2 from epoch 4, noise sd 0.3."""
    rng = np.random.default_rng(seed)
    X, E, Z = [], [], []
    for t in range(8):
        alive = [0, 1] if t < 4 else [0, 2]
        centre = {0: (-5.0 + 0.3 * t, 0.0), 1: (5.0, 0.0 - 0.2 * t), 2: (0.0, 6.0 + 0.2 * t)}
        for i in range(40):
            k = alive[i % 2]
            X.append(np.array(centre[k]) + 0.3 * rng.standard_normal(2))
            E.append(t)
            Z.append(k)
    return np.array(X), np.array(E, np.int64), np.array(Z)


def chain_run(seed: int, sweeps: int, split_merge: bool, data: str, data_seed: int,
              start: str = "empty") -> dict:
    """One run from the empty start (or, Sec. 7 data, the truth). Sec. 7: the true
    hyperparameters; the engine test's data: the engine's defaults (σ the data's variance, Σ
    and ρ drawn each sweep from their inverse-gamma conditionals,
    ``pipeline.engines.tdpm.hyperparameters``)."""
    rng = np.random.default_rng(seed)
    learn: dict = {}
    if data == "sec7":
        X, epochs, truth, states = tdpm_gaussian(n_epochs=30, per_epoch=100, **SEC7, dim=2,
                                                 seed=data_seed)
        h = SEC7
    else:
        X, epochs, truth = engine_test_data(data_seed)
        h = hyperparameters(TDPMConfig(), X, False)
        learn = h["learn"]
    s = ChainSampler(epochs, int(epochs.max()) + 1, GaussianEmission(X, h["noise_var"]),
                     RandomWalk(h["birth_var"], h["drift_var"]),
                     RCRPPrior(h["alpha"], h["window"], h["decay"]), split_merge=split_merge)
    if start == "truth":
        set_state(s, truth, states)
    begun = time.perf_counter()
    for _ in range(sweeps):
        s.sweep(rng)
        if learn:
            s.resample_variances(rng, learn.get("noise_var"), learn.get("drift_var"))
    seconds = time.perf_counter() - begun
    z = s.canonical()
    gvi, lvi = global_and_local_vi(truth, z, epochs)
    profile = pair_profile(s, truth)
    return {"seed": seed, "pairs": len(profile), "gvi": gvi, "lvi": lvi,
            "chains": int(z.max() + 1), "seconds": seconds,
            "moves": {} if s.splitmerge is None else s.splitmerge.moves, "profile": profile}


X6 = np.array([-1.0, -0.6, 1.2, -0.8, 1.0, 1.5])
E6 = np.array([0, 0, 0, 1, 1, 1])


def tiny_run(seed: int, sweeps: int) -> float:
    """CPU seconds of ``sweeps`` sweeps of the enumeration tests' 6-item corpus (the machine
    may be shared: the process's own time, not the wall's)."""
    s = ChainSampler(E6, 2, GaussianEmission(X6[:, None], 0.5), RandomWalk(4.0, 0.3),
                     RCRPPrior(1.0, 1, 0.8))
    rng = np.random.default_rng(seed)
    start = time.process_time()
    for _ in range(sweeps):
        s.sweep(rng)
    return time.process_time() - start


def run_all(tasks: list, jobs: int) -> list:
    """Each (function, arguments) task's result, in order, over ``jobs`` processes."""
    if jobs <= 1:
        return [f(*a) for f, a in tasks]
    with ProcessPoolExecutor(jobs) as pool:
        return [f.result() for f in [pool.submit(f, *a) for f, a in tasks]]


def summarise(runs: list[dict]) -> dict:
    share = float(np.mean([r["pairs"] > 0 for r in runs]))
    pairs = [p for r in runs for p in r["profile"]]
    smaller = np.array([p["sizes"][1] for p in pairs], int)
    ratio = np.array([p["merge_gain"] + p["split_log_q"] if p["merge_gain"] is not None
                      else -np.inf for p in pairs])
    return {"share_with_parallel_chains": share,
            "moves": {k: int(sum(r["moves"].get(k, 0) for r in runs))
                      for k in ("merge", "split", "graft", "peel")},
            "smaller_chain": {"<=5": int(np.sum(smaller <= 5)),
                              "6-20": int(np.sum((smaller > 5) & (smaller <= 20))),
                              ">20": int(np.sum(smaller > 20))},
            "merge_ratio_above_1": int(np.sum(ratio > 0)),
            "pairs_per_run": float(np.mean([r["pairs"] for r in runs])),
            "gvi": float(np.mean([r["gvi"] for r in runs])),
            "lvi": float(np.mean([r["lvi"] for r in runs])),
            "seconds_per_sweep": float(np.mean([r["seconds"] for r in runs]))
            / runs[0]["sweeps"], "runs": runs}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--sweeps", type=int, default=12)
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--data", choices=("sec7", "engine-test"), default="sec7")
    p.add_argument("--moves", choices=("on", "off", "both"), default="both",
                   help="with the split-merge moves, without them (the sampler before), both")
    p.add_argument("--start", choices=("empty", "truth", "both"), default="empty",
                   help="Sec. 7 data: start at the true labels and states (a posterior draw), "
                        "or run from both starts")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--skip-parallel", action="store_true")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--json", type=Path, default=RESULTS / "tdpm_chains.json")
    args = p.parse_args()
    out: dict = {"machine": {"python": platform.python_version(), "numpy": np.__version__,
                             "processor": platform.processor() or platform.machine()},
                 "settings": vars(args) | {"json": str(args.json)}}
    if not args.skip_parallel:
        out["parallel"] = {}
        starts = ("empty", "truth") if args.start == "both" else (args.start,)
        for start, on in itertools.product(
                starts, {"on": [True], "off": [False], "both": [True, False]}[args.moves]):
            runs = run_all([(chain_run, (seed, args.sweeps, on, args.data, args.data_seed,
                                         start)) for seed in range(args.runs)], args.jobs)
            for r in runs:
                r["sweeps"] = args.sweeps
            key = "split_merge" if on else "no_split_merge"
            out["parallel"][f"{args.data}_{start}_{key}"] = summary = summarise(runs)
            print(f"{args.data} data, {start} start, {args.runs} runs of {args.sweeps} "
                  f"sweeps, {key}: {summary['share_with_parallel_chains']:.0%} end with a "
                  f"cluster held by two parallel chains ({summary['pairs_per_run']:.2f} such "
                  f"pairs a run; smaller chain {summary['smaller_chain']} items, whole merge's "
                  f"MH ratio above 1 for {summary['merge_ratio_above_1']}); GVI "
                  f"{summary['gvi']:.3f}, LVI {summary['lvi']:.3f}; accepted "
                  f"{summary['moves']}; {summary['seconds_per_sweep']:.2f} s a sweep",
                  flush=True)
    if not args.skip_speed:
        start = time.perf_counter()
        seconds = run_all([(tiny_run, (seed, 7000)) for seed in range(3)], args.jobs)
        wall = time.perf_counter() - start
        out["speed"] = {"sweeps": 21000, "wall_seconds": wall, "jobs": args.jobs,
                        "cpu_seconds": float(np.sum(seconds)),
                        "ms_per_sweep": 1000 * float(np.sum(seconds)) / 21000}
        print(f"6 items, 2 epochs: 21,000 sweeps (3 x 7,000) in {wall:.1f} s wall on "
              f"{args.jobs} processes, {np.sum(seconds):.1f} CPU seconds "
              f"({out['speed']['ms_per_sweep']:.2f} ms a sweep)", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
