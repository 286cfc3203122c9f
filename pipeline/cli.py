"""The ``bnpmix`` command line. Exit codes: 0 success, 1 data or runtime error, 2 usage error.

Each command imports what it runs when it runs, and the parser gives arguments only to the
command named (``build_parser``): ``bnpmix --help`` and ``bnpmix info`` load neither Dask nor
pyarrow, pandas or scipy, which the commands that read partitions or fit need."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import select
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from bnpmix.pipeline import stops
from bnpmix.pipeline.console import console_notes
from bnpmix.pipeline.declared import HELDOUT_DEQUANTISED, HELDOUT_NOTE
from bnpmix.pipeline.report.cli import add_parsers as add_report_parsers
from bnpmix.pipeline.usage import UsageError, renamed_flag
from bnpmix.storage import BnpmixError, local_path
from bnpmix.storage.errors import is_url

if TYPE_CHECKING:
    from bnpmix.pipeline.config import Option

FORMATS = ("npy", "csv", "docword", "text")


def guess_format(src: Path) -> str:
    """The ingest format implied by a source's name (used when --format is not given)."""
    name = src.name.removesuffix(".gz")
    if src.suffix == ".npy":
        return "npy"
    if src.suffix == ".csv":
        return "csv"
    if name.startswith("docword."):
        return "docword"
    if src.is_dir() or src.suffix == ".txt":
        return "text"
    raise BnpmixError(
        f"{src}: cannot tell the format from the name; give --format {'|'.join(FORMATS)}"
    )


def cmd_ingest(args: argparse.Namespace) -> int:
    """Ingest into a corpus directory, or into a URL: into a local temporary directory that is
    then published to the store, manifest last (storage.objectstore.publish_corpus)."""
    from bnpmix.storage.objectstore import publish_corpus
    from bnpmix.storage.writer import check_replaceable

    remote = is_url(args.corpus_dir)
    if remote and (args.append or args.overwrite):
        raise UsageError(f"{args.corpus_dir}: --append and --overwrite need a local corpus "
                         "directory (a corpus in object storage is written once)")
    src = Path(args.src)
    fmt = args.format or guess_format(src)
    check_ingest_flags(args, fmt)
    staging = (tempfile.TemporaryDirectory(prefix="bnpmix-ingest-") if remote
               else contextlib.nullcontext(None))
    with data_warnings("always"), staging as tmp:
        out = Path(tmp) / "corpus" if remote else Path(args.corpus_dir)
        if args.append:
            return ingest_append(args, src, out, fmt)
        if args.overwrite:
            check_replaceable(out, src)
        manifest = ingest_source(args, src, out, fmt, args.overwrite)
        if remote:
            publish_corpus(out, args.corpus_dir)
    print(f"ingested {manifest.n_items} items into {partitions(len(manifest.partitions))} at "
          f"{args.corpus_dir if remote else out}")
    return 0


def partitions(n: int) -> str:
    """``1 partition``, ``3 partitions``."""
    return f"{n} partition{'s' * (n != 1)}"


