"""Record this checkout's speed and quality in the benchmark history: every ``time_*`` of the
suite (suite.py, on asv's conventions) timed, every ``track_*`` figure read, as one record
(commit, its date, machine) appended to benchmarks/results/history.json, which the Benchmarks
page shows as a trend. A record replaces an earlier one of the same commit and machine.

Usage::

    python benchmarks/history/run.py [--repeat 3] [--history PATH] [--json PATH]
    python benchmarks/history/run.py --rev REV [REV ...] | --last N   (backfill)

--repeat times each fit that many times and keeps the shortest (asv's best of); --json also
writes the one record to PATH (a backfill's records as {"records": [...]}). The suite takes
about a minute on 2 cores.

A backfill records past commits the way asv does: the suite of this checkout, the package of
each commit. Each commit is checked out with ``git worktree add --detach`` into a temporary
folder, an import root built beside it (``bnpmix`` laid out from that commit's pyproject.toml
package-dir, as symlinks), and the suite run in a child process with PYTHONPATH on that root,
which comes before the installed package's editable finder; the record names the commit, its
date, and dirty=False. A commit whose package cannot run the suite is reported and skipped (the
exit status is then 1). --last N: the last N first-parent commits of HEAD."""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import inspect
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common, history
from history.checkouts import Skipped, first_parent, git, measure_commit, resolve

from _common import RESULTS, json_option, write_json

HISTORY = RESULTS / "history.json"
ROOT = Path(__file__).resolve().parents[2]
SUITE = Path(__file__).resolve().with_name("suite.py")
FIELDS = {"commit": str, "date": str, "recorded": str, "dirty": bool, "machine": dict,
          "time": dict, "track": dict, "units": dict}


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


def record(times: dict, tracks: dict, units: dict, rev: str | None = None,
           repo: Path = ROOT) -> dict[str, Any]:
    """One history record: of this checkout (``rev`` None: HEAD, dirty when files had
    uncommitted changes) or of commit ``rev`` (its files as committed), with the commit's date,
    when and on what machine it was measured, and the figures."""
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    commit = git("rev-parse", rev or "HEAD", repo=repo)
    dirty = rev is None and bool(git("status", "--porcelain", "--untracked-files=no", repo=repo))
    return {"commit": commit, "date": git("log", "-1", "--format=%cI", commit, repo=repo),
            "recorded": now, "dirty": dirty, "machine": machine(), "time": times,
            "track": tracks, "units": units}


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


def load_suite(path: Path) -> ModuleType:
    """The suite module at ``path`` (asv's conventions: setup, time_*, track_*)."""
    spec = importlib.util.spec_from_file_location("history_suite", path)
    assert spec is not None and spec.loader is not None, path
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    return suite


def write_figures(suite: Path, repeat: int, path: Path) -> None:
    """A backfill's child: the suite's figures, and the file bnpmix was imported from (which
    the parent checks is the commit's checkout), as JSON to ``path``."""
    times, tracks, units = measure(load_suite(suite), repeat)
    bnpmix = importlib.import_module("bnpmix")
    path.write_text(json.dumps({"time": times, "track": tracks, "units": units,
                                "bnpmix": bnpmix.__file__}))


def backfill(revs: list[str], suite: Path, repeat: int, history: Path,
             repo: Path = ROOT) -> tuple[list[dict[str, Any]], list[str]]:
    """Record each rev's package on this checkout's suite (measured in a child process), each
    record appended to ``history`` when made; returns the records and, for each rev skipped,
    why."""
    child = [sys.executable, str(Path(__file__).resolve()), "--suite", str(suite),
             "--repeat", str(repeat)]
    records, skipped = [], []
    for rev in revs:
        try:
            commit = resolve(rev, repo)
            print(f"measuring {rev} ({commit[:10]})", flush=True)
            figures = measure_commit(commit, child, repo)
        except Skipped as exc:
            skipped.append(f"{rev}: {exc}")
            print(f"skipped {rev}: {exc}", file=sys.stderr, flush=True)
            continue
        rec = record(figures["time"], figures["track"], figures["units"], commit, repo)
        append(history, rec)
        records.append(rec)
    return records, skipped


def show(rec: dict[str, Any], history: Path) -> None:
    """A record's figures, one a line, and where it went."""
    for group in ("time", "track"):
        for name, value in rec[group].items():
            print(f"{name:<28} {value:12.6g} {rec['units'][name]}")
    print(f"recorded {rec['commit'][:10]} on {rec['machine']['name']} in {history}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="timings per fit, the shortest kept")
    ap.add_argument("--history", type=Path, default=HISTORY, help="the history file to extend")
    ap.add_argument("--rev", nargs="+", default=[], metavar="REV",
                    help="backfill: record these commits' package on this checkout's suite")
    ap.add_argument("--last", type=int, default=0, metavar="N",
                    help="backfill: the last N first-parent commits of HEAD")
    ap.add_argument("--suite", type=Path, default=SUITE, help="the suite file (%(default)s)")
    ap.add_argument("--figures", type=Path, help=argparse.SUPPRESS)  # a backfill's child
    json_option(ap, "history_last")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.figures is not None:
        write_figures(args.suite, args.repeat, args.figures)
        return 0
    if args.rev or args.last:
        revs = [*args.rev, *(first_parent(args.last, ROOT) if args.last else [])]
        records, skipped = backfill(revs, args.suite, args.repeat, args.history)
        write_json(args.json, {"records": records})
        for rec in records:
            show(rec, args.history)
        for why in skipped:
            print(f"skipped {why.splitlines()[0]}", file=sys.stderr)
        return 1 if skipped else 0
    # the suite is imported after the arguments: --help needs no data sets
    rec = record(*measure(load_suite(args.suite), args.repeat))
    append(args.history, rec)
    write_json(args.json, rec)
    show(rec, args.history)
    return 0


if __name__ == "__main__":
    sys.exit(main())
