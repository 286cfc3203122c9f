"""Bartunov & Vetrov (2014), Secs. 5.2.1, 5.2.2 and 5.3: variational inference for the
sequential distance-dependent CRP (``algorithms/ddcrp``) against truncated stick-breaking DP VB,
against the plain sequential CRP, and against Gibbs sampling (collapsed, and uncollapsed as in
the paper).

Data of Secs. 5.2.1 and 5.2.2 (one set per R = 1..5, data seed [--data-seed, R]): five 2-D
unit-variance spherical Gaussians centred at (0, 0) and (±R, ±R), 200 training and 200 test items,
each exactly 40 per component in a random order.

Prior (both models, both sections): Normal-Wishart, m0 = (0, 0), κ0 = 0.01, ν0 = D + 2 = 4,
B0 = I (Λ ~ Wishart(ν0, B0⁻¹): E[Λ] = 4 I, E[Σ] = B0 / (ν0 − D − 1) = I, the true covariance;
μ | Λ ~ N(m0, (κ0 Λ)⁻¹), a prior standard deviation of 10 per coordinate at Σ = I). α = 0.1 is
the seqCRP's self-link weight and the DP's concentration: with f ≡ 1 the two are the same prior
over partitions, so both bounds are lower bounds on the same log p(x).

sec521 (Sec. 5.2.1): on each data set, --restarts (default 50; the paper: 300) restarts of
  - seqCRP VI: ``ddcrp.fit.fit_sequence`` (decay "none", no window, prune 1e-6, the default)
    from the start ``fit.default_starts("none")`` (the tables of a DP VB fit), then
    table moves (``fit.climb``); restart r uses the r-th stream spawned from
    SeedSequence([--seed, R, 0]), i.e. exactly ``fit_restarts(..., seed=that SeedSequence,
    restarts=--restarts)``; with --plain also the ascent alone from the drawn start of the same
    stream (no DP VB start, no table moves: what the moves add);
  - DP VB: bnpmix's plain truncated stick-breaking VB (no births, no merges), the algorithm of the
    ``vb`` engine called in-process: ``vb.local.batch_step`` (local step, Eq. 9) then
    ``Mixture.from_summary`` (global step, Eq. 10), its exact ELBO ``Mixture.elbo`` as the bound,
    truncation --truncation 50; random start per restart: the engine's own initialisation, the
    items hard-assigned to the nearest of 50 k-means++ seeds drawn with the restart's generator;
  - DP VB (drawn start): the same VB from the seqCRP restart's own drawn start (the tables of
    ``fit.sampled_links`` under the same generator, largest first), to separate the bounds from
    the starts;
  - and once each from the true labels (seqCRP: each customer linked to the previous one of its
    component; DP: the true labels one-hot): the two bounds near the true partition, beside its
  exact log p(P, x) = log CRP(P) + Σ log M(table) (the seqCRP bound exceeds it when VI keeps P:
  q(c) within the tables is then exact; a hard DP labelling is worth about log K! less).
  Both iterate until the ELBO's relative change is below --tol 1e-8 (cap --max-iter 1000); one
  iteration is one links sweep + tables update (seqCRP) or one local + global step (DP). Best
  bound, the difference seqCRP − DP, how many restarts came within 0.01 of their best, mean
  iterations, tables / components (E[#tables] = Σ q(c_j = j); components holding >= 0.5 items),
  and held-out log-likelihood per test item of the best-bound restart: seqCRP by
  ``heldout_logpdf`` with test links f ≡ 1 (no new tables; the table weights are the training
  items' average Z), DP by its posterior predictive (``Mixture.score_samples``: E[w_k] and the
  mass beyond the truncation). PNG: each restart's bound, histograms per R (the paper's Fig. 4).

sec522 (Sec. 5.2.2): the same data sets with the training items sorted by true component
  (positions 0..199 in that order), seqddCRP with exponential decay f(d) = e^{−d/a}, a = --a 4,
  α = 0.1, against the seqCRP (decay "none") on the same sorted items, best of --restarts each
  (seeds [--seed, R, 2] and [--seed, R, 3]); held-out per test item with test links f ≡ 1 (the
  paper: test items in random order with CRP distances), of the best-bound restart and the mean
  over restarts; and the seqCRP once from the true labels (its held-out at the true partition).

sec53 (Sec. 5.3): a 1-D switching-state sequence (data seed [--data-seed, 53]): --states K = 5
  states with means 5k, precisions λ_k ~ Gamma(shape 0.8, scale 1.1), a Markov chain of 2 x
  --n53 (500) steps starting uniformly, staying with probability --stay 0.98 and otherwise
  moving to one of the other states uniformly, x_t ~ N(5 s_t, 1/λ_{s_t}). Then at every switch t
  the --swap 3 points before and after it (times t − 3 .. t + 2) are randomly permuted among
  themselves. The even times are the training sequence (positions = times 0, 2, ..), the odd
  times the test items (so the test set is drawn from the same chain, a held-out point between
  every two training points). Prior: Normal-Wishart with D = 1, ν0 = 1.6, B0 = 2 / 1.1, so that
  Λ ~ Gamma(0.8, scale 1.1), the precisions' generating law (the paper's prior), m0 = 5 (K − 1)
  / 2, κ0 = 0.01. Link prior: exponential decay, a = --a53 4 (time steps: the nearest training
  neighbour has f = e^{−1/2}), α = 0.1, no window. Held-out log-likelihood per test item: a test
  item at time t* links to the training customers before it with weight f(t* − t)
  (``heldout_links``: links point backwards), and also to all of them with f ≡ 1 (the paper's
  5.2.2 setting). --chains (4) independent runs of each method, run c with the c-th
  generator spawned from SeedSequence([--seed, 53]):
  - VI: run c from ``fit.start_links`` of ``fit.STARTS[c % 2]`` (DP VB tables, or drawn) then
    one ``fit.ascend`` iteration at a time until the relative ELBO change is below --tol (cap
    --max-iter), scored after the start and after each iteration, then ``fit.climb`` (--rounds
    10 rounds of table moves at most; 0: none), scored once after it;
  - Gibbs, two samplers: ``gibbs.LinkSampler`` (collapsed: θ integrated out) and
    ``gibbs.ThetaSampler`` (uncollapsed, the paper's kind: θ drawn per table, links by Neal's
    Algorithm 8 with one auxiliary table drawn from G_0), each from the same drawn start as VI
    run c (same generator), --sweeps (300) sweeps, scored after each sweep from its current
    state (tables one-hot, q(θ) = their posteriors, for both samplers), and also as the
    average of the predictive densities over the last half of the sweeps so far.
  - convergence in time: the seconds at which a run first comes within --settle (0.01 nats
    per test item) of its own level (VI: its final held-out; a chain: the mean of its states'
    held-out over the last half of its sweeps), and the seconds a chain needs to first reach
    VI's final held-out.
  - and VI started at each Gibbs chain's last state (hard links), run to convergence: a bound
    above VI's own shows that VI stopped at a worse local optimum, not that the bound prefers it.
  Seconds are the algorithm's own (the start's drawing included, the scoring excluded; each
  process first runs both methods once on 30 items, untimed). --window53 W keeps the W most
  recent links only, for both methods (at a = 4, W = 50 drops weights below e^{−25}). PNG:
  held-out per test item against seconds (log scale), every run, with the true-state oracle.

With --jobs N (default 2) the restarts / runs go to N processes (one BLAS thread each when
threadpoolctl is importable); results do not depend on N, sec53's seconds slightly may. Each
experiment prints tables and writes benchmarks/results/ddcrp_<name><--suffix>.json (--out DIR;
--quick: the temporary directory) and, if matplotlib is importable, ddcrp_sec521.png and
ddcrp_sec53.png. --quick: a smoke run (3 restarts, R = 1, 3, 5, 150 training items in sec53, 2
runs of 20 sweeps). --plot PATH redraws the PNG of a saved JSON.

Measured (``python benchmarks/reproductions/ddcrp_paper.py sec521 sec522 sec53 --restarts 10
--plain``, seed 0,
data seed 0, 2 cores; the run of benchmarks/results/ddcrp_sec521.json, ddcrp_sec522.json and
ddcrp_sec53.json, 2 min 15 s): sec521: the best of 10 restarts minus DP VB's best of 10 (its
k-means++ starts) is 0.00, +14.42, +1.29, +45.04, +32.94 at R = 1..5 (the ascent alone from drawn
starts: 0.00, +14.42, −22.38, +7.60, +32.94); at R = 5 the seqCRP is at the true partition's
bound, +4.79 (log 5!) above DP VB started from the true labels; at R = 3 DP VB's soft assignments
bound 3.8 nats above the seqCRP at the true labels, and 1.27 above it from the seqCRP's own drawn
tables. Mean iterations: seqCRP 1-10, DP VB 137-318. sec522: held-out gain of the window decay over
the seqCRP +0.126 / +0.029 at R = 2, 3, −0.002 at R = 1, 0 at R = 4, 5 (from the true labels the
seqCRP is within 0.003 of the decay at R >= 3). sec53 (4 runs, two from DP VB tables and two
drawn): VI converges in 10.5 ± 2.1 iterations, 1.29 s, to held-out −2.209 ± 0.007 per test item,
against the collapsed sampler's −2.205 ± 0.007 after 300 sweeps (it settles after 0.42 ± 0.09 s)
and the uncollapsed sampler's (the paper's kind) −2.220 ± 0.013 (settled after 3.6 ± 1.7 s);
oracle −1.861. VI's bounds (−1129.5 to −1147.4) match those of VI started from the Gibbs chains'
last states (−1134.6 to −1144.4): VI's optima are as good as those the samplers lead it to (the
paper: Gibbs "may achieve better test likelihood in time depending on the initialization").

Z is clipped at 0 before every held-out score, a guard against the rank-one updates' rounding
(entries of about −1e−23, on which ``heldout_logpdf`` returns NaN);
``vi.LinkState.responsibilities`` clips them to [0, 1] itself, so the guard leaves the figures
bitwise the same.

    python benchmarks/reproductions/ddcrp_paper.py [sec521] [sec522] [sec53] [--quick] [--restarts
        50]
        [--plain] [--rounds 10]
        [--jobs 2] [--seed 0] [--data-seed 0] [--truncation 50] [--a 4] [--a53 4]
        [--chains 4] [--sweeps 300] [--window53 W] [--out DIR] [--suffix S]
    python benchmarks/reproductions/ddcrp_paper.py --plot benchmarks/results/ddcrp_sec53.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy.special import gammaln, logsumexp

from bnpmix.algorithms.alloc.stick import StickBreaking
from bnpmix.algorithms.ddcrp.fit import (
    ROUNDS,
    STARTS,
    ascend,
    climb,
    default_starts,
    fit_sequence,
    sampled_links,
    start_links,
)
from bnpmix.algorithms.ddcrp.gibbs import LinkSampler, ThetaSampler, tables_of
from bnpmix.algorithms.ddcrp.heldout import heldout_links, heldout_logpdf
from bnpmix.algorithms.ddcrp.links import decay, dense, log_link_band
from bnpmix.algorithms.ddcrp.vi import LinkState
from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.vb.init import seeded_summary
from bnpmix.algorithms.vb.local import batch_step, summarize

RESULTS = Path(__file__).resolve().parents[1] / "results"
EXPERIMENTS = ("sec521", "sec522", "sec53")
PRUNE = 1e-6  # fit_sequence's default: self-links whose optimum is below it are closed
HIT = 0.01  # a restart "found the best" when its bound is within this of the best
N_TRAIN = N_TEST = 200
PER = 40  # items per component in each half
SEQ_STARTS = default_starts("none")  # the seqCRP's starts, as the ddcrp engine takes them
SAMPLERS = {"collapsed": LinkSampler, "uncollapsed": ThetaSampler}


# ---------------------------------------------------------------- data and priors


def five_gaussians(R: float, data_seed: int) -> dict:
    """Secs. 5.2.1-5.2.2: 40 items of each of five unit spherical Gaussians per half, shuffled."""
    rng = np.random.default_rng([data_seed, int(R)])
    centres = np.array([[0, 0], [R, R], [R, -R], [-R, R], [-R, -R]], float)
    out = {"R": R, "centres": centres}
    for part in ("train", "test"):
        labels = rng.permutation(np.repeat(np.arange(5), PER))
        out[part] = centres[labels] + rng.standard_normal((len(labels), 2))
        out[part + "_labels"] = labels
    return out


def mixture_prior() -> Gauss:
    return Gauss(2, np.zeros(2), 0.01, 4.0, np.eye(2))


def switching_sequence(n_train: int, states: int, stay: float, swap: int,
                       data_seed: int) -> dict:
    """Sec. 5.3: 2 n_train steps of a sticky Markov chain of 1-D Gaussian states, points near
    each switch permuted, even times for training and odd times for testing."""
    rng = np.random.default_rng([data_seed, 53])
    T = 2 * n_train
    precision = rng.gamma(0.8, 1.1, states)
    s = np.empty(T, dtype=np.intp)
    s[0] = rng.integers(states)
    for t in range(1, T):
        if rng.random() < stay:
            s[t] = s[t - 1]
        else:
            s[t] = (s[t - 1] + 1 + rng.integers(states - 1)) % states
    x = 5.0 * s + rng.standard_normal(T) / np.sqrt(precision[s])
    switches = np.flatnonzero(np.diff(s)) + 1
    for t in switches.tolist():
        idx = np.arange(max(t - swap, 0), min(t + swap, T))
        perm = rng.permutation(idx)
        x[idx], s[idx] = x[perm], s[perm]
    times = np.arange(T)
    train, test = times[0::2], times[1::2]
    oracle = (-0.5 * math.log(2 * math.pi) + 0.5 * np.log(precision[s[test]])
              - 0.5 * precision[s[test]] * (x[test] - 5.0 * s[test]) ** 2)
    return {"x_train": x[train, None], "x_test": x[test, None], "t_train": train.astype(float),
            "t_test": test.astype(float), "s_train": s[train], "s_test": s[test],
            "precision": precision, "switches": switches, "oracle": float(oracle.mean())}


def sequence_prior(states: int) -> Gauss:
    """Λ ~ Wishart(ν0 = 1.6, B0⁻¹ = 0.55): in 1-D Gamma(0.8, scale 1.1); μ centred on the states."""
    return Gauss(1, np.array([2.5 * (states - 1)]), 0.01, 1.6, np.array([[2.0 / 1.1]]))


def log_joint_partition(X: np.ndarray, labels: np.ndarray, obs: Gauss, alpha: float) -> float:
    """log p(P, x) of a hard partition P under the CRP(α) mixture: log CRP(P) + Σ log M(table),
    CRP(P) = α^K Π_k Γ(n_k) Γ(α) / Γ(α + N)."""
    _, which, n = np.unique(labels, return_inverse=True, return_counts=True)
    crp = len(n) * math.log(alpha) + gammaln(n).sum() + gammaln(alpha) - gammaln(alpha + len(X))
    Z = np.zeros((len(X), len(n)))
    Z[np.arange(len(X)), which] = 1.0
    return float(crp + obs.log_marginal(Z.sum(0), obs.stats(X, Z)).sum())


# ---------------------------------------------------------------- one restart of each method


def _mixture_weights(Z: np.ndarray) -> np.ndarray:
    """Responsibilities with the rank-one updates' rounding (entries ~ −1e−23) clipped at 0."""
    return np.maximum(Z, 0.0)


