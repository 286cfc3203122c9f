"""bnpmix's settings in Dask's configuration: the shipped bnpmix.yaml is Dask's default for the
``bnpmix.`` keys once bnpmix is imported, read where each value is used, so dask.config.set and
DASK_BNPMIX__* environment variables override it; a job option beats it; every key of the file
has a reader in the code and every reader a key."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pytest
import yaml

from bnpmix.pipeline.fit import fit, job_config
from bnpmix.pipeline.jobfile import load_job
from bnpmix.pipeline.runtime.data import BatchSource, PartitionCache
from bnpmix.pipeline.runtime.executors import LocalExecutor
from bnpmix.pipeline.runtime.memlimit import Share
from bnpmix.pipeline.runtime.store import ARRAYS, StateStore
from bnpmix.pipeline.settings import PARSERS, setting, shipped_defaults
from bnpmix.storage import BnpmixError, Corpus, ingest_array

ROOT = Path(__file__).parents[2]
YAML = ROOT / "pipeline" / "bnpmix.yaml"
# the values the code had before they moved into bnpmix.yaml (no change by default), but the
# budgets: shares of the memory each process may use (issue 46; were 2 GiB and 1 GiB)
FORMER = {"cache-bytes": Share(0.1), "summary-bytes": Share(0.05), "worker-wait": 60,
          "task-retries": 3, "scheduler-timeout": 20, "connect-timeout": 10, "assign-wave": 8,
          "schedule-lease": 6 * 3600,  # the lease is new (scheduled runs in object storage)
          "worker-malloc-trim": 64 << 20,  # new: Dask workers' malloc thresholds
          "checkpoint-interval": 10}  # new: lap ends checkpointed at most this often
READERS = ["bnpmix", "bnpmix.pipeline.fit", "bnpmix.pipeline.clusters",
           "bnpmix.pipeline.runtime.data", "bnpmix.pipeline.runtime.store",
           "bnpmix.pipeline.runtime.executors"]


def python(code: str, **env: str) -> str:
    """stdout of ``python -c code`` in a fresh interpreter, with extra environment variables."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def corpus(tmp_path):
    ingest_array(np.random.default_rng(0).normal(size=(300, 2)), tmp_path / "c",
                 partition_rows=100)
    return tmp_path / "c"


@pytest.mark.parametrize("module", READERS)
def test_importing_a_reader_makes_the_shipped_defaults_dask_config(module):
    """A fresh interpreter that imports any module reading a setting sees the file's values
    under dask.config.get("bnpmix....")."""
    out = python(f"import json, dask, {module}\nprint(json.dumps(dask.config.get('bnpmix')))")
    assert json.loads(out) == shipped_defaults()["bnpmix"]


def test_the_shipped_defaults_are_the_former_constants():
    assert {key: setting(key) for key in PARSERS} == FORMER
    assert setting("cache-bytes", 5) == 5  # a given value (a job option) is used as it is


def test_dask_config_set_overrides_where_the_value_is_used(corpus):
    with dask.config.set({"bnpmix.cache-bytes": "1MiB", "bnpmix.summary-bytes": 123}):
        assert PartitionCache().max_bytes == 1 << 20
        ex = LocalExecutor(Corpus(corpus), "synchronous")
        assert ex.cache.max_bytes == 1 << 20
        assert StateStore(ARRAYS).max_bytes == 123
    # read at each use, never cached: the default is back outside the block
    assert PartitionCache().max_bytes == Share(0.1).nbytes()
    assert StateStore(ARRAYS).max_bytes == Share(0.05).nbytes()
    assert ex.cache.max_bytes == 1 << 20  # an object made inside keeps what it was given


def budgets(corpus: Path, out: Path, job, monkeypatch) -> dict[str, int]:
    """The budgets a real memo fit used: its driver-side partition cache (until it is released
    once the engine has started: none after), its executor's cache and its summary store."""
    seen = {}
    release = BatchSource.release

    def recorded(self):
        seen["source"] = self.cache.max_bytes
        release(self)

    def look(engine, step):
        assert engine.ctx.source.cache.max_bytes == 0
        seen.update(executor=engine.ctx.executor.cache.max_bytes, store=engine.store.max_bytes)

    monkeypatch.setattr(BatchSource, "release", recorded)
    fit(corpus, out, job, on_step=look)
    return seen