@contextlib.contextmanager
def data_warnings(action: str) -> Iterator[None]:
    """DataWarnings shown as ``bnpmix: warning: ...`` (``action``: the filter's, "always" or
    "default": once per text)."""
    import warnings

    from bnpmix.storage import DataWarning

    with warnings.catch_warnings():
        warnings.simplefilter(action, DataWarning)
        warnings.showwarning = _show_warning
        yield


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    import warnings

    from bnpmix.storage import DataWarning

    if issubclass(category, DataWarning):
        print(f"bnpmix: warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


TEXT_PRUNING = {"stopwords": "--stopwords", "min_df": "--min-df",
                "max_df_fraction": "--max-df-fraction"}


def check_ingest_flags(args: argparse.Namespace, fmt: str) -> None:
    """Flags that would be ignored for this format are usage errors, not silently dropped."""
    if args.vocab is not None and fmt not in ("docword", "text"):
        raise UsageError(f"--vocab applies to docword and text sources, not {fmt}")
    if args.labels is not None and fmt == "csv":
        raise UsageError("--labels is for npy, docword and text sources; a csv source keeps "
                         "its labels in a column: give --label-column NAME")
    given = [flag for key, flag in TEXT_PRUNING.items() if getattr(args, key) is not None]
    if fmt == "text" and args.vocab is not None and given:
        raise UsageError(f"--vocab fixes the vocabulary, so {', '.join(given)} would not "
                         "apply; drop them")


def ingest_source(args: argparse.Namespace, src: Path, out: Path, fmt: str, overwrite: bool):
    """Run the ingester of ``fmt`` with the options given on the command line."""
    from bnpmix.storage import ingest_csv, ingest_docword, ingest_npy, ingest_text

    common = {"partition_rows": args.partition_rows, "overwrite": overwrite}
    if fmt == "npy":
        return ingest_npy(src, out, labels=args.labels, **common)
    if fmt == "csv":
        return ingest_csv(src, out, label_column=args.label_column,
                          time_column=args.time_column, id_column=args.id_column,
                          sequence_column=args.sequence_column, **common)
    if fmt == "docword":
        return ingest_docword(src, out, vocab=args.vocab, labels=args.labels, **common)
    pruning = {key: getattr(args, key) for key in TEXT_PRUNING if getattr(args, key) is not None}
    return ingest_text(src, out, vocab=args.vocab, labels=args.labels,
                       min_doc_length=args.min_doc_length, **pruning, **common)


def ingest_append(args: argparse.Namespace, src: Path, corpus: Path, fmt: str) -> int:
    """Ingest into a staged sibling, then move its partitions into the existing corpus."""
    from bnpmix.storage import Corpus
    from bnpmix.storage.append import append_corpus
    from bnpmix.storage.atomic import remove_stale_staging

    if fmt == "text" and args.vocab is None:
        raise BnpmixError(f"{src}: --append of text needs --vocab {corpus} (the corpus's "
                          "vocabulary; without it text ingestion builds its own)")
    Corpus(corpus)  # the target must already be a corpus
    remove_stale_staging(corpus / "append")
    staged = Path(tempfile.mkdtemp(prefix=f".append.{os.getpid()}-", suffix=".tmp", dir=corpus))
    try:
        ingest_source(args, src, staged / "new", fmt, overwrite=False)
        added = append_corpus(corpus, staged / "new", source=src)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    print(f"appended {partitions(added)} to {corpus} "
          f"(now {partitions(Corpus(corpus).n_partitions)})")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from bnpmix.pipeline import inspect
    from bnpmix.pipeline.remote_run import local_copy
    from bnpmix.storage import Corpus
    from bnpmix.storage.objectstore import exists

    if is_url(args.path):  # a run in object storage has its summary.json; a corpus has not
        kind = "run" if exists(args.path, "summary.json") else "corpus"
    else:
        kind = inspect.kind_of(args.path)
    if kind == "run":
        with local_copy(args.path) as local:
            info = inspect.run_info(local)
        if is_url(args.path):
            info["run_dir"] = args.path
        print(json.dumps(info) if args.json else inspect.format_run_info(info))
    else:
        info = Corpus(args.path).info()
        print(json.dumps(info) if args.json else inspect.format_corpus_info(info))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from bnpmix.pipeline import inspect
    from bnpmix.pipeline.remote_run import local_copy

    with local_copy(args.run_dir) as run_dir:
        shown = {**inspect.show_clusters(run_dir, top_words=args.top_words, top=args.top),
                 "run_dir": args.run_dir}
    print(json.dumps(shown) if args.json else inspect.format_show(shown))
    return 0


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
    import time

    started = time.perf_counter()  # summary.json's wall_seconds count from here
    from bnpmix.pipeline.config import OptionError
    from bnpmix.pipeline.jobfile import load_job

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
    from bnpmix.pipeline.schedule import scheduled_run

    print(scheduled_run(args.job))
    return 0


def format_fit(summary: dict, out: str | Path) -> str:
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


def cmd_evaluate(args: argparse.Namespace) -> int:
    from bnpmix.pipeline.evaluate import evaluate
    from bnpmix.pipeline.remote_run import local_copy

    with local_copy(args.run_dir) as run_dir:
        result = evaluate(run_dir, args.heldout, args.label_column, scheduler=args.scheduler,
                          cluster=args.cluster)
    if result["heldout_kind"] == HELDOUT_DEQUANTISED:
        print(f"bnpmix evaluate: {HELDOUT_NOTE}", file=sys.stderr)
    if args.heldout is None:
        print(f"bnpmix evaluate: no --heldout: scored the run's training corpus "
              f"{result['corpus']} (in-sample: items the fit saw)", file=sys.stderr)
    print(json.dumps(result))
    return 0


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


def cmd_demo(args: argparse.Namespace) -> int:
    from bnpmix.datasets import TOY_PATCHES_OBS, toy_patch_covariances, toy_patches
    from bnpmix.pipeline.evaluate import evaluate
    from bnpmix.pipeline.fit import fit, job_config
    from bnpmix.storage import ingest_array

    if args.out is not None and Path(args.out).exists() and any(Path(args.out).iterdir()):
        raise UsageError(f"--out {args.out}: not empty; the demo writes its corpus and run "
                         "into a new or empty directory")
    X, labels = toy_patches(n=args.n, seed=args.seed)
    keep = contextlib.nullcontext(args.out) if args.out is not None else \
        tempfile.TemporaryDirectory(prefix="bnpmix-demo-")
    with keep as where:
        corpus, run = Path(where) / "toy-patches", Path(where) / "run"
        ingest_array(X, corpus, partition_rows=max(1, args.n // 20), columns={"label": labels})
        print(f"demo: {args.n} synthetic 5x5 patches from 8 zero-mean edge components, "
              f"20 partitions; memoized VB with births, merges and deletes from K = 1")
        laps = {} if args.laps is None else {"laps": args.laps}
        summary = fit(corpus, run, job_config(obs=TOY_PATCHES_OBS, seed=args.seed, **laps))
        print(format_fit(summary, run if args.out is not None else "(temporary)"))
        scores = evaluate(run, corpus, "label")
        oracle = oracle_ari(X, labels, toy_patch_covariances())
        print(f"agreement with the true components: ARI {scores['ari']:.3f} "
              f"(the true parameters' own assignments: ARI {oracle:.3f}), "
              f"NMI {scores['nmi']:.3f}")
    print(demo_next(corpus, run) if args.out is not None else
          "to keep the corpus and the run and look at them: bnpmix demo --out DIR")
    return 0


def demo_next(corpus: Path, run: Path) -> str:
    """What to try next on the demo's corpus and run."""
    return "\n".join([
        "next:",
        f"  bnpmix info {run}                     # the run: K, weights, sizes, ELBO",
        f"  bnpmix show {run}                     # each cluster's weight, size and mean",
        f"  bnpmix report {run}                   # an HTML report in {run / 'report'}",
        f"  bnpmix evaluate {run} --heldout {corpus} --label-column label",
        f"  bnpmix fit {corpus} --out {run.parent / 'run-vb'} --algorithm vb --K 20"
        "   # another engine"])


def oracle_ari(X, labels, covariances) -> float:
    """ARI of the assignments the true (equal-weight, zero-mean) components would make."""
    import numpy as np

    from bnpmix.algorithms.metrics import adjusted_rand_index

    L = np.linalg.cholesky(covariances)
    U = np.linalg.inv(L)
    logdet = 2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(1)
    quad = np.stack([((X @ u.T) ** 2).sum(1) for u in U], axis=1)
    return adjusted_rand_index(labels, (-0.5 * quad - 0.5 * logdet).argmax(1))


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the command line: every command with its help, but only the command that
    ``argv`` names gets its arguments (fit's come from every engine's option table, tune's
    defaults from the tuner), so ``bnpmix --help`` and ``bnpmix info`` import neither; without
    ``argv`` every command gets them."""
    parser = argparse.ArgumentParser(
        prog="bnpmix",
        description="Bayesian nonparametric mixture models on corpora stored as Parquet "
        "partitions.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # the top level's only option is --debug, a switch: the first other word is the command
    chosen = None if argv is None else next((w for w in argv if not w.startswith("-")), None)

    def command(name: str, arguments: Callable[[argparse.ArgumentParser], None],
                **text: str) -> None:
        p = sub.add_parser(name, **text)
        if argv is None or name == chosen:
            arguments(p)

    command("ingest", _ingest_arguments,
            help="turn a source file or folder into a partitioned corpus")
    command("info", _info_arguments, help="describe a corpus or a finished run",
            description="A corpus: kind, items, dimension, partitions, columns, its "
            "vocabulary file. A run directory: engine, K (effective: more than 1%% of "
            "the weight; non-empty: at least one item), weights, cluster sizes, the "
            "objective, laps, wall seconds.")
    command("show", _show_arguments,
            help="a finished run's clusters by weight: top words (text) or means (dense)",
            description="The heaviest clusters of a run with their weights and sizes "
            "and, for text, their most probable words (posterior mean word "
            "probabilities; words from RUN_DIR/vocab.txt, else the corpus's), for "
            "dense data their posterior mean vectors.")
    command("fit", _fit_arguments, help="fit a DP mixture to a corpus and write a run directory",
            description="Options may also come from --config job.toml (same names); "
            "flags override the file.")
    command("resume", _resume_arguments, help="continue a killed run from its last checkpoint")
    command("schedule", _schedule_arguments, help="scheduled, resumable pipeline runs")
    command("tune", _tune_arguments, help="prior hyperparameters by held-out predictive "
            "log-likelihood on a sample: the NRM prior's a, tau (adf, ep) or the DP "
            "concentration alpha0 (memo); writes a job file",
            description="Fits a sample of the corpus for every point of a grid and "
            "scores held-out items by their posterior predictive; prints the table, "
            "best first. adf, ep: one ADF pass per point over a and tau (Tank, Foti "
            "& Fox 2015, supplement 4.1). memo: one memo fit per point (its default "
            "options, the --seed) over alpha0. Both also search a Gaussian prior's "
            "scale; memo on bag-of-words searches the Dirichlet's lam0.")
    command("evaluate", _evaluate_arguments,
            help="held-out (or, without --heldout, training) log-likelihood per item, K; with "
            "labels ARI, NMI, VI and majority-label accuracy (prints JSON)")
    command("plan", _plan_arguments,
            help="project a memo lap's seconds and the driver's and workers' memory for a "
            "corpus on N workers (from its manifest and costs measured by "
            "benchmarks/speed/sizing.py)",
            description="Reads only the corpus's manifest (or --shape). The model: a lap is "
            "ceil(P / W) waves, each the slowest slot's tasks, the driver's W visits, the "
            "wave's globals and its round trip through the scheduler, plus the lap end and "
            "the checkpoint; see the user guide's Sizing a cluster.")
    add_report_parsers(sub)
    command("demo", _demo_arguments, help="run the main job on an embedded synthetic data set")
    return parser


def _ingest_arguments(p: argparse.ArgumentParser) -> None:
    """`ingest SRC CORPUS_DIR` and its options."""
    from bnpmix.storage import DOCUMENTS_PER_PARTITION, VALUES_PER_PARTITION

    p.add_argument("src", help="source: .npy, .csv, docword.NAME.txt[.gz], a text file or folder")
    p.add_argument("corpus_dir", help="the corpus directory to create")
    p.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    p.add_argument("--partition-rows", type=_positive_int, default=None, metavar="N",
                   help=f"items per partition (default: {DOCUMENTS_PER_PARTITION:,} documents; "
                   f"dense: {VALUES_PER_PARTITION:,} / D rows rounded up to a thousand, 50,000 "
                   "at D = 25); "
                   "with --sequence-column a partition closes at the first sequence boundary at "
                   "or after N items, so a longer sequence makes one bigger partition")
    p.add_argument("--overwrite", action="store_true", help="replace an existing corpus directory")
    p.add_argument("--append", action="store_true",
                   help="add the source's rows as new partitions of an existing corpus")
    p.add_argument("--vocab", metavar="FILE|CORPUS_DIR",
                   help="docword, text: vocabulary, one word per line, or a corpus directory "
                   "(its vocab.txt, which `bnpmix info CORPUS_DIR` names): the corpus's columns "
                   "are exactly these words, so held-out text ingested with a training corpus's "
                   "vocabulary gets its columns; other words are dropped and --stopwords, "
                   "--min-df, --max-df-fraction do not apply (docword default: vocab.NAME.txt "
                   "beside it)")
    p.add_argument("--labels", metavar="FILE",
                   help="npy, docword, text: one label per line for each row/document, in order "
                   "(text: each file of the folder in name order, or each line of the file), or "
                   "a .npy file of a 1-D integer or string array, one entry per item; "
                   "stored as the corpus's `label` column as csv's --label-column stores one; "
                   "integers, or strings (mapped to 0..k-1 in sorted order, the mapping recorded "
                   "in the manifest)")
    p.add_argument("--label-column", help="csv: column holding a label per item (a feature "
                   "column named label, class, target, y, ... holding integers gets a warning "
                   "when this is not given)")
    renamed_flag(p, "--labels-column", "--label-column", "label_column")
    p.add_argument("--time-column", help="csv: column holding an integer time/epoch per item")
    p.add_argument("--id-column", help="csv: column holding an item id")
    p.add_argument("--sequence-column",
                   help="csv: column holding an integer sequence id; a sequence is kept whole in "
                   "one partition, rows in file order (the file must be grouped by sequence; a "
                   "partition may exceed --partition-rows to hold a long sequence)")
    p.add_argument("--stopwords", metavar="english|none|FILE",
                   help="text: words never kept: `english` (default: the shipped list of about "
                   "270 function words such as the, of, and), `none`, or a file with one word per "
                   "line that replaces the list (./english for a file of that name); the manifest "
                   "records which list was used")
    p.add_argument("--min-df", type=_positive_int,
                   help="text: drop words in fewer documents than this (default 2: a word met in "
                   "one document only cannot tie documents together, and such words, typos and "
                   "rare names, are often half of the distinct words; 1 keeps every word)")
    p.add_argument("--max-df-fraction", type=float,
                   help="text: drop words in more than this fraction of documents (default 1.0)")
    p.add_argument("--min-doc-length", type=int, default=1,
                   help="text: drop documents with fewer vocabulary words (default 1)")
    p.set_defaults(func=cmd_ingest, remote_ok=("corpus_dir",))


def _info_arguments(p: argparse.ArgumentParser) -> None:
    """`info PATH [--json]`."""
    p.add_argument("path", metavar="CORPUS_DIR|RUN_DIR")
    p.add_argument("--json", action="store_true",
                   help="one JSON object (a corpus: kind, n_items, dim, nnz (bow), n_partitions, "
                   "bytes, ...; a run: engine, K, K_effective, K_nonempty, weights, sizes, ...)")
    p.set_defaults(func=cmd_info, remote_ok=("path",))


def _show_arguments(p: argparse.ArgumentParser) -> None:
    """`show RUN_DIR` and its options."""
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--top-words", type=_positive_int, default=10, metavar="N",
                   help="words shown per text cluster (default 10)")
    p.add_argument("--top", type=_positive_int, default=20, metavar="N",
                   help="clusters shown, heaviest first (default 20)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_show, remote_ok=("run_dir",))


def _fit_arguments(p: argparse.ArgumentParser) -> None:
    """`fit [CORPUS_DIR]`: --config and a flag per row of the option table (every engine's)."""
    from bnpmix.pipeline.config import options

    p.add_argument("corpus_dir", nargs="?", help="corpus directory (or `corpus` in the job file)")
    p.add_argument("--config", metavar="JOB.toml", help="job file with any of these options")
    for row in options():
        if row.name != "corpus":
            add_option(p, row)
    p.set_defaults(func=cmd_fit, remote_ok=("corpus_dir", "out", "warm_start"))


def _resume_arguments(p: argparse.ArgumentParser) -> None:
    """`resume RUN_DIR`."""
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_resume, remote_ok=("run_dir",))


def _schedule_arguments(p: argparse.ArgumentParser) -> None:
    """`schedule run JOB.toml`."""
    ssub = p.add_subparsers(dest="schedule_command", required=True, metavar="ACTION")
    q = ssub.add_parser("run", help="fit the corpus if it has new partitions; publish a version")
    q.add_argument("job", metavar="JOB.toml")
    q.set_defaults(func=cmd_schedule)


def _tune_arguments(p: argparse.ArgumentParser) -> None:
    """`tune CORPUS_DIR` and its grids."""
    from bnpmix.algorithms.obs import OBS_NAMES
    from bnpmix.pipeline.engines import DEFAULT_TUNED
    from bnpmix.pipeline.runtime.engine import ENGINES, engine_names
    from bnpmix.pipeline.tune import ALL_ITEMS, FRACTION, SCALE_GRID

    tuned = [n for n in engine_names() if ENGINES[n].tuner]
    p.add_argument("corpus_dir")
    p.add_argument("--algorithm", choices=tuned,
                   default=DEFAULT_TUNED, help="the engine tuned and written into the job file "
                   f"(those that declare a search; default {DEFAULT_TUNED})")
    p.add_argument("--prior", action="append", type=_prior, metavar="PRIOR",
                   help="a JSON table of observation-prior parameters, kept fixed; or (adf, "
                   "ep) the NRM prior: dp, ig (default) or nggp (repeatable)")
    p.add_argument("--obs", choices=OBS_NAMES, help="observation model (default: the corpus's)")
    p.add_argument("--fraction", type=float,
                   help=f"fraction of the corpus's items sampled (default: all items of a "
                   f"corpus of at most {ALL_ITEMS}, else {FRACTION:g} of them but at least "
                   f"{ALL_ITEMS})")
    p.add_argument("--max-items", type=_positive_int,
                   help=f"at most this many items sampled (default: "
                   f"{_tuner_defaults(tuned, 'max_items')})")
    p.add_argument("--test-fraction", type=float, default=0.2,
                   help="fraction of the sample held out (default 0.2)")
    for flag, engines in engine_tune_flags().items():  # each engine's search's own
        kind = ({"type": _numbers, "metavar": flag.metavar} if flag.grid else
                {"type": float, "metavar": flag.flag[2:].replace("-", "_").upper()})
        p.add_argument(flag.flag, dest=flag.parameter, help=f"{', '.join(engines)}: {flag.help}",
                       **kind)
    p.add_argument("--scale-grid", type=_numbers, default=SCALE_GRID, metavar="S,S,...",
                   help="Gaussian priors' scale values (default 0.1,0.3,1; not searched when "
                   "--prior sets scale)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (and memo's)")
    p.add_argument("--out", metavar="JOB.toml", help="write the best point as a job file")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_tune, remote_ok=("corpus_dir",))


def _tuner_defaults(tuned: list[str], parameter: str) -> str:
    """Each tuned engine's default of its search's keyword ``parameter``, engines sharing a
    default named together ("adf, ep 20000; memo 5000")."""
    from inspect import signature

    from bnpmix.pipeline.runtime.engine import tuner_of

    by: dict[Any, list[str]] = {}
    for name in tuned:
        given = signature(tuner_of(name)).parameters.get(parameter)
        if given is not None:
            by.setdefault(given.default, []).append(name)
    return "; ".join(f"{', '.join(names)} {default}" for default, names in by.items())


def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    """`evaluate RUN_DIR [--heldout CORPUS_DIR]` and its options."""
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--heldout", metavar="CORPUS_DIR",
                   help="score this corpus (a directory or a URL) of items the fit did not see, "
                   "with the run's columns or vocabulary (default: the run's training corpus, "
                   "recorded in RUN_DIR/job.json, in-sample; the output's `scored` says which)")
    p.add_argument("--label-column", help="corpus column with true labels (for ARI, NMI, "
                   "VI and accuracy)")
    renamed_flag(p, "--labels-column", "--label-column", "label_column")
    p.add_argument("--scheduler", default="threads",
                   help="where partitions are scored: threads, synchronous, or tcp://HOST:PORT "
                   "of a Dask scheduler (default threads)")
    p.add_argument("--cluster", metavar="PROFILE.yaml",
                   help="score on a Dask cluster started or reached from a cluster profile "
                   "(cluster-configs/), as fit --cluster")
    p.set_defaults(func=cmd_evaluate, remote_ok=("run_dir", "heldout"))


def _plan_arguments(p: argparse.ArgumentParser) -> None:
    """`plan [CORPUS_DIR] --workers N` and its options."""
    p.add_argument("corpus_dir", nargs="?", metavar="CORPUS_DIR",
                   help="an ingested corpus (only its manifest is read)")
    p.add_argument("--shape", metavar="dense:ITEMS:D|bow:ITEMS:V:NNZ",
                   help="a corpus not ingested yet, instead of CORPUS_DIR")
    p.add_argument("--partition-rows", type=_positive_int, metavar="N",
                   help="with --shape: rows per partition (default: ingest's)")
    p.add_argument("--workers", type=_positive_int, required=True, help="Dask workers")
    p.add_argument("--threads", type=_positive_int, default=1, help="threads per worker (1)")
    p.add_argument("--K", type=_positive_int, default=100,
                   help="components the run will hold (default 100)")
    p.add_argument("--obs", help="observation model (default: the corpus's; dense: each "
                   "model --obs auto races that has measured costs)")
    p.add_argument("--wave", type=_positive_int, help="memo's --wave (default: memo's, 4)")
    p.add_argument("--ahead", type=int, default=0, help="memo's --ahead (default 0)")
    p.add_argument("--cache-bytes", type=_bytes, metavar="BYTES",
                   help="each worker's partition cache (default: Dask config, 10%% of what "
                   "--memory leaves beyond a process's start)")
    p.add_argument("--summary-bytes", type=_bytes, metavar="BYTES",
                   help="the driver's in-memory summaries (default: Dask config, 5%% of it)")
    p.add_argument("--memory", type=_bytes, metavar="BYTES",
                   help="memory each process (driver, worker) may use, which the default "
                   "budgets are shares of (default: this process's: its cgroup's limit, "
                   "else the machine's)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_plan, remote_ok=("corpus_dir",))


def _bytes(text: str) -> int:
    """A size (pipeline/sizes.py: bytes, or 40MB, 1.5GiB, 200k)."""
    from bnpmix.pipeline.sizes import nbytes

    try:
        return nbytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    """`demo` and its options."""
    p.add_argument("--n", type=_positive_int, default=20_000, help="number of patches")
    p.add_argument("--laps", type=_positive_int,
                   help="most laps (default: memo's, stopping on convergence)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", metavar="DIR", help="keep the corpus (DIR/toy-patches) and the run "
                   "(DIR/run) in this new or empty directory, and print what to try on them "
                   "(default: a temporary directory, removed at the end)")
    p.set_defaults(func=cmd_demo)


def add_option(parser: argparse.ArgumentParser, row: Option) -> None:
    """One row of the option table as a flag (default None: not given, so a job file's value or
    the engine's default applies)."""

    def parse(text: str):
        if row.variants:  # the chosen engine's row parses it, at resolve
            return text
        try:
            return row.parse(text)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    where = f"; {', '.join(row.engines)}" if row.engines else ""
    shown = "none" if row.default == () else row.default
    if row.defaults:  # engines whose defaults differ: each engine's (sovb runs 20 laps)
        shown = ", ".join(f"{value} ({', '.join(e for e, v in row.defaults if v == value)})"
                          for value in dict.fromkeys(v for _, v in row.defaults))
    default = "" if row.default is None or row.default == {} else f" (default {shown}"
    if row.within:
        default = (f"{default}, " if default else " (") + f"in {row.within}"
    repeat = {"action": "append"} if row.name == "prior" else {}  # see prior_flags
    parser.add_argument(row.flag, dest=row.name, type=parse, choices=row.choices, **repeat,
                        metavar=None if row.choices else row.name.upper(),
                        help=(row.help + (f"{default}{where})" if default else (
                            f" ({where[2:]})" if where else ""))).replace("%", "%%"))


def _prior(text: str) -> dict[str, Any] | str:
    from bnpmix.pipeline.config import prior_value

    try:
        return prior_value(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _numbers(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers separated by commas, "
                                         f"not {text!r}")
    return values


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def _notes(exc: BaseException) -> str:
    """What the code that was stopped added to its exception (how to continue a run)."""
    return "".join(f"; {note}" for note in getattr(exc, "__notes__", ()))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    remote_ok = getattr(args, "remote_ok", ())  # arguments that may be URLs (object storage)
    for name, value in vars(args).items():  # before anything can take a URL for a local path
        if not isinstance(value, str) or name in remote_ok:
            continue
        try:
            local_path(value)
        except BnpmixError as exc:
            parser.error(f"{name}: {exc}")
    stops.install()
    try:
        # fit's notes as lines on stderr; warnings such as a fit's constant columns once per text
        with console_notes(), data_warnings("default"):
            code = args.func(args)
        if stops.pending() is not None:  # swallowed where it landed, after the last step
            print("bnpmix: stopped by a signal once the command had finished; what it wrote "
                  "is complete", file=sys.stderr)
            return 143 if stops.pending() is stops.Terminated else 130
        return code
    except stops.Terminated as exc:
        print(f"bnpmix: terminated; nothing half-written was left{_notes(exc)}",
              file=sys.stderr)
        return 143
    except UsageError as exc:
        parser.error(str(exc))
    except BnpmixError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"bnpmix: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"bnpmix: interrupted{_notes(exc)}", file=sys.stderr)
        return 130
    except BrokenPipeError as exc:
        if stdout_gone():  # `bnpmix info RUN | head -1`: the reader has what it wanted
            return 0
        return report_error(exc, args.debug)
    except Exception as exc:
        return report_error(exc, args.debug)


def report_error(exc: Exception, debug: bool) -> int:
    """A one-line report of an unexpected error (the traceback with --debug): exit code 1."""
    if debug:
        traceback.print_exc()
    print(f"bnpmix: error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
          file=sys.stderr)
    return 1


def stdout_gone() -> bool:
    """Whether stdout's reader has closed the pipe (as in ``| head``); then stdout is pointed
    at /dev/null so that nothing later writes to it or reports the closed pipe."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file (captured output)
        return False
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    if not any(events & select.POLLERR for _, events in poll.poll(0)):  # a pipe's reader left
        try:
            sys.stdout.flush()
            return False
        except BrokenPipeError:
            pass
        except (OSError, ValueError):  # closed some other way: nothing more can be said there
            return False
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)
    return True


def entry() -> NoReturn:
    """The console script: main(), then an exit that skips the interpreter's teardown. Native
    thread pools (pyarrow's Parquet readers; apache/arrow#34314) can still be alive when the
    interpreter finalises and abort the process ("terminate called without an active
    exception", exit 134) after the command has succeeded. Every file a command writes is
    closed and published before main() returns, so after flushing stdout and stderr there is
    nothing left for the teardown to do. Before main(): the process's allocators
    (malloc.process_allocators)."""
    from bnpmix.pipeline.malloc import process_allocators

    process_allocators()
    code = main()
    stdout_gone()  # a reader that left before the last lines (`| head`) is not an error
    try:
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more can be said there
        code = code or 1
    os._exit(code)


if __name__ == "__main__":
    entry()