def _seq_summary(fit, X_test: np.ndarray, obs: Gauss, N: int) -> dict:
    Z = _mixture_weights(fit.links.responsibilities)
    link = heldout_links(np.arange(N, dtype=float), np.full(len(X_test), float(N)),
                         decay("none"))
    return {"elbo": fit.elbo, "iterations": fit.iterations, "converged": fit.converged,
            "tables": fit.n_tables, "tables_05": int(np.sum(Z.sum(0) >= 0.5)),
            "heldout": float(heldout_logpdf(X_test, link, Z, fit.post, obs).mean())}


def seq_restart(X: np.ndarray, X_test: np.ndarray, obs: Gauss, alpha: float, kind: str,
                a: float, seed: np.random.SeedSequence, max_iter: int, tol: float,
                start: str = "drawn", rounds: int = ROUNDS) -> dict:
    """One restart of ``fit_restarts``: fit_sequence from the ``start`` of this stream, then
    ``rounds`` rounds of table moves (``fit.climb``)."""
    N = len(X)
    clock = time.perf_counter()
    fit = fit_sequence(X, np.arange(N, dtype=float), obs, alpha, decay(kind, a),
                       np.random.default_rng(seed), max_iter, tol, None, PRUNE, start, rounds)
    return {**_seq_summary(fit, X_test, obs, N), "seconds": time.perf_counter() - clock,
            "start": start, "moves": len(fit.moves)}