def test_a_fit_reads_dask_config_unless_the_job_sets_the_option(corpus, tmp_path, monkeypatch):
    # made outside the block: unset (the model named: --obs auto's race runs outside the hook)
    job = job_config(obs="gauss", K=2, laps=1, scheduler="synchronous")
    with dask.config.set({"bnpmix.cache-bytes": 4000, "bnpmix.summary-bytes": 0}):
        assert budgets(corpus, tmp_path / "a", job, monkeypatch) == {
            "source": 4000, "executor": 4000, "store": 0}
        given = job_config(obs="gauss", K=2, laps=1, scheduler="synchronous",
                           cache_bytes=5000, summary_bytes=6000)
        assert budgets(corpus, tmp_path / "b", given, monkeypatch) == {
            "source": 5000, "executor": 5000, "store": 6000}
    saved = json.loads((tmp_path / "a" / "job.json").read_text())["config"]["run"]
    assert saved["cache_bytes"] is None  # unset: a resume reads the Dask config of its time


def test_flag_beats_job_file_beats_dask_config(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text("cache_bytes = 3000\n")
    with dask.config.set({"bnpmix.cache-bytes": 1000}):
        assert load_job(job, {"cache_bytes": 4000}).config.run.cache_bytes == 4000
        from_file = load_job(job, {}).config.run.cache_bytes
        assert from_file == 3000 and PartitionCache(from_file).max_bytes == 3000
        unset = load_job(None, {}).config.run.cache_bytes
        assert unset is None and PartitionCache(unset).max_bytes == 1000


def test_an_environment_variable_overrides_the_default():
    """DASK_BNPMIX__<KEY>, set before Python starts, beats the shipped default (Dask reads the
    environment when dask.config is first imported; update_defaults keeps values already set),
    in plain bytes or with units, and survives dask.config.refresh()."""
    code = ("import dask\n"
            "from bnpmix.pipeline.runtime.data import PartitionCache\n"
            "from bnpmix.pipeline.runtime.store import ARRAYS, StateStore\n"
            "def show():\n"
            "    print(PartitionCache().max_bytes, StateStore(ARRAYS).max_bytes,\n"
            "          dask.config.get('bnpmix.task-retries'))\n"
            "show()\n"
            "dask.config.refresh()\n"
            "show()\n")
    out = python(code, DASK_BNPMIX__CACHE_BYTES="12345", DASK_BNPMIX__SUMMARY_BYTES="3MiB")
    assert out.split("\n")[:2] == [f"12345 {3 << 20} 3"] * 2


def test_a_bad_value_is_an_error_naming_the_key():
    with dask.config.set({"bnpmix.cache-bytes": "lots"}), \
            pytest.raises(BnpmixError, match=r"Dask config bnpmix\.cache-bytes: 'lots'"):
        PartitionCache()
    with dask.config.set({"bnpmix.worker-wait": 0}), \
            pytest.raises(BnpmixError, match=r"bnpmix\.worker-wait: 0 .*must be positive"):
        setting("worker-wait")


def test_every_key_of_the_file_has_a_reader_and_a_comment_and_every_reader_a_key():
    keys = set(yaml.safe_load(YAML.read_text())["bnpmix"])
    sources = [p for folder in ("pipeline", "storage", "algorithms", "src")
               for p in (ROOT / folder).rglob("*.py")]
    read = {key for p in sources
            for key in re.findall(r"""\bsetting\(\s*["']([\w-]+)["']""", p.read_text())}
    assert keys == read == set(PARSERS) == set(FORMER)
    lines = YAML.read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^  [\w-]+:", line):
            assert lines[i - 1].lstrip().startswith("#"), f"{line.strip()} has no comment"
