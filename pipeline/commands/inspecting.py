"""``bnpmix info``, ``show`` and ``evaluate``: what a corpus or a finished run holds, and how
well a run scores items."""

from __future__ import annotations

import argparse
import json
import sys

from bnpmix.pipeline.declared import HELDOUT_DEQUANTISED, HELDOUT_NOTE
from bnpmix.storage.errors import is_url


def cmd_info(args: argparse.Namespace) -> int:
    """`bnpmix info PATH`: a corpus's or a finished run's description (a local path or a
    URL)."""
    from bnpmix.pipeline import inspect
    from bnpmix.pipeline.finished import kind_of
    from bnpmix.pipeline.remote_run import local_copy
    from bnpmix.storage import Corpus
    from bnpmix.storage.objectstore import exists

    if is_url(args.path):  # a run in object storage has its summary.json; a corpus has not
        kind = "run" if exists(args.path, "summary.json") else "corpus"
    else:
        kind = kind_of(args.path)
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
    """`bnpmix show RUN_DIR`: the run's heaviest clusters (pipeline/show.py)."""
    from bnpmix.pipeline import show
    from bnpmix.pipeline.remote_run import local_copy

    with local_copy(args.run_dir) as run_dir:
        shown = {**show.show_clusters(run_dir, top_words=args.top_words, top=args.top),
                 "run_dir": args.run_dir}
    print(json.dumps(shown) if args.json else show.format_show(shown))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """`bnpmix evaluate RUN_DIR`: held-out (else training) scores as JSON, with a note on
    stderr of what was scored."""
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
