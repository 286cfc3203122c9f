"""The tied-gauss E-step (TiedGauss.local_step) in GFLOP/s against this machine's matrix
product rate, measured in the same run (a 2000 x 2000 product).

Flops counted are those the BLAS calls execute per item: the log-weights a_k·(x - c) (2 K D),
the statistics Σ r (x - c) (2 K D) and the pooled scatter Σ (x - c)(x - c)ᵀ as one syrk (D (D + 1));
the softmax, its logarithms and the entropies (about 10 K elementwise operations per item) are
not counted, and neither is the centring (D). No whitening of the items is done: the term
|U (x - c)|² is the same for every component and cancels from R and H. "steps on the same
items" is the birth's case (ObsModel.repeated), where the scatter is made once. The profile
splits one step into its BLAS products and the rest, timed separately on the same blocks.
The matrix product is timed again beside every row (the best of its two figures is that row's
reference): on a machine shared with other work both figures move. --threads N limits the
BLAS threads of both (threadpoolctl): with 2 threads on 2 busy cores, products of a tall item
block with a small matrix stalled where one thread did not (measured).

    python benchmarks/speed/tied_estep.py [--n 100000] [--dims 25 64 128] [--ks 10 25 100]
                                    [--repeat 5] [--threads N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import best_time
from bnpmix.algorithms.obs import wishart as W
from bnpmix.algorithms.obs.tied_gauss import ESTEP_BYTES, TiedGauss, TiedItems


def matmul_rate(repeat: int) -> float:
    """GFLOP/s of one 2000 x 2000 by 2000 x 2000 product (2 n³ flops), best of ``repeat``."""
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(2000, 2000)), rng.normal(size=(2000, 2000))
    return 2 * 2000**3 / best_time(lambda: A @ B, repeat) / 1e9


def problem(n: int, D: int, K: int, seed: int = 0):
    """n items of K tied clusters, the model's default prior and the posterior of the true
    assignment (so responsibilities are realistic), E[log w] uniform."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, 3.0, (K, D))
    z = rng.integers(0, K, n)
    A = rng.normal(size=(D, D)) / np.sqrt(D) + np.eye(D)
    X = means[z] + rng.normal(size=(n, D)) @ A
    model = TiedGauss.default(X[:10_000])
    R = np.eye(K)[z]
    post = model.post(R.sum(0), model.stats(X, R))
    return model, X, post, np.full(K, -np.log(K))


def profile(model: TiedGauss, X: np.ndarray, post: dict, Elogw: np.ndarray,
            repeat: int) -> tuple[float, float]:
    """Seconds of one step's BLAS products alone and of its softmax alone, on the same blocks
    as local_step (A and b as it makes them)."""
    F = TiedItems(X)
    n, D = X.shape
    K = len(Elogw)
    block = max(64, ESTEP_BYTES // (8 * (D + K)))
    Z = (post["m"] - F.center) @ post["U"].T
    A = float(post["nu"]) * (Z @ post["U"])
    b = Elogw - 0.5 * float(post["nu"]) * (Z * Z).sum(1)
    L, RT, t = np.empty((K, block)), np.empty((K, n)), np.empty(block)
    blocks = [(rows, Y.copy()) for rows, Y in F.blocks(block)]

    def blas():
        for rows, Y in blocks:
            m = len(Y)
            np.matmul(A, Y.T, out=L[:, :m])
            _ = RT[:, rows] @ Y
            _ = Y.T @ Y

    def rest():
        for rows, Y in blocks:
            m = len(Y)
            L[:, :m] = b[:, None]
            W.softmax_columns(L[:, :m], RT[:, rows], t[:m])

    return best_time(blas, repeat), best_time(rest, repeat)


def measure(n: int, D: int, K: int, repeat: int) -> dict:
    """One row: the step's time and rate, on the same items again, its profile, and the matrix
    product's rate measured before and after it (the better of the two)."""
    model, X, post, Elogw = problem(n, D, K)
    before = matmul_rate(repeat)
    flops = n * (4 * D * K + D * (D + 1))
    seconds = best_time(lambda: model.local_step(X, post, Elogw), repeat)
    F = model.repeated(X)
    model.local_step(F, post, Elogw)  # makes F's scatter
    again = best_time(lambda: model.local_step(F, post, Elogw), repeat)
    blas, rest = profile(model, X, post, Elogw, repeat)
    peak = max(before, matmul_rate(repeat))
    return {"n": n, "D": D, "K": K, "gflop": flops / 1e9, "seconds": seconds,
            "matmul_gflops": peak, "gflops": flops / seconds / 1e9,
            "ratio": flops / seconds / 1e9 / peak, "repeated_seconds": again,
            "repeated_ratio": n * 4 * D * K / again / 1e9 / peak,
            "blas_seconds": blas, "rest_seconds": rest}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dims", type=int, nargs="+", default=[25, 64, 128])
    ap.add_argument("--ks", type=int, nargs="+", default=[10, 25, 100])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads (default: as set)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    if args.threads is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    first = matmul_rate(args.repeat)
    print(f"2000 x 2000 matmul: {first:.2f} GFLOP/s (best of {args.repeat}; threads: "
          f"{args.threads or 'as set'})")
    print(f"{'D':>4} {'K':>4} {'GFLOP':>7} {'ms':>8} {'GFLOP/s':>8} {'matmul':>7} {'ratio':>6} | "
          f"{'repeat ms':>9} {'ratio':>6} | {'BLAS ms':>8} {'rest ms':>8}")
    rows = []
    for D in args.dims:
        for K in args.ks:
            row = measure(args.n, D, K, args.repeat)
            rows.append(row)
            seconds, again, peak = row["seconds"], row["repeated_seconds"], row["matmul_gflops"]
            blas, rest = row["blas_seconds"], row["rest_seconds"]
            print(f"{D:>4} {K:>4} {row['gflop']:>7.2f} {seconds * 1e3:>8.1f} "
                  f"{row['gflops']:>8.2f} {peak:>7.2f} {row['ratio']:>6.2f} | {again * 1e3:>9.1f} "
                  f"{row['repeated_ratio']:>6.2f} | {blas * 1e3:>8.1f} {rest * 1e3:>8.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"threads": args.threads, "rows": rows}, indent=2)
                             + "\n")
        print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
