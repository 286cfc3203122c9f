"""A DPMMSubClusters-shaped benchmark: N = 100,000 items in D = 128 from 79 full-covariance
Gaussians (their published case: 100,000 ImageNet embeddings x 128-D, 79 classes; 475 s for
DPMMSubClusters, 6,108 s for scikit-learn's BayesianGaussianMixture).

The data (``dpmm_data``, fixed seed): class weights ~ Dir(3) (sizes about 150 to 3,100);
a shared covariance B = Q diag(λ) Qᵀ with λ geometric from 4 down to 0.04 (a 100x spread) and Q
a random rotation; class covariances Σ_k ~ Wishart(ν, s_k B / ν) with ν = D + 1000 (each close
to a scaled B, none equal) and s_k ~ LogNormal(0, 0.3); means in 12 superclasses,
μ_k = B^{1/2} (c_g + 0.5 z_k) with c_g ~ N(0, 0.5² I), z_k ~ N(0, I), so that class means differ
along the data's own high-variance directions (as embeddings' do). The true parameters' own
assignments are nearly exact (printed: oracle) while Euclidean k-means with the true K = 79
reaches NMI 0.88. The script also prints bnpmix's objective at three fixed hard labellings
(one cluster, the 12 superclasses, the 79 classes): on this data the full Gaussian's ELBO
prefers the superclasses to the classes (measured: -137.2 against -161.5 per item; one cluster
-141.6), so a full-covariance fit cannot recover the 79 classes whatever the search: each
class's 128 x 128 covariance, estimated from 157-3,135 items, costs more evidence than its mean
gains. That holds at the default prior only: the plain fit learns its prior (empirical Bayes
between laps), and under it the full Gaussian recovers the classes (measured on a loaded
machine: K 72, NMI 0.990, ELBO -126.49 per item, converged at lap 25) and beats the tied
Gaussian's converged bound (-129.02 per item, K 83, NMI 0.995, the fit of an earlier default
that compared the structures on a sample). --obs auto's race keeps gauss: diag-gauss leaves at
lap 6 (45 nats per item behind), tied-gauss at lap 10 (2.28 behind); the full covariances'
laps cost O(N K D²), so the fit takes far longer than the tied one did (1,042 s with three
other jobs on the 2 cores; the 120 s target was met by the tied fit, 55-92 s). The printout
and the JSON give the structure chosen and every candidate's race.

Default mode: bnpmix with its defaults (``job_config(algorithm="memo")``: K = 1 on dense data,
births, merges and deletes, at most 100 laps; --obs auto, the dense default) on
a corpus from ``ingest_array`` with its default partition size; prints ingest and fit seconds,
K, NMI, ARI, laps and convergence, next to the latest scikit-learn figures from
results/dpmm_shaped_sklearn.json. Targets: fit within 120 s on 2 cores, NMI at least
scikit-learn's.

``--sklearn-only``: BayesianGaussianMixture (n_components=100, covariance_type="full",
weight_concentration_prior_type="dirichlet_process", its defaults otherwise, random_state 0) as
one EM run cut into chunks of 5 iterations (warm_start=True: each call continues the same EM
from the last call's parameters and lower bound); after every chunk it writes iterations, wall
seconds, converged_, NMI, ARI and K with more than 1% of the mass to
results/dpmm_shaped_sklearn.json; stops when converged_ or after ``--sklearn-hours``.

    python benchmarks/reproductions/dpmm_shaped.py [--out results/dpmm_shaped.json]
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 nice -n 19 \\
        python benchmarks/reproductions/dpmm_shaped.py --sklearn-only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import KEEP, WORK, oracle_ari, run_fit
from bnpmix.algorithms.metrics import adjusted_rand_index, normalized_mutual_info
from bnpmix.pipeline.fit import job_config
from bnpmix.storage import RunDir, ingest_array

RESULTS = Path(__file__).resolve().parents[1] / "results"
SKLEARN_JSON = RESULTS / "dpmm_shaped_sklearn.json"
N, D, K_TRUE = 100_000, 128, 79
CHUNK = 5  # EM iterations per scikit-learn call between checkpoints


def dpmm_data(n: int = N, D: int = D, K: int = K_TRUE, seed: int = 0, group_spread: float = 0.5,
              class_spread: float = 0.5) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(X (n, D), labels, truth) as the module docstring describes; truth holds the weights
    (K,), means (K, D), covariances (K, D, D) and each class's superclass (K,)."""
    from scipy.stats import wishart

    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(K, 3.0))
    spectrum = np.geomspace(4.0, 0.04, D)
    Q, _ = np.linalg.qr(rng.normal(size=(D, D)))
    B = (Q * spectrum) @ Q.T
    nu = D + 1000
    covs = np.array([wishart.rvs(nu, s * B / nu, random_state=rng)
                     for s in rng.lognormal(0.0, 0.3, K)])
    centres = rng.normal(0.0, group_spread, (12, D))
    group = rng.integers(0, len(centres), K)
    root = (Q * np.sqrt(spectrum)) @ Q.T  # B^{1/2}
    means = (centres[group] + rng.normal(0.0, class_spread, (K, D))) @ root
    labels = rng.choice(K, size=n, p=weights)
    chol = np.linalg.cholesky(covs)
    X = np.empty((n, D))
    for k in range(K):
        rows = labels == k
        X[rows] = means[k] + rng.standard_normal((rows.sum(), D)) @ chol[k].T
    return X, labels, {"weights": weights, "means": means, "covs": covs, "superclass": group}


