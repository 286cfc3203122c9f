"""One table drives the command line, job files and job.json: every option is accepted as a
flag and as a job-file key and comes back resolved in job.json; unknown keys are refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bnpmix.pipeline.cli import build_parser, fit_flags
from bnpmix.pipeline.config import JobConfig, options, resolve
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.pipeline.jobfile import load_job, read_job
from bnpmix.storage import BnpmixError, ingest_array

SPECIAL = {"scheduler": "synchronous", "moves": ("merge",), "prior": {"kappa0": 0.5},
           "nrm_sigma": 0.3, "epsilon": 0.6, "damping": 0.5, "birth_var": 2.0, "drift_var": 0.2,
           "noise_var": 0.3, "fixed_k": 5, "restarts": 2, "learn_prior": False,
           "dequantise": False,
           # default None: the Dask config key (bnpmix.cache-bytes, ...)
           "cache_bytes": 1000, "summary_bytes": 1000, "worker_wait": 5.0,
           # default None: resolved from the executor when the run starts
           "wave": 2, "ahead": 1, "threads": 3,
           # rows several engines define differently (parsed by the first engine, ddcrp)
           "window": 3, "decay": "exponential", "alpha": 0.5, "tol": 1e-5}
COMPANION = {"nrm_sigma": {"nrm_prior": "nggp"}}  # options only valid beside another


def example(row):
    """A valid value of the option that differs from its default (where it can)."""
    if row.name in SPECIAL:
        return SPECIAL[row.name]
    if row.choices:
        others = [c for c in row.choices if c != row.default]
        return others[0] if others else row.choices[0]
    if row.default is None or isinstance(row.default, str):
        return f"/data/{row.name}"
    if isinstance(row.default, int):
        return row.default + 1
    if isinstance(row.default, float):
        return row.default * 1.5 if row.default else 0.5
    raise AssertionError(f"no example for {row.name}")


def as_text(value) -> str:
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def as_toml(key: str, value) -> str:
    if isinstance(value, dict):
        return f"[{key}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in value.items())
    if isinstance(value, tuple):
        return f"{key} = {json.dumps(list(value))}\n"
    return f"{key} = {json.dumps(value)}\n"


def resolved(config: JobConfig, row):
    """The option's value in config.to_dict(), which job.json and summary.json record."""
    d = config.to_dict()
    if row.section == "job":
        return d["algorithm"]
    value = d[row.section]
    for part in row.path:
        value = value[part]
    return tuple(value) if isinstance(value, list) else value


ROWS = options()


def test_the_table_covers_every_config_field():
    names = [r.name for r in ROWS]
    assert len(names) == len(set(names))
    for expected in ("algorithm", "corpus", "out", "seed", "scheduler", "cluster", "threads",
                     "wave", "cache_bytes", "summary_bytes", "checkpoint_every", "warm_start",
                     "obs", "prior", "alloc", "alpha0", "init_sample", "K", "laps", "moves",
                     "birth_per_lap", "birth_settled_per_lap", "birth_tau", "birth_max_collect",
                     "birth_fresh_K",
                     "birth_max_iter", "birth_prune_fraction", "birth_tol", "merge_max_pairs",
                     "merge_partners", "merge_max_attempts", "sovb_kappa", "sovb_delay"):
        assert expected in names, expected
    shared = {r.name: r.engines for r in ROWS if r.section == "engine"}
    assert set(shared["laps"]) >= {"memo", "vb", "sovb"} and shared["moves"] == ("memo",)


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_each_option_is_a_flag_a_job_key_and_a_resolved_value(row, tmp_path):
    value = example(row)
    algorithm = row.engines[0] if row.engines else "memo"
    base = [] if row.name == "algorithm" else ["--algorithm", algorithm]
    companion = COMPANION.get(row.name, {})
    for key, v in companion.items():
        base += [f"--{key.replace('_', '-')}", v]
    # 1. argparse
    if row.name != "corpus":
        args = build_parser().parse_args(["fit", "c", "--out", "o", *base, row.flag,
                                          as_text(value)])
        flags = fit_flags(args)  # a repeatable --prior arrives as a list of values
        # a row engines parse differently arrives as text, parsed at resolve by the engine
        assert flags[row.name] == (as_text(value) if row.variants else value)
        flags.update(companion)
        assert resolved(load_job(None, flags).config, row) == value
    # 2. a job file
    job = tmp_path / "job.toml"
    head = "" if row.name == "algorithm" else f'algorithm = "{algorithm}"\n'
    head += "".join(as_toml(k, v) for k, v in companion.items())
    job.write_text(head + as_toml(row.name, value))
    config = load_job(job, {}).config
    want = value if row.name not in ("corpus", "out", "warm_start", "cluster") else (
        str(Path(value).resolve()))  # paths in job files are taken relative to the file
    assert resolved(config, row) == want
    # 3. job.json's form round-trips to the same configuration
    assert JobConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_job_json_records_the_resolved_configuration(tmp_path):
    rng = np.random.default_rng(0)
    ingest_array(rng.normal(size=(300, 2)), tmp_path / "corpus", partition_rows=100)
    job = tmp_path / "job.toml"
    job.write_text('corpus = "corpus"\nout = "run"\nlaps = 2\nK = 2\nmoves = "merge"\n'
                   'seed = 3\nscheduler = "synchronous"\nalpha0 = 2.5\nbirth_tau = 0.2\n'
                   'merge_max_attempts = 7\nsummary_bytes = 1000\n[prior]\nkappa0 = 0.5\n'
                   'scale = 0.3\n')
    config = load_job(job, {"laps": 3}).config
    summary = fit(config.run.corpus, config.run.out, config)
    saved = json.loads((tmp_path / "run" / "job.json").read_text())["config"]
    want = config.replace(model_obs="auto", run_wave=4).to_dict()  # W resolved: memo's
    assert saved == json.loads(json.dumps(want))
    assert json.loads(json.dumps(summary["config"])) == saved
    assert saved["engine"]["laps"] == 3 and saved["engine"]["merge"]["max_attempts"] == 7
    assert saved["model"]["prior"] == {"kappa0": 0.5, "scale": 0.3}
    assert saved["model"]["obs"] == "auto"  # the default, resolved from the corpus (dense)
    assert summary["obs"] == max(summary["obs_candidates"], key=summary["obs_candidates"].get)


