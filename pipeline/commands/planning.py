"""``bnpmix plan``: a memo lap's projected seconds and memory (pipeline/sizing.py)."""

from __future__ import annotations

import argparse
import json

from bnpmix.pipeline.usage import UsageError
from bnpmix.storage import BnpmixError

from .ingest import partitions


def cmd_plan(args: argparse.Namespace) -> int:
    """Projected seconds per lap and memory of a memo run (pipeline/sizing.py), from a corpus's
    manifest or a described shape, never its data."""
    from bnpmix.algorithms.obs import AUTO_CANDIDATES, default_obs
    from bnpmix.pipeline import sizing
    from bnpmix.pipeline.engines import DEFAULT_ENGINE
    from bnpmix.pipeline.runtime.context import AUTO, default_obs_name
    from bnpmix.pipeline.runtime.engine import engine_class
    from bnpmix.pipeline.runtime.memlimit import resolve
    from bnpmix.pipeline.settings import setting
    from bnpmix.storage import Corpus

    if (args.corpus_dir is None) == (args.shape is None):
        raise UsageError("plan needs a corpus directory or --shape (one of them)")
    if args.shape is not None:
        shape = sizing.Shape.described(args.shape, args.partition_rows)
        where = f"--shape {args.shape}"
        obs_default = AUTO if shape.kind == "dense" else default_obs(shape.kind)
    else:
        shape = sizing.Shape.of_corpus(args.corpus_dir)
        where = args.corpus_dir
        obs_default = default_obs_name(Corpus(args.corpus_dir), auto=True)
    coef = sizing.load_coefficients()
    measured = coef["models"]
    if args.obs is not None:
        names = [args.obs]
    elif obs_default == AUTO:  # the race's candidates: the winner's laps are the run's
        names = [n for n in AUTO_CANDIDATES if n in measured]
    else:
        names = [obs_default]
    for name in names:
        if name not in measured:
            raise BnpmixError(f"--obs {name}: no measured costs for it (measured: "
                              f"{', '.join(measured)})")
        if (measured[name]["structure"] == "text") != (shape.kind == "bow"):
            raise BnpmixError(f"--obs {name} does not fit a {shape.kind} corpus")
    wave = args.wave or engine_class(DEFAULT_ENGINE).default_wave
    budgets = {"cache_bytes": resolve(setting("cache-bytes", args.cache_bytes), args.memory),
               "summary_bytes": resolve(setting("summary-bytes", args.summary_bytes),
                                        args.memory)}
    plans = [sizing.project(coef, name, shape, args.K, args.workers, args.threads, wave,
                            args.ahead, **budgets) for name in names]
    if args.json:
        print(json.dumps({"corpus": where, "kind": shape.kind, "items": shape.items,
                          "dim": shape.dim, "partitions": shape.partitions,
                          "nnz_per_partition": shape.nnz, "machine": coef.get("machine"),
                          "plans": plans}))
        return 0
    dim = "V" if shape.kind == "bow" else "D"
    nnz = f", {shape.nnz * shape.partitions:,.0f} non-zeros" if shape.kind == "bow" else ""
    print(f"{where}: {shape.kind}, {shape.items:,} items, {dim} = {shape.dim:,}{nnz}, "
          f"{partitions(shape.partitions)} of {shape.rows:,.0f} rows")
    print(f"costs measured {coef['machine']['measured']} on {coef['machine']['cores']} cores "
          "(benchmarks/speed/sizing.py); one lap of memo, not counting the first (partitions "
          "read) nor, for --obs auto, its race")
    for p in plans:
        print(sizing.format_projection(p))
    return 0
