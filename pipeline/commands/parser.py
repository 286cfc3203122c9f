"""The parser of the ``bnpmix`` command line: every command with its help; the arguments
(pipeline/commands/arguments.py) only of the command named."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from bnpmix.pipeline.report.cli import add_parsers as add_report_parsers

from .arguments import (
    demo_arguments,
    evaluate_arguments,
    fit_arguments,
    info_arguments,
    ingest_arguments,
    plan_arguments,
    resume_arguments,
    schedule_arguments,
    show_arguments,
    tune_arguments,
)

Arguments = Callable[[argparse.ArgumentParser], None] | None

# every command in the order `bnpmix --help` lists them: its name, what gives it its arguments
# (None: the report's commands, report and compare, added by pipeline/report/cli.py) and its
# help texts
COMMANDS: tuple[tuple[str, Arguments, dict[str, str]], ...] = (
    ("ingest", ingest_arguments,
     {"help": "turn a source file or folder into a partitioned corpus"}),
    ("info", info_arguments,
     {"help": "describe a corpus or a finished run",
      "description": "A corpus: kind, items, dimension, partitions, columns, its "
      "vocabulary file. A run directory: engine, K (effective: more than 1%% of "
      "the weight; non-empty: at least one item), weights, cluster sizes, the "
      "objective, laps, wall seconds."}),
    ("show", show_arguments,
     {"help": "a finished run's clusters by weight: top words (text) or means (dense)",
      "description": "The heaviest clusters of a run with their weights and sizes "
      "and, for text, their most probable words (posterior mean word "
      "probabilities; words from RUN_DIR/vocab.txt, else the corpus's), for "
      "dense data their posterior mean vectors."}),
    ("fit", fit_arguments,
     {"help": "fit a DP mixture to a corpus and write a run directory",
      "description": "Options may also come from --config job.toml (same names); "
      "flags override the file."}),
    ("resume", resume_arguments, {"help": "continue a killed run from its last checkpoint"}),
    ("schedule", schedule_arguments, {"help": "scheduled, resumable pipeline runs"}),
    ("tune", tune_arguments,
     {"help": "prior hyperparameters by held-out predictive "
      "log-likelihood on a sample: the NRM prior's a, tau (adf, ep) or the DP "
      "concentration alpha0 (memo); writes a job file",
      "description": "Fits a sample of the corpus for every point of a grid and "
      "scores held-out items by their posterior predictive; prints the table, "
      "best first. adf, ep: one ADF pass per point over a and tau (Tank, Foti "
      "& Fox 2015, supplement 4.1). memo: one memo fit per point (its default "
      "options, the --seed) over alpha0. Both also search a Gaussian prior's "
      "scale; memo on bag-of-words searches the Dirichlet's lam0."}),
    ("evaluate", evaluate_arguments,
     {"help": "held-out (or, without --heldout, training) log-likelihood per item, K; with "
      "labels ARI, NMI, VI and majority-label accuracy (prints JSON)"}),
    ("plan", plan_arguments,
     {"help": "project a memo lap's seconds and the driver's and workers' memory for a "
      "corpus on N workers (from its manifest and costs measured by "
      "benchmarks/speed/sizing.py)",
      "description": "Reads only the corpus's manifest (or --shape). The model: a lap is "
      "ceil(P / W) waves, each the slowest slot's tasks, the driver's W visits, the "
      "wave's globals and its round trip through the scheduler, plus the lap end and "
      "the checkpoint; see the user guide's Sizing a cluster."}),
    ("report, compare", None, {}),
    ("demo", demo_arguments, {"help": "run the main job on an embedded synthetic data set"}),
)


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
    for name, arguments, text in COMMANDS:
        if arguments is None:
            add_report_parsers(sub)
            continue
        p = sub.add_parser(name, **text)
        if argv is None or name == chosen:
            arguments(p)
    return parser
