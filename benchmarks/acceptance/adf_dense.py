"""ADF and EP with their defaults on small dense data sets, against one Gaussian.

For iris, wine, breast cancer and digits (scikit-learn's; standardised with the training rows'
mean and deviation, 80/20 split, one split per seed, as benchmarks/acceptance/real_data.py):
`bnpmix fit
--algorithm adf` and `--algorithm ep` with their defaults (DP, a = 1, epsilon = 0.1, the default
Gaussian prior scaled to the training rows), reporting per data set, averaged over the seeds:
- K, the training figure per item (summary.json's loglik_per_item: ADF's one-step-ahead
  predictive, EP's cavity predictive in its last pass) and the held-out predictive per item
  (`bnpmix evaluate`'s figure: log Σ_k π_k p(x | λ_k) + π_new p(x | λ_0));
- one Gaussian: the posterior predictive of a single full-covariance Gaussian under the same
  prior (closed form, a Student-t), the bar ADF's and EP's held-out figure must reach (each is
  printed as >= or < one Gaussian).

--prior JSON fits with that observation prior instead (e.g. '{"scale": 1.0}'). --oracle adds ADF
under the prior learned by type-II maximum likelihood from the true labels (fixed hard
assignments, q(θ_k) exact, so the bound is the marginal likelihood): B0 = b T (T the shrunk
training covariance, so E[Σ] = b T / (ν0 − D − 1)) and ν0 at the fixed point of
b = K ν0 D / Σ_k tr(T E[Λ_k]) and ψ_D(ν0/2) = mean_k E ln|Λ_k| + ln|b T| − D ln 2, m0 and κ0
kept. It shows what a prior learned from a good fit of the data would give ADF, whose own prior
stays fixed (ADF and EP do not learn it). --gibbs adds the number of clusters of a collapsed
Gibbs sampler of the DP mixture under the default prior (what the model itself says, against
ADF's greedy pass).

    python benchmarks/acceptance/adf_dense.py [--seeds 5] [--sets iris,wine,breast_cancer,digits]
        [--algorithms adf,ep] [--ep-passes 10] [--prior JSON] [--oracle] [--gibbs]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import digamma

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import WORK
from acceptance.real_data import split
from bnpmix.algorithms.adf import Clusters, prepare
from bnpmix.algorithms.alloc import NRM
from bnpmix.algorithms.ep import sweep
from bnpmix.algorithms.nrm_mixture import NRMMixture
from bnpmix.algorithms.obs import obs_class
from bnpmix.algorithms.obs.base import SHRINKAGE, data_scale_matrix
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.summary import Summary
from bnpmix.pipeline.evaluate import load
from bnpmix.pipeline.fit import fit, job_config
from bnpmix.storage import ingest_array

SETS = ("iris", "wine", "breast_cancer", "digits")


def one_gaussian(Xtr: np.ndarray, Xte: np.ndarray, prior: dict[str, Any]) -> float:
    """Mean held-out log density under one Gaussian's posterior predictive (same prior)."""
    obs = obs_class("gauss").default(Xtr, **prior)
    post = obs.post(np.array([float(len(Xtr))]), obs.stats(Xtr, np.ones((len(Xtr), 1))))
    return float(obs.predictive_logpdf(Xte, post)[:, 0].mean())