def seq_from_labels(X: np.ndarray, X_test: np.ndarray, labels: np.ndarray, obs: Gauss,
                    alpha: float, seed: np.random.SeedSequence, max_iter: int,
                    tol: float) -> dict:
    """seqCRP VI from the true partition: each customer linked to the previous one of its label."""
    N = len(X)
    logp = log_link_band(np.arange(N, dtype=float), alpha, decay("none"))
    q = np.zeros_like(logp)
    last: dict[int, int] = {}
    for i, k in enumerate(labels.tolist()):
        q[i, i - last[k] if k in last else 0] = 1.0
        last[k] = i
    fit = ascend(X, LinkState.of(logp, q, PRUNE), obs, np.random.default_rng(seed), max_iter,
                 tol)
    return _seq_summary(fit, X_test, obs, N)


def dp_vb(X: np.ndarray, X_test: np.ndarray, obs: Gauss, alpha: float, S, max_iter: int,
          tol: float) -> dict:
    """Plain truncated stick-breaking VB from the summary S (q(z) of the start): the global step,
    then local + global steps until the ELBO's relative change is below tol."""
    alloc = StickBreaking(alpha)
    start = time.perf_counter()
    model = Mixture.from_summary(obs, alloc, S)
    elbo = model.elbo(S)
    converged, it, decreases = False, 0, 0
    while it < max_iter:
        it += 1
        S = batch_step(X, obs, model.globals()).summary
        model = Mixture.from_summary(obs, alloc, S)
        previous, elbo = elbo, model.elbo(S)
        decreases += elbo < previous - 1e-9 * abs(previous)
        if abs(elbo - previous) <= tol * abs(elbo):
            converged = True
            break
    return {"elbo": float(elbo), "iterations": it, "converged": converged,
            "tables": float(np.sum(S.N >= 0.5)), "tables_05": int(np.sum(S.N >= 0.5)),
            "decreases": int(decreases),
            "heldout": float(model.score_samples(X_test).mean()),
            "seconds": time.perf_counter() - start}


def _onehot_summary(X: np.ndarray, obs: Gauss, labels: np.ndarray, K: int):
    """Summary of hard labels 0..(≤ K − 1) in K components (ids 0..K − 1)."""
    if labels.max() >= K:
        raise ValueError(f"{labels.max() + 1} tables for a truncation of {K}")
    R = np.zeros((len(X), K))
    R[np.arange(len(X)), labels] = 1.0
    return summarize(X, obs, R, None, np.arange(K))


def dp_restart(X: np.ndarray, X_test: np.ndarray, obs: Gauss, alpha: float, K: int, init: str,
               seed: np.random.SeedSequence, max_iter: int, tol: float,
               labels: np.ndarray | None = None) -> dict:
    """DP VB from a start: "kmeans++" (the vb engine's: nearest of K k-means++ seeds), "drawn"
    (the tables of the seqCRP's drawn start under the same stream, largest first) or "truth"."""
    rng = np.random.default_rng(seed)
    if init == "kmeans++":
        S = seeded_summary(X, obs, K, np.arange(K), rng)
    elif init == "drawn":
        logp = log_link_band(np.arange(len(X), dtype=float), alpha, decay("none"))
        q = sampled_links(X, logp, obs, rng, PRUNE).q
        roots = tables_of(np.arange(len(X)) - q.argmax(1))
        _, which, sizes = np.unique(roots, return_inverse=True, return_counts=True)
        rank = np.empty(len(sizes), dtype=np.intp)
        rank[np.argsort(-sizes, kind="stable")] = np.arange(len(sizes))
        S = _onehot_summary(X, obs, rank[which], K)
    elif init == "truth":
        S = _onehot_summary(X, obs, labels, K)
    else:
        raise ValueError(init)
    return dp_vb(X, X_test, obs, alpha, S, max_iter, tol)


