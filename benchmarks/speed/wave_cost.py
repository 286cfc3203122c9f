"""The ELBO a wider wave costs per lap, measured on this machine.

Memo with W > 1 computes W partitions against the same globals, and with ``ahead`` A each wave
against the globals after wave j − 1 − A: the global update after a visit reaches fewer of the
next visits than at W = 1, A = 0 (the paper's algorithm), so the ELBO may rise more slowly per
lap. This script measures by how much: N toy patches (D = 25, 8 zero-mean full-covariance
components; ``bnpmix.datasets.toy_patches``) in 100 partitions, the full Gaussian, fitted from
the same K = 25 k-means++ seeds with the same seed, for each (W, A) in --settings:
- without moves (K stays 25), so every run climbs the same objective from the same start and
  the only difference is which globals each visit saw: the ELBO per item at the end of each
  of the first --laps laps, and its shortfall against W = 1, A = 0 at that lap;
- with the default moves (birth, merge, delete) to convergence: laps, K and the final ELBO per
  item.

Local threads run the same arithmetic as a Dask cluster for the same (W, A) (the tests check
threads = Dask to 1e-9), so no cluster is started: the figures are ELBO, not seconds.

    python benchmarks/speed/wave_cost.py [--n 100000] [--laps 8] [--settings 1:0,2:0,2:1,4:1]
        [--seeds 3] [--json [PATH]]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK, json_option, write_json
from bnpmix.datasets import toy_patches
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array


def lap_elbos(run) -> pd.Series:
    """ELBO at the end of each lap, from trace.csv: the last row of each lap."""
    trace = pd.read_csv(run / "trace.csv")
    trace = trace[trace["lap"] == trace["lap"].round()]  # a lap's last visit and its lap end
    return trace.groupby("lap")["elbo"].last()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--laps", type=int, default=8, help="laps of the runs without moves")
    ap.add_argument("--settings", default="1:0,2:0,2:1,4:1", help="W:A pairs")
    ap.add_argument("--seeds", type=int, default=3, help="fit seeds 0.. (the data's is 0)")
    json_option(ap, "wave_cost")
    args = ap.parse_args()
    settings = [tuple(int(v) for v in s.split(":")) for s in args.settings.split(",")]
    X, labels = toy_patches(args.n, seed=0)
    corpus = WORK / "patches"
    ingest_array(X, corpus, partition_rows=args.n // 100, columns={"label": labels})
    print(f"{args.n:,} toy patches (D = 25), 100 partitions; full Gaussian from K = 25; fit "
          f"seeds 0..{args.seeds - 1}; local threads (2)", flush=True)
    fixed, moving = {}, {}
    for seed in range(args.seeds):
        for W, A in settings:
            common = {"algorithm": "memo", "obs": "gauss", "K": 25, "seed": seed, "wave": W,
                      "ahead": A, "scheduler": "threads", "threads": 2}
            out = WORK / f"fixed-{W}-{A}-{seed}"
            fit(corpus, out, job_config(**common, moves="", laps=args.laps, tol=0.0))
            fixed[(W, A, seed)] = lap_elbos(out) / args.n
            out = WORK / f"moves-{W}-{A}-{seed}"
            summary = fit(corpus, out, job_config(**common))
            moving[(W, A, seed)] = (summary["laps"], summary["K"], summary["elbo_per_item"])
    ref = settings[0]
    print(f"\nwithout moves (K = 25): ELBO per item at each lap end, the mean over seeds, and "
          f"in brackets the mean difference from W:A = {ref[0]}:{ref[1]} with the same seed")
    print("lap  " + "".join(f"{f'W={W} A={A}':>24s}" for W, A in settings))
    for lap in fixed[(*ref, 0)].index:
        cells = ""
        for W, A in settings:
            mine = [fixed[(W, A, s)][lap] for s in range(args.seeds)]
            base = [fixed[(*ref, s)][lap] for s in range(args.seeds)]
            diff = sum(m - b for m, b in zip(mine, base, strict=True)) / args.seeds
            cells += f"{sum(mine) / args.seeds:12.5f} ({diff:+9.2e})"
        print(f"{int(lap):3d}  {cells}")
    print("\nwith the default moves (birth, merge, delete), to convergence (laps, K, ELBO per "
          f"item; in brackets the difference from W:A = {ref[0]}:{ref[1]} with the same seed):")
    for W, A in settings:
        runs = []
        for s in range(args.seeds):
            laps, K, elbo = moving[(W, A, s)]
            runs.append(f"{laps:3d} laps K={K:2d} {elbo:.5f} ({elbo - moving[(*ref, s)][2]:+.1e})")
        print(f"  W={W} A={A}: " + "; ".join(runs))
    write_json(args.json, {"args": vars(args), "runs": [
        {"W": W, "A": A, "seed": s, "lap_elbo_per_item": fixed[(W, A, s)].tolist(),
         **dict(zip(("laps", "K", "elbo_per_item"), moving[(W, A, s)], strict=True))}
        for W, A in settings for s in range(args.seeds)]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