def engine_run(Xtr: np.ndarray, Xte: np.ndarray, name: str, seed: int, algorithm: str,
               prior: dict[str, Any], passes: int) -> dict[str, float]:
    """One `bnpmix fit` of the training rows (4 partitions) and its held-out score."""
    corpus = WORK / f"{name}-{seed}"
    if not corpus.exists():
        ingest_array(Xtr, corpus, partition_rows=-(-len(Xtr) // 4))
    out = WORK / f"run-{name}-{seed}-{algorithm}-{json.dumps(prior, sort_keys=True)}"
    options = {"passes": passes} if algorithm == "ep" else {}
    summary = fit(corpus, out, job_config(algorithm=algorithm, seed=seed, prior=prior,
                                          scheduler="synchronous", **options))
    model = load(out)
    return {"K": summary["K"], "train": summary["loglik_per_item"], "heldout": model.score(Xte)}


def psi_D(x: float, D: int) -> float:
    """The multivariate digamma ψ_D(x) = Σ_{j=1..D} ψ(x + (1 − j)/2)."""
    return float(digamma(x + (1 - np.arange(1, D + 1)) / 2).sum())


def shape(X: np.ndarray) -> np.ndarray:
    """T, the shrunk covariance of X: the default prior's E[Σ] is 0.1 T."""
    return data_scale_matrix(np.cov(X, rowvar=False, bias=True), 1.0, SHRINKAGE)


def solve_nu0(c: float, D: int) -> float:
    """ν0 with ψ_D(ν0/2) − D ln ν0 = c (b eliminated: ln|b T| = D ln ν0 + ln(K D / tr) + ln|T|);
    the left side rises from −inf to 0 as ν0 grows from D − 1."""
    return brentq(lambda v: psi_D(v / 2, D) - D * np.log(v) - c, D - 1 + 1e-9, 1e8)


def oracle_prior(X: np.ndarray, labels: np.ndarray, iters: int = 200) -> Gauss:
    """The Normal-Wishart prior with B0 = b T and ν0 at the type-II ML fixed point given the
    true labels (see the module's docstring); m0 and κ0 the default's."""
    default = Gauss.default(X)
    D, T = X.shape[1], shape(X)
    R = (labels[:, None] == np.unique(labels)[None]).astype(float)
    K, logdet_T = R.shape[1], np.linalg.slogdet(T)[1]
    nu0, b = default.nu0, float(np.trace(default.B0) / np.trace(T))
    for _ in range(iters):
        obs = Gauss(D, default.m0, default.kappa0, nu0, b * T)
        post = obs.post(R.sum(0), obs.stats(X, R))
        Binv = np.einsum("kji,kjl->kil", post["U"], post["U"])
        trace = float(np.einsum("ij,kji->", T, post["nu"][:, None, None] * Binv))
        Elog = np.mean([psi_D(n / 2, D) for n in post["nu"]]) + D * np.log(2) - post[
            "logdet_B"].mean()
        new = solve_nu0(Elog + logdet_T + D * np.log(K * D / trace) - D * np.log(2), D)
        done = abs(new - nu0) < 1e-10 * nu0
        nu0, b = new, K * new * D / trace
        if done:
            break
    return Gauss(D, default.m0, default.kappa0, nu0, b * T)


def adf_under(obs: Gauss, Xtr: np.ndarray, Xte: np.ndarray) -> dict[str, float]:
    """ADF (DP, a = 1, ε = 0.1) over the training rows in order, under ``obs``."""
    prior = NRM()
    res = sweep(Xtr, obs, prior, 0.1, Summary.zeros(np.zeros(0, np.int64), obs.stat_shapes()),
                None, 0, 0.0)
    model = NRMMixture(obs, prior, res.sites.named(0).summary, len(Xtr), res.v)
    return {"K": model.K, "train": res.loglik / len(Xtr),
            "heldout": float(model.score_samples(Xte).mean())}


def gibbs_k(X: np.ndarray, obs: Gauss, sweeps: int, seed: int, a: float = 1.0) -> float:
    """Mean K over the second half of a collapsed Gibbs run of the DP(a) mixture (each item's
    exact conditional from the clusters without it, Neal's Algorithm 3)."""
    rng = np.random.default_rng(seed)
    cl, items = Clusters(obs, NRM(a)), prepare(obs, X)
    new = cl.new_logliks(items)
    z, Ks = np.full(len(X), -1), []
    with np.errstate(divide="ignore"):
        for _ in range(sweeps):
            for i in rng.permutation(len(X)):
                if z[i] >= 0:
                    cl.take_at(items, i, np.eye(cl.K)[z[i]])
                    if cl.S[z[i]] < 0.5:
                        cl.drop(np.arange(cl.K) != z[i])
                        z[z > z[i]] -= 1
                logp = cl.log_joint_at(items, i, len(X) - 1, new[i])
                p = np.exp(logp - logp.max())
                k = int(rng.choice(len(p), p=p / p.sum()))
                if k == cl.K:
                    cl.create(k)
                cl.add_at(items, i, np.eye(cl.K)[k])
                z[i] = k
            Ks.append(cl.K)
    return float(np.mean(Ks[len(Ks) // 2:]))


def engines(args: argparse.Namespace) -> list[str]:
    return [a for a in args.algorithms.split(",") if a]


def measure(name: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    Xtr, ytr, Xte, _ = split(name, seed)
    row: dict[str, Any] = {"seed": seed, "one_gaussian": one_gaussian(Xtr, Xte, args.prior)}
    for algorithm in engines(args):
        row[algorithm] = engine_run(Xtr, Xte, name, seed, algorithm, args.prior, args.ep_passes)
    if args.oracle:
        obs = oracle_prior(Xtr, ytr)
        b = float(np.trace(obs.B0) / np.trace(shape(Xtr)))  # B0 = b T
        row["oracle"] = {**adf_under(obs, Xtr, Xte), "nu0": obs.nu0,
                         "scale": b / (obs.nu0 - obs.D - 1) if obs.nu0 > obs.D + 1 else None}
    if args.gibbs:
        row["gibbs_K"] = gibbs_k(Xtr, obs_class("gauss").default(Xtr, **args.prior),
                                 args.gibbs_sweeps, seed)
    return row


def mean(rows: list[dict[str, Any]], *path: str) -> float:
    values = []
    for r in rows:
        for p in path:
            r = r[p]
        values.append(r)
    return float(np.mean(values))


def report(name: str, rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n{name} ({len(rows)} seeds): K per seed, means of the figures per item")
    gauss = mean(rows, "one_gaussian")
    kinds = engines(args) + (["oracle"] if args.oracle else [])
    for kind in kinds:
        Ks = [r[kind]["K"] for r in rows]
        held = mean(rows, kind, "heldout")
        label = "adf, oracle prior" if kind == "oracle" else kind
        print(f"  {label:<18} K {Ks}  training {mean(rows, kind, 'train'):9.3f}  held-out "
              f"{held:9.3f}  one Gaussian {gauss:9.3f}  "
              f"{'>=' if held >= gauss else '<'} one Gaussian")
    if args.oracle:
        print("  oracle prior: nu0 " + ", ".join(f"{r['oracle']['nu0']:.1f}" for r in rows)
              + f" (D = {len(split(name, 0)[0][0])}); E[Sigma] / T: " + ", ".join(
                  "-" if r["oracle"]["scale"] is None else f"{r['oracle']['scale']:.2f}"
                  for r in rows))
    if args.gibbs:
        print("  collapsed Gibbs K (same prior as adf): "
              + ", ".join(f"{r['gibbs_K']:.1f}" for r in rows))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--algorithms", default="adf,ep",
                    help="the engines fitted (adf,ep; '' for none)")
    ap.add_argument("--ep-passes", type=int, default=10, help="EP passes (the default 10)")
    ap.add_argument("--prior", type=json.loads, default={},
                    help="observation prior (JSON), e.g. '{\"scale\": 1.0}'")
    ap.add_argument("--oracle", action="store_true",
                    help="also ADF under the prior learned from the true labels")
    ap.add_argument("--gibbs", action="store_true",
                    help="also a collapsed Gibbs sampler's K under the same prior (slow on "
                    "digits)")
    ap.add_argument("--gibbs-sweeps", type=int, default=40)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    out = {}
    for name in args.sets.split(","):
        rows = [measure(name, seed, args) for seed in range(args.seeds)]
        report(name, rows, args)
        out[name] = rows
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"prior": args.prior, "sets": out}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
