"""The memory a process may use (pipeline/runtime/memlimit.py) and the budgets sized from it:
the cgroup chain read from the process's own group up (v1 and v2 layouts, unlimited values
ignored), shares of memory as Dask settings, a real capped cgroup seen from inside, and the
estimate `bnpmix fit` prints before it starts."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pytest

from bnpmix.pipeline.runtime import memlimit
from bnpmix.pipeline.runtime.data import PartitionCache
from bnpmix.pipeline.runtime.memlimit import PROCESS_BASE, Share, cgroup_limits
from bnpmix.pipeline.settings import setting
from bnpmix.storage import BnpmixError, Corpus, ingest_array, ingest_docword
from helpers import random_counts, write_docword

MIB = 2 ** 20


def test_v1_limits_are_read_from_the_process_group_up_to_the_root(tmp_path):
    memory = tmp_path / "memory"
    (memory / "outer" / "inner").mkdir(parents=True)
    (memory / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    (memory / "outer" / "memory.limit_in_bytes").write_text(str(900 * MIB))
    (memory / "outer" / "inner" / "memory.limit_in_bytes").write_text(str(300 * MIB))
    listing = "5:devices:/\n4:memory:/outer/inner\n0::/\n"
    assert cgroup_limits(listing, tmp_path) == [300 * MIB, 900 * MIB]
    # a group path that is not under this mount (a container's own root): the mount's files
    (memory / "memory.limit_in_bytes").write_text(str(700 * MIB))
    assert cgroup_limits("4:memory:/elsewhere/x\n", tmp_path) == [700 * MIB]


def test_v2_limits_and_max(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "memory.max").write_text(f"{512 * MIB}\n")
    (tmp_path / "a" / "b" / "memory.max").write_text("max\n")
    assert cgroup_limits("0::/a/b\n", tmp_path) == [512 * MIB]
    # a v1 machine lists an empty v2 line too: without cgroup.controllers it is not read
    (tmp_path / "cgroup.controllers").unlink()
    assert cgroup_limits("0::/a/b\n", tmp_path) == []


def test_shares_of_memory_as_settings(monkeypatch):
    monkeypatch.setattr(memlimit, "memory_limit", lambda: PROCESS_BASE + 1000 * MIB)
    with dask.config.set({"bnpmix.cache-bytes": "25%"}):
        assert setting("cache-bytes") == Share(0.25)
        assert PartitionCache().max_bytes == 250 * MIB
    with dask.config.set({"bnpmix.cache-bytes": "3MiB"}):
        assert PartitionCache().max_bytes == 3 * MIB
    assert PartitionCache(12345).max_bytes == 12345
    for bad in ("150%", "0%", "x%"):
        with dask.config.set({"bnpmix.summary-bytes": bad}), \
                pytest.raises(BnpmixError, match=r"bnpmix\.summary-bytes"):
            setting("summary-bytes")


def _memory_controller() -> Path | None:
    v1 = Path("/sys/fs/cgroup/memory")
    if v1.is_dir() and os.access(v1, os.W_OK):
        return v1
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").exists() and os.access(v2, os.W_OK):
        return v2
    return None


@pytest.mark.skipif(_memory_controller() is None,
                    reason="needs a writable memory cgroup controller (root); CI runs as root")
def test_a_process_in_a_capped_cgroup_sizes_its_budgets_from_the_cap():
    """A real cgroup of 300 MiB (created and removed here): the process inside sees 300 MiB
    and its default partition cache is 10% of what is left beyond its start-up memory."""
    root = _memory_controller()
    group = root / f"bnpmix-test-{os.getpid()}"
    group.mkdir()
    limit_file = "memory.limit_in_bytes" if root.name == "memory" else "memory.max"
    try:
        (group / limit_file).write_text(str(300 * MIB))
        code = ("from bnpmix.pipeline.runtime.memlimit import memory_limit\n"
                "from bnpmix.pipeline.runtime.data import PartitionCache\n"
                "print(memory_limit(), PartitionCache().max_bytes)\n")
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
            preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
        assert done.returncode == 0, done.stderr
        limit, cache = map(int, done.stdout.split())
        assert limit == 300 * MIB
        assert cache == int(0.1 * (300 * MIB - PROCESS_BASE))
    finally:
        group.rmdir()


def test_the_estimate_names_each_part_and_the_option_that_bounds_it(tmp_path, monkeypatch):
    X = np.random.default_rng(0).normal(size=(5000, 16))
    ingest_array(X, tmp_path / "c", partition_rows=2000)
    corpus = Corpus(tmp_path / "c")
    decoded = 2000 * 16 * 8
    assert memlimit.partition_bytes(corpus) == decoded
    largest_file = max(p.bytes for p in corpus.manifest.partitions)
    assert memlimit.visit_bytes(corpus) == largest_file + decoded + memlimit.VISIT_WORK
    monkeypatch.setattr(memlimit, "memory_limit", lambda: 4096 * MIB)
    assert memlimit.corpus_bytes(corpus) == 5000 * 16 * 8
    text, need, limit = memlimit.estimate(corpus, 3, 100 * MIB, Share(0.1), local=True)
    # the cache counts at most the corpus (625,000 bytes here), the summaries at their budget
    want = PROCESS_BASE + 3 * memlimit.visit_bytes(corpus) + 5000 * 16 * 8 + int(
        0.1 * (4096 * MIB - PROCESS_BASE))
    assert need == want and limit == 4096 * MIB and f"up to {want // MIB} MiB" in text
    for part in ("--threads", "--cache-bytes", "--summary-bytes", "of the 4096 MiB"):
        assert part in text
    monkeypatch.setattr(memlimit, "memory_limit", lambda: 300 * MIB)
    _, need, limit = memlimit.estimate(corpus, 3, 100 * MIB, 100 * MIB, local=True)
    assert need > limit
    text, need, _ = memlimit.estimate(corpus, 2, 10 * MIB, 0, local=False)
    assert need == PROCESS_BASE  # the workers hold the cache and run the visits
    assert "each worker needs" in text and "at once" not in text
    # a birth's rows: stacked beside the collected ones, at most the corpus's items
    assert memlimit.row_bytes(corpus) == 16 * 8
    # and a wave's results, each with up to a partition of collected rows
    text, need, _ = memlimit.estimate(corpus, 2, 10 * MIB, 0, local=False, birth_rows=4000,
                                      wave=4)
    assert need == PROCESS_BASE + 2 * 4000 * 16 * 8 + 4 * decoded
    assert "--birth-max-collect" in text and "4 visits collect (--wave)" in text
    _, need, _ = memlimit.estimate(corpus, 2, 10 * MIB, 0, local=False, birth_rows=10 ** 6)
    assert need == PROCESS_BASE + 2 * 5000 * 16 * 8 + decoded


def test_local_threads_are_the_most_whose_visits_fit(monkeypatch):
    monkeypatch.setattr(memlimit, "memory_limit", lambda: 1000)
    assert memlimit.fitting_threads(2, lambda t: 400 * t) == 2
    assert memlimit.fitting_threads(4, lambda t: 300 * t) == 3
    assert memlimit.fitting_threads(2, lambda t: 600 * t) == 1
    assert memlimit.fitting_threads(2, lambda t: 2000 * t) == 1  # the least there is


def test_a_text_row_is_its_mean_values_and_indices(tmp_path):
    X = random_counts(np.random.default_rng(0), 40, 30, 0.2)
    write_docword(tmp_path / "docword.t.txt", X)
    ingest_docword(tmp_path / "docword.t.txt", tmp_path / "t")
    corpus = Corpus(tmp_path / "t")
    assert memlimit.row_bytes(corpus) == math.ceil(12 * X.nnz / 40) + 8


def test_the_birth_rows_a_job_stacks(tmp_path):
    """memo's birth.max_collect; none without births or for another engine, except that
    --obs auto races memo at its defaults."""
    from bnpmix.pipeline.fit import birth_rows, job_config

    assert birth_rows(job_config(obs="gauss")) == 10_000
    assert birth_rows(job_config(obs="gauss", birth_max_collect=500)) == 500
    assert birth_rows(job_config(obs="gauss", moves="merge")) == 0
    assert birth_rows(job_config(algorithm="vb", obs="gauss")) == 0
    assert birth_rows(job_config(algorithm="vb", obs="auto")) == 10_000


def test_fit_speaks_of_memory_only_where_it_may_be_short(tmp_path):
    """A fit that may need more than half of what it may use says so before it starts, with
    a warning past all of it; one far below says nothing (its stderr starts with its own
    messages, errors first)."""
    ingest_array(np.random.default_rng(0).normal(size=(3000, 4)), tmp_path / "c",
                 partition_rows=1000)
    base = [sys.executable, "-m", "bnpmix", "fit", str(tmp_path / "c"), "--obs", "gauss",
            "--laps", "1", "--K", "2"]
    quiet = subprocess.run([*base, "--out", str(tmp_path / "a")], capture_output=True,
                           text=True, timeout=300)
    assert quiet.returncode == 0, quiet.stderr
    assert "memory:" not in quiet.stderr
    short = subprocess.run([*base, "--out", str(tmp_path / "b"), "--summary-bytes",
                            str(10 ** 15)], capture_output=True, text=True, timeout=300)
    assert short.returncode == 0, short.stderr
    assert "bnpmix: memory: up to" in short.stderr and "bnpmix: warning: that is more" in \
        short.stderr


def test_a_fit_short_of_memory_for_two_visits_runs_one_at_a_time(tmp_path, monkeypatch, caplog):
    """With --threads unset, a driver whose memory holds one visit but not two runs its visits
    on one thread and says so (fit's logger); the model is the one two threads fit."""
    from bnpmix.pipeline import fit as fitting
    from bnpmix.pipeline.runtime import executors

    ingest_array(np.random.default_rng(1).normal(size=(3000, 4)), tmp_path / "c",
                 partition_rows=500)
    corpus = Corpus(tmp_path / "c")
    options = {"obs": "gauss", "laps": 2, "K": 2, "cache_bytes": MIB, "summary_bytes": MIB}
    job = fitting.job_config(**options, wave=4)
    one = fitting.memory_need(corpus, job, 1, local=True)[1]
    assert fitting.memory_need(corpus, job, 2, local=True)[1] == one + memlimit.visit_bytes(
        corpus)
    opened = []
    real = executors.LocalExecutor.__init__

    def spy(self, corpus, mode="threads", workers=2, *args, **kwargs):
        opened.append(workers)
        real(self, corpus, mode, workers, *args, **kwargs)

    monkeypatch.setattr(executors.LocalExecutor, "__init__", spy)
    monkeypatch.setattr(memlimit, "memory_limit", lambda: one + 1000)
    caplog.set_level("INFO", logger="bnpmix.pipeline.fit")
    short = fitting.fit(corpus.path, tmp_path / "short", fitting.job_config(**options))
    assert opened == [1] and "so visits run on 1 thread, not 2 (--threads" in caplog.text
    caplog.clear()
    monkeypatch.setattr(memlimit, "memory_limit", lambda: 64 * 2 ** 30)
    two = fitting.fit(corpus.path, tmp_path / "two", fitting.job_config(**options))
    assert opened == [1, 2] and "so visits run" not in caplog.text
    assert short["elbo"] == two["elbo"] and short["K"] == two["K"]
