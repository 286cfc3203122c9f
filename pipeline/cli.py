"""The ``bnpmix`` command line. Exit codes: 0 success, 1 data or runtime error, 2 usage error."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bnpmix.algorithms.birth import BirthConfig
from bnpmix.pipeline.config import ALGORITHMS, OBS_NAMES, SOVB_SCHEDULES, FitConfig
from bnpmix.pipeline.fit import evaluate, fit
from bnpmix.storage import (
    DEFAULT_PARTITION_ROWS,
    BnpmixError,
    Corpus,
    ingest_csv,
    ingest_docword,
    ingest_npy,
    ingest_text,
)

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
    src, out = Path(args.src), Path(args.corpus_dir)
    fmt = args.format or guess_format(src)
    common = {"partition_rows": args.partition_rows, "overwrite": args.overwrite}
    if fmt == "npy":
        manifest = ingest_npy(src, out, **common)
    elif fmt == "csv":
        manifest = ingest_csv(
            src, out, label_column=args.label_column, time_column=args.time_column,
            id_column=args.id_column, **common,
        )
    elif fmt == "docword":
        manifest = ingest_docword(src, out, vocab=args.vocab, **common)
    else:
        manifest = ingest_text(
            src, out, stopwords=args.stopwords, min_df=args.min_df,
            max_df_fraction=args.max_df_fraction, min_doc_length=args.min_doc_length, **common,
        )
    print(f"ingested {manifest.n_items} items into {len(manifest.partitions)} partitions at {out}")
    return 0


def format_info(info: dict) -> str:
    """Human-readable lines of a corpus's info."""
    dim_name = "V (vocabulary)" if info["kind"] == "bow" else "D (dimension)"
    lines = [
        f"kind          {info['kind']}",
        f"items         {info['n_items']}",
        f"{dim_name:<14}{info['dim']}",
    ]
    if info["kind"] == "bow":
        lines.append(f"non-zeros     {info['nnz']}")
    lines += [
        f"partitions    {info['n_partitions']}",
        f"bytes         {info['bytes']}",
        f"columns       {', '.join(info['columns']) or '-'}",
    ]
    return "\n".join(lines)


def cmd_info(args: argparse.Namespace) -> int:
    info = Corpus(args.corpus_dir).info()
    print(json.dumps(info) if args.json else format_info(info))
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    summary = fit(args.corpus_dir, args.out, cfg)
    print(format_fit(summary, args.out))
    return 0


def config_from_args(args: argparse.Namespace) -> FitConfig:
    """The FitConfig the flags describe."""
    moves = tuple(m for m in (args.moves or "").split(",") if m)
    kappa, delay = SOVB_SCHEDULES[args.sovb_schedule]
    try:
        return FitConfig(
            algorithm=args.algorithm, obs=args.obs, K=args.K, laps=args.laps, moves=moves,
            seed=args.seed, alpha0=args.alpha0, warm_start=args.warm_start,
            sovb_kappa=kappa, sovb_delay=delay,
            birth=BirthConfig(per_lap=args.births_per_lap),
        )
    except ValueError as exc:
        raise BnpmixError(str(exc)) from None


def format_fit(summary: dict, out: str | Path) -> str:
    weights = ", ".join(f"{w:.3f}" for w in sorted(summary["weights"], reverse=True)[:12])
    return (f"{summary['algorithm']}: K = {summary['K']} components "
            f"({summary['K_effective']} with more than 1% of the mass), "
            f"ELBO per item {summary['elbo_per_item']:.4f}, {summary['wall_seconds']:.1f} s\n"
            f"weights: {weights}{' ...' if summary['K'] > 12 else ''}\nrun directory: {out}")


