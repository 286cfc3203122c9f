"""Ahmed & Xing (2008), Sec. 8: the simple nonparametric dynamic topic model (SNDTM) — the
temporal DP mixture with multinomial documents and natural-parameter chains (``TextEmission``) —
on a synthetic corpus whose topics are born, drift and die.

Data (generated here, --data-seed): 13 epochs, V = 300 words (--vocab), 50-100 documents per
epoch (--docs), each of 50-100 words. Five topics with fixed spans (first..last epoch with
documents): A 0-12, B 0-9 (dies at 10), C 0-4 (dies at 5), D 4-12 (born at 4), E 8-12 (born at
8), so 3, 4 or 3 topics are alive at each epoch. Topic k's natural parameter at its birth is a
background shared by all topics, b ~ N(0, I) (common words are common in every topic), plus a
topic-specific N(0, 0.3² I) perturbation, plus +3 (--boost) on its own block of 20 words
(disjoint blocks, words named A00..A19, B00.. ; the other 200 words are w100..w299): about 60%
of a document's words come from its topic's block (16% with --boost 1, where topics are hard to
tell apart), and with the default boost the true top-10 words of different topics do not
overlap; it then
drifts as a random walk φ_t = φ_{t−1} + N(0, 0.05 I) (--true-drift), which reorders the words
inside a block over time (the true top-10 changes). At each epoch the alive topics' popularities
are Dirichlet(4, ..., 4) and every document draws its topic from them.

Sampler: ``ChainSampler`` with ``TextEmission`` (Laplace candidates, Eqs. 8.12-8.13 pseudo-
observations with smoothing 0.5) and the RCRP prior, hyperparameters as the paper's Sec. 8
(those of Sec. 7 with α = 0.1): α = 0.1, W = 1, λ = 0.8, birth variance σ = 10, drift variance
ρ = 0.1 (variances, in natural-parameter units: σ = 10 gives each word's log-weight a prior
standard deviation of 3.2, wide enough for topics whose top words are ~e³ times more frequent
than the rest; ρ = 0.1 is twice the true drift). The sampler starts empty (the first sweep seats
documents sequentially; the paper instead started from a global clustering) and runs --sweeps
(60) sweeps; measures are averaged over --samples (5) samples --thin (5) sweeps apart at the
end (mean ± standard error over samples; the samples are successive states of one Markov chain).

Measures, against the truth:
- GVI and LVI (Sec. 7: the variation of information of the chain labels over all documents and
  its average over epochs; lower is better), and the two halves of GVI, H(truth | chains)
  (chains mixing topics) and H(chains | truth) (topics split over chains);
- alive chains per epoch (members at t or in the W epochs before), all chains and chains of
  >= 4 documents;
- precision@10: for each true topic and epoch where it has documents, the chain holding most of
  that topic's documents at that epoch ("matched chain"), and the overlap of the top-10 words of
  its posterior-mean state (RTS smoother given the sample's labels) with the true top-10 at that
  epoch, / 10; averaged over (topic, epoch) pairs. References at the true labels: the top-10 of
  the topic's summed counts at that epoch (the per-epoch MLE), and of the RTS-smoothed states
  given the true labels (what the sampler's own smoother reaches when the clustering is right);
- births and deaths: for each true topic, its main chain (the chain holding most of its
  documents over all epochs) — its first and last epoch with documents against the topic's, and
  how many distinct chains are matched to the topic over its epochs (1 = tracked by one chain);
- the final sample's chains of >= 4 documents: top-5 words at each epoch of their spans (like the
  paper's Fig. 4, left), printed;
- seconds per sweep, the number of Newton steps per document.

--init truth starts the sampler at the true labels and states instead (is the truth stable under
the sampler? separates the posterior from mixing).

Findings (data seed 0, sampler seed 1, 60 sweeps: ``python benchmarks/reproductions/tdpm_text.py``,
the run
of benchmarks/results/tdpm_text.json), with the split-merge moves over whole chains
(``splitmerge.py``: the chains' evidence over the documents' second-order pseudo-observations,
splits allocated by the pieces' word counts, a third of the partners drawn from any epoch):
- default (boost 3): all 5 births and 5 deaths at the right epochs, GVI 0.000 and LVI 0.000 over
  the last 5 samples, precision@10 0.950 (the smoother at the true labels: 0.950; per-epoch
  counts: 0.921). Without the moves, one topic (A) kept a short parallel chain beside its main
  one (GVI 0.051).
- --boost 1.5 (``--boost 1.5 --init empty``): GVI 0.000, 5 chains, all births and deaths exact,
  P@10 0.895, as from the truth (``--init truth``: GVI 0.000, P@10 0.895). Without the moves
  the sequential start merged every topic into 1 chain (GVI 1.518).
- --boost 1: started empty, 3 chains, GVI 0.798 ± 0.014, P@10 0.850, 3 of 5 births and deaths
  exact; started at the truth, the moves merge two topics as well (4 chains, GVI 0.313 ± 0.011,
  P@10 0.881; without the moves it stayed at GVI 0.076). At this boost (16 % of a document's
  words from its topic's block) the approximate posterior the moves target (Laplace and
  diagonal pseudo-observation marginals) puts topics whose spans touch into one chain: merging
  C (epochs 0-4) into D (4-12) raises it by 121 nats. Without the moves (before them): 2 chains,
  GVI 1.301. The Laplace new-chain marginals, ~3-4 nats too low (``text`` module docstring),
  and α = 0.1 both make opening chains harder.

Writes JSON (--json, default benchmarks/results/tdpm_text.json; with --quick a file in the
temporary directory). --quick: 13 epochs of 20-30 documents, V = 200, 10 sweeps (< 60 s).

    python benchmarks/reproductions/tdpm_text.py [--quick] [--sweeps 60] [--samples 5] [--thin 5]
        [--vocab 300] [--docs 50 100] [--boost 3] [--true-drift 0.05] [--data-seed 0]
        [--seed 1] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.special import softmax, xlogy

from bnpmix.algorithms.metrics import contingency, global_and_local_vi
from bnpmix.algorithms.tdpm.dynamics import RandomWalk
from bnpmix.algorithms.tdpm.gibbs import ChainSampler, RCRPPrior, alive_per_epoch
from bnpmix.algorithms.tdpm.text import TextEmission

RESULTS = Path(__file__).resolve().parents[1] / "results"
SIGNIFICANT = 4  # documents: smaller chains are the paper's "insignificant" ones
T = 13
SPANS = {"A": (0, 12), "B": (0, 9), "C": (0, 4), "D": (4, 12), "E": (8, 12)}
BLOCK, BOOST, TOPIC_SD = 20, 3.0, 0.3


def make_corpus(seed: int, vocab: int, docs: tuple[int, int], drift: float,
                boost: float = BOOST, lengths: tuple[int, int] = (50, 100)) -> dict:
    """The synthetic corpus of the module docstring: counts X (CSR), epochs, true topic labels,
    true natural parameters (K, T, V; NaN outside a topic's span) and word names."""
    rng = np.random.default_rng(seed)
    names = list(SPANS)
    K = len(names)
    if vocab < K * BLOCK + 10:
        raise ValueError(f"vocab must be at least {K * BLOCK + 10}")
    words = [f"{n}{j:02d}" for n in names for j in range(BLOCK)]
    words += [f"w{j:03d}" for j in range(K * BLOCK, vocab)]
    phi = np.full((K, T, vocab), np.nan)
    background = rng.normal(size=vocab)
    for k, n in enumerate(names):
        first, last = SPANS[n]
        state = background + TOPIC_SD * rng.normal(size=vocab)
        state[k * BLOCK:(k + 1) * BLOCK] += boost
        for t in range(first, last + 1):
            if t > first:
                state = state + math.sqrt(drift) * rng.standard_normal(vocab)
            phi[k, t] = state
    rows, epochs, labels = [], [], []
    for t in range(T):
        alive = [k for k, n in enumerate(names) if SPANS[n][0] <= t <= SPANS[n][1]]
        weights = rng.dirichlet(np.full(len(alive), 4.0))
        n_docs = int(rng.integers(docs[0], docs[1] + 1))
        # every alive topic has at least one document at every epoch of its span
        topics = np.concatenate([alive, rng.choice(alive, n_docs - len(alive), p=weights)])
        for k in rng.permutation(topics):
            rows.append(rng.multinomial(int(rng.integers(lengths[0], lengths[1] + 1)),
                                        softmax(phi[k, t])))
            epochs.append(t)
            labels.append(int(k))
    return {"X": sp.csr_matrix(np.array(rows)), "epochs": np.array(epochs),
            "labels": np.array(labels), "phi": phi, "words": words, "names": names}


def top_words(state: np.ndarray, k: int = 10) -> np.ndarray:
    return np.argsort(state)[::-1][:k]


def cond_entropy(a: np.ndarray, b: np.ndarray) -> float:
    """H(a | b) in nats."""
    p = contingency(a, b) / len(a)
    pb = p.sum(0)
    return max(0.0, -float(np.sum(xlogy(p, p)) - np.sum(xlogy(pb, pb))))


def measure(s: ChainSampler, data: dict, W: int) -> dict:
    """Every measure of the module docstring for the sampler's current sample."""
    epochs, labels, phi, names = data["epochs"], data["labels"], data["phi"], data["names"]
    z = s.z
    gvi, lvi = global_and_local_vi(labels, z, epochs)
    ks, sizes = np.unique(z, return_counts=True)
    size = dict(zip(ks.tolist(), sizes.tolist(), strict=True))
    sig = np.array([size[k] >= SIGNIFICANT for k in z.tolist()])
    smoothed = s.smoothed_states()

    def state(k: int, t: int) -> np.ndarray:
        return smoothed[k][0][t - int(s.first[k])]

    precision, per_topic = [], []
    for j, name in enumerate(names):
        first, last = SPANS[name]
        mine = labels == j
        main = int(np.bincount(z[mine]).argmax())
        matched = []
        for t in range(first, last + 1):
            here = mine & (epochs == t)
            k = int(np.bincount(z[here]).argmax())
            matched.append(k)
            hit = np.intersect1d(top_words(state(k, t)), top_words(phi[j, t])).size
            precision.append(hit / 10)
        occ = np.flatnonzero(np.bincount(epochs[z == main], minlength=T))
        per_topic.append({"topic": name, "first": first, "last": last,
                          "chain_first": int(occ[0]), "chain_last": int(occ[-1]),
                          "main_share": float(np.mean(z[mine] == main)),
                          "chains_matched": len(set(matched)),
                          "precision_at_10": float(np.mean(precision[-len(matched):]))})
    return {"gvi": gvi, "lvi": lvi, "h_truth_given_chains": cond_entropy(labels, z),
            "h_chains_given_truth": cond_entropy(z, labels), "chains": len(ks),
            "significant": int(np.sum(sizes >= SIGNIFICANT)),
            "alive": alive_per_epoch(z, epochs, T, W).tolist(),
            "alive_significant": alive_per_epoch(np.where(sig, z, -1), epochs, T, W).tolist(),
            "precision_at_10": float(np.mean(precision)),
            "births_exact": sum(p["chain_first"] == p["first"] for p in per_topic),
            "deaths_exact": sum(p["chain_last"] == p["last"] for p in per_topic),
            "topics": per_topic}


def true_sample(data: dict) -> dict:
    """The true labels and states as a sampler state (``ChainSampler.restore``)."""
    spans = [SPANS[n] for n in data["names"]]
    return {"z": data["labels"], "labels": np.arange(len(spans)),
            "first": np.array([a for a, _ in spans]), "last": np.array([b for _, b in spans]),
            "phi": np.concatenate([data["phi"][j, a:b + 1] for j, (a, b) in enumerate(spans)])}


def oracle_precision(data: dict, emission: TextEmission, walk: RandomWalk,
                     prior: RCRPPrior) -> dict:
    """Precision@10 at the true labels, as references for the sampler's: of the summed counts
    of each topic's documents at each epoch (the per-epoch MLE), and of the RTS-smoothed states
    (the same pseudo-observations and smoother the sampler uses) given the true labels."""
    epochs, labels, phi, names = data["epochs"], data["labels"], data["phi"], data["names"]
    s = ChainSampler(epochs, T, emission, walk, prior)
    spans = [SPANS[n] for n in names]
    s.restore(true_sample(data))
    mle, smooth = [], []
    smoothed = s.smoothed_states()
    for j, (a, b) in enumerate(spans):
        means = smoothed[j][0]
        for t in range(a, b + 1):
            truth = top_words(phi[j, t])
            counts = emission.counts_of(np.flatnonzero((labels == j) & (epochs == t)))
            mle.append(np.intersect1d(top_words(counts), truth).size / 10)
            smooth.append(np.intersect1d(top_words(means[t - a]), truth).size / 10)
    return {"mle": float(np.mean(mle)), "smoothed": float(np.mean(smooth))}


def chain_table(s: ChainSampler, data: dict, n_words: int = 5) -> list[dict]:
    """The sample's chains of >= SIGNIFICANT documents: span, documents per epoch, the true
    topic most of their documents come from, and top words per epoch of the smoothed state."""
    words, labels, names = data["words"], data["labels"], data["names"]
    out = []
    smoothed = s.smoothed_states()
    for k in np.flatnonzero(s.active):
        k = int(k)
        members = s.z == k
        if members.sum() < SIGNIFICANT:
            continue
        means = smoothed[k][0]
        f0 = int(s.first[k])
        out.append({"chain": k, "first": f0, "last": int(s.last[k]),
                    "documents": s.counts[:, k].tolist(),
                    "topic": names[int(np.bincount(labels[members]).argmax())],
                    "top_words": {f0 + u: [words[w] for w in top_words(means[u], n_words)]
                                  for u in range(len(means))}})
    return sorted(out, key=lambda c: (c["topic"], c["first"]))


def mean_se(values) -> tuple[float, float]:
    v = np.asarray(values, float)
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1
                             else float("nan"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small smoke run (< 60 s)")
    p.add_argument("--sweeps", type=int, default=60)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--thin", type=int, default=5)
    p.add_argument("--trace-every", type=int, default=5)
    p.add_argument("--vocab", type=int, default=300)
    p.add_argument("--docs", type=int, nargs=2, default=[50, 100])
    p.add_argument("--true-drift", type=float, default=0.05)
    p.add_argument("--boost", type=float, default=BOOST,
                   help="log-weight added to a topic's own 20 words")
    p.add_argument("--init", choices=["empty", "truth"], default="empty",
                   help="start empty (sequential seating) or at the true labels and states")
    p.add_argument("--data-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    if args.quick:
        args.sweeps, args.samples, args.thin, args.trace_every = 10, 3, 2, 2
        args.vocab, args.docs = 200, [20, 30]
    if args.json is None:
        args.json = (Path(tempfile.gettempdir()) / "tdpm_text_quick.json" if args.quick
                     else RESULTS / "tdpm_text.json")
    hyper = {"alpha": 0.1, "window": 1, "decay": 0.8, "birth_var": 10.0, "drift_var": 0.1,
             "smoothing": 0.5}
    W = hyper["window"]
    wall = time.perf_counter()
    data = make_corpus(args.data_seed, args.vocab, tuple(args.docs), args.true_drift,
                       args.boost)
    X, epochs, labels = data["X"], data["epochs"], data["labels"]
    truth_alive = alive_per_epoch(labels, epochs, T, W).tolist()
    print(f"data: {T} epochs, {X.shape[0]} documents ({np.bincount(epochs).min()}-"
          f"{np.bincount(epochs).max()} per epoch), V = {X.shape[1]}, "
          f"{X.sum() / X.shape[0]:.0f} words per document; topic spans {SPANS}; "
          f"data seed {args.data_seed}; sampler seed {args.seed}; init {args.init}; {hyper}",
          flush=True)

    emission = TextEmission(X, smoothing=hyper["smoothing"])
    walk = RandomWalk(hyper["birth_var"], hyper["drift_var"])
    prior = RCRPPrior(hyper["alpha"], W, hyper["decay"])
    oracle = oracle_precision(data, TextEmission(X, smoothing=hyper["smoothing"]), walk, prior)
    print(f"precision@10 at the true labels: per-epoch counts {oracle['mle']:.3f}, smoothed "
          f"states {oracle['smoothed']:.3f}", flush=True)
    s = ChainSampler(epochs, T, emission, walk, prior)
    if args.init == "truth":
        s.restore(true_sample(data))
    rng = np.random.default_rng(args.seed)
    keep = {args.sweeps - j * args.thin for j in range(args.samples)}
    trace, samples = [], []
    start = time.perf_counter()
    for sweep in range(1, args.sweeps + 1):
        s.sweep(rng)
        if sweep in keep or sweep % args.trace_every == 0 or sweep <= 2:
            m = measure(s, data, W)
            if sweep in keep:
                samples.append({"sweep": sweep, **m})
            row = {"sweep": sweep, "chains": m["chains"], "significant": m["significant"],
                   "gvi": m["gvi"], "lvi": m["lvi"], "precision_at_10": m["precision_at_10"],
                   "seconds": time.perf_counter() - start}
            trace.append(row)
            print(f"sweep {sweep:4d}  chains {m['chains']:3d} ({m['significant']:2d} >= "
                  f"{SIGNIFICANT} docs)  GVI {m['gvi']:.3f}  LVI {m['lvi']:.3f}  "
                  f"P@10 {m['precision_at_10']:.3f}  {row['seconds']:.0f} s", flush=True)
    seconds = time.perf_counter() - start
    # seconds spent measuring are inside; they are small next to a sweep (smoother only)
    summary = {"sweeps": args.sweeps, "seconds": seconds,
               "seconds_per_sweep": seconds / args.sweeps,
               "newton_steps_per_document": emission.newton_iterations
               / (args.sweeps * X.shape[0])}
    for key in ("gvi", "lvi", "h_truth_given_chains", "h_chains_given_truth", "chains",
                "significant", "precision_at_10", "births_exact", "deaths_exact"):
        summary[key], summary[key + "_se"] = mean_se([x[key] for x in samples])
    for key in ("alive", "alive_significant"):
        summary[key] = np.mean([x[key] for x in samples], axis=0).tolist()
    final = samples[-1]
    table = chain_table(s, data)

    print(f"\nover {len(samples)} samples (sweeps {sorted(keep)}), mean ± se:")
    for key in ("gvi", "lvi", "h_truth_given_chains", "h_chains_given_truth", "chains",
                "significant", "precision_at_10", "births_exact", "deaths_exact"):
        print(f"  {key:<22}{summary[key]:8.3f} ± {summary[key + '_se']:.3f}")
    print(f"  seconds per sweep {summary['seconds_per_sweep']:.2f}; Newton steps per document "
          f"and sweep {summary['newton_steps_per_document']:.1f}")
    print("\nalive chains per epoch (all | >= 4 documents), truth vs samples' mean:")
    print(f"{'epoch':>6}{'truth':>7}{'TDPM':>7} |{'TDPM':>7}")
    for t in range(T):
        print(f"{t:>6}{truth_alive[t]:>7}{summary['alive'][t]:>7.1f} |"
              f"{summary['alive_significant'][t]:>7.1f}")
    print("\ntrue topics against their main chain (final sample): span, chain's span, share of "
          "the topic's documents in it, chains matched over epochs, precision@10")
    for r in final["topics"]:
        print(f"  {r['topic']}  {r['first']:2d}-{r['last']:2d}  chain {r['chain_first']:2d}-"
              f"{r['chain_last']:2d}  share {r['main_share']:.2f}  matched "
              f"{r['chains_matched']}  P@10 {r['precision_at_10']:.2f}")
    print(f"\ntop words of the final sample's chains of >= {SIGNIFICANT} documents "
          "(smoothed states; true top-5 in brackets):")
    names = data["names"]
    for c in table:
        j = names.index(c["topic"])
        print(f"chain {c['chain']} (mostly topic {c['topic']}), epochs {c['first']}-"
              f"{c['last']}, documents {sum(c['documents'])}")
        for t, ws in c["top_words"].items():
            true = (" ".join(data["words"][w] for w in top_words(data["phi"][j, t], 5))
                    if not np.isnan(data["phi"][j, t, 0]) else "-")
            print(f"  {t:>3} ({c['documents'][t]:>3} docs)  {' '.join(ws):<24} [{true}]")

    result = {"settings": {"epochs": T, "vocab": args.vocab, "docs": args.docs,
                           "spans": SPANS, "block": BLOCK, "boost": args.boost,
                           "topic_sd": TOPIC_SD,
                           "true_drift": args.true_drift, "data_seed": args.data_seed,
                           "seed": args.seed, "init": args.init, "sweeps": args.sweeps,
                           "samples": args.samples, "thin": args.thin, "quick": args.quick,
                           **hyper},
              "machine": {"python": platform.python_version(), "numpy": np.__version__,
                          "processor": platform.processor() or platform.machine()},
              "truth": {"alive": truth_alive, "documents": int(X.shape[0]),
                        "precision_at_10_oracle": oracle},
              "summary": summary, "trace": trace, "samples": samples, "chains": table,
              "wall_seconds": time.perf_counter() - wall}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print(f"\nwrote {args.json}; wall {result['wall_seconds']:.0f} s")


if __name__ == "__main__":
    main()
