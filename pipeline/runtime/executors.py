"""Executors: where partition visits run. One interface (executor_base.py): two kinds, and a view
of either.

- ``LocalExecutor``: in this process, ``threads`` (a thread pool) or ``synchronous`` (each
  submit runs at once). A pool of more than one thread limits BLAS to one thread per call while
  it is open (as Dask's worker processes do): the pool's threads are the parallelism, and BLAS
  threads on top of them oversubscribe the cores, busy-waiting (measured 3-5x slower fits).
- ``SubsetExecutor``: another executor's visits to some of its partitions (a ``Corpus.subset``
  view: --obs auto's race on a large corpus).
- ``DaskExecutor`` (dask_executor.py): tasks on a Dask cluster, placed by rendezvous hashing
  with bounded loads (placement.py).

``open_executor`` opens the one a run names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from threadpoolctl import threadpool_limits

from bnpmix.storage import Corpus

from .dask_executor import DaskExecutor
from .data import PartitionCache, partition_refs
from .executor_base import BatchFn, Executor, Pending, TaskCounts, task_list
from .placement import bounded_placement, partition_key, ranking, rendezvous, submit_kwargs

__all__ = ["DaskExecutor", "Executor", "LocalExecutor", "Pending", "SubsetExecutor",
           "TaskCounts", "bounded_placement", "open_executor", "partition_key", "ranking",
           "rendezvous", "submit_kwargs"]


class LocalExecutor(Executor):
    """Partition visits in this process: a thread pool (``threads``) or one after another,
    at submit time (``synchronous``)."""

    def __init__(self, corpus: Corpus, mode: str = "threads", workers: int = 2,
                 cache_bytes: int | None = None) -> None:
        if mode not in ("threads", "synchronous"):
            raise ValueError(f"local scheduler must be threads or synchronous, not {mode!r}")
        super().__init__()
        self.refs = partition_refs(corpus)
        self.mode = mode
        self.cache = PartitionCache(cache_bytes)
        self._threads = workers if mode == "threads" else 1
        self._pool = ThreadPoolExecutor(workers) if mode == "threads" else None
        self._blas = threadpool_limits(1, user_api="blas") if self._threads > 1 else None

    @property
    def parallelism(self) -> int:
        return self._threads

    def submit(self, fn: BatchFn, indices: Sequence[int], *shared: Any,
               payloads: Sequence[Any] | None = None) -> Pending:
        tasks = task_list(indices, payloads)
        warm = self._warm(i for i, _ in tasks)

        def one(task: tuple[int, tuple]) -> tuple[Any, bool]:
            i, own = task
            batch, hit = self.cache.lookup(self.refs[i])
            return fn(batch, *own, *shared), hit

        def unwrap(outcomes: Iterable[tuple[Any, bool]]) -> list[Any]:
            values = []
            for (i, _), was_warm, (value, hit) in zip(tasks, warm, outcomes, strict=True):
                self._record(i, hit, was_warm, False)
                values.append(value)
            return values

        if self._pool is None:  # run now; an error is kept and raised by result(), as threads'
            pending = Pending(lambda: unwrap(one(t) for t in tasks))
            with contextlib.suppress(Exception):
                pending.result()
            return pending
        futures = [self._pool.submit(one, t) for t in tasks]

        def collect() -> list[Any]:
            try:
                return unwrap([f.result() for f in futures])
            except BaseException:
                for f in futures:
                    f.cancel()
                raise

        return Pending(collect)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        if self._blas is not None:
            self._blas.restore_original_limits()
            self._blas = None

    def describe(self) -> str:
        return f"local ({self.mode})"


class SubsetExecutor(Executor):
    """Another executor's visits to a subset of its corpus's partitions (``Corpus.subset``):
    partition i here is partition ``origin[i]`` there. Its tasks are the other's, counted
    there; closing it leaves the other open."""

    def __init__(self, inner: Executor, origin: Sequence[int]) -> None:
        super().__init__()
        self.inner = inner
        self.origin = list(origin)

    @property
    def parallelism(self) -> int:
        return self.inner.parallelism

    def submit(self, fn: BatchFn, indices: Sequence[int], *shared: Any,
               payloads: Sequence[Any] | None = None) -> Pending:
        return self.inner.submit(fn, [self.origin[i] for i in indices], *shared,
                                 payloads=payloads)

    def describe(self) -> str:
        return f"{self.inner.describe()}, {len(self.origin)} of its partitions"


@contextlib.contextmanager
def open_executor(corpus: Corpus, scheduler: str = "threads", cluster: str | None = None,
                  threads: int = 2, cache_bytes: int | None = None,
                  worker_wait: float | None = None, client: Any = None) -> Iterator[Executor]:
    """The executor a run names: ``client`` (a distributed.Client of the caller's: used, never
    closed), local threads / synchronous, this process's current Client (``distributed``), or a
    Dask cluster reached by address or started from a profile (closed at the end). None for
    ``cache_bytes`` and ``worker_wait``: Dask config (``bnpmix.cache-bytes``,
    ``bnpmix.worker-wait``)."""
    from bnpmix.pipeline import clusters
    from bnpmix.pipeline.addresses import is_address

    client = clusters.process_client(scheduler) if client is None else client
    if client is not None:
        clusters.wait_for_a_worker(client, client.scheduler.address, worker_wait)
        with contextlib.closing(DaskExecutor(client, corpus, cache_bytes)) as ex:
            yield ex
        return
    if cluster is None and not is_address(scheduler):
        with contextlib.closing(LocalExecutor(corpus, scheduler, threads, cache_bytes)) as ex:
            yield ex
        return
    with clusters.open_client(scheduler, cluster, worker_wait) as own, \
            contextlib.closing(DaskExecutor(own, corpus, cache_bytes)) as ex:
        yield ex