def test_the_prior_table_reaches_the_model(tmp_path):
    from bnpmix.pipeline.evaluate import load

    rng = np.random.default_rng(1)
    ingest_array(rng.normal(size=(200, 2)), tmp_path / "corpus", partition_rows=100)
    fit(tmp_path / "corpus", tmp_path / "run",
        job_config(laps=1, prior={"kappa0": 0.25, "nu0": 7.0}))
    prior = load(tmp_path / "run").model.obs.prior()
    assert prior["kappa0"] == 0.25 and prior["nu0"] == 7.0
    with pytest.raises(BnpmixError, match="lam0"):
        fit(tmp_path / "corpus", tmp_path / "bad", job_config(laps=1, prior={"lam0": 0.1}))
    assert not (tmp_path / "bad").exists()


def test_learn_prior_from_the_prior_table_a_flag_or_an_old_job_json(tmp_path):
    """``[prior] learn = false`` is the option learn_prior (the rest of the table stays the
    prior's); a flag overrides the file; both in one source is an error; a job.json written
    before the option keeps the fixed prior its run had."""
    job = tmp_path / "job.toml"
    job.write_text("[prior]\nlearn = false\nkappa0 = 0.5\n")
    config = load_job(job, {}).config
    assert config.model.learn_prior is False and config.model.prior == {"kappa0": 0.5}
    assert job_config().model.learn_prior is True
    args = build_parser().parse_args(["fit", "c", "--out", "o", "--learn-prior", "true"])
    assert load_job(job, fit_flags(args)).config.model.learn_prior is True
    job.write_text("learn_prior = true\n[prior]\nlearn = false\n")
    with pytest.raises(BnpmixError, match="both say whether the prior is learned"):
        load_job(job, {})
    job.write_text('[prior]\nlearn = "sometimes"\n')
    with pytest.raises(BnpmixError, match="learn_prior: expected true or false"):
        load_job(job, {})
    old = job_config().to_dict()
    del old["model"]["learn_prior"]
    assert JobConfig.from_dict(old).model.learn_prior is False