def cmd_evaluate(args: argparse.Namespace) -> int:
    print(json.dumps(evaluate(args.run_dir, args.heldout, args.labels_column)))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from bnpmix.datasets import toy_patch_covariances, toy_patches
    from bnpmix.storage import ingest_array

    X, labels = toy_patches(n=args.n, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="bnpmix-demo-") as tmp:
        corpus, run = Path(tmp) / "toy-patches", Path(tmp) / "run"
        ingest_array(X, corpus, partition_rows=max(1, args.n // 20), columns={"label": labels})
        print(f"demo: {args.n} synthetic 5x5 patches from 8 zero-mean edge components, "
              f"20 partitions; memoized VB with births and merges from K = 1")
        cfg = FitConfig(algorithm="memo", obs="zm-gauss", K=1, laps=args.laps,
                        moves=("birth", "merge"), seed=args.seed)
        summary = fit(corpus, run, cfg)
        print(format_fit(summary, "(temporary)"))
        scores = evaluate(run, corpus, "label")
        oracle = oracle_ari(X, labels, toy_patch_covariances())
        print(f"agreement with the true components: ARI {scores['ari']:.3f} "
              f"(the true parameters' own assignments: ARI {oracle:.3f}), "
              f"NMI {scores['nmi']:.3f}")
    return 0


def oracle_ari(X, labels, covariances) -> float:
    """ARI of the assignments the true (equal-weight, zero-mean) components would make."""
    from bnpmix.algorithms.metrics import adjusted_rand_index

    L = np.linalg.cholesky(covariances)
    U = np.linalg.inv(L)
    logdet = 2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(1)
    quad = np.stack([((X @ u.T) ** 2).sum(1) for u in U], axis=1)
    return adjusted_rand_index(labels, (-0.5 * quad - 0.5 * logdet).argmax(1))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bnpmix",
        description="Bayesian nonparametric mixture models on corpora stored as Parquet "
        "partitions.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", help="turn a source file or folder into a partitioned corpus")
    p.add_argument("src", help="source: .npy, .csv, docword.NAME.txt[.gz], a text file or folder")
    p.add_argument("corpus_dir", help="the corpus directory to create")
    p.add_argument("--format", choices=FORMATS, help="source format (default: from the name)")
    p.add_argument("--partition-rows", type=_positive_int, default=DEFAULT_PARTITION_ROWS,
                   metavar="N", help=f"items per partition (default {DEFAULT_PARTITION_ROWS})")
    p.add_argument("--overwrite", action="store_true", help="replace an existing corpus directory")
    p.add_argument("--vocab", help="docword: vocabulary file (default vocab.NAME.txt beside it)")
    p.add_argument("--label-column", help="csv: column holding a label per item")
    p.add_argument("--time-column", help="csv: column holding an integer time/epoch per item")
    p.add_argument("--id-column", help="csv: column holding an item id")
    p.add_argument("--stopwords", help="text: stop-word file, one word per line")
    p.add_argument("--min-df", type=_positive_int, default=1,
                   help="text: drop words in fewer documents than this (default 1)")
    p.add_argument("--max-df-fraction", type=float, default=1.0,
                   help="text: drop words in more than this fraction of documents (default 1.0)")
    p.add_argument("--min-doc-length", type=int, default=1,
                   help="text: drop documents with fewer vocabulary words (default 1)")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("info", help="describe a corpus")
    p.add_argument("corpus_dir")
    p.add_argument("--json", action="store_true",
                   help="one JSON object: kind, n_items, dim, nnz (bow), n_partitions, bytes")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("fit", help="fit a DP mixture to a corpus and write a run directory")
    p.add_argument("corpus_dir")
    p.add_argument("--out", required=True, help="run directory to write")
    p.add_argument("--algorithm", choices=ALGORITHMS, default="memo",
                   help="memo (memoized online VB), vb (full-data VB), sovb (stochastic online)")
    p.add_argument("--obs", choices=OBS_NAMES,
                   help="observation model (default: gauss for dense, mult for bag-of-words)")
    p.add_argument("--K", type=_positive_int, default=1, help="initial number of components")
    p.add_argument("--laps", type=_positive_int, default=20, help="passes through the data")
    p.add_argument("--moves", default="", help="comma-separated: birth,merge (memo only)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha0", type=float, default=1.0, help="DP concentration")
    p.add_argument("--births-per-lap", type=_positive_int, default=1)
    p.add_argument("--sovb-schedule", choices=sorted(SOVB_SCHEDULES), default="a",
                   help="sovb learning rate (t+d)^-kappa: a (0.5, 10), b (0.5, 100), c (0.9, 10)")
    p.add_argument("--warm-start", metavar="RUN_DIR", help="start from a previous run's model")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("evaluate", help="held-out log-likelihood, ARI and NMI (prints JSON)")
    p.add_argument("run_dir")
    p.add_argument("--heldout", required=True, metavar="CORPUS_DIR")
    p.add_argument("--labels-column", help="corpus column with true labels (for ARI and NMI)")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("demo", help="run the main job on an embedded synthetic data set")
    p.add_argument("--n", type=_positive_int, default=20_000, help="number of patches")
    p.add_argument("--laps", type=_positive_int, default=15)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BnpmixError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"bnpmix: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bnpmix: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a one-line report; the traceback with --debug
        if args.debug:
            traceback.print_exc()
        print(f"bnpmix: error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