# ---------------------------------------------------------------- process pool


def _one_thread() -> None:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(1)


def _call(task: tuple) -> dict:
    f, args = task
    return f(*args)


def run_all(tasks: list, jobs: int) -> list:
    """Each (function, arguments) task's result, in order, over ``jobs`` processes."""
    if jobs <= 1:
        return [_call(t) for t in tasks]
    with ProcessPoolExecutor(jobs, initializer=_one_thread) as pool:
        return list(pool.map(_call, tasks, chunksize=max(1, len(tasks) // (8 * jobs))))


def mean_se(values) -> tuple[float, float]:
    v = np.asarray(values, float)
    se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")
    return float(v.mean()), se


def best_of(runs: list[dict]) -> dict:
    """The best-bound restart, with the restarts' mean iterations, hits and every bound."""
    elbos = np.array([r["elbo"] for r in runs])
    best = runs[int(np.argmax(elbos))]
    return {"best": best, "elbos": elbos.tolist(),
            "hits": int(np.sum(elbos >= elbos.max() - HIT)),
            "iterations_mean": float(np.mean([r["iterations"] for r in runs])),
            "converged": int(sum(r["converged"] for r in runs)),
            "tables_mean": float(np.mean([r["tables"] for r in runs])),
            "heldout_mean": mean_se([r["heldout"] for r in runs]),
            "seconds": float(sum(r["seconds"] for r in runs))}


# ---------------------------------------------------------------- Sec. 5.2.1


def sec521(args) -> dict:
    obs, alpha, K = mixture_prior(), args.alpha, args.truncation
    print(f"\n== sec521: seqCRP VI vs DP VB (truncation {K}), α = {alpha}, best of "
          f"{args.restarts} restarts; prior {obs.prior()}")
    tasks, keys = [], []
    for R in args.radii:
        d = five_gaussians(R, args.data_seed)
        X, Xt = d["train"], d["test"]
        streams = np.random.SeedSequence([args.seed, R, 0]).spawn(args.restarts)
        kpp = np.random.SeedSequence([args.seed, R, 1]).spawn(args.restarts)
        common = (args.max_iter, args.tol)
        for r in range(args.restarts):
            tasks.append((seq_restart, (X, Xt, obs, alpha, "none", 1.0, streams[r], *common,
                                        SEQ_STARTS[r % len(SEQ_STARTS)])))
            keys.append((R, "seqcrp"))
            if args.plain:
                tasks.append((seq_restart, (X, Xt, obs, alpha, "none", 1.0, streams[r], *common,
                                            "drawn", 0)))
                keys.append((R, "seqcrp_plain"))
            tasks.append((dp_restart, (X, Xt, obs, alpha, K, "kmeans++", kpp[r], *common)))
            keys.append((R, "dp"))
            tasks.append((dp_restart, (X, Xt, obs, alpha, K, "drawn", streams[r], *common)))
            keys.append((R, "dp_drawn"))
        truth_seed = np.random.SeedSequence([args.seed, R, 9])
        tasks.append((seq_from_labels, (X, Xt, d["train_labels"], obs, alpha, truth_seed,
                                        *common)))
        keys.append((R, "seqcrp_truth"))
        tasks.append((dp_restart, (X, Xt, obs, alpha, K, "truth", truth_seed, *common,
                                   d["train_labels"])))
        keys.append((R, "dp_truth"))
    start = time.perf_counter()
    results = run_all(tasks, args.jobs)
    wall = time.perf_counter() - start
    grouped: dict = {}
    for key, res in zip(keys, results, strict=True):
        grouped.setdefault(key, []).append(res)
    rows = []
    for R in args.radii:
        methods = ("seqcrp", "dp", "dp_drawn") + (("seqcrp_plain",) if args.plain else ())
        row = {"R": R, **{m: best_of(grouped[R, m]) for m in methods},
               "seqcrp_truth": grouped[R, "seqcrp_truth"][0],
               "dp_truth": grouped[R, "dp_truth"][0]}
        row["diff"] = row["seqcrp"]["best"]["elbo"] - row["dp"]["best"]["elbo"]
        row["diff_drawn"] = row["seqcrp"]["best"]["elbo"] - row["dp_drawn"]["best"]["elbo"]
        row["diff_truth"] = row["seqcrp_truth"]["elbo"] - row["dp_truth"]["elbo"]
        d = five_gaussians(R, args.data_seed)
        row["log_joint_truth"] = log_joint_partition(d["train"], d["train_labels"], obs, alpha)
        rows.append(row)
    n = args.restarts
    print(f"\nbest lower bound of {n} restarts (hits: restarts within {HIT} of that method's "
          f"best); log 5! = {math.log(120):.3f}")
    print(f"{'R':>3}{'seqCRP':>11}{'hits':>5}{'DP VB':>11}{'hits':>5}{'diff':>8}"
          f"{'DP drawn':>11}{'hits':>5}{'diff':>8} |{'seq truth':>11}{'DP truth':>11}{'diff':>8}"
          f"{'log p(P,x)':>12}")
    for w in rows:
        s, p, q = w["seqcrp"], w["dp"], w["dp_drawn"]
        print(f"{w['R']:>3}{s['best']['elbo']:>11.2f}{s['hits']:>5}{p['best']['elbo']:>11.2f}"
              f"{p['hits']:>5}{w['diff']:>8.2f}{q['best']['elbo']:>11.2f}{q['hits']:>5}"
              f"{w['diff_drawn']:>8.2f} |{w['seqcrp_truth']['elbo']:>11.2f}"
              f"{w['dp_truth']['elbo']:>11.2f}{w['diff_truth']:>8.2f}"
              f"{w['log_joint_truth']:>12.2f}")
    print("\nseqCRP restarts by start (best bound, restarts whose climb made table moves, "
          "their moves; the vb start's own moves, before its first ascent, not counted):")
    for w in rows:
        runs = grouped[w["R"], "seqcrp"]
        cells = []
        for kind in SEQ_STARTS:
            mine = [x for x in runs if x["start"] == kind]
            cells.append(f"{kind} {max(x['elbo'] for x in mine):.2f} "
                         f"({sum(x['moves'] > 0 for x in mine)}/{len(mine)}, "
                         f"{sum(x['moves'] for x in mine)})")
        plain = w.get("seqcrp_plain", {}).get("best", {}).get("elbo", np.nan)
        plain = (f"; without moves, drawn starts only: {plain:.2f} (diff to DP VB "
                 f"{plain - w['dp']['best']['elbo']:.2f})" if args.plain else "")
        print(f"{w['R']:>3}  " + "  ".join(cells) + plain)
    print("\niterations (mean over restarts; converged / restarts), tables (best restart: "
          "E[#tables] | >= 0.5 items; DP: components >= 0.5 items), seconds (all restarts)")
    print(f"{'R':>3}{'seq it':>8}{'conv':>6}{'DP it':>8}{'conv':>6}{'drawn it':>9}{'conv':>6}"
          f"{'seq tables':>12}{'DP':>4}{'drawn':>6}{'seq s':>7}{'DP s':>7}{'drawn s':>8}")
    for w in rows:
        s, p, q = w["seqcrp"], w["dp"], w["dp_drawn"]
        print(f"{w['R']:>3}{s['iterations_mean']:>8.1f}{s['converged']:>6}"
              f"{p['iterations_mean']:>8.1f}{p['converged']:>6}{q['iterations_mean']:>9.1f}"
              f"{q['converged']:>6}{s['best']['tables']:>7.2f} | {s['best']['tables_05']:<2}"
              f"{p['best']['tables_05']:>4}{q['best']['tables_05']:>6}{s['seconds']:>7.1f}"
              f"{p['seconds']:>7.1f}{q['seconds']:>8.1f}")
    print("\nheld-out log-likelihood per test item: best-bound restart (mean ± se over restarts)")
    print(f"{'R':>3}{'seqCRP':>22}{'DP VB':>22}{'DP drawn':>22}{'seq truth':>11}{'DP truth':>10}")
    for w in rows:
        cells = "".join(f"{w[m]['best']['heldout']:>9.4f} ({w[m]['heldout_mean'][0]:.3f}"
                        f"±{w[m]['heldout_mean'][1]:.3f})" for m in ("seqcrp", "dp", "dp_drawn"))
        print(f"{w['R']:>3}{cells}{w['seqcrp_truth']['heldout']:>11.4f}"
              f"{w['dp_truth']['heldout']:>10.4f}")
    decreases = sum(r.get("decreases", 0) for r in results)
    print(f"DP VB ELBO decreases (> 1e-9 relative) over all runs: {decreases}; wall {wall:.0f} s")
    return {"rows": rows, "prior": obs.prior(), "dp_decreases": decreases, "wall_seconds": wall}


# ---------------------------------------------------------------- Sec. 5.2.2


def sec522(args) -> dict:
    obs, alpha = mixture_prior(), args.alpha
    print(f"\n== sec522: training sorted by component, exponential decay a = {args.a} vs "
          f"seqCRP, α = {alpha}, best of {args.restarts} restarts; test links f ≡ 1")
    tasks, keys = [], []
    models = {"ddcrp": ("exponential", args.a, 2), "seqcrp": ("none", 1.0, 3)}
    for R in args.radii:
        d = five_gaussians(R, args.data_seed)
        order = np.argsort(d["train_labels"], kind="stable")
        X, Xt = d["train"][order], d["test"]
        tasks.append((seq_from_labels, (X, Xt, d["train_labels"][order], obs, alpha,
                                        np.random.SeedSequence([args.seed, R, 8]),
                                        args.max_iter, args.tol)))
        keys.append((R, "seqcrp_truth"))
        for name, (kind, a, code) in models.items():
            streams = np.random.SeedSequence([args.seed, R, code]).spawn(args.restarts)
            starts = default_starts(kind)  # the engine's --starts auto for this decay
            for r in range(args.restarts):
                tasks.append((seq_restart, (X, Xt, obs, alpha, kind, a, streams[r],
                                            args.max_iter, args.tol, starts[r % len(starts)])))
                keys.append((R, name))
    start = time.perf_counter()
    results = run_all(tasks, args.jobs)
    wall = time.perf_counter() - start
    grouped: dict = {}
    for key, res in zip(keys, results, strict=True):
        grouped.setdefault(key, []).append(res)
    rows = [{"R": R, **{m: best_of(grouped[R, m]) for m in models},
             "seqcrp_truth": grouped[R, "seqcrp_truth"][0]} for R in args.radii]
    print(f"\n{'R':>3}{'ddCRP bound':>13}{'seqCRP bound':>14}{'dd it':>7}{'seq it':>7}"
          f"{'dd tab':>8}{'seq tab':>8} |{'held-out: ddCRP':>17}{'seqCRP':>9}{'diff':>9} |"
          f"{'mean ddCRP':>18}{'mean seqCRP':>18} |{'seqCRP from truth':>18}")
    for w in rows:
        dd, sq = w["ddcrp"], w["seqcrp"]
        w["heldout_diff"] = dd["best"]["heldout"] - sq["best"]["heldout"]
        print(f"{w['R']:>3}{dd['best']['elbo']:>13.2f}{sq['best']['elbo']:>14.2f}"
              f"{dd['iterations_mean']:>7.1f}{sq['iterations_mean']:>7.1f}"
              f"{dd['best']['tables']:>8.2f}{sq['best']['tables']:>8.2f} |"
              f"{dd['best']['heldout']:>17.4f}{sq['best']['heldout']:>9.4f}"
              f"{w['heldout_diff']:>9.4f} |"
              f"{dd['heldout_mean'][0]:>11.4f}±{dd['heldout_mean'][1]:.4f}"
              f"{sq['heldout_mean'][0]:>11.4f}±{sq['heldout_mean'][1]:.4f} |"
              f"{w['seqcrp_truth']['heldout']:>9.4f} ({w['seqcrp_truth']['elbo']:.2f})")
    print(f"wall {wall:.0f} s")
    return {"rows": rows, "prior": obs.prior(), "wall_seconds": wall}


# ---------------------------------------------------------------- Sec. 5.3


def _scorer(data: dict, a: float):
    f = decay("exponential", a)
    near = heldout_links(data["t_train"], data["t_test"], f)
    flat = heldout_links(data["t_train"], np.full(len(data["t_test"]), data["t_train"][-1]),
                         decay("none"))

    def score(Z: np.ndarray, post: dict, obs: Gauss) -> tuple[np.ndarray, np.ndarray]:
        Z = _mixture_weights(Z)
        return (heldout_logpdf(data["x_test"], near, Z, post, obs),
                heldout_logpdf(data["x_test"], flat, Z, post, obs))
    return score


def warm_up(data: dict, obs: Gauss, alpha: float, a: float) -> None:
    """Both methods once on the first 30 items, untimed: a fresh process's first calls (imports,
    caches) are not charged to the timed run."""
    n, rng = 30, np.random.default_rng(0)
    X, logp = data["x_train"][:n], log_link_band(data["t_train"][:n], alpha, decay("none"))
    ascend(X, sampled_links(X, logp, obs, rng, PRUNE), obs, rng, 1)
    for kernel in SAMPLERS.values():
        sampler = kernel(X, dense(logp, -np.inf), obs)
        sampler.sample(sampler.init(), rng)
    _scorer(data, a)(np.ones((len(data["x_train"]), 1)), obs.prior_post(1), obs)


def vi_run(data: dict, obs: Gauss, alpha: float, a: float, window: int | None,
           seed: np.random.SeedSequence, max_iter: int, tol: float, start: str = "drawn",
           rounds: int = ROUNDS) -> dict:
    warm_up(data, obs, alpha, a)
    X, score = data["x_train"], _scorer(data, a)
    rng = np.random.default_rng(seed)
    clock = time.perf_counter()
    logp = log_link_band(data["t_train"], alpha, decay("exponential", a), window)
    fit = ascend(X, start_links(X, logp, obs, alpha, start, rng, PRUNE), obs, rng, 0,
                 tol)  # the start's q(θ) and bound, no iteration
    seconds = time.perf_counter() - clock
    trace, elbo, converged = [], fit.elbo, False
    for it in range(max_iter + 1):
        if it:
            clock = time.perf_counter()
            fit = ascend(X, fit.links, obs, rng, 1, tol)
            seconds += time.perf_counter() - clock
        near, flat = score(fit.links.responsibilities, fit.post, obs)
        trace.append({"iteration": it, "seconds": seconds, "heldout": float(near.mean()),
                      "heldout_crp": float(flat.mean()), "elbo": fit.elbo,
                      "tables": fit.n_tables})
        if it and abs(fit.elbo - elbo) <= tol * abs(fit.elbo):
            converged = True
            break
        elbo = fit.elbo
    moves = 0
    if rounds:
        clock = time.perf_counter()
        fit = climb(X, fit, obs, rng, max_iter, tol, rounds)
        seconds += time.perf_counter() - clock
        moves = len(fit.moves)
        near, flat = score(fit.links.responsibilities, fit.post, obs)
        trace.append({"iteration": trace[-1]["iteration"] + 1, "seconds": seconds,
                      "heldout": float(near.mean()), "heldout_crp": float(flat.mean()),
                      "elbo": fit.elbo, "tables": fit.n_tables, "climb": True})
    return {"trace": trace, "converged": converged, "iterations": trace[-1]["iteration"],
            "seconds": seconds, "elbo": trace[-1]["elbo"], "start": start, "moves": moves}


def gibbs_run(data: dict, obs: Gauss, alpha: float, a: float, window: int | None,
              seed: np.random.SeedSequence, sweeps: int, kind: str) -> dict:
    warm_up(data, obs, alpha, a)
    X, score = data["x_train"], _scorer(data, a)
    N = len(X)
    rng = np.random.default_rng(seed)
    clock = time.perf_counter()
    band = log_link_band(data["t_train"], alpha, decay("exponential", a), window)
    start = np.arange(N) - sampled_links(X, band, obs, rng, PRUNE).q.argmax(1)
    sampler = SAMPLERS[kind](X, dense(band, -np.inf), obs)
    state = sampler.init(start)
    seconds = time.perf_counter() - clock
    trace, dens = [], []
    for sweep in range(sweeps + 1):
        if sweep:
            clock = time.perf_counter()
            state = sampler.sample(state, rng)
            seconds += time.perf_counter() - clock
        _, which = np.unique(state.labels, return_inverse=True)
        Z = np.zeros((N, which.max() + 1))
        Z[np.arange(N), which] = 1.0
        post = obs.post(Z.sum(0), obs.stats(X, Z))
        near, flat = score(Z, post, obs)
        dens.append(np.stack([near, flat]))
        half = np.stack(dens[len(dens) // 2:])
        avg = logsumexp(half, axis=0) - math.log(len(half))
        trace.append({"sweep": sweep, "seconds": seconds, "heldout": float(near.mean()),
                      "heldout_crp": float(flat.mean()), "heldout_avg": float(avg[0].mean()),
                      "heldout_crp_avg": float(avg[1].mean()), "tables": Z.shape[1],
                      **({"log_joint": sampler.log_joint(state)} if kind == "collapsed" else {})})
    return {"trace": trace, "seconds": seconds, "sweeps": sweeps,
            "links": state.links.tolist()}


def vi_from_links(data: dict, obs: Gauss, alpha: float, a: float, window: int | None,
                  links: list[int], seed: np.random.SeedSequence, max_iter: int,
                  tol: float) -> dict:
    """VI started at hard links (a Gibbs chain's last state): is VI's optimum there better?"""
    X, score = data["x_train"], _scorer(data, a)
    logp = log_link_band(data["t_train"], alpha, decay("exponential", a), window)
    d = np.arange(len(X)) - np.asarray(links)
    q = np.zeros_like(logp)
    q[np.arange(len(X)), d] = 1.0
    fit = ascend(X, LinkState.of(logp, q, PRUNE), obs, np.random.default_rng(seed), max_iter,
                 tol)
    near, flat = score(fit.links.responsibilities, fit.post, obs)
    return {"elbo": fit.elbo, "iterations": fit.iterations, "tables": fit.n_tables,
            "heldout": float(near.mean()), "heldout_crp": float(flat.mean())}


def settled(trace: list[dict], final: float, tol: float) -> float:
    """Seconds at which the held-out first comes within ``tol`` of ``final`` (a run's own
    level: VI's last value, a chain's last-half average of its states' values)."""
    return first_time(trace, "heldout", final - tol)


def first_time(trace: list[dict], key: str, level: float) -> float:
    """Seconds at which ``key`` first reaches ``level`` (nan if never)."""
    return next((t["seconds"] for t in trace if t[key] >= level), float("nan"))


def at_time(trace: list[dict], key: str, seconds: float) -> float:
    """``key`` of the last trace row at or before ``seconds``."""
    rows = [t for t in trace if t["seconds"] <= seconds]
    return rows[-1][key] if rows else float("nan")


def sec53(args) -> dict:
    data = switching_sequence(args.n53, args.states, args.stay, args.swap, args.data_seed)
    obs, alpha = sequence_prior(args.states), args.alpha
    N = len(data["x_train"])
    counts = np.bincount(data["s_train"], minlength=args.states).tolist()
    print(f"\n== sec53: switching sequence, {N} train + {N} test (odd times), {args.states} "
          f"states (means 5k, precisions {np.round(data['precision'], 3).tolist()}), stay "
          f"{args.stay}, {len(data['switches'])} switches, ±{args.swap} points permuted at each; "
          f"training items per state {counts}")
    window = "no window" if args.window53 is None else f"window {args.window53} customers"
    print(f"prior {obs.prior()}; exponential decay a = {args.a53}, {window}, α = {alpha}; "
          "true-state "
          f"oracle held-out {data['oracle']:.4f} per test item")
    streams = np.random.SeedSequence([args.seed, 53]).spawn(args.chains)
    model = (data, obs, alpha, args.a53, args.window53)
    tasks = [(vi_run, (*model, s, args.max_iter, args.tol, STARTS[c % len(STARTS)],
                       args.rounds)) for c, s in enumerate(streams)]
    for kind in SAMPLERS:
        tasks += [(gibbs_run, (*model, s, args.sweeps, kind)) for s in streams]
    start = time.perf_counter()
    results = run_all(tasks, args.jobs)
    wall = time.perf_counter() - start
    C = args.chains
    vi = results[:C]
    chains = {kind: results[C * (n + 1):C * (n + 2)] for n, kind in enumerate(SAMPLERS)}
    polish = run_all([(vi_from_links, (*model, g["links"], s, args.max_iter, args.tol))
                      for g, s in zip(chains["collapsed"], streams, strict=True)], args.jobs)
    # VI restarted in sequence: after each run, the held-out of the best bound so far
    best, restarts, clock = -np.inf, [], 0.0
    for run in vi:
        clock += run["seconds"]
        if run["elbo"] > best:
            best, keep = run["elbo"], run["trace"][-1]
        restarts.append({"seconds": clock, "heldout": keep["heldout"],
                         "heldout_crp": keep["heldout_crp"], "elbo": best})
    for v in vi:
        v["settled"] = settled(v["trace"], v["trace"][-1]["heldout"], args.settle)
    for runs in chains.values():
        for g in runs:
            tail = [t["heldout"] for t in g["trace"][len(g["trace"]) // 2:]]
            g["level"] = float(np.mean(tail))
            g["settled"] = settled(g["trace"], g["level"], args.settle)
    print("\nper run: VI (converged iterations, seconds, seconds to come within --settle "
          f"{args.settle} of its final held-out, bound, tables, held-out with decay links | "
          "f ≡ 1); each Gibbs sampler (seconds for all sweeps, seconds to come within --settle "
          "of its last-half mean, that mean, the last state's held-out | the last-half average "
          "of densities; at VI's convergence time; seconds to first reach VI's final held-out)")
    for c, v in enumerate(vi):
        last = v["trace"][-1]
        print(f"run {c}: VI {v['iterations']:>3} it {'conv' if v['converged'] else 'cap':<5}"
              f"{v['seconds']:>6.2f} s (settled {v['settled']:.2f} s)  bound {last['elbo']:>9.2f}"
              f"  tables {last['tables']:>6.2f}  {last['heldout']:.4f} | "
              f"{last['heldout_crp']:.4f}")
        for kind, runs in chains.items():
            g = runs[c]
            gl = g["trace"][-1]
            g["at_vi_time"] = at_time(g["trace"], "heldout", v["seconds"])
            g["reaches_vi"] = first_time(g["trace"], "heldout", last["heldout"])
            print(f"       {kind:<11} Gibbs {g['seconds']:>6.1f} s (settled {g['settled']:.2f} s"
                  f" at {g['level']:.4f})  last {gl['heldout']:.4f} | avg "
                  f"{gl['heldout_avg']:.4f} ({gl['tables']} tables, f ≡ 1: "
                  f"{gl['heldout_crp']:.4f}); at VI's {v['seconds']:.2f} s: "
                  f"{g['at_vi_time']:.4f}; reaches VI's level at {g['reaches_vi']:.2f} s")
    print("VI started at each collapsed Gibbs chain's last state (links one-hot), run to "
          "convergence:")
    for c, (v, w) in enumerate(zip(vi, polish, strict=True)):
        print(f"run {c}: {w['iterations']:>3} it  bound {w['elbo']:>9.2f} (VI from its own "
              f"start: {v['elbo']:.2f})  tables {w['tables']:>6.2f}  held-out {w['heldout']:.4f}"
              f" | {w['heldout_crp']:.4f}")
    summary = {
        "vi_seconds": mean_se([v["seconds"] for v in vi]),
        "vi_settled": mean_se([v["settled"] for v in vi]),
        "vi_iterations": mean_se([v["iterations"] for v in vi]),
        "vi_heldout": mean_se([v["trace"][-1]["heldout"] for v in vi]),
        "vi_heldout_crp": mean_se([v["trace"][-1]["heldout_crp"] for v in vi]),
        "vi_best_bound_heldout": restarts[-1]["heldout"],
        "vi_from_gibbs_elbo": mean_se([w["elbo"] for w in polish]),
        "vi_from_gibbs_heldout": mean_se([w["heldout"] for w in polish]),
    }
    for kind, runs in chains.items():
        summary[kind] = {
            "seconds_per_sweep": mean_se([g["seconds"] / max(g["sweeps"], 1) for g in runs]),
            "settled": mean_se([g["settled"] for g in runs]),
            "level": mean_se([g["level"] for g in runs]),
            "heldout_last": mean_se([g["trace"][-1]["heldout"] for g in runs]),
            "heldout_avg": mean_se([g["trace"][-1]["heldout_avg"] for g in runs]),
            "heldout_crp_last": mean_se([g["trace"][-1]["heldout_crp"] for g in runs]),
            "at_vi_time": mean_se([g["at_vi_time"] for g in runs]),
            "reaches_vi": mean_se([g["reaches_vi"] for g in runs]),
        }
    times = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
    for t in times:
        summary[f"at_{t:g}s"] = {"vi": mean_se([at_time(v["trace"], "heldout", t) for v in vi])}
        for kind, runs in chains.items():
            summary[f"at_{t:g}s"][kind] = mean_se([at_time(g["trace"], "heldout", t)
                                                   for g in runs])
    print(f"\nmean ± se over {C} runs (held-out per test item, decay links):")
    print(f"  VI: {summary['vi_iterations'][0]:.1f} iterations, {summary['vi_seconds'][0]:.2f} ± "
          f"{summary['vi_seconds'][1]:.2f} s to converge (within {args.settle} of its final "
          f"held-out at {summary['vi_settled'][0]:.2f} ± {summary['vi_settled'][1]:.2f} s), "
          f"held-out {summary['vi_heldout'][0]:.4f} ± {summary['vi_heldout'][1]:.4f} (f ≡ 1: "
          f"{summary['vi_heldout_crp'][0]:.4f}); the best bound of the {C} runs: "
          f"{summary['vi_best_bound_heldout']:.4f}")
    for kind in SAMPLERS:
        g = summary[kind]
        print(f"  {kind} Gibbs: {g['seconds_per_sweep'][0]:.3f} s a sweep; within {args.settle}"
              f" of its last-half mean ({g['level'][0]:.4f} ± {g['level'][1]:.4f}) at "
              f"{g['settled'][0]:.2f} ± {g['settled'][1]:.2f} s; after {args.sweeps} sweeps "
              f"{g['heldout_last'][0]:.4f} ± {g['heldout_last'][1]:.4f} (last-half average of "
              f"densities {g['heldout_avg'][0]:.4f}; f ≡ 1: {g['heldout_crp_last'][0]:.4f}); at "
              f"VI's convergence time {g['at_vi_time'][0]:.4f} ± {g['at_vi_time'][1]:.4f}; "
              f"reaches VI's final held-out at {g['reaches_vi'][0]:.2f} s (nan: never)")
    print(f"{'seconds':>8}" + "".join(f"{k:>18}" for k in ("VI", *SAMPLERS)))
    for t in times:
        cell = summary[f"at_{t:g}s"]
        print(f"{t:>8g}" + "".join(f"{cell[k][0]:>11.4f} ± {cell[k][1]:.3f}"
                                    for k in ("vi", *SAMPLERS)))
    print(f"oracle (true states and parameters) {data['oracle']:.4f}; wall {wall:.0f} s")
    settings_data = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                     for k, v in data.items() if k in ("precision", "switches", "oracle")}
    return {"data": settings_data, "train_per_state": counts, "prior": obs.prior(),
            "vi": vi, "gibbs": chains["collapsed"], "gibbs_uncollapsed": chains["uncollapsed"],
            "vi_restarts": restarts, "vi_from_gibbs": polish,
            "summary": summary,
            "wall_seconds": wall}


# ---------------------------------------------------------------- plots


def plot(path: Path, result: dict) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not importable: no plot"
    name = result["experiment"]
    png = path.with_suffix(".png")
    if name == "sec521":
        rows = result["rows"]
        fig, ax = plt.subplots(1, len(rows), figsize=(4 * len(rows), 3.4), squeeze=False)
        for a, w in zip(ax[0], rows, strict=True):
            every = np.concatenate([w[k]["elbos"] for k in ("seqcrp", "dp", "dp_drawn")])
            lo, hi = float(every.min()), float(every.max())
            bins = np.linspace(lo - 0.5, max(hi, lo + 1.0) + 0.5, 41)
            for key, label, colour in (("seqcrp", "seqCRP VI", "C0"), ("dp", "DP VB", "C1"),
                                       ("dp_drawn", "DP VB, drawn start", "C2")):
                a.hist(w[key]["elbos"], bins=bins, alpha=0.5, color=colour, label=label)
            a.axvline(w["seqcrp_truth"]["elbo"], color="C0", ls=":", label="seqCRP from truth")
            a.axvline(w["dp_truth"]["elbo"], color="C1", ls=":", label="DP VB from truth")
            a.set_title(f"R = {w['R']:g}")
            a.set_xlabel("lower bound")
        ax[0][0].set_ylabel("restarts")
        ax[0][0].legend(fontsize=8)
    elif name == "sec53":
        fig, ax = plt.subplots(1, 2, figsize=(13, 4.5))
        for a, key, title in ((ax[0], "heldout",
                               "test links to earlier items by the decay of t* − t"),
                              (ax[1], "heldout_crp", "test links f ≡ 1")):
            for c, run in enumerate(result["vi"]):
                a.plot([t["seconds"] for t in run["trace"]], [t[key] for t in run["trace"]],
                       "C0.-", lw=1, ms=3, label="VI (per iteration)" if c == 0 else None)
            for runs, colour, what in ((result["gibbs"], "C1", "collapsed Gibbs"),
                                       (result.get("gibbs_uncollapsed", []), "C2",
                                        "uncollapsed Gibbs")):
                for c, run in enumerate(runs):
                    tr = run["trace"]
                    a.plot([t["seconds"] for t in tr], [t[key] for t in tr], f"{colour}-",
                           lw=0.6, alpha=0.7, label=f"{what}, current state" if c == 0 else None)
            if key == "heldout":
                a.axhline(result["data"]["oracle"], color="k", ls=":", label="true states")
            a.set_xscale("log")
            a.set_xlabel("seconds")
            a.set_ylabel("held-out log-likelihood per test item")
            a.set_title(title)
        ax[0].legend(fontsize=8)
    else:
        return f"no plot for {name}"
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return f"plot: {png}"


# ---------------------------------------------------------------- main


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("experiments", nargs="*", metavar="EXPERIMENT",
                   help=f"any of {', '.join(EXPERIMENTS)} (default: all three)")
    p.add_argument("--quick", action="store_true", help="a smoke run (< 60 s)")
    p.add_argument("--restarts", type=int, default=50, help="restarts per model and R")
    p.add_argument("--jobs", type=int, default=2, help="processes")
    p.add_argument("--seed", type=int, default=0, help="the algorithms' seed")
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--truncation", type=int, default=50, help="DP VB's K")
    p.add_argument("--rounds", type=int, default=ROUNDS,
                   help="sec53: VI's rounds of table moves after its ascent (0: none)")
    p.add_argument("--plain", action="store_true",
                   help="sec521: also the seqCRP without table moves, drawn starts only")
    p.add_argument("--max-iter", type=int, default=1000)
    p.add_argument("--tol", type=float, default=1e-8, help="relative ELBO change to stop at")
    p.add_argument("--radii", type=float, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--a", type=float, default=4.0, help="sec522's exponential decay")
    p.add_argument("--a53", type=float, default=4.0, help="sec53's exponential decay")
    p.add_argument("--window53", type=int, default=None,
                   help="sec53: links to this many most recent customers only (both methods)")
    p.add_argument("--n53", type=int, default=500, help="sec53's training (and test) items")
    p.add_argument("--states", type=int, default=5)
    p.add_argument("--stay", type=float, default=0.98)
    p.add_argument("--swap", type=int, default=3, help="points permuted each side of a switch")
    p.add_argument("--chains", type=int, default=4, help="sec53's runs of each method")
    p.add_argument("--sweeps", type=int, default=300, help="sec53's Gibbs sweeps per run")
    p.add_argument("--settle", type=float, default=0.01,
                   help="sec53: a run has settled once its held-out per test item comes within "
                        "this of its own final level")
    p.add_argument("--out", type=Path, default=None, help="directory of the JSON and PNG files")
    p.add_argument("--suffix", default="", help="output names ddcrp_<experiment><suffix>.json")
    p.add_argument("--plot", type=Path, default=None, help="only redraw the plot of this JSON")
    args = p.parse_args()
    if args.plot:
        print(plot(args.plot, json.loads(args.plot.read_text())))
        return
    experiments = args.experiments or list(EXPERIMENTS)
    unknown = sorted(set(experiments) - set(EXPERIMENTS))
    if unknown:
        p.error(f"unknown experiment(s) {', '.join(unknown)}: choose from {', '.join(EXPERIMENTS)}")
    if args.quick:
        args.restarts, args.radii, args.n53, args.chains, args.sweeps = 3, [1, 3, 5], 150, 2, 20
    if args.out is None:
        args.out = Path(tempfile.gettempdir()) / "ddcrp_paper_quick" if args.quick else RESULTS
    args.radii = [int(r) if float(r).is_integer() else r for r in args.radii]
    machine = {"python": platform.python_version(), "numpy": np.__version__,
               "processor": platform.processor() or platform.machine()}
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    wall = time.perf_counter()
    for name in experiments:
        result = {"experiment": name, "settings": settings, "machine": machine,
                  **{"sec521": sec521, "sec522": sec522, "sec53": sec53}[name](args)}
        path = args.out / f"ddcrp_{name}{args.suffix}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1, default=_json_default))
        note = plot(path, result) if name in ("sec521", "sec53") else "no plot"
        print(f"wrote {path}; {note}")
    print(f"\ntotal wall {time.perf_counter() - wall:.0f} s")


def _json_default(o):
    if isinstance(o, np.integer | np.bool_):
        return o.item()
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o))


if __name__ == "__main__":
    main()
