"""Each command's arguments (``build_parser`` gives them to the command named only): its
positionals, options and help texts, and the handler it runs (``func``) with the arguments that
may be URLs (``remote_ok``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from bnpmix.pipeline.usage import renamed_flag

from .argtypes import _bytes, _numbers, _positive_int, _prior
from .demo import cmd_demo
from .fitting import cmd_fit, cmd_resume, cmd_schedule
from .ingest import FORMATS, cmd_ingest
from .inspecting import cmd_evaluate, cmd_info, cmd_show
from .planning import cmd_plan
from .tuning import cmd_tune, engine_tune_flags

if TYPE_CHECKING:
    from bnpmix.pipeline.option_rows import Option


def ingest_arguments(p: argparse.ArgumentParser) -> None:
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


def info_arguments(p: argparse.ArgumentParser) -> None:
    """`info PATH [--json]`."""
    p.add_argument("path", metavar="CORPUS_DIR|RUN_DIR")
    p.add_argument("--json", action="store_true",
                   help="one JSON object (a corpus: kind, n_items, dim, nnz (bow), n_partitions, "
                   "bytes, ...; a run: engine, K, K_effective, K_nonempty, weights, sizes, ...)")
    p.set_defaults(func=cmd_info, remote_ok=("path",))


def show_arguments(p: argparse.ArgumentParser) -> None:
    """`show RUN_DIR` and its options."""
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--top-words", type=_positive_int, default=10, metavar="N",
                   help="words shown per text cluster (default 10)")
    p.add_argument("--top", type=_positive_int, default=20, metavar="N",
                   help="clusters shown, heaviest first (default 20)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_show, remote_ok=("run_dir",))


def fit_arguments(p: argparse.ArgumentParser) -> None:
    """`fit [CORPUS_DIR]`: --config and a flag per row of the option table (every engine's)."""
    from bnpmix.pipeline.config import options

    p.add_argument("corpus_dir", nargs="?", help="corpus directory (or `corpus` in the job file)")
    p.add_argument("--config", metavar="JOB.toml", help="job file with any of these options")
    for row in options():
        if row.name != "corpus":
            add_option(p, row)
    p.set_defaults(func=cmd_fit, remote_ok=("corpus_dir", "out", "warm_start"))


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


def resume_arguments(p: argparse.ArgumentParser) -> None:
    """`resume RUN_DIR`."""
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_resume, remote_ok=("run_dir",))


def schedule_arguments(p: argparse.ArgumentParser) -> None:
    """`schedule run JOB.toml`."""
    ssub = p.add_subparsers(dest="schedule_command", required=True, metavar="ACTION")
    q = ssub.add_parser("run", help="fit the corpus if it has new partitions; publish a version")
    q.add_argument("job", metavar="JOB.toml")
    q.set_defaults(func=cmd_schedule)


def tune_arguments(p: argparse.ArgumentParser) -> None:
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


def evaluate_arguments(p: argparse.ArgumentParser) -> None:
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


def plan_arguments(p: argparse.ArgumentParser) -> None:
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


def demo_arguments(p: argparse.ArgumentParser) -> None:
    """`demo` and its options."""
    p.add_argument("--n", type=_positive_int, default=20_000, help="number of patches")
    p.add_argument("--laps", type=_positive_int,
                   help="most laps (default: memo's, stopping on convergence)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", metavar="DIR", help="keep the corpus (DIR/toy-patches) and the run "
                   "(DIR/run) in this new or empty directory, and print what to try on them "
                   "(default: a temporary directory, removed at the end)")
    p.set_defaults(func=cmd_demo)
