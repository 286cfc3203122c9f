"""An engine written outside pipeline/ plugs into the runtime through the public registry and
runs under fit, resume, progress and checkpoints, with per-partition payloads and random
streams that do not depend on which executor ran what."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.summary import Summary
from bnpmix.algorithms.vb.init import seeded_summary
from bnpmix.algorithms.vb.local import responsibilities, summarize
from bnpmix.pipeline.evaluate import evaluate, load
from bnpmix.pipeline.fit import fit, job_config, resume
from bnpmix.pipeline.options import opt
from bnpmix.pipeline.runtime import ENGINES, Engine, Fitted, Step, TuneFlag, register
from bnpmix.pipeline.runtime.context import partition_seed
from bnpmix.pipeline.runtime.progress import Progress
from bnpmix.storage import BnpmixError, RunDir, ingest_array

# ---------------------------------------------------------------- the engine (all it takes)

def sample_partition(batch, seed, obs, g):
    """Draw each item's component from q(z_n) with the partition's own stream; summarise."""
    R, _ = responsibilities(batch.X, obs, g)
    u = np.random.default_rng(seed).random((len(R), 1))
    z = np.minimum((R.cumsum(1) < u).sum(1), R.shape[1] - 1)
    return summarize(batch.X, obs, np.eye(R.shape[1])[z], None, g.uids)


@dataclass(frozen=True)
class SampledConfig:
    K: int = 3
    sweeps: int = 4


class SampledEngine(Engine):
    """Stochastic hard-assignment VB: sample z from q(z), update the globals from the samples."""

    name = "test-sampled"
    Config = SampledConfig

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
        ctx, n = self.ctx, self.ctx.corpus.n_partitions
        seeds = [partition_seed(ctx.seed, b, self.sweep) for b in range(n)]
        parts = ctx.executor.map(sample_partition, range(n), ctx.obs, self.model.globals(),
                                 payloads=seeds)
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


# ---------------------------------------------------------------- the proof

@pytest.fixture
def engine():
    register(SampledEngine)
    yield SampledEngine
    ENGINES.pop(SampledEngine.name)


@pytest.fixture
def corpus(tmp_path):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 900)
    X = np.array([[0, 0], [8, 0], [0, 8]])[y] + rng.normal(size=(900, 2))
    ingest_array(X, tmp_path / "corpus", partition_rows=150, columns={"label": y})
    return tmp_path / "corpus"


def trace_of(run) -> pd.DataFrame:
    return RunDir(run).load_trace().drop(columns="seconds")


def test_fit_writes_a_complete_run_with_progress(engine, corpus, tmp_path):
    tty = io.StringIO()
    tty.isatty = lambda: True
    progress = Progress(tty, interval=0.0)
    summary = fit(corpus, tmp_path / "run", job_config(algorithm="test-sampled", sweeps=5),
                  progress=progress)
    assert summary["algorithm"] == "test-sampled" and summary["laps"] == 5
    assert summary["config"]["engine"] == {"K": 3, "sweeps": 5}
    assert "K=3" in tty.getvalue() and "ELBO=" in tty.getvalue()
    assert len(trace_of(tmp_path / "run")) == 5
    assert not (tmp_path / "run" / "checkpoint.npz").exists()  # removed once finished
    scores = evaluate(tmp_path / "run", corpus, label_column="label")
    assert scores["ari"] > 0.9  # three well-separated clusters
    model = load(tmp_path / "run")
    assert model.n_components_ == 3 and model.means_.shape == (3, 2)


@pytest.mark.usefixtures("lap_checkpoints")
def test_resume_after_an_interruption_gives_the_uninterrupted_result(engine, corpus, tmp_path):
    cfg = job_config(algorithm="test-sampled", sweeps=5, seed=7)
    whole = fit(corpus, tmp_path / "whole", cfg)

    def stop_after_two(e, step):
        if e.sweep == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(corpus, tmp_path / "run", cfg, on_step=stop_after_two)
    assert (tmp_path / "run" / "checkpoint.npz").exists()
    resumed = resume(tmp_path / "run")
    assert resumed["elbo"] == whole["elbo"]
    pd.testing.assert_frame_equal(trace_of(tmp_path / "run"), trace_of(tmp_path / "whole"))


def test_results_do_not_depend_on_the_executor(engine, corpus, tmp_path):
    a = fit(corpus, tmp_path / "threads", job_config(algorithm="test-sampled", threads=3))
    b = fit(corpus, tmp_path / "sync", job_config(algorithm="test-sampled",
                                                   scheduler="synchronous"))
    assert a["elbo"] == b["elbo"]
    pd.testing.assert_frame_equal(RunDir(tmp_path / "threads").load_assignments(),
                                  RunDir(tmp_path / "sync").load_assignments())
    c = fit(corpus, tmp_path / "other", job_config(algorithm="test-sampled", seed=1))
    assert c["elbo"] != a["elbo"]  # the per-partition streams do follow the seed


def test_its_options_join_the_table(engine):
    from bnpmix.pipeline.cli import build_parser
    from bnpmix.pipeline.config import options

    rows = {r.name: r for r in options()}
    assert rows["sweeps"].engines == ("tdpm", "test-sampled")  # one row, shared with tdpm
    assert "test-sampled" in rows["K"].engines
    args = build_parser().parse_args(["fit", "c", "--out", "o", "--algorithm", "test-sampled",
                                      "--sweeps", "9"])
    assert args.sweeps == 9


def test_a_second_engine_under_a_taken_name_is_refused(engine):
    class Impostor(SampledEngine):
        pass

    with pytest.raises(ValueError, match="already registered"):
        register(Impostor)


@dataclass(frozen=True)
class ShapedConfig(SampledConfig):
    shape: str = opt("plain", "how items are drawn", choices=("plain", "fancy"))


class ShapedEngine(SampledEngine):
    """The toy engine with an option that ``--prior`` names, as adf's nrm_prior."""

    name = "test-shaped"
    Config = ShapedConfig
    prior_alias = "shape"


