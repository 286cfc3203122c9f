"""Tank, Foti & Fox (2015), Sec. 4, with bnpmix's ``adf`` and ``ep`` engines: the bars, the
Pitman-Yor power-law clusters and a KOS-shaped corpus (generators in nrm_data.py). Every acceptance
bar is checked here and printed as PASS or FAIL with its figures.

bars (Sec. 4.1): ``nrm_data.bars(seed)``, 200 8x8 images (64 words, 16 bar topics plus a 0.05
  baseline, x ~ Mult(50, theta_z)), IG prior, Dirichlet lam0 = 0.5, per seed. Two NRM settings:
  "tuned" (``bnpmix tune`` on the seed's 200 images, 160/40) and "large" (a = 1000, tau = 1000,
  the top corner of the paper's grid: new clusters are cheap, as in the paper's Fig. 1 without
  merges). ADF and EP, without merges and with ``merge_threshold`` = MERGE_THRESHOLD.
  - bar b is matched when some component's posterior mean is within the oracle's Hellinger
    distance + BAR_MARGIN of topic b (oracle: the posterior mean of the items labelled b);
  - extra clusters: K - 16, and the components beyond 16 with mass p_k = S_k / sum S > 1 %;
    merges must not increase them on any seed and must reduce their total over the seeds in the
    large setting (the tuned setting is reported; it may have none to remove);
  - the default epsilon (IG: max(sigma, 0.1) = 0.5) against 0.7 and 0.9, without merges.
powerlaw (Sec. 4.2): ``nrm_data.power_law(seed)``, 10,000 documents (V = 1000, ~100 tokens, PY
  (0.75, 1) labels, Dirichlet(0.75) topics), split at random 7,000 train / 2,000 test / 1,000 for
  ``bnpmix tune`` (80/20 inside, ADF, the paper's grid), lam0 = 0.75 (the paper's). Training
  orders are permutations of the 7,000 training documents, one corpus each (the engines absorb a
  corpus in its stored order). ADF and EP (``--passes`` EP passes after the ADF pass), DP and IG.
  Held-out log-likelihood per test document, K against the true number of clusters among the
  training documents, and the true-label oracle (cluster posteriors from the true labels, the
  NRM predictive rule with m = 7,000, scored as ``bnpmix evaluate`` scores). K counts every
  cluster the engine keeps; K (S>=.5) only those holding at least half a document. The DP is
  also run with epsilon = 0.5 (the IG's default and least value) beside its default 0.1, to
  separate the prior from the threshold.
kos (Sec. 4.3): ``nrm_data.kos_like(seed)``, printed at run time; 20 % of the corpus held out at
  random (the paper's split), tune on 10 % of the training documents (the paper's fraction),
  lam0 = 0.1 (the paper's); ADF vs EP for DP and IG over training orders; also the paper's own
  hyperparameters (DP a = 100; IG a = 10, tau = 100) and the DP with epsilon = 0.5 as above.

Held-out figures are per test document without the multinomial coefficient (bnpmix's scale;
the JSON also has the per-document figure with it). Mean +- s.e. are over training orders.

    python benchmarks/reproductions/nrm_experiments.py [--quick] [--only bars|powerlaw|kos] [--json
        out.json]
        [--seeds 10] [--orders N] [--passes 5] [--paper-hyper] [--work DIR]
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
import nrm_data
from bnpmix.algorithms.alloc import NRM
from bnpmix.algorithms.nrm_mixture import NRMMixture
from bnpmix.algorithms.obs.mult import Mult
from bnpmix.algorithms.summary import Summary
from bnpmix.pipeline.evaluate import evaluate, load
from bnpmix.pipeline.fit import fit, job_config

SIGMA = {"dp": 0.0, "ig": 0.5}
N_BARS = 16
BAR_MARGIN = 0.06
# Distinct true bars are >= 0.633 apart (Hellinger); fitted bars >= 0.57; the extra clusters ADF
# and EP leave (one or two documents of a bar, smoothed by lam0) lie 0.19-0.36 from their bar.
MERGE_THRESHOLD = 0.45
MASS_LEVEL = 0.01
LARGE = {"nrm_a": 1000.0, "nrm_tau": 1000.0}
EPSILONS = (0.7, 0.9)
PAPER = {"powerlaw": {"dp": {"nrm_a": 100.0}, "ig": {"nrm_a": 1.0, "nrm_tau": 1000.0}},
         "kos": {"dp": {"nrm_a": 100.0}, "ig": {"nrm_a": 10.0, "nrm_tau": 100.0}}}


class Checks:
    """Acceptance checks: each printed as PASS/FAIL with its figures and kept for the JSON."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def __call__(self, name: str, ok: bool, figures: str) -> bool:
        ok = bool(ok)
        self.rows.append({"check": name, "pass": ok, "figures": figures})
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {figures}")
        return ok

    @property
    def all_pass(self) -> bool:
        return all(r["pass"] for r in self.rows)


