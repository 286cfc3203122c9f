"""Record this checkout's speed and quality in the benchmark history: every ``time_*`` of the
suite (suite.py, on asv's conventions) timed, every ``track_*`` figure read, as one record
(commit, its date, machine) appended to benchmarks/results/history.json, which the Benchmarks
page shows as a trend. A record replaces an earlier one of the same commit and machine.

Usage::

    python benchmarks/history/run.py [--repeat 3] [--history PATH] [--json PATH]

--repeat times each fit that many times and keeps the shortest (asv's best of); --json also
writes the one record to PATH. The suite takes about a minute on 2 cores."""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import RESULTS, json_option, write_json

HISTORY = RESULTS / "history.json"
ROOT = Path(__file__).resolve().parents[2]
FIELDS = {"commit": str, "date": str, "recorded": str, "dirty": bool, "machine": dict,
          "time": dict, "track": dict, "units": dict}


def git(*args: str) -> str:
    """A git command's output in the checkout the suite runs from."""
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def machine() -> dict[str, Any]:
    """What the times depend on: the host's name, its cores, the Python and the platform."""
    return {"name": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def benchmarks(suite: ModuleType, prefix: str) -> dict[str, Callable[[], Any]]:
    """The suite's functions named ``<prefix>_*``, in the order they are defined."""
    found = inspect.getmembers(suite, inspect.isfunction)
    chosen = [(n, f) for n, f in found if n.startswith(prefix + "_")]
    return dict(sorted(chosen, key=lambda nf: nf[1].__code__.co_firstlineno))


def measure(suite: ModuleType, repeat: int) -> tuple[dict, dict, dict]:
    """Each time_ function's shortest of ``repeat`` wall times (seconds; its own ``setup``, if
    any, run before each and not timed), then each track_ function's figure (after the fits the
    times made) and the units of both."""
    getattr(suite, "setup", lambda: None)()
    times, units = {}, {}
    for name, f in benchmarks(suite, "time").items():
        runs = []
        for _ in range(repeat):
            getattr(f, "setup", lambda: None)()
            t = time.perf_counter()
            f()
            runs.append(time.perf_counter() - t)
        times[name], units[name] = min(runs), "seconds"
    tracks = {name: f() for name, f in benchmarks(suite, "track").items()}
    units |= {name: getattr(f, "unit", "") for name, f in benchmarks(suite, "track").items()}
    return times, tracks, units


def record(times: dict, tracks: dict, units: dict) -> dict[str, Any]:
    """One history record of this checkout: its commit and the commit's date, whether files
    had uncommitted changes, when and on what machine it was measured, and the figures."""
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {"commit": git("rev-parse", "HEAD"), "date": git("log", "-1", "--format=%cI"),
            "recorded": now, "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "machine": machine(), "time": times, "track": tracks, "units": units}


def check(rec: dict[str, Any]) -> None:
    """Raise ValueError naming the first field of a record that is missing or malformed."""
    for field, kind in FIELDS.items():
        if not isinstance(rec.get(field), kind):
            raise ValueError(f"history record: {field} missing or not a {kind.__name__}")
    if len(rec["commit"]) != 40 or "name" not in rec["machine"]:
        raise ValueError("history record: commit is not a full hash or machine has no name")
    for group in ("time", "track"):
        for name, value in rec[group].items():
            if not isinstance(value, int | float) or name not in rec["units"]:
                raise ValueError(f"history record: {group}.{name} is not a number with a unit")


def load(path: Path) -> list[dict[str, Any]]:
    """The history's records, oldest commit first; none when the file does not exist."""
    if not path.exists():
        return []
    records = json.loads(path.read_text())["records"]
    for rec in records:
        check(rec)
    return records


def append(path: Path, rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Add a record to the history at ``path``, in place of one of the same commit and machine,
    and keep the records in the order of their commits' dates."""
    check(rec)
    key = (rec["commit"], rec["machine"]["name"])
    records = [r for r in load(path) if (r["commit"], r["machine"]["name"]) != key] + [rec]
    records.sort(key=lambda r: (r["date"], r["recorded"]))
    write_json(path, {"records": records})
    return records


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="timings per fit, the shortest kept")
    ap.add_argument("--history", type=Path, default=HISTORY, help="the history file to extend")
    json_option(ap, "history_last")
    args = ap.parse_args()
    from history import suite  # after the arguments: --help needs no data sets

    rec = record(*measure(suite, args.repeat))
    append(args.history, rec)
    write_json(args.json, rec)
    for group in ("time", "track"):
        for name, value in rec[group].items():
            print(f"{name:<28} {value:12.6g} {rec['units'][name]}")
    print(f"recorded {rec['commit'][:10]} on {rec['machine']['name']} in {args.history}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
