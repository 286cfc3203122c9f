"""bnpmix's defaults against scikit-learn's BayesianGaussianMixture on data that ships with it.

For iris, wine and digits (standardised with the training rows' mean and deviation, 80/20 split,
one split per seed): bnpmix with the plain defaults (`bnpmix fit CORPUS --out RUN`), and
scikit-learn's BayesianGaussianMixture (dirichlet_process, full covariance, n_components = 25,
its defaults). Reported per seed and averaged:
- held-out log-likelihood per item: bnpmix's posterior predictive (Student-t mixture with the new
  components' mass); scikit-learn's posterior predictive built from its fitted
  weight_concentration_, mean_precision_, means_, degrees_of_freedom_ and covariances_
  (Student-t components with its expected weights), and its own plug-in `score` (lower);
- ARI of the test rows' clusters against the labels; K (bnpmix's components; scikit-learn's
  components with more than 1 % of the weight).
Then the prior's sensitivity: K and held-out log-likelihood of bnpmix against the default
prior's scale factor over two orders of magnitude (0.01 to 1; the default is 0.1).

    python benchmarks/real_data.py [--seeds 5] [--sets iris,wine,digits] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

import numpy as np
from scipy.special import gammaln, logsumexp
from sklearn import datasets
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture

from _common import WORK
from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array

SCALES = (0.01, 0.03, 0.1, 0.3, 1.0)


def split(name: str, seed: int):
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(X))
    cut = int(0.8 * len(X))
    train, test = order[:cut], order[cut:]
    mu, sd = X[train].mean(0), X[train].std(0)
    sd = np.where(sd > 0, sd, 1.0)
    return (X[train] - mu) / sd, y[train], (X[test] - mu) / sd, y[test]


def student_t(X: np.ndarray, m: np.ndarray, S: np.ndarray, dof: float) -> np.ndarray:
    D = X.shape[1]
    L = np.linalg.cholesky(S)
    q = (np.linalg.solve(L, (X - m).T) ** 2).sum(0)
    return (gammaln((dof + D) / 2) - gammaln(dof / 2) - D / 2 * np.log(dof * np.pi)
            - np.log(np.diag(L)).sum() - (dof + D) / 2 * np.log1p(q / dof))


def sklearn_predictive(g: BayesianGaussianMixture, X: np.ndarray) -> np.ndarray:
    """Posterior predictive of a fitted BayesianGaussianMixture: Σ_k E[w_k] St(x | m_k,
    (κ_k + 1) / (κ_k (ν_k - D + 1)) W_k⁻¹, ν_k - D + 1), with W_k⁻¹ = ν_k covariances_k."""
    D = X.shape[1]
    cols = []
    for k in range(g.n_components):
        nu, kappa = g.degrees_of_freedom_[k], g.mean_precision_[k]
        dof = nu - D + 1
        scale = g.covariances_[k] * nu * (kappa + 1) / (kappa * dof)
        cols.append(np.log(g.weights_[k]) + student_t(X, g.means_[k], scale, dof))
    return logsumexp(np.stack(cols, 1), axis=1)


def bnpmix_fit(Xtr: np.ndarray, name: str, seed: int, **options):
    corpus = WORK / f"{name}-{seed}"
    if not corpus.exists():
        ingest_array(Xtr, corpus, partition_rows=max(50, -(-len(Xtr) // 4)))
    tag = "-".join(f"{k}{v}" for k, v in sorted(options.items()))
    out = WORK / f"run-{name}-{seed}-{tag}"
    summary = fit(corpus, out, job_config(seed=seed, **options))
    return summary, load(out)


def compare(name: str, seeds: int) -> list[dict]:
    rows = []
    for seed in range(seeds):
        Xtr, _, Xte, yte = split(name, seed)
        summary, model = bnpmix_fit(Xtr, name, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            g = BayesianGaussianMixture(n_components=25, covariance_type="full",
                                        weight_concentration_prior_type="dirichlet_process",
                                        random_state=seed).fit(Xtr)
        rows.append({
            "seed": seed, "K": summary["K"],
            "heldout": model.score(Xte), "ari": adjusted_rand_index(yte, model.predict(Xte)),
            "sk_K": int((g.weights_ > 0.01).sum()),
            "sk_heldout": float(sklearn_predictive(g, Xte).mean()),
            "sk_plugin": float(g.score(Xte)),
            "sk_ari": adjusted_rand_index(yte, g.predict(Xte)),
        })
    return rows


def sensitivity(name: str, seeds: int) -> list[dict]:
    rows = []
    for scale in SCALES:
        Ks, lls = [], []
        for seed in range(seeds):
            Xtr, _, Xte, _ = split(name, seed)
            summary, model = bnpmix_fit(Xtr, name, seed, prior={"scale": scale})
            Ks.append(summary["K"])
            lls.append(model.score(Xte))
        rows.append({"scale": scale, "K": Ks, "heldout": float(np.mean(lls))})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sets", default="iris,wine,digits")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    out = {}
    for name in args.sets.split(","):
        rows = compare(name, args.seeds)
        print(f"\n{name}: per seed  K  held-out  ARI   | sklearn K  predictive  plug-in  ARI")
        for r in rows:
            print(f"  seed {r['seed']}   {r['K']:>3} {r['heldout']:>9.3f} {r['ari']:>5.3f} |"
                  f" {r['sk_K']:>9} {r['sk_heldout']:>11.3f} {r['sk_plugin']:>8.3f}"
                  f" {r['sk_ari']:>5.3f}")
        mean = {k: float(np.mean([r[k] for r in rows]))
                for k in ("heldout", "ari", "sk_heldout", "sk_plugin", "sk_ari")}
        ll_ok, ari_ok = mean["heldout"] >= mean["sk_heldout"], mean["ari"] >= mean["sk_ari"]
        print(f"  mean: bnpmix held-out {mean['heldout']:.3f} vs sklearn predictive "
              f"{mean['sk_heldout']:.3f} (plug-in {mean['sk_plugin']:.3f}): "
              f"{'AT LEAST AS HIGH' if ll_ok else 'LOWER'}; ARI {mean['ari']:.3f} vs "
              f"{mean['sk_ari']:.3f}: {'AT LEAST AS HIGH' if ari_ok else 'LOWER'}")
        sens = sensitivity(name, args.seeds)
        print("  prior scale:  " + "  ".join(f"{s['scale']:g}: K {s['K']} held-out "
                                              f"{s['heldout']:.3f}" for s in sens))
        out[name] = {"runs": rows, "mean": mean, "sensitivity": sens}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