def test_unknown_and_misplaced_keys_are_errors_naming_file_and_key(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text("laps = 2\nlapz = 3\n")
    with pytest.raises(BnpmixError, match=r"job\.toml: unknown key 'lapz'"):
        read_job(job)
    job.write_text('algorithm = "vb"\nmoves = "merge"\n')
    with pytest.raises(BnpmixError, match=r"job\.toml: moves: does not apply to "
                                          r"--algorithm vb"):
        load_job(job, {})
    job.write_text('laps = "many"\n')
    with pytest.raises(BnpmixError, match=r"job\.toml: laps: expected an integer"):
        load_job(job, {})
    job.write_text("wave = 0\n")  # the error names the file the value came from
    with pytest.raises(BnpmixError, match=r"job\.toml: wave: 0 is not in \[1, inf\)"):
        load_job(job, {})
    job.write_text("[schedule]\nrunz = 1\n")
    with pytest.raises(BnpmixError, match=r"\[schedule\] takes only"):
        read_job(job)


def test_configurations_are_frozen():
    config = job_config(K=2)
    with pytest.raises(AttributeError):
        config.engine.K = 3
    with pytest.raises(AttributeError):
        config.run.seed = 1
    assert config.replace(run_seed=5).run.seed == 5 and config.run.seed == 0


# option -> (a value outside its interval, a value on its closed edge or inside)
EDGES = {"alpha0": ("0", "1e-9"), "seed": ("-1", "0"), "cache_bytes": ("-1", "0"),
         "checkpoint_every": ("-1", "0"), "summary_bytes": ("-1", "0"), "threads": ("0", "1"),
         "wave": ("0", "1"), "ahead": ("-1", "0"), "restarts": ("0", "1"),
         "init_sample": ("0", "1"), "K": ("-1", "0"),
         "worker_wait": ("0", "0.001"),
         "laps": ("0", "1"), "tol": ("-1e-9", "0"), "birth_per_lap": ("0", "1"),
         "birth_settled_per_lap": ("0", "1"),
         "birth_tau": ("1", "0"), "birth_max_collect": ("1", "2"), "birth_fresh_K": ("1", "2"),
         "birth_max_iter": ("0", "1"), "birth_prune_fraction": ("0", "0.5"),
         "birth_tol": ("-1", "0"), "birth_attempts": ("0", "1"),
         "birth_attempts_grown": ("0", "1"), "merge_max_pairs": ("-1", "0"),
         "merge_partners": ("0", "1"), "merge_max_attempts": ("-1", "0"),
         "birth_retries": ("-1", "0"), "delete_max_share": ("0", "1e-9"),
         "delete_per_lap": ("0", "1")}


def test_every_numeric_option_has_an_interval_that_the_table_enforces():
    """Each numeric option of memo's table is range-checked in one place; a value outside is an
    error naming the option and its interval, the edge value is accepted."""
    rows = {r.name: r.for_engine("memo") for r in options()
            if "memo" in r.engines or r.section in ("run", "model")}
    numeric = {n for n, r in rows.items() if type(r.default) in (int, float)}
    numeric |= {"restarts"}  # default None: each engine's own (1, ddcrp 10)
    numeric |= {"cache_bytes", "summary_bytes", "worker_wait"}  # default None: Dask config
    numeric |= {"wave"}  # default None: each engine's own (memo 4, ep 1)
    numeric |= {"threads"}  # default None: 2, or 1 where memory holds one visit
    assert numeric == set(EDGES), "every numeric option needs an interval and an edge case"
    for name, (bad, edge) in EDGES.items():
        assert rows[name].within, name
        with pytest.raises(BnpmixError, match=rf"flags: {name}: .* is not in "):
            resolve({name: bad}, "flags")
        assert resolve({name: edge}, "flags") is not None
    for text in ("nan", "inf", "-inf"):
        with pytest.raises(BnpmixError, match="expected a finite number"):
            resolve({"alpha0": text}, "flags")


def test_programmatic_configs_are_range_checked_too():
    from bnpmix.algorithms.vb.birth import BirthConfig
    from bnpmix.pipeline.engines.memo import MemoConfig

    with pytest.raises(ValueError, match=r"birth_tau: 2\.0 is not in \[0, 1\)"):
        JobConfig(engine=MemoConfig(birth=BirthConfig(tau=2.0)))


@pytest.mark.parametrize("prior, message", [
    ({"scale": -1}, "scale must be a positive finite number"),
    ({"scale": "x"}, "scale must be a positive finite number"),
    ({"kappa0": 0}, "kappa0 must be positive"),
    ({"B0": [[1, 0], [0, -1]]}, "B0 must be positive definite"),
    ({"B0": [[1, 0]]}, "B0 must be a finite symmetric 2 x 2 matrix"),
    ({"shrinkage": 2}, r"shrinkage must lie in \(0, 1\]"),
])
def test_bad_prior_values_are_errors_naming_the_parameter(tmp_path, prior, message):
    ingest_array(np.random.default_rng(0).normal(size=(50, 2)), tmp_path / "c",
                 partition_rows=25)
    with pytest.raises(BnpmixError, match="prior: " + message):
        fit(tmp_path / "c", tmp_path / "run", job_config(laps=1, prior=prior))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("algorithm", ["adf", "ep"])
def test_restarts_of_an_engine_that_ignores_the_seed_are_refused(algorithm):
    with pytest.raises(BnpmixError, match=r"restarts: .* does not depend on the seed"):
        job_config(algorithm=algorithm, restarts=2)
    assert job_config(algorithm=algorithm, restarts=1).run.restarts == 1
    assert job_config(algorithm="memo", restarts=2).run.restarts == 2
