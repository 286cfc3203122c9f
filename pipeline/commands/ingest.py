"""``bnpmix ingest``: a source file or folder (npy, csv, docword, text) into a partitioned
corpus, a new one, a replaced one (--overwrite), new partitions of one (--append) or one
published to object storage."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from bnpmix.pipeline.usage import UsageError
from bnpmix.storage import BnpmixError
from bnpmix.storage.errors import is_url

if TYPE_CHECKING:
    from bnpmix.storage.manifest import Manifest

from .datawarnings import data_warnings

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


def ingest_source(args: argparse.Namespace, src: Path, out: Path, fmt: str,
                  overwrite: bool) -> Manifest:
    """Run the ingester of ``fmt`` with the options given on the command line; the corpus's
    manifest."""
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
