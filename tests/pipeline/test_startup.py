"""The quick commands stay quick: `bnpmix --help`, `bnpmix info CORPUS_DIR` and `bnpmix info
RUN_DIR` import neither Dask nor pyarrow, pandas, scipy, matplotlib or scikit-learn (each run in
a fresh interpreter, its modules listed when it ends), and print what they printed before; the
lazy re-exports keep the public names. (Their wall times: benchmarks/speed/startup.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bnpmix
import bnpmix.storage
from bnpmix.pipeline.cli import build_parser
from bnpmix.pipeline.config import options
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.pipeline.inspect import RECORDED, run_info
from bnpmix.pipeline.settings import shipped_defaults
from bnpmix.storage import RunDir, ingest_array

COLUMNS = "100"  # argparse wraps help to this width, here and in the subprocesses
HEAVY = ("dask", "distributed", "pyarrow", "pandas", "scipy", "matplotlib", "sklearn")
COMMANDS = ("ingest", "info", "show", "fit", "resume", "schedule", "tune", "evaluate", "plan",
            "report", "compare", "demo")

# the console script's main() on the given argv; then, on stderr's last line, the exit code
# and which of HEAVY the process imported
CLI = f"""
import json, sys
from bnpmix.pipeline.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def fresh_cli(*argv: object) -> tuple[str, list[str]]:
    """stdout of the command line run in a fresh interpreter, and the heavy modules it loaded
    (the command must succeed)."""
    done = subprocess.run([sys.executable, "-c", CLI, *map(str, argv)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": COLUMNS})
    report = json.loads(done.stderr.splitlines()[-1])
    assert done.returncode == 0 and report["code"] == 0, done.stderr
    return done.stdout, report["heavy"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.5, size=(150, 2)) for c in (-4.0, 4.0)])
    path = tmp_path_factory.mktemp("startup") / "corpus"
    ingest_array(X, path, partition_rows=100)
    return path


@pytest.fixture(scope="module")
def run(corpus):
    path = corpus.parent / "run"
    fit(corpus, path, job_config(laps=3, seed=0))
    return path


def whole_parser_help(capsys, monkeypatch, *argv: str) -> str:
    """What the parser with every command's arguments prints for ``argv`` (ending in --help)."""
    monkeypatch.setenv("COLUMNS", COLUMNS)
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    return capsys.readouterr().out


def test_help_lists_every_command_and_loads_no_heavy_module(capsys, monkeypatch):
    out, heavy = fresh_cli("--help")
    assert heavy == []
    assert out == whole_parser_help(capsys, monkeypatch, "--help")
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("    ")
              and not line.startswith("      ")]
    assert tuple(listed) == COMMANDS


def test_info_of_a_corpus_loads_no_heavy_module(corpus):
    out, heavy = fresh_cli("info", corpus)
    assert heavy == []
    assert "items         300" in out and "partitions    3" in out
    out, heavy = fresh_cli("info", corpus, "--json")
    assert heavy == []
    assert json.loads(out)["n_items"] == 300 and json.loads(out)["dim"] == 2


def test_info_of_a_run_loads_no_heavy_module(run):
    out, heavy = fresh_cli("info", run)
    assert heavy == []
    summary = RunDir(run).load_summary()
    assert f"K             {summary['K']} component" in out
    assert "items         300" in out
    out, heavy = fresh_cli("info", run, "--json")
    assert heavy == []
    info = json.loads(out)
    assert info == run_info(run)
    assert sum(info["sizes"]) == 300 and info["weights"] == sorted(summary["weights"],
                                                                  reverse=True)


def test_info_of_a_run_that_recorded_no_sizes_counts_them(run, tmp_path):
    """A run written before summary.json recorded the components (ids, sizes, new mass) gets
    the same info from its model and its assignments."""
    old = shutil.copytree(run, tmp_path / "old")
    summary = json.loads((old / "summary.json").read_text())
    assert set(RECORDED) <= set(summary)
    for key in RECORDED:
        del summary[key]
    (old / "summary.json").write_text(json.dumps(summary))
    ids = np.asarray(json.loads((run / "summary.json").read_text())["component_ids"])
    for part in (old / "assignments").glob("part-*.parquet"):  # such a run's hold the ids
        table = pq.read_table(part)
        ids_of = pa.array(ids[table.column("cluster").to_numpy()])
        pq.write_table(table.set_column(1, "cluster", ids_of), part)
    assert {**run_info(old), "run_dir": str(run)} == run_info(run)


def test_fit_help_lists_every_engine_option(capsys, monkeypatch):
    out, _ = fresh_cli("fit", "--help")
    assert out == whole_parser_help(capsys, monkeypatch, "fit", "--help")
    flags = [row.flag for row in options() if row.name != "corpus"]
    assert len(flags) > 20
    missing = [flag for flag in flags if flag not in out]
    assert missing == []


@pytest.mark.parametrize("argv", [
    ["info", "c", "--json"],
    ["--debug", "show", "r", "--top", "3"],
    ["ingest", "x.npy", "c", "--partition-rows", "7"],
    ["fit", "c", "--out", "o", "--laps", "4", "--algorithm", "memo"],
    ["tune", "c", "--algorithm", "memo", "--alpha-grid", "1,2"],
    ["schedule", "run", "job.toml"],
    ["report", "r", "--out", "o"],
    ["plan", "c", "--workers", "8", "--K", "50"],
])
def test_a_parser_for_one_command_parses_as_the_whole_parser(argv):
    assert vars(build_parser(argv).parse_args(argv)) == vars(build_parser().parse_args(argv))


def test_importing_bnpmix_before_dask_still_gives_dask_the_defaults():
    code = ("import json, sys, bnpmix\n"
            f"assert not [m for m in {HEAVY!r} if m in sys.modules]\n"
            "import dask\n"
            "print(json.dumps(dask.config.get('bnpmix')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == shipped_defaults()["bnpmix"]


def test_lazy_names_are_the_defining_modules_objects():
    from bnpmix.pipeline.estimator import BayesianMixture
    from bnpmix.storage.corpus import Corpus
    from bnpmix.storage.rundir import RunDir as RunDirClass
    from bnpmix.storage.writer import DOCUMENTS_PER_PARTITION, partition_rows

    assert bnpmix.BayesianMixture is BayesianMixture and bnpmix.Corpus is Corpus
    assert bnpmix.storage.RunDir is RunDirClass
    assert bnpmix.storage.DOCUMENTS_PER_PARTITION == DOCUMENTS_PER_PARTITION
    assert bnpmix.storage.partition_rows is partition_rows
    for module in (bnpmix, bnpmix.storage):
        for name in module.__all__:
            assert getattr(module, name) is not None
            assert name in dir(module)
    with pytest.raises(AttributeError):
        bnpmix.storage.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        bnpmix.no_such_name  # noqa: B018
