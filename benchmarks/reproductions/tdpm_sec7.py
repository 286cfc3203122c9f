"""Ahmed & Xing (2008), Sec. 7: the temporal DP mixture (TDPM) of Gaussian chains on data drawn
from the TDPM, against fixed-K dynamic mixtures of Kalman filters.

Data: ``bnpmix.datasets.tdpm_gaussian``: 30 epochs x 100 points, α = 2.5, W = 1, λ = 0.8,
σ = 10, ρ = 0.1, Σ = 0.1 I (σ, ρ, Σ variances). The paper does not give the dimension D; we chose
D = 2 (--dim).

TDPM: ``ChainSampler`` with the RCRP prior and the true hyperparameters, its item moves and the
relinking moves across epoch boundaries (both samplers have them; --no-relink: item moves only,
the samplers as the paper describes them), and the split-merge moves over whole chains
(--no-split-merge: without; the fixed-K chains never die or split). The paper runs 1000 Gibbs
sweeps, then keeps 10 samples 100 sweeps apart (2000 sweeps: about 43 min at ~1.3 s a sweep on
a 2-core machine); our default is --burn-in 300 sweeps, then --samples 10 every --thin 20 sweeps
(500 sweeps); --paper uses the paper's 1000 + 10 x 100. The first sweep seats the items
sequentially.
GVI and LVI (Sec. 7: the variation of information of the chain labels over all items, and its
average over epochs; lower is better) against the true labels: mean and standard error over the
kept samples (successive samples of one Markov chain: the standard error ignores their
autocorrelation). Every --trace-every sweeps the number of chains, GVI, LVI and log p(z, φ, x)
are recorded and printed (mixing); log p at the true labels and states is printed beside it.

Fixed K: the same sampler with ``FixedKPrior(K, α)`` (K chains born at epoch 0 that never die;
--baselines eq45: the paper's finite dynamic mixture of Sec. 4.3, π_t ~ Dir(n_{·,t−1} + α/K),
Eq. 4.5; independent: π_t ~ Dir(α/K) each epoch), for K in --ks (5, 10, 15, 20, 25, 30), each
from --inits (10) random initialisations (chain k constant at a data point drawn at random, all
K distinct) run for --fixed-sweeps sweeps; the last sample's GVI / LVI, mean and standard error
over initialisations. The first initialisation of each K records GVI / LVI at a few sweeps
(printed: has it flattened?). The default of 200 sweeps was chosen from 300-sweep runs on the
default data (K = 5, 15, 30, two initialisations each; GVI at sweeps 50 / 100 / 200 / 300):
K = 5 is flat from sweep 50 (1.856 / 1.851 / 1.854 / 1.852 and 2.099 / 2.123 / 2.116 / 2.119),
K = 15 from about 100 (1.528 / 1.528 / 1.503 / 1.522 and 1.654 / 1.479 / 1.439 / 1.462), K = 30
still creeps down after 200 (1.739 / 1.735 / 1.626 / 1.554 and 1.784 / 1.727 / 1.660 / 1.631):
its chains keep trading true clusters slowly, so large K is, if anything, slightly pessimistic
at 200 sweeps (by less than 0.1 GVI here; LVI is flat from ~50 sweeps for every K).

Chains: the number alive at each epoch (``alive_per_epoch``: members at t or in the W epochs
before), truth against the TDPM samples' average, for all chains and for chains of >= 4 items
(the paper's Fig. 3-d/f attribute most errors to chains of 1-3 items); and lifespans (the number
of epochs from a chain's first item to its last, inclusive), their histogram and mean.

--from-truth adds a TDPM run (same schedule and seed) started at the true labels and states:
where its samples' GVI / LVI match the empty start's, the sampler has found the posterior, and
what is left is the posterior's own spread around the truth.

--sensitivity adds two TDPM runs (same data, seed and schedule) with σ, ρ, Σ all scaled by 10
and all scaled by 0.1 (α, W, λ true).

Prints tables; writes JSON (--json, default benchmarks/results/tdpm_sec7.json; with --quick a
file in the temporary directory) and, if matplotlib is importable (``pip install
bnpmix[plot]``), a PNG next to it (GVI and LVI against K with the TDPM as a horizontal line,
alive chains per epoch truth vs TDPM); --plot PATH redraws it from a saved JSON. --jobs N runs
the TDPM and the fixed-K runs in N processes (each run's figures do not depend on it). --quick:
8 epochs x 40 points, 30 + 3 x 5 sweeps, 2 initialisations of K = 5, 10, 20 fixed sweeps.

    python benchmarks/reproductions/tdpm_sec7.py [--quick | --paper] [--burn-in 300] [--samples 10]
        [--thin 20] [--inits 10] [--fixed-sweeps 200] [--ks 5 10 ...] [--sensitivity]
        [--from-truth]
        [--baselines eq45 independent] [--no-relink] [--no-split-merge] [--jobs 1]
        [--data-seed 0] [--seed 1]
        [--json PATH]
    python benchmarks/reproductions/tdpm_sec7.py --plot benchmarks/results/tdpm_sec7.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from bnpmix.algorithms.metrics import global_and_local_vi
from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.emission import GaussianEmission
from bnpmix.algorithms.tdpm.gibbs import ChainSampler, FixedKPrior, RCRPPrior, alive_per_epoch
from bnpmix.datasets import tdpm_gaussian

RESULTS = Path(__file__).resolve().parents[1] / "results"
SIGNIFICANT = 4  # items: smaller chains are the paper's "insignificant" ones


def mean_se(values) -> tuple[float, float]:
    v = np.asarray(values, float)
    se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")
    return float(v.mean()), se


def chain_summary(labels: np.ndarray, epochs: np.ndarray, T: int, W: int) -> dict:
    """Number of chains, alive chains per epoch (all and >= SIGNIFICANT items), lifespans."""
    ks, sizes = np.unique(labels, return_counts=True)
    size = dict(zip(ks.tolist(), sizes.tolist(), strict=True))
    sig = np.array([size[k] >= SIGNIFICANT for k in labels.tolist()])
    life = np.array([np.ptp(epochs[labels == k]) + 1 for k in ks])
    return {"chains": len(ks), "significant": int(np.sum(sizes >= SIGNIFICANT)),
            "alive": alive_per_epoch(labels, epochs, T, W).tolist(),
            "alive_significant": alive_per_epoch(np.where(sig, labels, -1), epochs, T,
                                                 W).tolist(),
            "lifespan_hist": np.bincount(life, minlength=T + 1)[1:].tolist(),
            "lifespan_mean": float(life.mean()),
            "lifespan_mean_significant": float(life[sizes >= SIGNIFICANT].mean())}


def set_state(s: ChainSampler, labels: np.ndarray, states: np.ndarray) -> None:
    """Put the sampler at the true labels and states (over each chain's span)."""
    K = labels.max() + 1
    s.counts = np.zeros((s.T, K), dtype=np.int64)
    np.add.at(s.counts, (s.epochs, labels), 1)
    s.first = np.array([s.epochs[labels == k].min() for k in range(K)])
    s.last = np.array([s.epochs[labels == k].max() for k in range(K)])
    s.active = np.ones(K, bool)
    s.z = labels.astype(np.int64).copy()
    s.phi = {k: states[k, s.first[k]:s.last[k] + 1].copy() for k in range(K)}


def run_tdpm(data: dict, hyper: dict, args, seed: int, label: str,
             from_truth: bool = False) -> dict:
    X, epochs, labels, T = data["X"], data["epochs"], data["labels"], data["T"]
    W = hyper["window"]
    s = ChainSampler(epochs, T, GaussianEmission(X, hyper["noise_var"]),
                     RandomWalk(hyper["birth_var"], hyper["drift_var"]),
                     RCRPPrior(hyper["alpha"], W, hyper["decay"]), relink=not args.no_relink,
                     split_merge=not args.no_split_merge)
    if from_truth:
        set_state(s, labels, data["states"])
    rng = np.random.default_rng(seed)
    total = args.burn_in + args.samples * args.thin
    keep = {args.burn_in + j * args.thin for j in range(1, args.samples + 1)}
    trace, samples = [], []
    start = time.perf_counter()
    print(f"[{label}] {total} sweeps (burn-in {args.burn_in}, {args.samples} samples every "
          f"{args.thin}), seed {seed}", flush=True)
    for sweep in range(1, total + 1):
        s.sweep(rng)
        if sweep in keep or sweep % args.trace_every == 0 or sweep <= 2:
            z = s.canonical()
            gvi, lvi = global_and_local_vi(labels, z, epochs)
            if sweep % args.trace_every == 0 or sweep <= 2:
                row = {"sweep": sweep, "chains": len(np.unique(z)), "gvi": gvi, "lvi": lvi,
                       "log_joint": s.log_joint(),
                       "seconds": time.perf_counter() - start}
                trace.append(row)
                print(f"[{label}] sweep {sweep:5d}  chains {row['chains']:4d}  GVI {gvi:.3f}  "
                      f"LVI {lvi:.3f}  log p {row['log_joint']:.1f}  {row['seconds']:.0f} s",
                      flush=True)
            if sweep in keep:
                samples.append({"sweep": sweep, "gvi": gvi, "lvi": lvi,
                                **chain_summary(z, epochs, T, W)})
    seconds = time.perf_counter() - start
    out = {"label": label, "seed": seed, "hyper": hyper, "sweeps": total, "seconds": seconds,
           "relinked": s.relinked,
           "seconds_per_sweep": seconds / total, "trace": trace, "samples": samples}
    for key in ("gvi", "lvi", "chains", "significant", "lifespan_mean"):
        out[key], out[key + "_se"] = mean_se([x[key] for x in samples])
    for key in ("alive", "alive_significant", "lifespan_hist"):
        out[key] = np.mean([x[key] for x in samples], axis=0).tolist()
    return out


def run_fixed(data: dict, hyper: dict, K: int, init: int, args, seed: int,
              carry: bool) -> dict:
    X, epochs, labels, T = data["X"], data["epochs"], data["labels"], data["T"]
    rng = np.random.default_rng([seed, K, init])
    s = ChainSampler(epochs, T, GaussianEmission(X, hyper["noise_var"]),
                     RandomWalk(hyper["birth_var"], hyper["drift_var"]),
                     FixedKPrior(K, hyper["alpha"], carry), relink=not args.no_relink)
    phi0 = X[rng.choice(len(X), K, replace=False)]
    s.init_fixed(np.repeat(phi0[:, None, :], T, axis=1))
    marks = {1, 2, 5, 10, 20, 50, 100, 150, 200, 300, 500, 1000, args.fixed_sweeps}
    trace = []
    start = time.perf_counter()
    for sweep in range(1, args.fixed_sweeps + 1):
        s.sweep(rng)
        if init == 0 and sweep in marks:
            gvi, lvi = global_and_local_vi(labels, s.z, epochs)
            trace.append({"sweep": sweep, "gvi": gvi, "lvi": lvi})
    gvi, lvi = global_and_local_vi(labels, s.z, epochs)
    return {"K": K, "init": init, "gvi": gvi, "lvi": lvi, "used": len(np.unique(s.z)),
            "relinked": s.relinked,
            "seconds": time.perf_counter() - start, "trace": trace}


def plot(path: Path, result: dict) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not importable: no plot"
    tdpm, truth, baselines = result["tdpm"], result["truth"], result["fixed"]
    if isinstance(baselines, list):  # a list: the independent baseline alone, Dir(α/K) per epoch
        baselines = {"independent": baselines}
    fig, ax = plt.subplots(1, 3, figsize=(15, 4))
    for a, key in zip(ax[:2], ("gvi", "lvi"), strict=True):
        for name, fixed in baselines.items():
            a.errorbar([f["K"] for f in fixed], [f[key] for f in fixed],
                       yerr=[f[key + "_se"] for f in fixed], marker="o", capsize=3,
                       color=BASELINES[name][2], label=f"fixed K, {BASELINES[name][1]}")
        a.axhline(tdpm[key], color="C1", label="TDPM")
        a.axhspan(tdpm[key] - tdpm[key + "_se"], tdpm[key] + tdpm[key + "_se"], color="C1",
                  alpha=0.2)
        a.set_xlabel("K")
        a.set_ylabel(key.upper())
        a.legend()
    T = len(truth["alive"])
    ax[2].plot(range(T), truth["alive"], "k-", label="truth")
    ax[2].plot(range(T), tdpm["alive"], "C1--", label="TDPM (mean of samples)")
    ax[2].plot(range(T), truth["alive_significant"], "k:", label=f"truth, >= {SIGNIFICANT} items")
    ax[2].plot(range(T), tdpm["alive_significant"], "C1:", label=f"TDPM, >= {SIGNIFICANT} items")
    ax[2].set_xlabel("epoch")
    ax[2].set_ylabel("alive chains")
    ax[2].legend()
    fig.tight_layout()
    png = path.with_suffix(".png")
    fig.savefig(png, dpi=100)
    return f"plot: {png}"


def run_all(tasks: list, jobs: int) -> list:
    """Each (function, arguments) task's result, in order, over ``jobs`` processes."""
    if jobs <= 1:
        return [f(*a) for f, a in tasks]
    with ProcessPoolExecutor(jobs) as pool:
        return [f.result() for f in [pool.submit(f, *a) for f, a in tasks]]


BASELINES = {"eq45": (True, "Dir(n_{t-1} + α/K) (Eq. 4.5)", "C0"),  # (carry, legend, colour)
             "independent": (False, "Dir(α/K) per epoch", "C2")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small smoke run (< 60 s)")
    p.add_argument("--paper", action="store_true", help="the paper's 1000 + 10 x 100 sweeps")
    p.add_argument("--burn-in", type=int, default=300)
    p.add_argument("--samples", type=int, default=10)
    p.add_argument("--thin", type=int, default=20)
    p.add_argument("--trace-every", type=int, default=10)
    p.add_argument("--inits", type=int, default=10)
    p.add_argument("--fixed-sweeps", type=int, default=200)
    p.add_argument("--ks", type=int, nargs="*", default=[5, 10, 15, 20, 25, 30],
                   help="fixed-K runs (none: skip them)")
    p.add_argument("--dim", type=int, default=2)
    p.add_argument("--sensitivity", action="store_true")
    p.add_argument("--from-truth", action="store_true",
                   help="one more TDPM run started at the true labels and states")
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=1, help="the TDPM sampler's (and fixed K's) seed")
    p.add_argument("--baselines", nargs="*", choices=sorted(BASELINES),
                   default=["eq45", "independent"])
    p.add_argument("--no-relink", action="store_true",
                   help="item moves only (both samplers): no relinking across epoch boundaries")
    p.add_argument("--no-split-merge", action="store_true",
                   help="the TDPM without the split-merge moves over whole chains")
    p.add_argument("--jobs", type=int, default=1, help="processes for the runs")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--plot", type=Path, default=None, help="only redraw the plot of this JSON")
    args = p.parse_args()
    if args.plot:
        print(plot(args.plot, json.loads(args.plot.read_text())))
        return
    shape = {"n_epochs": 30, "per_epoch": 100}
    if args.paper:
        args.burn_in, args.samples, args.thin = 1000, 10, 100
    if args.quick:
        shape = {"n_epochs": 8, "per_epoch": 40}
        args.burn_in, args.samples, args.thin, args.trace_every = 30, 3, 5, 5
        args.inits, args.fixed_sweeps, args.ks = 2, 20, [5, 10]
    if args.json is None:
        args.json = (Path(tempfile.gettempdir()) / "tdpm_sec7_quick.json" if args.quick
                     else RESULTS / "tdpm_sec7.json")
    hyper = {"alpha": 2.5, "window": 1, "decay": 0.8, "birth_var": 10.0, "drift_var": 0.1,
             "noise_var": 0.1}
    wall = time.perf_counter()
    X, epochs, labels, states = tdpm_gaussian(**shape, **hyper, dim=args.dim, seed=args.data_seed)
    T, W = shape["n_epochs"], hyper["window"]
    data = {"X": X, "epochs": epochs, "labels": labels, "T": T, "states": states}
    truth = chain_summary(labels, epochs, T, W)
    print(f"data: {T} epochs x {shape['per_epoch']} points, D = {args.dim}, {hyper}, "
          f"data seed {args.data_seed}; sampler seed {args.seed}")
    print(f"truth: {truth['chains']} chains ({truth['significant']} with >= {SIGNIFICANT} "
          f"items), mean lifespan {truth['lifespan_mean']:.2f} epochs")
    check = ChainSampler(epochs, T, GaussianEmission(X, hyper["noise_var"]),
                         RandomWalk(hyper["birth_var"], hyper["drift_var"]),
                         RCRPPrior(hyper["alpha"], W, hyper["decay"]))
    set_state(check, labels, states)
    truth["log_joint"] = check.log_joint()
    print(f"truth: log p(z, φ, x) = {truth['log_joint']:.1f}", flush=True)

    tasks = [(run_tdpm, (data, hyper, args, args.seed, "TDPM"))]
    scales = (10.0, 0.1) if args.sensitivity else ()
    for scale in scales:
        h = {**hyper, **{k: hyper[k] * scale for k in ("birth_var", "drift_var", "noise_var")}}
        tasks.append((run_tdpm, (data, h, args, args.seed, f"TDPM x{scale:g}")))
    if args.from_truth:
        tasks.append((run_tdpm, (data, hyper, args, args.seed, "TDPM from the truth", True)))
    grid = list(itertools.product(args.baselines, args.ks, range(args.inits)))
    tasks += [(run_fixed, (data, hyper, K, i, args, args.seed, BASELINES[name][0]))
              for name, K, i in grid]
    results = run_all(tasks, args.jobs)
    tdpm = results[0]
    sensitivity = [{"scale": scale, **r}
                   for scale, r in zip(scales, results[1:1 + len(scales)], strict=True)]
    fixed: dict[str, list] = {name: [] for name in args.baselines}
    from_truth = results[1 + len(scales)] if args.from_truth else None
    runs_of = dict(zip(grid, results[1 + len(scales) + args.from_truth:], strict=True))
    for name, K in itertools.product(args.baselines, args.ks):
        runs = [runs_of[name, K, i] for i in range(args.inits)]
        row = {"K": K, "runs": runs, "trace": runs[0]["trace"],
               "seconds": float(sum(r["seconds"] for r in runs))}
        for key in ("gvi", "lvi", "used"):
            row[key], row[key + "_se"] = mean_se([r[key] for r in runs])
        fixed[name].append(row)
        print(f"[fixed K = {K}, {name}] GVI {row['gvi']:.3f} ± {row['gvi_se']:.3f}  LVI "
              f"{row['lvi']:.3f} ± {row['lvi_se']:.3f}  ({row['seconds']:.0f} s); init 0 "
              "GVI by sweep: " + ", ".join(f"{t['sweep']}: {t['gvi']:.3f}" for t in row["trace"]),
              flush=True)

    print(f"\nGVI / LVI against the truth (lower is better); TDPM: mean ± se over {args.samples} "
          f"samples; fixed K: over {args.inits} initialisations")
    print(f"{'method':<22}{'GVI':>16}{'LVI':>16}{'chains':>14}{'seconds':>10}")
    rows = [("TDPM", tdpm, f"{tdpm['chains']:.1f}", tdpm["seconds"])]
    rows += [(f"TDPM σ,ρ,Σ x{s['scale']:g}", s, f"{s['chains']:.1f}", s["seconds"])
             for s in sensitivity]
    if from_truth:
        rows.append(("TDPM from the truth", from_truth, f"{from_truth['chains']:.1f}",
                     from_truth["seconds"]))
    rows += [(f"K = {f['K']} {name}", f, f"{f['used']:.1f} used", f["seconds"])
             for name, rows_k in fixed.items() for f in rows_k]
    for name, r, chains, sec in rows:
        print(f"{name:<22}{r['gvi']:>9.3f} ± {r['gvi_se']:.3f}{r['lvi']:>9.3f} ± "
              f"{r['lvi_se']:.3f}{chains:>14}{sec:>10.0f}")
    print(f"{'truth':<22}{0.0:>16.3f}{0.0:>16.3f}{truth['chains']:>14}")

    print(f"\nchains: truth {truth['chains']} ({truth['significant']} with >= {SIGNIFICANT} "
          f"items); TDPM {tdpm['chains']:.1f} ± {tdpm['chains_se']:.1f} "
          f"({tdpm['significant']:.1f} ± {tdpm['significant_se']:.1f})")
    print(f"mean lifespan (epochs, first to last item): truth {truth['lifespan_mean']:.2f} "
          f"(>= {SIGNIFICANT} items: {truth['lifespan_mean_significant']:.2f}); "
          f"TDPM {tdpm['lifespan_mean']:.2f} ± {tdpm['lifespan_mean_se']:.2f}")
    print("alive chains per epoch (all | >= 4 items):")
    print(f"{'epoch':>6}{'truth':>7}{'TDPM':>7} |{'truth':>7}{'TDPM':>7}")
    for t in range(T):
        print(f"{t:>6}{truth['alive'][t]:>7}{tdpm['alive'][t]:>7.1f} |"
              f"{truth['alive_significant'][t]:>7}{tdpm['alive_significant'][t]:>7.1f}")
    nz = max(i for i, c in enumerate(truth["lifespan_hist"]) if c) + 1
    nz = max(nz, max(i for i, c in enumerate(tdpm["lifespan_hist"]) if c) + 1)
    print("chains by lifespan (epochs):")
    print(f"{'lifespan':>9}{'truth':>7}{'TDPM':>7}")
    for L in range(nz):
        print(f"{L + 1:>9}{truth['lifespan_hist'][L]:>7}{tdpm['lifespan_hist'][L]:>7.1f}")

    result = {"settings": {**shape, **hyper, "dim": args.dim, "data_seed": args.data_seed,
                           "seed": args.seed, "burn_in": args.burn_in, "samples": args.samples,
                           "thin": args.thin, "inits": args.inits,
                           "fixed_sweeps": args.fixed_sweeps, "ks": args.ks,
                           "baselines": args.baselines, "relink": not args.no_relink,
                           "split_merge": not args.no_split_merge,
                           "quick": args.quick, "paper": args.paper},
              "machine": {"python": platform.python_version(), "numpy": np.__version__,
                          "processor": platform.processor() or platform.machine()},
              "truth": truth, "tdpm": tdpm, "sensitivity": sensitivity,
              "from_truth": from_truth, "fixed": fixed,
              "wall_seconds": time.perf_counter() - wall}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print(f"\nwrote {args.json}; {plot(args.json, result)}; "
          f"wall {result['wall_seconds']:.0f} s")


if __name__ == "__main__":
    main()