def test_an_engines_prior_alias_is_what_prior_names():
    from bnpmix.pipeline.cli import build_parser, fit_flags
    from bnpmix.pipeline.config import resolve

    register(ShapedEngine)
    try:
        job = resolve({"algorithm": "test-shaped", "prior": "fancy"}, "job.toml")
        assert job.engine.shape == "fancy" and job.model.prior == {}
        args = build_parser().parse_args(["fit", "c", "--out", "o", "--algorithm",
                                          "test-shaped", "--prior", "fancy"])
        assert fit_flags(args)["shape"] == "fancy"
        with pytest.raises(BnpmixError, match="test-shaped"):  # not memo's
            resolve({"prior": "fancy"}, "job.toml")
    finally:
        ENGINES.pop(ShapedEngine.name)


def depth_search(corpus_dir, *, obs=None, obs_prior=None, test_fraction=0.2, seed=0,
                 scale_grid=(), depth_grid=(1.0,)):
    """A tuner taking one flag of its own (never run here)."""
    raise AssertionError("not reached")


class TunedEngine(SampledEngine):
    """The toy engine with a search of its own and its flag."""

    name = "test-tuned"
    tuner = f"{__name__}:depth_search"
    tune_flags = (TuneFlag("depth_grid", "--depth-grid", "values of the depth",
                           metavar="D,D,..."),)


def test_an_engines_tune_flags_are_offered_and_kept_to_its_search(tmp_path):
    from bnpmix.pipeline.cli import UsageError, build_parser

    register(TunedEngine)
    try:
        args = build_parser(["tune"]).parse_args(
            ["tune", "c", "--algorithm", "test-tuned", "--depth-grid", "2,3", "--a-grid", "1"])
        assert args.depth_grid == (2.0, 3.0)
        with pytest.raises(UsageError, match=r"--a-grid: not for --algorithm test-tuned .*"
                           r"takes --depth-grid"):
            args.func(args)
    finally:
        ENGINES.pop(TunedEngine.name)
