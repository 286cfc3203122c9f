"""An engine from another distribution, declared only as an entry point (group
``bnpmix.engines``), runs from the command line: ``bnpmix fit`` in one process, killed after a
checkpoint, and ``bnpmix resume`` in another give the uninterrupted run's result.

The distribution is a module and a dist-info folder (METADATA, entry_points.txt) in the test's
own directory, put on the subprocesses' PYTHONPATH: nothing is installed into the environment."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bnpmix.storage import RunDir, ingest_array
from helpers import cli_process

ENGINE = '''
import os
from dataclasses import dataclass

from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.summary import Summary
from bnpmix.algorithms.vb.init import seeded_summary
from bnpmix.algorithms.vb.local import responsibilities, summarize
from bnpmix.pipeline.runtime import Engine, Fitted, Step


def partition_summary(batch, obs, g):
    R, _ = responsibilities(batch.X, obs, g)
    return summarize(batch.X, obs, R, None, g.uids)


@dataclass(frozen=True)
class TinyConfig:
    K: int = 3
    sweeps: int = 4


class TinyEngine(Engine):
    """Batch VB: every sweep visits every partition, then updates the globals."""

    name = "tiny-vb"
    Config = TinyConfig

    def start(self):
        ctx = self.ctx
        sample = ctx.source.sample(ctx.init_sample, ctx.rng.init)
        self.S = seeded_summary(sample, ctx.obs, self.cfg.K, ctx.new_uids(self.cfg.K),
                                ctx.rng.init)
        self.model, self.sweep = Mixture.from_summary(ctx.obs, ctx.alloc, self.S), 0

    @property
    def done(self):
        return self.sweep >= self.cfg.sweeps

    def step(self):
        if str(self.sweep) == os.environ.get("TINY_CRASH_AT"):
            os._exit(3)  # a crash after the checkpoints of the sweeps before
        ctx, n = self.ctx, self.ctx.corpus.n_partitions
        parts = ctx.executor.map(partition_summary, range(n), ctx.obs, self.model.globals())
        self.S = sum(parts[1:], parts[0])
        self.model, self.sweep = Mixture.from_summary(ctx.obs, ctx.alloc, self.S), self.sweep + 1
        self.trace.append(ctx.trace_row(self.sweep, -1, self.model.elbo(self.S), self.model.K))
        return Step(visits=n, lap_end=True)

    def state(self):
        arrays = {f"S/{k}": v for k, v in self.S.to_arrays().items()}
        return {"sweep": self.sweep}, iter(arrays.items())

    def restore(self, meta, arrays):
        self.S, self.sweep = Summary.from_arrays(arrays.group("S")), meta["sweep"]
        self.model = Mixture.from_summary(self.ctx.obs, self.ctx.alloc, self.S)

    def result(self):
        return Fitted(self.model, {"elbo": self.model.elbo(self.S)})
'''


def make_distribution(site) -> None:
    """A distribution `tiny-engine` whose only tie to bnpmix is its entry point."""
    site.mkdir()
    (site / "tiny_engine.py").write_text(ENGINE)
    info = site / "tiny_engine-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-engine\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[bnpmix.engines]\ntiny-vb = tiny_engine:TinyEngine\n")


def bnpmix(site, *args, crash_at=None):
    """The command in a process that finds the tiny engine's distribution in ``site``, stopping
    with an error at sweep ``crash_at`` (never when None: no sweep's number is "")."""
    crash = "" if crash_at is None else str(crash_at)
    return cli_process(*args, env={"PYTHONPATH": str(site), "TINY_CRASH_AT": crash})


@pytest.mark.usefixtures("lap_checkpoints")
def test_an_entry_point_engine_fits_and_resumes_from_the_command_line(tmp_path):
    site, corpus = tmp_path / "site", tmp_path / "corpus"
    make_distribution(site)
    rng = np.random.default_rng(0)
    X = np.array([[0, 0], [8, 0], [0, 8]])[rng.integers(0, 3, 600)] + rng.normal(size=(600, 2))
    ingest_array(X, corpus, partition_rows=150)
    flags = ("--algorithm", "tiny-vb", "--sweeps", 5, "--seed", 3)

    whole = bnpmix(site, "fit", corpus, "--out", tmp_path / "whole", *flags)
    assert whole.returncode == 0, whole.stderr
    summary = RunDir(tmp_path / "whole").load_summary()
    assert summary["algorithm"] == "tiny-vb" and summary["laps"] == 5

    crashed = bnpmix(site, "fit", corpus, "--out", tmp_path / "run", *flags, crash_at=2)
    assert crashed.returncode == 3, crashed.stderr
    assert (tmp_path / "run" / "checkpoint.npz").exists()
    assert not (tmp_path / "run" / "summary.json").exists()
    resumed = bnpmix(site, "resume", tmp_path / "run")
    assert resumed.returncode == 0, resumed.stderr
    assert RunDir(tmp_path / "run").load_summary()["elbo"] == summary["elbo"]
    pd.testing.assert_frame_equal(RunDir(tmp_path / "run").load_trace().drop(columns="seconds"),
                                  RunDir(tmp_path / "whole").load_trace().drop(columns="seconds"))
