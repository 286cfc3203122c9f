"""``bnpmix tune``: an engine's own search of its prior hyperparameters (its ``tuner``), with
the flags every search takes and each engine's own (``Engine.tune_flags``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bnpmix.pipeline.usage import UsageError

# the optional flags every search may take, by its keyword parameter each sets (`prior`: the
# name --prior gave an engine's prior_alias); each engine's own are its Engine.tune_flags
TUNE_COMMON = {"fraction": "--fraction", "max_items": "--max-items", "prior": "--prior"}


def engine_tune_flags() -> dict[Any, list[str]]:
    """Every tuned engine's own tune flags (Engine.tune_flags), each with the engines whose
    search takes it."""
    from bnpmix.pipeline.runtime.engine import ENGINES, engine_names

    found: dict[Any, list[str]] = {}
    for name in engine_names():
        for flag in ENGINES[name].tune_flags if ENGINES[name].tuner else ():
            found.setdefault(flag, []).append(name)
    return found


def cmd_tune(args: argparse.Namespace) -> int:
    """`bnpmix tune`: the engine's own search over its grid (flags of another engine's search
    are usage errors), its table and the best point as a job file."""
    from inspect import signature

    from bnpmix.pipeline.config import prior_flags
    from bnpmix.pipeline.runtime.engine import tuner_of
    from bnpmix.pipeline.tune import format_table, write_job

    given = prior_flags(args.prior or [])
    search = tuner_of(args.algorithm)  # the engine's own search, with its own parameters
    takes = signature(search).parameters
    flags = {**{f.parameter: f.flag for f in engine_tune_flags()}, **TUNE_COMMON}
    alias = next((value for key, value in given.items() if key != "prior"), None)
    values = {**{k: getattr(args, k) for k in flags if k not in TUNE_COMMON},
              "fraction": args.fraction, "max_items": args.max_items, "prior": alias}
    chosen = {k: v for k, v in values.items() if v is not None}
    wrong = [flags[k] + (f" {v}" if k == "prior" else "") for k, v in chosen.items()
             if k not in takes]
    if wrong:
        own = [flag for k, flag in flags.items() if k in takes]
        raise UsageError(f"tune: {', '.join(wrong)}: not for --algorithm {args.algorithm} "
                         f"(its search takes {', '.join(own)}: {search.__name__} in "
                         f"{search.__module__})")
    common = {"obs": args.obs, "obs_prior": given.get("prior"),
              "test_fraction": args.test_fraction, "seed": args.seed,
              "scale_grid": args.scale_grid}
    if "algorithm" in takes:
        common["algorithm"] = args.algorithm
    result = search(args.corpus_dir, **common, **chosen)
    print(json.dumps(result) if args.json else format_table(result))
    for warning in result["warnings"]:
        print(f"bnpmix tune: warning: {warning}", file=sys.stderr)
    if args.out:
        write_job(args.out, args.corpus_dir, result, args.algorithm)
        if not args.json:
            print(f"job file: {args.out} (bnpmix fit --config {args.out} --out RUN_DIR)")
    return 0
