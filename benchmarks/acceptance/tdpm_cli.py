"""The tdpm engine on the path users take, ``bnpmix fit`` as a process, against its Gibbs
sampler (``bnpmix.algorithms.tdpm.gibbs.ChainSampler``) run in this process.

1. The enumeration tests' corpus (``tests/algorithms/test_tdpm_gibbs.py``: 6 items over 2 epochs,
   1-D, σ = 4, ρ = 0.3, Σ = 0.5, α = 1, W = 1, λ = 0.8, given as flags): --sweeps sweeps with
   ``--thin 1`` through the command (wall time of the process, start-up included) and the same
   number of sweeps of the sampler in this process, measured in the same run, with their ratio;
   and the command's co-clustering over its kept samples against exact enumeration (the
   largest difference over item pairs).
2. 3,000 2-D items over 15 epochs (``bnpmix.datasets.tdpm_gaussian``, seed 0) x --big-sweeps
   sweeps through the command with its defaults: wall time.

--command runs another install's command (e.g. an older commit's venv/bin/bnpmix) for a
before-and-after.

    python benchmarks/acceptance/tdpm_cli.py [--sweeps 21000] [--big-sweeps 200] [--command CMD]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib
import json
import resource
import shlex
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import RESULTS, WORK
from acceptance.tdpm_chains import E6, X6  # the enumeration tests' corpus
from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.emission import GaussianEmission
from bnpmix.algorithms.tdpm.gibbs import ChainSampler, RCRPPrior
from bnpmix.datasets import tdpm_gaussian
from bnpmix.storage import ingest_array

ROOT = Path(__file__).resolve().parents[2]
FLAGS6 = ["--birth-var", "4", "--drift-var", "0.3", "--noise-var", "0.5", "--alpha", "1",
          "--window", "1", "--decay", "0.8", "--thin", "1"]


def in_process(sweeps: int, seed: int = 0) -> tuple[float, float]:
    """Wall and CPU seconds of ``sweeps`` sweeps of the sampler on the 6-item corpus."""
    s = ChainSampler(E6, 2, GaussianEmission(X6[:, None], 0.5), RandomWalk(4.0, 0.3),
                     RCRPPrior(1.0, 1, 0.8))
    rng = np.random.default_rng(seed)
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(sweeps):
        s.sweep(rng)
    return time.perf_counter() - start, time.process_time() - cpu


def command_fit(command: list[str], corpus: Path, run: Path, *flags: str
                ) -> tuple[float, float]:
    """Wall and CPU seconds (its own, start-up included) of ``bnpmix fit CORPUS --algorithm
    tdpm FLAGS`` as a process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([*command, "fit", str(corpus), "--algorithm", "tdpm", "--out",
                           str(run), *flags], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"bnpmix fit failed:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return seconds, cpu


def co_clustering(run: Path) -> np.ndarray:
    """The share of kept samples in which each pair of items shares a chain."""
    s = pd.read_parquet(run / "samples.parquet").sort_values(["sample", "item"])
    z = s["chain"].to_numpy().reshape(s["sample"].nunique(), -1)
    return (z[:, :, None] == z[:, None, :]).mean(axis=0)


def exact_co_clustering() -> np.ndarray:
    """The enumeration test's exact co-clustering (tests/algorithms/test_tdpm_gibbs.py,
    imported as a package of its folder: it imports its neighbour test_rcrp)."""
    package = types.ModuleType("enumeration_tests")
    package.__path__ = [str(ROOT / "tests" / "algorithms")]
    sys.modules[package.__name__] = package
    tests = importlib.import_module(f"{package.__name__}.test_tdpm_gibbs")
    return tests.exact_tdpm(X6, E6, 2, RCRPPrior(1.0, 1, 0.8))[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sweeps", type=int, default=21000)
    p.add_argument("--big-sweeps", type=int, default=200)
    p.add_argument("--command", default=f"{sys.executable} -m bnpmix",
                   help="the bnpmix command to time (default: this interpreter's)")
    p.add_argument("--json", type=Path, default=RESULTS / "tdpm_cli.json")
    args = p.parse_args()
    command = shlex.split(args.command)
    tiny = WORK / "tiny"
    ingest_array(X6[:, None], tiny, columns={"time": E6})
    cli, cli_cpu = command_fit(command, tiny, WORK / "run-tiny", "--sweeps", str(args.sweeps),
                               *FLAGS6)
    sampler, sampler_cpu = in_process(args.sweeps)
    gap = float(np.abs(co_clustering(WORK / "run-tiny") - exact_co_clustering()).max())
    print(f"6 items, {args.sweeps:,} sweeps --thin 1: bnpmix fit {cli:.1f} s ({cli_cpu:.1f} "
          f"CPU s), the sampler in process {sampler:.1f} s ({sampler_cpu:.1f} CPU s): ratio "
          f"{cli / sampler:.2f} wall, {cli_cpu / sampler_cpu:.2f} CPU (target <= 1.5); "
          f"co-clustering against enumeration: largest difference {gap:.4f} (target <= 0.03)",
          flush=True)
    X, epochs, _, _ = tdpm_gaussian(n_epochs=15, per_epoch=200, seed=0)
    big = WORK / "big"
    ingest_array(X, big, columns={"time": epochs})
    big_s, big_cpu = command_fit(command, big, WORK / "run-big", "--sweeps",
                                 str(args.big_sweeps))
    print(f"3,000 2-D items, {args.big_sweeps} sweeps: bnpmix fit {big_s:.1f} s ({big_cpu:.1f} "
          "CPU s)", flush=True)
    out = {"command": args.command, "sweeps": args.sweeps, "cli_seconds": cli,
           "cli_cpu_seconds": cli_cpu, "sampler_seconds": sampler,
           "sampler_cpu_seconds": sampler_cpu, "ratio": cli / sampler,
           "cpu_ratio": cli_cpu / sampler_cpu, "co_clustering_gap": gap,
           "big_sweeps": args.big_sweeps, "big_seconds": big_s, "big_cpu_seconds": big_cpu}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
