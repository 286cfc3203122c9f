"""Shared by the benchmark scripts: temporary corpora, one timed fit, scores from assignments,
--json and its writer. Its imports are the standard library's, bnpmix's and numpy's on use, so
a script that measures its own memory (speed/ingest.py) can import it."""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from bnpmix.pipeline.config import JobConfig

# where scripts write their figures (--json) by default
RESULTS = Path(__file__).resolve().parent / "results"
# corpora and runs, removed at exit unless BNPMIX_BENCH_KEEP=1 (to read a run's trace.csv)
KEEP = os.environ.get("BNPMIX_BENCH_KEEP") == "1"
WORK = Path(tempfile.mkdtemp(prefix="bnpmix-bench-"))
if not KEEP:
    atexit.register(shutil.rmtree, WORK, ignore_errors=True)
# what bnpmix processes started by a benchmark run with: a short connect timeout to our cluster
ENV = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "5s"}


def json_option(ap: argparse.ArgumentParser, name: str) -> None:
    """``--json [PATH]``, as every script takes it: write the figures to PATH, or alone to
    results/<name>.json; without it the script only prints."""
    ap.add_argument("--json", nargs="?", type=Path, const=RESULTS / f"{name}.json", default=None,
                    help="also write the figures to this file (alone: %(const)s)")


def write_json(path: Path | None, figures: dict) -> None:
    """Write a script's figures to ``path`` (its --json), if it was given: indented, numpy
    scalars and arrays as plain numbers and lists, paths as text."""
    def plain(x):
        return x.tolist() if hasattr(x, "tolist") else str(x)

    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figures, indent=1, default=plain) + "\n")


def corpus_of(X, labels: np.ndarray, n_partitions: int, name: str) -> Path:
    """Ingest X (dense array or CSR) with its labels into n_partitions partitions."""
    import scipy.sparse as sp

    from bnpmix.storage import ingest_array

    out = WORK / name
    rows = -(-X.shape[0] // n_partitions)
    if sp.issparse(X):
        from bnpmix.storage.corpus import Manifest
        from bnpmix.storage.writer import new_corpus

        X = sp.csr_matrix(X)
        manifest = Manifest(kind="bow", dim=X.shape[1], dtype="int32", columns=("label",))
        with new_corpus(out, manifest) as writer:
            for s in range(0, X.shape[0], rows):
                B = X[s:s + rows]
                writer.add_bow(B.indptr, B.indices, B.data, {"label": labels[s:s + rows]})
    else:
        ingest_array(X, out, partition_rows=rows, columns={"label": labels})
    return out


def run_fit(corpus: Path, cfg: JobConfig, name: str) -> dict:
    """Fit, then score the run's own hard assignments against the corpus labels."""
    from bnpmix.algorithms.metrics import adjusted_rand_index, normalized_mutual_info
    from bnpmix.pipeline.fit import fit
    from bnpmix.storage import Corpus, RunDir

    out = WORK / f"run-{name}"
    t = time.perf_counter()
    summary = fit(corpus, out, cfg)
    seconds = time.perf_counter() - t
    assigned = RunDir(out).load_assignments()["cluster"].to_numpy()
    labels = Corpus(corpus).read_all().columns["label"]
    return {
        "seconds": seconds, "K": summary["K"], "K_eff": summary["K_effective"],
        "elbo_per_item": summary["elbo_per_item"], "weights": summary["weights"],
        "ari": adjusted_rand_index(labels, assigned),
        "nmi": normalized_mutual_info(labels, assigned),
        "run": out,
    }


def oracle_ari(log_density: np.ndarray, labels: np.ndarray) -> float:
    """ARI of the assignments the true parameters would make (argmax of their log densities)."""
    from bnpmix.algorithms.metrics import adjusted_rand_index

    return adjusted_rand_index(labels, log_density.argmax(1))


class LocalDaskCluster:
    """A `dask scheduler` and `dask worker` processes (single-threaded unless ``nthreads``;
    more `dask worker` options in ``worker_args``, more environment in ``worker_env``) on
    127.0.0.1, started here (each child runs ``preexec_fn`` first, e.g. to join a memory
    cgroup) and ended by their PIDs."""

    def __init__(self, workers: int, nthreads: int = 1, worker_args: tuple[str, ...] = (),
                 preexec_fn=None, worker_env: dict[str, str] | None = None) -> None:
        import socket
        import subprocess
        import sys

        from distributed import Client

        dask = str(Path(sys.executable).parent / "dask")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{port}"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": ENV,
                 "preexec_fn": preexec_fn}
        self.scheduler = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port",
                                           str(port), "--dashboard-address", "127.0.0.1:0"],
                                          **quiet)
        self.workers = [subprocess.Popen([dask, "worker", self.address, "--nthreads", str(nthreads),
                                          "--host", "127.0.0.1", "--no-dashboard", *worker_args],
                                         **quiet | {"env": {**ENV, **(worker_env or {})}})
                        for _ in range(workers)]
        deadline = time.time() + 60
        while True:
            try:
                with Client(self.address, timeout="5s") as client:
                    client.wait_for_workers(workers, timeout=60)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) used so far by the scheduler and each worker, a worker
        counted with its nanny's child processes."""
        import psutil

        def tree(pid: int) -> float:
            proc = psutil.Process(pid)
            return sum(sum(p.cpu_times()[:2]) for p in [proc, *proc.children(recursive=True)])

        return {"scheduler": tree(self.scheduler.pid),
                **{f"worker {i}": tree(w.pid) for i, w in enumerate(self.workers)}}

    def close(self) -> None:
        import subprocess

        for p in [*self.workers, self.scheduler]:
            p.terminate()
        for p in [*self.workers, self.scheduler]:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:  # a worker without a nanny may not stop at once
                p.kill()
                p.wait()


def best_time(f, repeat: int) -> float:
    """The shortest of ``repeat`` timings of f(), after one call that is not timed (warm-up)."""
    f()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def converge(X, obs, alloc, S, tol: float = 1e-12, max_iter: int = 1000):
    """Full-data VB (Eq. 9 and 10 in turn) from the summary S until the ELBO changes by at most
    tol relative: the model, its summary and the ELBO (Eq. 8)."""
    from bnpmix.algorithms.mixture import Mixture
    from bnpmix.algorithms.vb.local import batch_step

    old = float("-inf")
    for _ in range(max_iter):
        model = Mixture.from_summary(obs, alloc, S)
        S = batch_step(X, obs, model.globals()).summary
        elbo = model.elbo(S)
        if abs(elbo - old) <= tol * abs(elbo):
            break
        old = elbo
    return model, S, elbo