# shared ------------------------------------------------------------------------------------


def hellinger(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """H[i, j] = sqrt(1 - sum_w sqrt(P_iw Q_jw)) between rows of P and rows of Q."""
    return np.sqrt(np.maximum(1.0 - np.sqrt(P) @ np.sqrt(Q).T, 0.0))


def subset(docs: nrm_data.Docs, rows: np.ndarray) -> nrm_data.Docs:
    return nrm_data.Docs(sp.csr_matrix(docs.X[rows]), docs.labels[rows], docs.topics)


def oracle_model(X: sp.csr_matrix, labels: np.ndarray, lam0: float, prior: NRM) -> NRMMixture:
    """The model the true labels give: one cluster per label present, hard one-hot
    responsibilities (S_k = count, lambda_k = lam0 + word counts), the NRM rule at m = n."""
    obs = Mult(X.shape[1], lam0)
    _, z = np.unique(labels, return_inverse=True)
    onehot = np.zeros((len(z), int(z.max()) + 1))
    onehot[np.arange(len(z)), z] = 1.0
    K = onehot.shape[1]
    summary = Summary(np.arange(K), onehot.sum(0), obs.stats(X, onehot), np.zeros(K),
                      n_items=len(z))
    return NRMMixture(obs, prior, summary, m=len(z))


def heldout(model: NRMMixture, X: sp.csr_matrix) -> float:
    """Mean held-out predictive log density per document (as ``evaluate`` computes it)."""
    return float(logsumexp(model.log_joint_predictive(X), axis=1).mean())


def nrm_of(options: dict[str, Any]) -> NRM:
    return NRM(options["nrm_a"], options.get("nrm_tau", 1.0), SIGMA[options["nrm_prior"]])


def run_fit(corpus: Path, out: Path, **options: Any) -> tuple[dict[str, Any], float]:
    shutil.rmtree(out, ignore_errors=True)  # a run of an earlier invocation in --work
    t = time.perf_counter()
    summary = fit(corpus, out, job_config(**options))
    return summary, time.perf_counter() - t


def choose(corpus: Path, prior: str, lam0: float, fraction: float, seed: int,
           paper: dict[str, Any] | None, echo: bool = True) -> tuple[dict[str, Any], Any]:
    """The NRM options: ``bnpmix tune`` (adf's search) on the corpus, or the paper's values."""
    if paper is not None:
        return {"nrm_prior": prior, **paper[prior]}, "paper"
    from bnpmix.pipeline.engines.nrm_tune import tune
    from bnpmix.pipeline.tune import format_table

    t = time.perf_counter()
    result = tune(corpus, prior=prior, fraction=fraction, seed=seed, obs_prior={"lam0": lam0})
    if echo:
        print(f"  bnpmix tune --prior {prior} --fraction {fraction} (lam0 {lam0}, seed {seed}), "
              f"{time.perf_counter() - t:.1f} s; best five:")
        lines = format_table(result).splitlines()
        print("\n".join("    " + s for s in lines[:-1][:7] + lines[-1:]))
    best = {k: v for k, v in result["best"].items() if k in ("nrm_prior", "nrm_a", "nrm_tau")}
    return best, result["rows"]


def mean_se(values: list[float]) -> tuple[float, float]:
    v = np.asarray(values, float)
    se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")
    return float(v.mean()), se


def fmt(values: list[float], digits: int = 2) -> str:
    m, s = mean_se(values)
    return f"{m:.{digits}f} +- {s:.{digits}f}"


# bars (Sec. 4.1) ---------------------------------------------------------------------------


def bars_oracle(docs: nrm_data.Docs) -> np.ndarray:
    """Per bar, the Hellinger distance from the true topic to the posterior mean (lam0 0.5) of
    the images labelled with it (nan for a bar no image has)."""
    oracle = oracle_model(docs.X, docs.labels, 0.5, NRM(1.0, 1.0, 0.5))
    present = np.unique(docs.labels)  # oracle cluster k is label present[k]
    H = np.full(N_BARS, np.nan)
    H[present] = np.diag(hellinger(docs.topics[present], oracle.obs.means(oracle.post)))
    return H


def bars_fit(corpus: Path, out: Path, docs: nrm_data.Docs, oracle_H: np.ndarray,
             algorithm: str, merge: float, passes: int, **nrm: Any) -> dict[str, Any]:
    """One fit of a bars corpus and its figures (an engine error is recorded, not raised)."""
    options = dict(algorithm=algorithm, prior={"lam0": 0.5}, merge_threshold=merge, **nrm)
    if algorithm == "ep":
        options["passes"] = passes
    row: dict[str, Any] = {"algorithm": algorithm, "merge_threshold": merge,
                           **{k: v for k, v in nrm.items() if k != "nrm_prior"}}
    try:
        summary, seconds = run_fit(corpus, out, **options)
    except Exception as exc:  # a product bug must show in the table, not stop the others
        row.update(error=f"{type(exc).__name__}: {exc}", matched=False, seconds=float("nan"))
        row["traceback"] = traceback.format_exc(limit=-3)
        return row
    model = load(out)
    S = model.model.sums.N
    best = hellinger(docs.topics, model.means_).min(axis=1)
    excess = best - oracle_H
    row.update(K=int(model.n_components_), extra=int(model.n_components_) - N_BARS,
               extra_mass=int((S / S.sum() > MASS_LEVEL).sum()) - N_BARS,
               worst_excess=float(excess.max()), bar_distance=best.round(4).tolist(),
               matched=bool((excess <= BAR_MARGIN).all()), merges=int(summary.get("merges", 0)),
               seconds=seconds)
    return row


def bars_seed(seed: int, work: Path, passes: int, paper_hyper: bool) -> dict[str, Any]:
    docs = nrm_data.bars(seed)
    corpus = work / f"bars-{seed}"
    if not corpus.exists():
        nrm_data.write_corpus(docs, corpus, 200)
    oracle_H = bars_oracle(docs)
    if paper_hyper:  # the paper gives no (a, tau) for the bars: the tuned DP-like corner
        tuned = {"nrm_prior": "ig", "nrm_a": 1.0, "nrm_tau": 1.0}
    else:
        tuned, _ = choose(corpus, "ig", 0.5, 1.0, seed, None, echo=False)
    settings = {"tuned": tuned, "large": {"nrm_prior": "ig", **LARGE}}
    runs = []
    for name, nrm in settings.items():
        for algorithm in ("adf", "ep"):
            for merge in (0.0, MERGE_THRESHOLD):
                out = work / f"bars-{seed}-{name}-{algorithm}-m{merge}"
                runs.append({"setting": name, **bars_fit(corpus, out, docs, oracle_H, algorithm,
                                                          merge, passes, **nrm)})
            for eps in EPSILONS:
                out = work / f"bars-{seed}-{name}-{algorithm}-e{eps}"
                runs.append({"setting": name, "epsilon": eps, **bars_fit(
                    corpus, out, docs, oracle_H, algorithm, 0.0, passes, epsilon=eps, **nrm)})
    return {"seed": seed, "tuned": tuned, "oracle_H": oracle_H.round(4).tolist(), "runs": runs}


def bars(args: argparse.Namespace, checks: Checks) -> dict[str, Any]:
    seeds = list(range(args.seeds if args.seeds else (2 if args.quick else 10)))
    print(f"\n== bars (Sec. 4.1): seeds {seeds}, IG, lam0 0.5, merge threshold "
          f"{MERGE_THRESHOLD}, EP passes {args.passes}, margin {BAR_MARGIN} ==")
    t = time.perf_counter()
    per_seed = [bars_seed(s, args.work, args.passes, args.paper_hyper) for s in seeds]
    seconds = time.perf_counter() - t
    print("  extra = K - 16; extra>1% = components beyond 16 with S_k / sum S > 1 %; excess = "
          "max over bars of (best component's Hellinger to the bar - oracle's)")
    print(f"  {'seed':>4} {'setting':<8} {'a':>6} {'tau':>6} {'engine':<6} {'merge':>5} "
          f"{'eps':>4} {'K':>3} {'extra':>5} {'extra>1%':>8} {'merges':>6} {'excess':>7} "
          f"{'bars':>5} {'s':>5}")
    for ps in per_seed:
        for r in ps["runs"]:
            eps = f"{r.get('epsilon', 0.5):g}"
            head = (f"  {ps['seed']:>4} {r['setting']:<8} {r['nrm_a']:>6g} "
                    f"{r.get('nrm_tau', 1.0):>6g} {r['algorithm']:<6} {r['merge_threshold']:>5g} "
                    f"{eps:>4}")
            if "error" in r:
                print(f"{head} ERROR {r['error']}")
                continue
            print(f"{head} {r['K']:>3} {r['extra']:>5} {r['extra_mass']:>8} {r['merges']:>6} "
                  f"{r['worst_excess']:>7.3f} {'ok' if r['matched'] else 'MISS':>5} "
                  f"{r['seconds']:>5.1f}")
    print(f"  oracle Hellinger to the true bars: "
          f"{min(min(p['oracle_H']) for p in per_seed):.3f} to "
          f"{max(max(p['oracle_H']) for p in per_seed):.3f}; bars total {seconds:.0f} s")

    main = [(ps["seed"], r) for ps in per_seed for r in ps["runs"] if "epsilon" not in r]
    for setting in ("tuned", "large"):
        for algorithm in ("adf", "ep"):
            for merge in (0.0, MERGE_THRESHOLD):
                sel = [(s, r) for s, r in main if r["setting"] == setting
                       and r["algorithm"] == algorithm and r["merge_threshold"] == merge]
                bad = [f"seed {s}: " + (r.get("error") or f"excess {r['worst_excess']:.3f}")
                       for s, r in sel if not r["matched"]]
                worst = max((r["worst_excess"] for _, r in sel if "error" not in r),
                            default=float("nan"))
                checks(f"bars {setting} {algorithm} merge {merge:g}: all 16 bars within oracle + "
                       f"{BAR_MARGIN}", not bad and sel,
                       f"{len(sel) - len(bad)}/{len(sel)} seeds; worst excess {worst:.3f}"
                       + (f"; {'; '.join(bad)}" if bad else ""))
        for algorithm in ("adf", "ep"):
            pairs = []
            for s, r in main:
                if r["setting"] == setting and r["algorithm"] == algorithm and \
                        r["merge_threshold"] == 0.0:
                    m = next(x for t, x in main if t == s and x["setting"] == setting
                             and x["algorithm"] == algorithm and x["merge_threshold"] > 0)
                    pairs.append((r, m))
            ok_runs = all("error" not in r and "error" not in m for r, m in pairs)
            if not ok_runs:
                checks(f"bars {setting} {algorithm}: merges reduce extra clusters", False,
                       "a run failed (see ERROR rows)")
                continue
            for key, label in (("extra", "K - 16"), ("extra_mass", "extra>1%")):
                before = [r[key] for r, _ in pairs]
                after = [m[key] for _, m in pairs]
                never_more = all(a <= b for b, a in zip(before, after, strict=True))
                fewer = sum(after) < sum(before)
                need = fewer if (setting == "large" and key == "extra") else True
                checks(f"bars {setting} {algorithm}: merges reduce {label}",
                       never_more and need,
                       f"per seed without {before} -> with {after} (totals {sum(before)} -> "
                       f"{sum(after)})" + ("" if fewer or sum(before) else "; none to remove"))
    eps_rows = {}
    for setting in ("tuned", "large"):
        for algorithm in ("adf", "ep"):
            for eps in (0.5, *EPSILONS):
                sel = [r for ps in per_seed for r in ps["runs"] if r["setting"] == setting
                       and r["algorithm"] == algorithm and r["merge_threshold"] == 0.0
                       and r.get("epsilon", 0.5) == eps]
                ok = [r for r in sel if "error" not in r]
                eps_rows[f"{setting}/{algorithm}/{eps}"] = {
                    "K": [r["K"] for r in ok], "matched": sum(r["matched"] for r in ok),
                    "runs": len(sel)}
    print("  epsilon (no merges): K per seed, bars matched")
    for key, v in eps_rows.items():
        print(f"    {key:<16} K {v['K']}  matched {v['matched']}/{v['runs']}")
    return {"seeds": per_seed, "epsilon": eps_rows, "seconds": seconds,
            "merge_threshold": MERGE_THRESHOLD, "margin": BAR_MARGIN}


# held-out comparisons (Secs. 4.2, 4.3) ------------------------------------------------------


def methods(hyper: dict[str, dict[str, Any]], passes: int, dp_eps: bool = False
            ) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for algorithm in ("adf", "ep"):
        for prior in ("dp", "ig"):
            options = {"algorithm": algorithm, **hyper[prior]}
            if algorithm == "ep":
                options["passes"] = passes
            out.append((f"{algorithm.upper()}-{prior.upper()}", options))
            if dp_eps and prior == "dp":
                out.append((f"{algorithm.upper()}-DP eps.5", {**options, "epsilon": 0.5}))
    return out


def compare(tag: str, docs: nrm_data.Docs, train: np.ndarray, test_corpus: Path,
            hyper: dict[str, dict[str, Any]], lam0: float, orders: int, passes: int,
            work: Path, partition: int, dp_eps: bool = False) -> dict[str, Any]:
    """Every method on every training order: held-out per document, K, seconds; the oracle."""
    K_true = len(np.unique(docs.labels[train]))
    runs: dict[str, list[dict[str, Any]]] = {}
    for o in range(orders):
        rows = np.random.default_rng(1000 + o).permutation(train)
        corpus = work / f"{tag}-train-order{o}"
        if not corpus.exists():
            nrm_data.write_corpus(subset(docs, rows), corpus, partition)
        for name, options in methods(hyper, passes, dp_eps):
            out = work / f"{tag}-order{o}-{name.replace(' ', '_')}"
            summary, seconds = run_fit(corpus, out, prior={"lam0": lam0}, **options)
            e = evaluate(out, test_corpus, label_column="label")
            S = load(out).model.sums.N  # K_half: clusters with at least half a document
            runs.setdefault(name, []).append({
                "order": o, "heldout": e["heldout_loglik_per_item"],
                "heldout_with_coefficient": e["heldout_loglik_per_item_with_coefficient"],
                "K": int(summary["K"]), "K_half": int((S >= 0.5).sum()), "ari": e["ari"],
                "seconds": seconds})
            print(f"    order {o} {name:<12} held-out {e['heldout_loglik_per_item']:.3f}  "
                  f"K {summary['K']:>5} (S>=.5: {int((S >= 0.5).sum()):>5})  ARI {e['ari']:.3f}  "
                  f"{seconds:.1f} s", flush=True)
    return {"K_true": K_true, "runs": runs}


def oracle_scores(docs: nrm_data.Docs, train: np.ndarray, test: np.ndarray, lam0: float,
                  hyper: dict[str, dict[str, Any]]) -> dict[str, float]:
    Xtr, Xte = sp.csr_matrix(docs.X[train]), sp.csr_matrix(docs.X[test])
    return {p: heldout(oracle_model(Xtr, docs.labels[train], lam0, nrm_of(h)), Xte)
            for p, h in hyper.items()}


def table(result: dict[str, Any], oracle: dict[str, float]) -> None:
    K_true = result["K_true"]
    print(f"  {'method':<13} {'held-out / doc':>20} {'K':>16} {'|K - K_true|':>12} "
          f"{'K (S>=.5)':>16} {'ARI':>6} {'s / run':>8}")
    for name, rs in result["runs"].items():
        print(f"  {name:<13} {fmt([r['heldout'] for r in rs], 3):>20} "
              f"{fmt([r['K'] for r in rs], 1):>16} "
              f"{np.mean([abs(r['K'] - K_true) for r in rs]):>12.1f} "
              f"{fmt([r['K_half'] for r in rs], 1):>16} "
              f"{np.mean([r['ari'] for r in rs]):>6.3f} "
              f"{np.mean([r['seconds'] for r in rs]):>8.1f}")
    for p, v in oracle.items():
        print(f"  {'oracle (' + p.upper() + ')':<13} {v:>20.3f} {K_true:>16}")


def paired(result: dict[str, Any], a: str, b: str, key: str = "heldout") -> tuple[float, float]:
    """Mean +- s.e. over orders of method a minus method b."""
    return mean_se([x[key] - y[key] for x, y in zip(result["runs"][a], result["runs"][b],
                                                     strict=True)])


def k_gap(result: dict[str, Any], name: str) -> float:
    return float(np.mean([abs(r["K"] - result["K_true"]) for r in result["runs"][name]]))


def mean_of(result: dict[str, Any], name: str, key: str = "heldout") -> float:
    return float(np.mean([r[key] for r in result["runs"][name]]))


def check_ordering(checks: Checks, tag: str, result: dict[str, Any], better: str, worse: str
                   ) -> None:
    d, s = paired(result, better, worse)
    checks(f"{tag}: {better} > {worse} held-out", d > 0,
           f"{mean_of(result, better):.3f} vs {mean_of(result, worse):.3f} (paired difference "
           f"{d:+.3f} +- {s:.3f})")


def check_k(checks: Checks, tag: str, result: dict[str, Any], closer: str, other: str) -> None:
    a, b = k_gap(result, closer), k_gap(result, other)
    checks(f"{tag}: {closer} K closer to the truth than {other}", a < b,
           f"|K - {result['K_true']}|: {a:.1f} vs {b:.1f} (K {mean_of(result, closer, 'K'):.1f}"
           f" vs {mean_of(result, other, 'K'):.1f})")


def powerlaw(args: argparse.Namespace, checks: Checks) -> dict[str, Any]:
    n, sizes = (2000, (1400, 400, 200)) if args.quick else (10_000, (7000, 2000, 1000))
    kwargs = {"n": n, "V": 300} if args.quick else {}
    orders = args.orders or (2 if args.quick else 5)
    lam0 = 0.75
    print(f"\n== power law (Sec. 4.2): power_law({args.data_seed}, {kwargs or 'defaults'}), "
          f"train/test/tune {sizes}, {orders} orders, EP passes {args.passes} ==")
    t0 = time.perf_counter()
    docs = nrm_data.power_law(args.data_seed, **kwargs)
    perm = np.random.default_rng(args.data_seed).permutation(n)
    train, test, tune_rows = np.split(perm, np.cumsum(sizes)[:2])
    w = args.work
    nrm_data.write_corpus(subset(docs, test), w / "pl-test", 1000, overwrite=True)
    nrm_data.write_corpus(subset(docs, tune_rows), w / "pl-tune", 1000, overwrite=True)
    paper = PAPER["powerlaw"] if args.paper_hyper else None
    hyper, tuning = {}, {}
    for p in ("dp", "ig"):
        hyper[p], tuning[p] = choose(w / "pl-tune", p, lam0, 1.0, 0, paper)
    print(f"  hyperparameters: {hyper} (paper's: DP a 100; IG a 1, tau 1000)")
    result = compare("pl", docs, train, w / "pl-test", hyper, lam0, orders, args.passes, w,
                     1000, dp_eps=True)
    oracle = oracle_scores(docs, train, test, lam0, hyper)
    seconds = time.perf_counter() - t0
    print(f"  true K among the {len(train)} training documents: {result['K_true']} "
          f"(all {n}: {len(np.unique(docs.labels))}); power law total {seconds:.0f} s")
    table(result, oracle)
    tag = "powerlaw"
    for alg in ("ADF", "EP"):
        check_ordering(checks, tag, result, f"{alg}-IG", f"{alg}-DP")
        check_k(checks, tag, result, f"{alg}-IG", f"{alg}-DP")
    for prior in ("DP", "IG"):
        check_ordering(checks, tag, result, f"EP-{prior}", f"ADF-{prior}")
        check_k(checks, tag, result, f"EP-{prior}", f"ADF-{prior}")
    best_oracle = max(oracle.values())
    top = max(result["runs"], key=lambda k: mean_of(result, k))
    checks(f"{tag}: every method below the true-label oracle", all(
        mean_of(result, k) < best_oracle for k in result["runs"]),
        f"best {top} {mean_of(result, top):.3f} vs oracle {best_oracle:.3f}")
    return {"hyper": hyper, "tuning": tuning, "sizes": sizes, "oracle": oracle,
            "seconds": seconds, **result}


def kos(args: argparse.Namespace, checks: Checks) -> dict[str, Any]:
    kwargs = {"n": 600, "V": 1500, "K": 15, "mean_length": 80} if args.quick else {}
    if args.kos_discount:
        kwargs["discount"] = args.kos_discount
    orders = args.orders or (2 if args.quick else 3)
    lam0 = 0.1
    t0 = time.perf_counter()
    docs = nrm_data.kos_like(args.data_seed, **kwargs)
    n = docs.X.shape[0]
    lengths = np.asarray(docs.X.sum(axis=1)).ravel()
    print(f"\n== KOS-shaped (Sec. 4.3): kos_like({args.data_seed}, {kwargs or 'defaults'}) ==")
    g = {**{k: v.default for k, v in inspect.signature(nrm_data.kos_like).parameters.items()
            if k != "seed"}, **kwargs}
    print(f"  generator: {g['n']} documents, V = {g['V']}, K = {g['K']} topics = "
          f"{g['background_weight']} background (b_w ~ (w + 1)^-{g['zipf']}) + "
          f"{1 - g['background_weight']} Dirichlet({g['specific']}) specific words; cluster "
          f"weights GEM({g['discount']}, {g['concentration']}) truncated at K; lengths "
          f"max(1, NegBin(r = {g['dispersion']}, mean {g['mean_length']})); "
          "x ~ Mult(length, topic_z)")
    print(f"  realised: {int(lengths.sum())} tokens ({lengths.mean():.1f} a document, "
          f"median {np.median(lengths):.0f}, max {lengths.max():.0f}), "
          f"{len(np.unique(docs.labels))} clusters occupied, largest "
          f"{np.bincount(docs.labels).max()} documents")
    perm = np.random.default_rng(args.data_seed).permutation(n)
    n_test = round(0.2 * n)
    test, train = perm[:n_test], perm[n_test:]
    w = args.work
    nrm_data.write_corpus(subset(docs, test), w / "kos-test", 1000, overwrite=True)
    nrm_data.write_corpus(subset(docs, train), w / "kos-train", 500, overwrite=True)
    print(f"  split: {len(test)} test documents (20 % at random), {len(train)} training; "
          f"tune on 10 % of the training documents; lam0 {lam0}; {orders} orders, "
          f"EP passes {args.passes}")
    blocks: dict[str, Any] = {}
    paper = PAPER["kos"] if args.paper_hyper else None
    hyper, tuning = {}, {}
    for p in ("dp", "ig"):
        hyper[p], tuning[p] = choose(w / "kos-train", p, lam0, 0.1, 0, paper)
    variants = [("tuned" if paper is None else "paper", hyper, True)]
    if paper is None and not args.quick:
        variants.append(("paper", {p: {"nrm_prior": p, **h} for p, h in PAPER["kos"].items()},
                         False))
    for label, hyp, dp_eps in variants:
        print(f"  [{label}] hyperparameters {hyp}")
        result = compare(f"kos-{label}", docs, train, w / "kos-test", hyp, lam0, orders,
                         args.passes, w, 500, dp_eps=dp_eps)
        oracle = oracle_scores(docs, train, test, lam0, hyp)
        print(f"  [{label}] true K among the training documents: {result['K_true']}")
        table(result, oracle)
        tag = f"kos {label}"
        for prior in ("DP", "IG"):
            check_ordering(checks, tag, result, f"EP-{prior}", f"ADF-{prior}")
        for alg in ("ADF", "EP"):
            d, s = paired(result, f"{alg}-IG", f"{alg}-DP")
            checks(f"{tag}: {alg}-IG >= {alg}-DP held-out", d >= 0,
                   f"{mean_of(result, f'{alg}-IG'):.3f} vs {mean_of(result, f'{alg}-DP'):.3f} "
                   f"(paired difference {d:+.3f} +- {s:.3f})")
        blocks[label] = {"hyper": hyp, "oracle": oracle, **result}
    seconds = time.perf_counter() - t0
    print(f"  KOS total {seconds:.0f} s")
    return {"generator": {"kwargs": kwargs, "n": n, "V": int(docs.X.shape[1]),
                          "tokens": int(lengths.sum())},
            "n_test": len(test), "n_train": len(train), "tuning": tuning, "blocks": blocks,
            "seconds": seconds}


def provenance() -> dict[str, Any]:
    """The checkout the figures come from: commit and the files with uncommitted changes."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        def git(*a: str) -> str:
            return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True,
                                  check=True, timeout=30).stdout
        return {"commit": git("rev-parse", "HEAD").strip(),
                "modified": git("status", "--porcelain", "--untracked-files=no").splitlines()}
    except (OSError, subprocess.SubprocessError):
        return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke version")
    ap.add_argument("--only", choices=("bars", "powerlaw", "kos"))
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--seeds", type=int, default=0, help="bars seeds (default 10; quick 2)")
    ap.add_argument("--orders", type=int, default=0,
                    help="training orders (default: power law 5, KOS 3; quick 2)")
    ap.add_argument("--passes", type=int, default=0, help="EP passes (default 5; quick 2)")
    ap.add_argument("--data-seed", type=int, default=0, help="power law / KOS generator seed")
    ap.add_argument("--kos-discount", type=float, default=0.0,
                    help="KOS-shaped cluster weights GEM(d, 10): d > 0 gives a power-law tail "
                    "(default 0: DP-like)")
    ap.add_argument("--paper-hyper", action="store_true",
                    help="the paper's (a, tau) instead of bnpmix tune")
    ap.add_argument("--work", type=Path, help="directory for corpora and runs (default: new "
                    "temporary directory)")
    args = ap.parse_args(argv)
    args.passes = args.passes or (2 if args.quick else 5)
    args.work = args.work or Path(tempfile.mkdtemp(prefix="bnpmix-nrm-"))
    args.work.mkdir(parents=True, exist_ok=True)
    where = provenance()
    print(f"work directory {args.work}; commit {where.get('commit', '?')[:10]}, uncommitted "
          f"changes: {', '.join(m.split()[-1] for m in where.get('modified', [])) or 'none'}")
    checks, out = Checks(), {}
    experiments = {"bars": bars, "powerlaw": powerlaw, "kos": kos}
    t = time.perf_counter()
    for name, run in experiments.items():
        if args.only in (None, name):
            out[name] = run(args, checks)
    n_pass = sum(r["pass"] for r in checks.rows)
    print(f"\n{n_pass}/{len(checks.rows)} checks PASS ({time.perf_counter() - t:.0f} s)")
    for r in checks.rows:
        if not r["pass"]:
            print(f"  FAIL  {r['check']}: {r['figures']}")
    out["checks"] = checks.rows
    out["provenance"] = where
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1, default=float)
    return 0 if checks.all_pass else 1


if __name__ == "__main__":
    sys.exit(main())
