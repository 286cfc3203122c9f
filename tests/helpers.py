"""Helpers shared by the tests (on sys.path through pytest's `pythonpath`)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

DASK = str(Path(sys.executable).parent / "dask")  # the `dask` command of this environment
ENV = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "5s"}


def cli(*args: object, cwd: Path | str | None = None) -> subprocess.CompletedProcess[str]:
    """`bnpmix ARGS` run in this process, as a CompletedProcess: ``pipeline.cli.main`` (what the
    console script's ``entry()`` returns before its ``os._exit``) with stdout and stderr
    captured, argparse's SystemExit (usage errors: 2, --help: 0) taken as the exit code, the
    SIGTERM handler main() installs put back, Dask's connect timeout that of ``ENV``. For the
    tests where the process is not what is tested: exit codes through the console script,
    signals, ``os._exit``, output buffering and start-up time need a real process
    (``python -m bnpmix``). Not thread-safe (stdout and stderr are the process's)."""
    import dask

    from bnpmix.pipeline.cli import main

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    handler = signal.getsignal(signal.SIGTERM)
    try:
        with (contextlib.redirect_stdout(out), contextlib.redirect_stderr(err),
              contextlib.chdir(cwd or os.getcwd()), warnings.catch_warnings(),
              dask.config.set({"distributed.comm.timeouts.connect": "5s"})):
            warnings.simplefilter("default")  # as a fresh interpreter shows them
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, handler)
    return subprocess.CompletedProcess(["bnpmix", *argv], code, out.getvalue(), err.getvalue())


def cli_process(*args: object, env: dict[str, str] | None = None, cwd: Path | str | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`bnpmix ARGS` as its own process (``python -m bnpmix``), output captured as text: what
    ``cli`` gives, for the tests where the process is under test. ``env``: variables set over
    this process's environment."""
    return subprocess.run([sys.executable, "-m", "bnpmix", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_scheduler(folder: Path, *args: str,
                    env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """A `dask scheduler` process on loopback and its address, once it listens. It picks its own
    port and writes its address to FOLDER/scheduler.json: a port chosen here and bound later can
    be taken in between (a CI run's scheduler never listened). ``args`` are passed on (TLS). A
    scheduler that exits, or writes no address within 60 s, fails the caller and is stopped."""
    info = Path(folder) / "scheduler.json"
    proc = subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0",
                             "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(info),
                             *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=ENV if env is None else env)
    deadline = time.time() + 60
    try:
        while True:
            try:
                return proc, json.loads(info.read_text())["address"]
            except (OSError, ValueError, KeyError):  # not written yet, or half-written
                assert proc.poll() is None, f"dask scheduler exited with code {proc.returncode}"
                assert time.time() < deadline, "dask scheduler wrote no address within 60 s"
                time.sleep(0.1)
    except BaseException:
        stop(proc)
        raise


def stop(*procs: subprocess.Popen) -> None:
    """Terminate processes this test session started (by their handles), killing any that
    outlive 10 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class DaskCluster:
    """A scheduler and ``workers`` (two) single-threaded workers, each its own process, on
    loopback."""

    def __init__(self, env: dict[str, str] | None = None, workers: int = 2) -> None:
        self.env = ENV if env is None else {**ENV, **env}
        self._dir = tempfile.TemporaryDirectory(prefix="bnpmix-dask-")
        self.scheduler, self.address = start_scheduler(Path(self._dir.name), env=self.env)
        self.workers: list[subprocess.Popen] = []
        try:
            self.workers = [self.start_worker() for _ in range(workers)]
            self.wait_for_workers(workers)
        except BaseException:
            self.close()  # nothing started here outlives a failed start
            raise

    def start_worker(self) -> subprocess.Popen:
        return subprocess.Popen(
            [DASK, "worker", self.address, "--nthreads", "1",
             "--host", "127.0.0.1", "--no-dashboard", "--death-timeout", "30"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client

        deadline = time.time() + 60
        while True:
            try:
                with Client(self.address, timeout="5s") as client:
                    client.wait_for_workers(n, timeout=60)
                    return
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        stop(*self.workers, self.scheduler)  # only the processes started here
        self._dir.cleanup()


def write_docword(path: Path, X: sp.csr_matrix, vocab: list[str] | None = None) -> None:
    """Write a CSR count matrix in the UCI docword format (1-based triples sorted by document)."""
    X = sp.csr_matrix(X)
    X.sort_indices()
    coo = X.tocoo()
    lines = [str(X.shape[0]), str(X.shape[1]), str(X.nnz)]
    triples = zip(coo.row, coo.col, coo.data, strict=True)
    lines += [f"{d + 1} {w + 1} {int(c)}" for d, w, c in triples]
    path.write_text("\n".join(lines) + "\n")
    if vocab is not None:
        name = path.name.removeprefix("docword.")
        (path.parent / f"vocab.{name}").write_text("\n".join(vocab) + "\n")


def random_counts(rng: np.random.Generator, D: int, V: int, density: float) -> sp.csr_matrix:
    """A random document-word count matrix with positive integer counts."""
    X = sp.random(D, V, density=density, format="csr", random_state=rng, dtype=np.float64)
    X.data = rng.integers(1, 6, size=X.nnz).astype(np.float64)
    return X


def engine_for(corpus_dir: Path, **options):
    """A started engine over a corpus, in this process (synchronous executor); options as in
    job files."""
    from bnpmix.pipeline.fit import job_config
    from bnpmix.pipeline.runtime.context import make_context
    from bnpmix.pipeline.runtime.engine import engine_class
    from bnpmix.pipeline.runtime.executors import LocalExecutor
    from bnpmix.storage import Corpus

    job = job_config(**options)
    corpus = Corpus(corpus_dir)
    ctx = make_context(corpus, job.run, job.model, LocalExecutor(corpus, "synchronous"))
    engine = engine_class(job.algorithm)(ctx, job.engine)
    engine.start()
    return engine


def run_to_end(engine):
    while not engine.done:
        engine.step()
    return engine


def run_lap(engine) -> None:
    """Step the engine up to and including its next lap end."""
    while not engine.step().lap_end:
        pass


SEQ_CENTRES = np.array([[0.0, 0.0], [6.0, 6.0], [6.0, -6.0]])
SEQUENCES = (10, 20, 30)


def sequence_items(rng: np.random.Generator, n: int, times: np.ndarray):
    """n items in each of SEQUENCES from three 2-D unit Gaussians at SEQ_CENTRES, sorted by
    component, at sorted times drawn from ``times``: a DataFrame (x, y, label, sequence,
    time) that every engine can fit, the sequential ones included."""
    import pandas as pd

    parts = []
    for s in SEQUENCES:
        z = np.sort(rng.integers(0, 3, n))
        X = SEQ_CENTRES[z] + rng.standard_normal((n, 2))
        parts.append(pd.DataFrame({"x": X[:, 0], "y": X[:, 1], "label": z, "sequence": s,
                                   "time": np.sort(rng.choice(times, n))}))
    return pd.concat(parts, ignore_index=True)


def blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n items from three unit Gaussians at (0, 0), (8, 0) and (0, 8), and their labels."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
    z = rng.integers(3, size=n)
    return centres[z] + rng.standard_normal((n, 2)), z


@contextlib.contextmanager
def local_client():
    """A distributed.Client on a LocalCluster of two single-threaded worker processes on
    loopback, closed afterwards."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def full_disk_at_checkpoints(monkeypatch) -> None:
    """Every checkpoint write fails as on a full disk (ENOSPC, raised by the writer of its
    temporary file), and a checkpoint is due after every lap end (bnpmix.checkpoint-interval 0
    until the test ends)."""
    import errno

    import dask

    from bnpmix.pipeline.runtime import checkpoint
    from bnpmix.storage.atomic import atomic_write

    def full_disk(path, meta, arrays):
        def write(tmp):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))

        return atomic_write(path, write)

    monkeypatch.setattr(checkpoint, "write_arrays_atomic", full_disk)
    monkeypatch.setitem(dask.config.config["bnpmix"], "checkpoint-interval", 0)