def true_log_density(X: np.ndarray, weights: np.ndarray, means: np.ndarray,
                     covs: np.ndarray) -> np.ndarray:
    """log w_k + log N(x | μ_k, Σ_k) up to the shared constant, (n, K)."""
    out = np.empty((len(X), len(weights)))
    for k, (w, m, C) in enumerate(zip(weights, means, covs, strict=True)):
        L = np.linalg.cholesky(C)
        Z = np.linalg.solve(L, (X - m).T)
        out[:, k] = np.log(w) - 0.5 * (Z**2).sum(0) - np.log(np.diag(L)).sum()
    return out


def write_json(path: Path, obj: dict) -> None:
    """Replace ``path`` with ``obj`` as JSON (a temporary sibling renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def sklearn_run(X: np.ndarray, labels: np.ndarray, hours: float, seed: int) -> None:
    """One BayesianGaussianMixture EM run in chunks of CHUNK iterations, checkpointed to
    SKLEARN_JSON after each chunk; stops at converged_ or after ``hours`` of wall time."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import BayesianGaussianMixture

    bgm = BayesianGaussianMixture(n_components=100, covariance_type="full",
                                  weight_concentration_prior_type="dirichlet_process",
                                  max_iter=CHUNK, warm_start=True, random_state=seed)
    record = {
        "model": "sklearn BayesianGaussianMixture(n_components=100, covariance_type='full', "
                 "weight_concentration_prior_type='dirichlet_process', random_state="
                 f"{seed}), defaults otherwise (tol 1e-3, init kmeans, n_init 1)",
        "how": f"one EM run in chunks of {CHUNK} iterations (warm_start=True, max_iter="
               f"{CHUNK}); each call also ends with one extra E-step (sklearn's, for labels)",
        "environment": {k: os.environ.get(k) for k in
                        ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
                       | {"nice": os.nice(0), "note": "one thread at the lowest priority on a "
                          "shared 2-core machine: wall times are inflated"},
        "data": f"dpmm_data(n={len(X)}, seed=0): D={X.shape[1]}, {K_TRUE} classes",
        "started": time.strftime("%Y-%m-%d %H:%M:%S"), "cap_seconds": hours * 3600,
        "pid": os.getpid(), "chunks": [], "finished": False,
    }
    write_json(SKLEARN_JSON, record)
    fit_seconds = 0.0
    start = time.perf_counter()
    while True:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            bgm.fit(X)
        fit_seconds += time.perf_counter() - t
        iterations = CHUNK * len(record["chunks"]) + bgm.n_iter_
        predicted = bgm.predict(X)
        record["chunks"].append({
            "iterations": iterations, "fit_seconds": round(fit_seconds, 1),
            "wall_seconds": round(time.perf_counter() - start, 1),
            "converged": bool(bgm.converged_), "lower_bound": float(bgm.lower_bound_),
            "nmi": normalized_mutual_info(labels, predicted),
            "ari": adjusted_rand_index(labels, predicted),
            "K_1pct": int((bgm.weights_ > 0.01).sum()),
        })
        done = bgm.converged_ or time.perf_counter() - start > hours * 3600
        record["finished"] = bool(done)
        record["stopped"] = ("converged" if bgm.converged_ else "time cap") if done else None
        write_json(SKLEARN_JSON, record)
        c = record["chunks"][-1]
        print(f"iter {c['iterations']:4d}  fit {c['fit_seconds']:8.1f} s  wall "
              f"{c['wall_seconds']:8.1f} s  NMI {c['nmi']:.4f}  ARI {c['ari']:.4f}  "
              f"K>1% {c['K_1pct']}  converged {c['converged']}", flush=True)
        if done:
            return


def sklearn_latest() -> str:
    """The latest scikit-learn checkpoint as one line (or why there is none)."""
    if not SKLEARN_JSON.exists():
        return f"scikit-learn: no results yet ({SKLEARN_JSON})"
    record = json.loads(SKLEARN_JSON.read_text(encoding="utf-8"))
    if not record["chunks"]:
        return "scikit-learn: started, no chunk finished yet"
    c = record["chunks"][-1]
    at100 = next((x for x in record["chunks"] if x["iterations"] >= 100), None)
    line = (f"scikit-learn BGM: {c['iterations']} iterations, {c['fit_seconds']:.0f} s of fit "
            f"(1 thread, nice 19), NMI {c['nmi']:.4f}, ARI {c['ari']:.4f}, K>1% {c['K_1pct']}, "
            f"converged {c['converged']}, "
            + (f"finished ({record['stopped']})" if record["finished"] else "still running"))
    if at100 is not None:
        line += f"; at its default max_iter (100): NMI {at100['nmi']:.4f}"
    return line


def bnpmix_run(X: np.ndarray, labels: np.ndarray, oracle: tuple[float, float], out: Path,
               seed: int) -> int:
    """bnpmix's default fit; prints and writes the figures, returns 0 if both targets hold."""
    t = time.perf_counter()
    corpus = WORK / "dpmm"
    ingest_array(X, corpus, columns={"label": labels})
    ingest = time.perf_counter() - t
    cfg = job_config(algorithm="memo", seed=seed)
    r = run_fit(corpus, cfg, "memo-default")
    summary = RunDir(r["run"]).load_summary()
    result = {
        "data": f"dpmm_data(n={len(X)}, seed=0): D={X.shape[1]}, {K_TRUE} classes",
        "oracle_nmi": oracle[0], "oracle_ari": oracle[1],
        "config": cfg.to_dict(), "obs": summary["config"]["model"]["obs"],
        "ingest_seconds": ingest, "fit_seconds": r["seconds"], "K": r["K"], "K_1pct": r["K_eff"],
        "nmi": r["nmi"], "ari": r["ari"], "laps": summary["laps"],
        "converged": summary["converged"], "stopped": summary.get("stopped"),
        "elbo_per_item": r["elbo_per_item"], "threads": cfg.run.threads,
        "run_dir": str(r["run"]), "chosen": summary.get("obs"),
        "race": {name: {key: c.get(key) for key in ("elbo_per_item", "laps", "K", "seconds",
                                                     "result")}
                 for name, c in (summary.get("obs_auto") or {}).get("candidates", {}).items()},
    }
    print(f"bnpmix memo defaults (obs {result['obs']}, chose {result['chosen']}): ingest "
          f"{ingest:.1f} s, fit "
          f"{r['seconds']:.1f} s, K {r['K']} (K>1% {r['K_eff']}), NMI {r['nmi']:.4f}, "
          f"ARI {r['ari']:.4f}, {summary['laps']} laps, converged {result['converged']}"
          f"{' (' + summary['stopped'] + ')' if summary.get('stopped') else ''}")
    for name, c in result["race"].items():
        print(f"  {name:<10} {c['elbo_per_item']:.4f} per item, {c['laps']} laps, K = {c['K']}, "
              f"{c['seconds']:.1f} s: {c['result']}")
    print(f"  run directory (trace.csv): {r['run']}" if KEEP else
          "  (BNPMIX_BENCH_KEEP=1 keeps the run directory and its trace.csv)")
    print(sklearn_latest())
    sk_nmi = None
    if SKLEARN_JSON.exists() and (chunks := json.loads(SKLEARN_JSON.read_text())["chunks"]):
        sk_nmi = chunks[-1]["nmi"]
    fast = r["seconds"] <= 120.0
    good = sk_nmi is not None and r["nmi"] >= sk_nmi
    result |= {"sklearn_nmi_latest": sk_nmi, "target_time": fast, "target_nmi": good}
    print(f"targets: fit <= 120 s {'PASS' if fast else 'FAIL'}; NMI >= scikit-learn's "
          f"{'PASS' if good else ('FAIL' if sk_nmi is not None else 'unknown')}")
    write_json(out, result)
    return 0 if fast and good else 1


def labelling_elbos(X: np.ndarray, labels: np.ndarray, superclass: np.ndarray) -> None:
    """The ELBO per item, under the full Gaussian for X (its default prior, DP
    stick-breaking), of q(z) fixed at three hard labellings, each with its optimal global
    update: one cluster, the 12 superclasses, the 79 classes. Which one the objective prefers
    bounds what any search for its optimum can find."""
    from bnpmix.algorithms.alloc import StickBreaking
    from bnpmix.algorithms.mixture import optimal_elbo
    from bnpmix.algorithms.obs.gauss import Gauss
    from bnpmix.algorithms.vb.local import summarize

    obs, alloc = Gauss.default(X), StickBreaking(1.0)
    for name, z in (("one cluster", np.zeros(len(X), np.int64)),
                    ("12 superclasses", superclass[labels]), (f"{K_TRUE} classes", labels)):
        _, z = np.unique(z, return_inverse=True)
        R = np.zeros((len(X), z.max() + 1))
        R[np.arange(len(X)), z] = 1.0
        S = summarize(X, obs, R, None, np.arange(R.shape[1]))
        print(f"  ELBO per item with q(z) = {name}: {optimal_elbo(obs, alloc, S) / len(X):.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sklearn-only", action="store_true",
                    help="run scikit-learn's BGM only, checkpointing to " + str(SKLEARN_JSON))
    ap.add_argument("--sklearn-hours", type=float, default=2.0)
    ap.add_argument("--n", type=int, default=N)
    ap.add_argument("--seed", type=int, default=0, help="the fit's seed (the data's is 0)")
    ap.add_argument("--out", type=Path, default=RESULTS / "dpmm_shaped.json")
    args = ap.parse_args()
    t = time.perf_counter()
    X, labels, truth = dpmm_data(args.n)
    sizes = np.bincount(labels, minlength=K_TRUE)
    print(f"data: N={len(X)}, D={D}, {K_TRUE} classes of {sizes.min()} to {sizes.max()} items, "
          f"made in {time.perf_counter() - t:.1f} s")
    if args.sklearn_only:
        sklearn_run(X, labels, args.sklearn_hours, args.seed)
        return 0
    logp = true_log_density(X, truth["weights"], truth["means"], truth["covs"])
    oracle = (normalized_mutual_info(labels, logp.argmax(1)), oracle_ari(logp, labels))
    print(f"oracle (true parameters' assignments): NMI {oracle[0]:.4f}, ARI {oracle[1]:.4f}")
    print("bnpmix's objective at fixed labellings (full Gaussian, default prior):")
    labelling_elbos(X, labels, truth["superclass"])
    return bnpmix_run(X, labels, oracle, args.out, args.seed)


if __name__ == "__main__":
    sys.exit(main())
