"""Cost of the one-item path of the observation models (absorb, predictive from a state).

Full Gaussian (bnpmix.algorithms.obs.gauss), K = 25 components from a posterior of 2,000 items,
for D = 20, 40, ..., 640, seconds per call of:
- absorb: one item into one component, a rank-one update of its Cholesky factor, O(D²);
- the one-item predictive against all K components (predictive_logpdf_state), K triangular
  solves, O(K D²);
- for comparison, refactoring B from scratch: np.linalg.cholesky of one D x D matrix, O(D³);
each with the ratio to the previous D: 4 as D doubles for O(D²), 8 for O(D³) (per-call costs
that do not depend on D pull the small-D ratios below either).
Multinomial, K = 100 components, one document of 100 distinct words, for V = 1,000, 10,000 and
100,000: the one-document predictive from a state and absorb, which must not grow with V
(O(K nnz)), next to the batch predictive_logpdf of the same document (it sums λ over all V).

Each figure is the best of --repeat timed runs of many calls. --json writes them to a file.

    python benchmarks/speed/obs_one_item.py [--repeat 5] [--dims 20 40 80 160 320 640] [--json
        out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp

from bnpmix.algorithms.obs.gauss import Gauss
from bnpmix.algorithms.obs.mult import Mult

DIMS = (20, 40, 80, 160, 320, 640)
VOCABS = (1_000, 10_000, 100_000)
K_GAUSS, K_MULT, NNZ = 25, 100, 100


def per_call(f: Callable[[int], object], repeat: int, min_seconds: float = 0.05) -> float:
    """Seconds per call of f(i) (i counts calls): calls per run grow until a run lasts
    min_seconds; the best of `repeat` runs."""
    number = 1
    while True:
        t = time.perf_counter()
        for i in range(number):
            f(i)
        if time.perf_counter() - t >= min_seconds:
            break
        number *= 2
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for i in range(number):
            f(i)
        best = min(best, (time.perf_counter() - t) / number)
    return best


def ratios(times: list[float]) -> list[float | None]:
    return [None, *(b / a for a, b in pairwise(times))]


def gauss_rows(dims: list[int], repeat: int, rng: np.random.Generator) -> list[dict]:
    rows = []
    for D in dims:
        A = rng.normal(size=(D, D)) / np.sqrt(D) + np.eye(D)
        X = rng.normal(size=(2000, D)) @ A
        model = Gauss.default(X)
        R = rng.dirichlet(np.ones(K_GAUSS), size=len(X))
        post = model.post(R.sum(0), model.stats(X, R))
        state = model.predictive_state(post)
        items = rng.normal(size=(256, D)) @ A
        B = post["B"][0].copy()

        def absorb(i: int, state=state, items=items, model=model) -> None:
            model.absorb(state, i % K_GAUSS, items[i % 256], 0.5)

        def predictive(i: int, state=state, items=items, model=model) -> None:
            model.predictive_logpdf_state(state, items[i % 256])

        rows.append({"D": D, "absorb_s": per_call(absorb, repeat),
                     "predictive_s": per_call(predictive, repeat),
                     "cholesky_s": per_call(lambda i, B=B: np.linalg.cholesky(B), repeat)})
    for key in ("absorb_s", "predictive_s", "cholesky_s"):
        for row, r in zip(rows, ratios([row[key] for row in rows]), strict=True):
            row[key.removesuffix("_s") + "_ratio"] = r
    return rows


def mult_rows(repeat: int, rng: np.random.Generator) -> list[dict]:
    rows = []
    for V in VOCABS:
        model = Mult(V, 0.1)
        wc = rng.gamma(0.5, 2.0, size=(K_MULT, V))
        post = model.post(wc.sum(1), {"wc": wc})
        state = model.predictive_state(post)
        cols = np.sort(rng.choice(V, size=NNZ, replace=False))
        doc = sp.csr_matrix((rng.integers(1, 6, NNZ).astype(float), cols, [0, NNZ]),
                            shape=(1, V))

        def predictive(i: int, state=state, doc=doc, model=model) -> None:
            model.predictive_logpdf_state(state, doc)

        def absorb(i: int, state=state, doc=doc, model=model) -> None:
            model.absorb(state, i % K_MULT, doc, 0.5)

        def batch(i: int, post=post, doc=doc, model=model) -> None:
            model.predictive_logpdf(doc, post)

        rows.append({"V": V, "predictive_s": per_call(predictive, repeat),
                     "absorb_s": per_call(absorb, repeat),
                     "batch_predictive_s": per_call(batch, repeat)})
    return rows


def us(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} us"


def ratio(r: float | None) -> str:
    return "   (-)" if r is None else f"(x{r:4.2f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per figure (the best)")
    ap.add_argument("--dims", type=int, nargs="+", default=list(DIMS),
                    help="dimensions D for the Gaussian (each the double of the last, for ratios)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)

    g = gauss_rows(args.dims, args.repeat, rng)
    print(f"Gauss, K={K_GAUSS}: time per call (ratio to the previous D; 4 = O(D²), 8 = O(D³))")
    print(f"{'D':>5} {'absorb (rank-one)':>22} {f'predictive vs K={K_GAUSS}':>24} "
          f"{'cholesky(B) from scratch':>26}")
    for row in g:
        print(f"{row['D']:>5} {us(row['absorb_s'])} {ratio(row['absorb_ratio'])} "
              f"{us(row['predictive_s'])} {ratio(row['predictive_ratio']):>11} "
              f"{us(row['cholesky_s'])} {ratio(row['cholesky_ratio']):>13}")

    m = mult_rows(args.repeat, rng)
    print(f"\nMult, K={K_MULT}, one document of {NNZ} distinct words: time per call")
    print(f"{'V':>8} {'predictive (state)':>19} {'absorb':>12} {'batch predictive_logpdf':>24}")
    for row in m:
        print(f"{row['V']:>8} {us(row['predictive_s']):>19} {us(row['absorb_s'])} "
              f"{us(row['batch_predictive_s']):>24}")
    first, last = m[0], m[-1]
    print(f"V x{last['V'] // first['V']}: predictive from the state "
          f"x{last['predictive_s'] / first['predictive_s']:.2f}, absorb "
          f"x{last['absorb_s'] / first['absorb_s']:.2f}, batch predictive "
          f"x{last['batch_predictive_s'] / first['batch_predictive_s']:.2f}")

    if args.json is not None:
        out = {"gauss": {"K": K_GAUSS, "rows": g},
               "mult": {"K": K_MULT, "nnz": NNZ, "rows": m},
               "machine": {"cpus": os.cpu_count(), "numpy": np.__version__,
                           "scipy": scipy.__version__, "repeat": args.repeat}}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
