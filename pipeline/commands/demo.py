"""``bnpmix demo``: ingest an embedded synthetic data set, fit it and score the fit against the
true components."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

from bnpmix.pipeline.usage import UsageError

from .fitting import format_fit


def cmd_demo(args: argparse.Namespace) -> int:
    """`bnpmix demo`: toy patches ingested, a memo fit from K = 1, its ARI and NMI against
    the true components."""
    from bnpmix.datasets import TOY_PATCHES_OBS, toy_patch_covariances, toy_patches
    from bnpmix.pipeline.evaluate import evaluate
    from bnpmix.pipeline.fit import fit, job_config
    from bnpmix.storage import ingest_array

    if args.out is not None and Path(args.out).exists() and any(Path(args.out).iterdir()):
        raise UsageError(f"--out {args.out}: not empty; the demo writes its corpus and run "
                         "into a new or empty directory")
    X, labels = toy_patches(n=args.n, seed=args.seed)
    keep = contextlib.nullcontext(args.out) if args.out is not None else \
        tempfile.TemporaryDirectory(prefix="bnpmix-demo-")
    with keep as where:
        corpus, run = Path(where) / "toy-patches", Path(where) / "run"
        ingest_array(X, corpus, partition_rows=max(1, args.n // 20), columns={"label": labels})
        print(f"demo: {args.n} synthetic 5x5 patches from 8 zero-mean edge components, "
              f"20 partitions; memoized VB with births, merges and deletes from K = 1")
        laps = {} if args.laps is None else {"laps": args.laps}
        summary = fit(corpus, run, job_config(obs=TOY_PATCHES_OBS, seed=args.seed, **laps))
        print(format_fit(summary, run if args.out is not None else "(temporary)"))
        scores = evaluate(run, corpus, "label")
        oracle = oracle_ari(X, labels, toy_patch_covariances())
        print(f"agreement with the true components: ARI {scores['ari']:.3f} "
              f"(the true parameters' own assignments: ARI {oracle:.3f}), "
              f"NMI {scores['nmi']:.3f}")
    print(demo_next(corpus, run) if args.out is not None else
          "to keep the corpus and the run and look at them: bnpmix demo --out DIR")
    return 0


def demo_next(corpus: Path, run: Path) -> str:
    """What to try next on the demo's corpus and run."""
    return "\n".join([
        "next:",
        f"  bnpmix info {run}                     # the run: K, weights, sizes, ELBO",
        f"  bnpmix show {run}                     # each cluster's weight, size and mean",
        f"  bnpmix report {run}                   # an HTML report in {run / 'report'}",
        f"  bnpmix evaluate {run} --heldout {corpus} --label-column label",
        f"  bnpmix fit {corpus} --out {run.parent / 'run-vb'} --algorithm vb --K 20"
        "   # another engine"])


def oracle_ari(X, labels, covariances) -> float:
    """ARI of the assignments the true (equal-weight, zero-mean) components would make."""
    import numpy as np

    from bnpmix.algorithms.metrics import adjusted_rand_index

    L = np.linalg.cholesky(covariances)
    U = np.linalg.inv(L)
    logdet = 2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(1)
    quad = np.stack([((X @ u.T) ** 2).sum(1) for u in U], axis=1)
    return adjusted_rand_index(labels, (-0.5 * quad - 0.5 * logdet).argmax(1))
