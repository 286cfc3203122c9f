"""The mfa E-step (MFA.E_loglik) in GFLOP/s against this machine's matrix product rate, measured
in the same run (a 2000 x 2000 product, timed again beside every row; the best of its figures
is that row's reference).

Flops counted are those of the one product per item block, 2 D K (q + 1) per item (the linear
and the K factor terms); the K q squares and sums (about 2 K q per item) are not. The
global-update column times ``post`` (the coordinate ascent from a spectral start) of K
components on the same items' statistics, and ``stats`` the O(N K D²) second moments the
summaries keep (a gauss E-step pays the same).

    python benchmarks/speed/mfa_estep.py [--n 100000] [--dims 64 128] [--ks 10 50] [--repeat 3]
                                   [--threads N] [--json [PATH]]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for _common
from _common import RESULTS, best_time
from bnpmix.algorithms.obs.mfa import MFA


def matmul_rate(repeat: int) -> float:
    """GFLOP/s of a 2000 x 2000 product."""
    A = np.random.default_rng(0).normal(size=(2000, 2000))
    return 2 * 2000**3 / best_time(lambda: A @ A, repeat) / 1e9


def row(n: int, D: int, K: int, repeat: int) -> dict:
    rng = np.random.default_rng(D * 1000 + K)
    q = 3
    z = rng.integers(K, size=n)
    X = (3 * rng.normal(size=(K, D)))[z] + np.einsum(
        "ndq,nq->nd", rng.normal(size=(K, D, q))[z], rng.normal(size=(n, q))) + rng.normal(
        size=(n, D))
    model = MFA.default(X[:2000])
    R = np.eye(K)[z]
    stats = model.stats(X, R)
    post = model.post(R.sum(0), stats)
    t_estep = best_time(lambda: model.E_loglik(X, post), repeat)
    t_post = best_time(lambda: model.post(R.sum(0), stats), repeat)
    t_stats = best_time(lambda: model.stats(X, R), 1)
    gflop = 2 * n * D * K * (model.q + 1) / 1e9
    ref = max(matmul_rate(repeat), matmul_rate(repeat))
    return {"n": n, "D": D, "K": K, "q": model.q, "estep_s": t_estep,
            "estep_gflops": gflop / t_estep, "matmul_gflops": ref,
            "share_of_matmul": gflop / t_estep / ref, "post_s": t_post, "stats_s": t_stats,
            "ranks": model.ranks(post).tolist()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--ks", type=int, nargs="+", default=[10, 50])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="BLAS threads (threadpoolctl)")
    p.add_argument("--json", nargs="?", const=str(RESULTS / "mfa_estep.json"), default=None)
    args = p.parse_args(argv)
    from threadpoolctl import threadpool_limits

    rows = []
    with threadpool_limits(args.threads):
        print(f"{'D':>4} {'K':>4} {'q':>3} {'E-step s':>9} {'GFLOP/s':>8} {'matmul':>7} "
              f"{'share':>6} {'post s':>7} {'stats s':>8}")
        for D in args.dims:
            for K in args.ks:
                r = row(args.n, D, K, args.repeat)
                rows.append(r)
                print(f"{D:>4} {K:>4} {r['q']:>3} {r['estep_s']:>9.3f} "
                      f"{r['estep_gflops']:>8.2f} {r['matmul_gflops']:>7.2f} "
                      f"{r['share_of_matmul']:>6.2f} {r['post_s']:>7.3f} {r['stats_s']:>8.3f}",
                      flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"n": args.n, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
