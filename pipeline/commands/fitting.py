"""``bnpmix fit``, ``resume`` and ``schedule run``: a fit from the option table's flags and a
job file, a stopped run continued, a scheduled run; and the lines they print."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bnpmix.pipeline.declared import HELDOUT_DEQUANTISED, HELDOUT_NOTE
from bnpmix.pipeline.usage import UsageError

from .datawarnings import data_warnings


def fit_flags(args: argparse.Namespace) -> dict[str, Any]:
    """`fit`'s flags as option values (None: not given); repeated --prior flags combined."""
    from bnpmix.pipeline.config import options, prior_flags

    flags = {o.name: getattr(args, o.name) for o in options() if o.name != "corpus"}
    flags["corpus"] = args.corpus_dir
    if flags["prior"] is not None:
        given = prior_flags(flags.pop("prior"))
        for key in sorted(given.keys() - {"prior"}):  # an engine's prior_alias
            if flags[key] is not None:
                raise UsageError(f"--prior {given[key]} and --{key.replace('_', '-')} "
                                 f"{flags[key]} both set {key}; give one")
        flags.update(given)
    return flags


def typed_flag(args: argparse.Namespace, key: str) -> str:
    """The flag the user typed for option ``key`` (``--prior ig`` for an engine's prior_alias
    given by --prior)."""
    from bnpmix.pipeline.config import options, prior_aliases

    aliased = {row.name for row in prior_aliases().values()}
    if key in aliased and getattr(args, key) is None:
        return " ".join(f"--prior {p}" for p in args.prior or [] if isinstance(p, str))
    return next((o.flag for o in options() if o.name == key), key)


def cmd_fit(args: argparse.Namespace) -> int:
    """`bnpmix fit`: the job (defaults < --config < flags; a flag's bad value a usage error),
    fitted, its summary printed."""
    import time

    started = time.perf_counter()  # summary.json's wall_seconds count from here
    from bnpmix.pipeline.jobfile import load_job
    from bnpmix.pipeline.ranges import OptionError

    flags = fit_flags(args)
    try:  # the options are checked before Dask or an engine's run is imported
        job = load_job(args.config, flags)
    except OptionError as exc:
        if exc.origin != "flags":
            raise
        raise UsageError(f"{typed_flag(args, exc.key)}: {exc.reason}") from None
    if job.corpus is None or job.out is None:
        raise UsageError("fit needs a corpus and --out (on the command line or in --config)")
    from bnpmix.pipeline.fit import fit
    from bnpmix.pipeline.runtime.progress import Progress

    progress = Progress()
    try:
        # as `bnpmix: warning: ...`, each text once (obs auto's candidates share the corpus)
        with job.storage_config(), data_warnings("default"):
            summary = fit(job.corpus, job.out, job.config, progress=progress,
                          on_step=progress.step, started=started)
    finally:
        progress.close()
    print(format_fit(summary, job.out))
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    """`bnpmix resume RUN_DIR`: the run continued from its last checkpoint (nothing to do
    once finished)."""
    from bnpmix.pipeline.fit import resume
    from bnpmix.pipeline.runtime.progress import Progress

    progress = Progress()
    try:
        summary = resume(args.run_dir, progress=progress, on_step=progress.step)
    finally:
        progress.close()
    if summary is None:
        print(f"{args.run_dir}: the run had already finished; nothing to do")
    else:
        print(format_fit(summary, args.run_dir))
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    """`bnpmix schedule run JOB.toml`: pipeline/schedule.py's scheduled run, its outcome
    printed."""
    from bnpmix.pipeline.schedule import scheduled_run

    print(scheduled_run(args.job))
    return 0


def format_fit(summary: dict, out: str | Path) -> str:
    """The lines `fit`, `resume` and `demo` print of a finished run's summary."""
    from bnpmix.pipeline.declared import Declared, local_note
    from bnpmix.pipeline.inspect import convergence_text

    declared = Declared.of(summary)
    key = declared.objective
    weights = ", ".join(f"{w:.3f}" for w in sorted(summary["weights"], reverse=True)[:12])
    lines = [f"{summary['algorithm']}: K = {summary['K']} {declared.component_noun}s "
             f"({summary['K_effective']} with more than 1% of the mass), "
             f"{declared.objective_label} per item {summary[key + '_per_item']:.4f}, "
             f"{summary['wall_seconds']:.1f} s"]
    local = local_note(summary)  # ddcrp's tables: each sequence's own, not shared clusters
    if local is not None:
        lines.append(local)
    moving = convergence_text(summary)  # not converged: says so, and what was still moving
    lines += [f"{key}: {summary[key]}" for key in ("stopped", "returned")
              if key in summary and not (key == "stopped" and moving)]
    if moving is not None:
        lines.append(moving)
    if summary.get("heldout_kind") == HELDOUT_DEQUANTISED:
        lines.append(f"dequantised: the {declared.objective_label} and {HELDOUT_NOTE}")
    lines += [f"weights: {weights}{' ...' if summary['K'] > 12 else ''}", f"run directory: {out}"]
    return "\n".join(lines)
