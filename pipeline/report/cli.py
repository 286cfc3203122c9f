"""The ``bnpmix report`` and ``bnpmix compare`` sub-commands (added to the main parser by
``add_parsers``)."""

from __future__ import annotations

import argparse

from bnpmix.storage.objectstore import is_url

from ..remote_run import local_copy
from ..usage import UsageError, renamed_flag
from . import compare, report


def cmd_report(args: argparse.Namespace) -> int:
    """Write one run's report and print where it is (a run in object storage is read from a
    downloaded copy; its report goes to a local --out)."""
    if is_url(args.run_dir) and args.out is None:  # RUN_DIR/report would be the local copy
        raise UsageError(f"{args.run_dir}: a run in object storage needs --out DIR (a "
                         "directory or a URL) for its report")
    with local_copy(args.run_dir) as run_dir:
        page = report(run_dir, args.out, args.heldout, args.label_column)
    if isinstance(page, str):  # in object storage
        print(f"report: {page}")
        return 0
    n = len(list(page.parent.glob("*.png")))
    print(f"report: {page} ({n} pictures, also as PNG files in {page.parent})")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Write the comparison page of two or more runs and print where it is."""
    if len(args.run_dirs) < 2:
        raise UsageError("compare needs two or more run directories")
    page = compare(args.run_dirs, args.out, args.heldout, args.label_column)
    print(f"comparison of {len(args.run_dirs)} runs: {page}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``report`` and ``compare`` to the main parser's sub-commands."""
    p = sub.add_parser("report", help="plots and one HTML page of a finished run "
                       "(RUN_DIR/report/index.html; needs matplotlib)",
                       description="Writes RUN_DIR/report/index.html, self-contained (pictures "
                       "embedded), and the pictures as PNG files beside it: the objective and K "
                       "against items seen, the weights' tail, component means and covariances "
                       "as images, top words of text clusters, chains of temporal runs, the "
                       "configuration. Needs matplotlib: pip install 'bnpmix[plot]'.")
    p.add_argument("run_dir", help="a finished run directory")
    p.add_argument("--out", metavar="DIR",
                   help="write the report here instead of RUN_DIR/report")
    _heldout_flags(p)
    p.set_defaults(func=cmd_report, remote_ok=("run_dir", "heldout", "out"))

    p = sub.add_parser("compare", help="one HTML page putting several runs' traces and "
                       "figures side by side (needs matplotlib)")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="two or more run directories")
    p.add_argument("--out", default="compare", metavar="DIR",
                   help="the output directory (default ./compare); replaces only an earlier "
                   "report")
    _heldout_flags(p)
    p.set_defaults(func=cmd_compare, remote_ok=("heldout", "out"))


def _heldout_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--heldout", metavar="CORPUS_DIR",
                   help="also show held-out figures on this corpus (as bnpmix evaluate)")
    p.add_argument("--label-column", help="with --heldout: corpus column with true labels "
                   "(ARI and NMI)")
    renamed_flag(p, "--labels-column", "--label-column", "label_column")
