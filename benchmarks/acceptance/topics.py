"""The multinomial observation model: 20,000 synthetic documents of 50-200 words over V = 2,000
from 20 topics (bnpmix.datasets.bag_of_words_topics). memo with births and merges from K = 1
must recover every topic: each true topic matched by a learned one at Hellinger distance < 0.2.

    python benchmarks/acceptance/topics.py [--docs 20000] [--laps 20] [--seed 0] [--json [PATH]]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import corpus_of, json_option, run_fit, write_json
from bnpmix.datasets import bag_of_words_topics
from bnpmix.pipeline.fit import job_config
from bnpmix.storage import RunDir


def hellinger(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Pairwise Hellinger distances between the rows of P and of Q."""
    return np.sqrt(np.maximum(0.0, 1.0 - np.sqrt(P) @ np.sqrt(Q).T))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--laps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    json_option(ap, "topics")
    args = ap.parse_args()
    X, labels, topics = bag_of_words_topics(args.docs, seed=0)
    corpus = corpus_of(X, labels, 20, "topics")
    print(f"topics: {args.docs} documents, V=2000, 20 true topics, {X.nnz} non-zeros, "
          f"20 partitions")
    cfg = job_config(algorithm="memo", obs="mult", K=1, laps=args.laps, moves=("birth", "merge"),
                    seed=args.seed)
    r = run_fit(corpus, cfg, "memo-bm")
    arrays, _ = RunDir(r["run"]).load_model()
    lam = arrays["post_lam"]
    learned = lam / lam.sum(1, keepdims=True)
    d = hellinger(topics, learned).min(axis=1)
    ok = bool((d < 0.2).all())
    print(f"memo + births + merges from K=1, {args.laps} laps: K={r['K']} (K>1%: {r['K_eff']}), "
          f"ARI {r['ari']:.4f}, {r['seconds']:.1f} s")
    print(f"Hellinger distance of each true topic to its nearest learned topic: "
          f"max {d.max():.3f}, mean {d.mean():.3f}; all < 0.2: {'PASS' if ok else 'FAIL'}")
    write_json(args.json, {"args": vars(args), "memo": {k: v for k, v in r.items() if k != "run"},
                           "hellinger": d, "pass": ok})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
