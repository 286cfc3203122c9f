"""Does every command exit 0 when it succeeds? A short command run many times.

Native thread pools (pyarrow's Parquet readers) still alive at interpreter teardown can abort a
command after it has printed its result ("terminate called without an active exception", exit 134;
about 1 command in 300 when the teardown runs), which is why the console script exits without it
(``bnpmix.pipeline.cli.entry``). This runs a short real command (`bnpmix fit` of one lap on a small
Parquet corpus, then `bnpmix evaluate`, whose JSON must parse) N times, two at a time, and counts
the exits that are not 0.

    python benchmarks/stress/exit_stress.py [--runs 500] [--parallel 2] [--json [PATH]]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK, json_option, write_json
from bnpmix.storage import ingest_array


def one(i: int, corpus: str) -> tuple[int, str]:
    """Run fit then evaluate; (the first non-zero exit code or 0, its stderr)."""
    run = str(WORK / f"run-{i}")
    fit = subprocess.run([sys.executable, "-m", "bnpmix", "fit", corpus, "--out", run,
                          "--laps", "1"], capture_output=True, text=True)
    if fit.returncode:
        return fit.returncode, fit.stderr
    ev = subprocess.run([sys.executable, "-m", "bnpmix", "evaluate", run, "--heldout", corpus],
                        capture_output=True, text=True)
    if ev.returncode:
        return ev.returncode, ev.stderr
    json.loads(ev.stdout)  # the whole result reached the pipe
    return 0, ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--parallel", type=int, default=2)
    json_option(ap, "exit_stress")
    args = ap.parse_args()
    X = np.random.default_rng(0).normal(size=(2000, 3))
    corpus = WORK / "corpus"
    ingest_array(X, corpus, partition_rows=200)
    start = time.perf_counter()
    with ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda i: one(i, str(corpus)), range(args.runs)))
    bad = [(code, err.strip().splitlines()[-1:] if err else "") for code, err in results if code]
    seconds = time.perf_counter() - start
    print(f"{args.runs} fit + evaluate pairs ({2 * args.runs} commands), {args.parallel} at a "
          f"time, {seconds:.0f} s: {len(bad)} failed")
    write_json(args.json, {"runs": args.runs, "parallel": args.parallel, "seconds": seconds,
                           "failed": [{"exit": code, "last": last} for code, last in bad]})
    for code, last in bad[:10]:
        print(f"  exit {code}: {last}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
