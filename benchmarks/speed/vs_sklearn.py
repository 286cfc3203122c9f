"""bnpmix with its defaults against scikit-learn's BayesianGaussianMixture on the toy patches
(D = 25, 8 true components) at N = 25,000, 100,000 and 400,000, and the Gaussian E-step's rate.

Fits. Each N: X and a held-out set of 20,000 items are one draw of toy_patches(N + 20,000),
split. bnpmix: ``bnpmix.BayesianMixture(random_state=seed)``, nothing else set (memo with
births, merges and deletes from K = 1, the full Gaussian, its default laps and tolerance); its
time includes writing X as a corpus. scikit-learn: dirichlet_process prior, covariance_type="full",
n_components=25, max_iter raised to 1,000 (its tol 1e-3 otherwise) so that it converges; whether
it did is printed. Per method: wall seconds, ARI of the training items' labels against the true
ones, held-out log-likelihood per item (bnpmix: its posterior predictive with the new
components' mass, score(); scikit-learn: score(), the density at its variational point
estimates) and the components above 1 % of the mass. Target: bnpmix at least 10x faster at an
ARI no more than 0.005 below scikit-learn's, at every N. bnpmix runs first, so that its times do
not share the process with the thread pools scikit-learn's fit leaves behind. Before its timed
fits each library fits 2,000 items once, untimed, so that neither time includes importing
modules (bnpmix's estimator subclasses scikit-learn's base classes, whose import takes about
0.8 s and would otherwise count against bnpmix's first fit). Each fit's figures are printed when
it ends.

E-step. One batch, N = 100,000, D = 25, K = 25, full Gaussian: ``batch_step`` (the whole local
step: E[log p(x|φ)] + E[log w], the log normaliser, exp, the entropies H_k = -Σ r log r and
N_k, Σ r x, Σ r x xᵀ). Its FLOP count is that of the direct formulation's matrix products: the
Mahalanobis forms [x 1] [U_1ᵀ .. U_Kᵀ; -(U_k m_k)ᵀ], 2 N K D (D + 1), and the statistics
Σ_n r_nk x_n x_nᵀ and Σ_n r_nk x_n as matrix products, 2 N K D² + 2 N K D: 4 N K D (D + 1)
= 6.50 GFLOP in all (elementwise work not counted). The fused code (wishart.feature_estep)
executes fewer: the same quantities as two products with the P = D(D+1)/2 + D + 1 = 351
quadratic features of each item, 4 N K P = 3.51 GFLOP; both rates are printed. The reference is
numpy's float64 matmul of two 2,000 x 2,000 matrices measured just before (2 · 2000³ FLOP), and
beside it the fused code's own matrix products run alone, and the unfused computation
(responsibilities, then summarize: the direct formulation, one step after the other). Target:
the E-step at 0.8 of the matmul rate by the direct count. Medians of 5; the load average is
printed beside them.

    python benchmarks/speed/vs_sklearn.py [--sizes 25000,100000,400000] [--seed 0] [--estep-only]
        [--json [PATH]]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
import bnpmix
from _common import json_option, write_json
from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.algorithms.obs import wishart as W
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.vb.local import Globals, batch_step, responsibilities, summarize
from bnpmix.datasets import toy_patches

HELD_OUT = 20_000
TARGET_RATE = 0.8  # of the matmul rate
TARGET_SPEEDUP = 10.0
ARI_SLACK = 0.005


def median_seconds(f: Callable[[], object], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def estep_rate(n: int = 100_000, D: int = 25, K: int = 25) -> bool:
    """Print the E-step's rates against numpy's matmul; True when it reaches TARGET_RATE."""
    X, _ = toy_patches(n, seed=1)
    obs = Gauss.default(X)
    rng = np.random.default_rng(0)
    R = rng.dirichlet(np.ones(K), n)
    g = Globals(np.arange(K), obs.post(R.sum(0), obs.stats(X, R)),
                np.log(rng.dirichlet(np.ones(K))))
    direct = 4.0 * n * K * D * (D + 1)
    P = D * (D + 1) // 2 + D + 1
    executed = 4.0 * n * K * P
    # the fused code's matrix products alone: per block, (K x P)(P x m) and (K x m)(m x P)
    block = W.feature_block(P)
    blocks = [min(block, n - s) for s in range(0, n, block)]
    Phi = {m: rng.normal(size=(P, m)) for m in set(blocks)}
    Rb = {m: rng.random((K, m)) for m in set(blocks)}
    theta = rng.normal(size=(K, P))

    def products() -> None:
        for m in blocks:
            theta @ Phi[m]
            Rb[m] @ Phi[m].T

    A = rng.normal(size=(2000, 2000))
    batch_step(X, obs, g)  # warm the code paths and the allocator
    t_mm = median_seconds(lambda: A @ A)
    before = load()
    t_fused = median_seconds(lambda: batch_step(X, obs, g))
    t_products = median_seconds(products)
    t_unfused = median_seconds(lambda: summarize(X, obs, *responsibilities(X, obs, g), g.uids))
    peak = 2 * 2000.0**3 / t_mm
    print(f"\nE-step of one batch: full Gaussian, n={n:,}, D={D}, K={K} (median of 5; "
          f"{before} before, {load()} after)")
    print(f"  numpy float64 matmul 2000x2000:   {t_mm * 1e3:7.1f} ms  {peak / 1e9:6.1f} GFLOP/s")
    rows = [("batch_step (fused)", t_fused, direct), ("  its matrix products alone", t_products,
                                                      executed),
            ("unfused (before: responsibilities + summarize)", t_unfused, direct)]
    for name, t, flops in rows:
        print(f"  {name:<48} {t * 1e3:7.1f} ms  {flops / t / 1e9:6.1f} GFLOP/s = "
              f"{flops / t / peak:.2f} of matmul ({flops / 1e9:.2f} GFLOP)")
    print(f"  batch_step by the FLOPs it executes ({executed / 1e9:.2f} GFLOP): "
          f"{executed / t_fused / 1e9:.1f} GFLOP/s = {executed / t_fused / peak:.2f} of matmul; "
          f"{t_products / t_fused:.0%} of its time is in those products; "
          f"x{t_unfused / t_fused:.1f} faster than unfused")
    ok = direct / t_fused >= TARGET_RATE * peak
    print(f"  target: batch_step >= {TARGET_RATE} of the matmul rate (direct count): "
          f"{direct / t_fused / peak:.2f}, {'PASS' if ok else 'FAIL'}")
    return ok


def fit_bnpmix(X: np.ndarray, X_test: np.ndarray, seed: int) -> dict:
    t = time.perf_counter()
    est = bnpmix.BayesianMixture(random_state=seed).fit(X)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "labels": est.labels_, "heldout": est.score(X_test),
            "K": int((est.weights_ > 0.01).sum()),
            "note": f"laps {est.n_iter_}, converged {est.converged_}, K {est.n_components_}"}


def fit_sklearn(X: np.ndarray, X_test: np.ndarray, seed: int, max_iter: int) -> dict:
    from sklearn.mixture import BayesianGaussianMixture

    t = time.perf_counter()
    sk = BayesianGaussianMixture(n_components=25, covariance_type="full",
                                 weight_concentration_prior_type="dirichlet_process",
                                 max_iter=max_iter, random_state=seed).fit(X)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "labels": sk.predict(X), "heldout": sk.score(X_test),
            "K": int((sk.weights_ > 0.01).sum()),
            "note": f"n_iter {sk.n_iter_} of {max_iter}, converged {sk.converged_}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="25000,100000,400000")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-iter", type=int, default=1000, help="scikit-learn's max_iter")
    ap.add_argument("--estep-only", action="store_true")
    json_option(ap, "vs_sklearn")
    args = ap.parse_args()

    rate_ok = estep_rate()
    if args.estep_only:
        write_json(args.json, {"args": vars(args), "estep_rate_ok": rate_ok})
        return 0 if rate_ok else 1
    sizes = [int(s) for s in args.sizes.split(",")]
    data = {}
    for n in sizes:
        X, labels = toy_patches(n + HELD_OUT, seed=args.seed)
        data[n] = X[:n], labels[:n], X[n:]
    results: dict[int, dict[str, dict]] = {n: {} for n in sizes}
    warm = data[sizes[0]][0][:2000], data[sizes[0]][2][:2000]
    fits = (("bnpmix", lambda X, X_test, max_iter: fit_bnpmix(X, X_test, args.seed)),
            ("scikit-learn", lambda X, X_test, max_iter: fit_sklearn(X, X_test, args.seed,
                                                                     max_iter)))
    print(f"\ntoy patches, D=25, 8 true components; held-out {HELD_OUT:,} items; seed {args.seed}")
    print(f"{'N':>8} {'method':<13} {'seconds':>8} {'ARI':>7} {'held-out/item':>14} {'K>1%':>5}")
    for name, fit_one in fits:  # bnpmix first, each after an untimed fit: see the docstring
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_one(*warm, 2)
        for n in sizes:
            r = results[n][name] = fit_one(data[n][0], data[n][2], args.max_iter)
            r["ARI"] = adjusted_rand_index(data[n][1], r["labels"])
            print(f"{n:>8,} {name:<13} {r['seconds']:>8.1f} {r['ARI']:>7.4f} "
                  f"{r['heldout']:>14.4f} {r['K']:>5}   {r['note']} ({load()})", flush=True)

    verdict = rate_ok
    for n in sizes:
        ari = {name: r["ARI"] for name, r in results[n].items()}
        speedup = results[n]["scikit-learn"]["seconds"] / results[n]["bnpmix"]["seconds"]
        ok = speedup >= TARGET_SPEEDUP and ari["bnpmix"] >= ari["scikit-learn"] - ARI_SLACK
        verdict &= ok
        gain = results[n]["bnpmix"]["heldout"] - results[n]["scikit-learn"]["heldout"]
        print(f"{n:>8,} bnpmix x{speedup:.1f} faster, "
              f"ARI {ari['bnpmix'] - ari['scikit-learn']:+.4f}, held-out {gain:+.4f}"
              f"/item: >= {TARGET_SPEEDUP:g}x at equal or better ARI: "
              f"{'PASS' if ok else 'FAIL'}")
    write_json(args.json, {"args": vars(args), "estep_rate_ok": rate_ok, "pass": verdict,
                           "fits": {n: {name: {k: v for k, v in r.items() if k != "labels"}
                                        for name, r in results[n].items()} for n in sizes}})
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
