"""How long do the quick commands take from the shell? Wall time of `bnpmix --help`,
`bnpmix info CORPUS_DIR` and `bnpmix info RUN_DIR` (a small corpus and a finished run made
here), each the median of N runs as a new process, against the target of 0.2 s. Two floors for
comparison: `python -c pass`, the interpreter's own start, and `python -c "import numpy"`, which
`info` needs.

    python benchmarks/speed/startup.py [--runs 10] [--json [PATH]]

Exits 1 when a command's median is over the target.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK, json_option, write_json
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array

TARGET = 0.2  # seconds, wall


def wall(command: list[str]) -> float:
    """Seconds from start to exit of one run of ``command`` (which must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    json_option(ap, "startup")
    args = ap.parse_args()
    exe = shutil.which("bnpmix")
    if exe is None:
        raise SystemExit("the bnpmix console script is not on PATH (pip install -e .)")
    X = np.random.default_rng(0).normal(size=(2000, 3))
    corpus, run = WORK / "corpus", WORK / "run"
    ingest_array(X, corpus, partition_rows=200)
    fit(corpus, run, job_config(laps=2))
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import numpy": [sys.executable, "-c", "import numpy"],
        "bnpmix --help": [exe, "--help"],
        "bnpmix info CORPUS": [exe, "info", str(corpus)],
        "bnpmix info RUN": [exe, "info", str(run)],
    }
    print(f"median wall seconds of {args.runs} runs each (target {TARGET} s)")
    over, medians = 0, {}
    for name, command in commands.items():
        wall(command)  # once first: the page cache and __pycache__ as a user's later runs see
        median = medians[name] = statistics.median(wall(command) for _ in range(args.runs))
        verdict = ""
        if command[0] == exe:
            verdict = "  ok" if median < TARGET else "  over the target"
            over += median >= TARGET
        print(f"  {name:<20} {median:.3f}{verdict}")
    write_json(args.json, {"runs": args.runs, "target": TARGET, "median_seconds": medians,
                           "over_target": int(over)})
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
