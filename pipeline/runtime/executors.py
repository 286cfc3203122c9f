"""Executors: where partition visits run. One interface, two kinds.

``executor.map(fn, indices, *shared)`` applies ``fn(batch, *shared)`` to each partition in
``indices`` and returns the results in the order of ``indices`` (never in completion order), so
local and distributed runs reduce identically. ``shared`` (the global parameters, the lap's merge
pairs, ...) is shipped once per call, not once per task. With ``payloads=[p_1, ...]`` (one per
index: a partition's own state from the driver's store, its random seed) the call is
``fn(batch, p_i, *shared)``: a payload travels with its partition's task only.

- ``LocalExecutor``: in this process, ``threads`` (a thread pool) or ``synchronous``.
- ``DaskExecutor``: a ``distributed.Client`` (opened for the run, or the caller's own, which the
  run never closes). Each worker reads its partitions itself (pyarrow) and keeps them in a
  per-process LRU cache across laps; the shared arguments travel as the result of a task
  (``submit(identity, ...)``), which Dask can recompute after losing a worker, unlike scattered
  data. Failed tasks are retried; a partition that still fails stops the run with an error
  naming it.
"""

from __future__ import annotations

import contextlib
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bnpmix.storage import BnpmixError, Corpus
from bnpmix.storage.objectstore import storage_options

from ..settings import setting
from .data import PartitionCache, PartitionRef, partition_refs

BatchFn = Callable[..., Any]


class Executor(ABC):
    """Runs ``fn(batch, *shared)`` over partitions, returning results in the given order."""

    corpus_path: str

    @abstractmethod
    def map(self, fn: BatchFn, indices: Sequence[int], *shared: Any,
            payloads: Sequence[Any] | None = None) -> list[Any]:
        """Results of fn on partitions ``indices``, in that order."""

    def close(self) -> None:
        """Release what the executor holds (threads, the client)."""
        return None

    def describe(self) -> str:
        return type(self).__name__


class LocalExecutor(Executor):
    """Partition visits in this process: a thread pool (``threads``) or one after another."""

    def __init__(self, corpus: Corpus, mode: str = "threads", workers: int = 2,
                 cache_bytes: int | None = None) -> None:
        if mode not in ("threads", "synchronous"):
            raise ValueError(f"local scheduler must be threads or synchronous, not {mode!r}")
        self.refs = partition_refs(corpus)
        self.mode = mode
        self.cache = PartitionCache(cache_bytes)
        self._pool = ThreadPoolExecutor(workers) if mode == "threads" else None

    def map(self, fn: BatchFn, indices: Sequence[int], *shared: Any,
            payloads: Sequence[Any] | None = None) -> list[Any]:
        tasks = _tasks(indices, payloads)

        def one(task: tuple[int, tuple]) -> Any:
            i, own = task
            return fn(self.cache.get(self.refs[i]), *own, *shared)

        if self._pool is None or len(tasks) == 1:
            return [one(t) for t in tasks]
        return list(self._pool.map(one, tasks))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()

    def describe(self) -> str:
        return f"local ({self.mode})"


# one cache per worker process; only a cache: anything in it can be read again from the corpus
_WORKER_CACHE: PartitionCache | None = None


def _worker_cache(max_bytes: int) -> PartitionCache:
    global _WORKER_CACHE
    if _WORKER_CACHE is None:
        _WORKER_CACHE = PartitionCache(max_bytes)
    elif _WORKER_CACHE.max_bytes != max_bytes:
        _WORKER_CACHE.resize(max_bytes)
    return _WORKER_CACHE


def _identity(x: Any) -> Any:
    return x


def _tasks(indices: Sequence[int], payloads: Sequence[Any] | None) -> list[tuple[int, tuple]]:
    """(partition, its own leading arguments): (payload,) when payloads are given, else ()."""
    if payloads is None:
        return [(int(i), ()) for i in indices]
    if len(payloads) != len(indices):
        raise ValueError(f"{len(payloads)} payloads for {len(indices)} partitions")
    return [(int(i), (p,)) for i, p in zip(indices, payloads, strict=True)]


def _on_worker(ref: PartitionRef, cache_bytes: int, fn: BatchFn, own: tuple,
               shared: tuple) -> Any:
    return fn(_worker_cache(cache_bytes).get(ref), *own, *shared)


class DaskExecutor(Executor):
    """Partition visits as tasks on a Dask cluster (workers read the corpus themselves).
    ``cache_bytes`` (each worker's partition cache) and ``retries`` (per task) are fixed here,
    on the driver, and travel with the tasks; None: Dask config ``bnpmix.cache-bytes`` and
    ``bnpmix.task-retries``."""

    def __init__(self, client: Any, corpus: Corpus, cache_bytes: int | None = None,
                 retries: int | None = None) -> None:
        self.client = client
        self.refs = partition_refs(corpus)
        self.corpus_path = corpus.uri
        options = storage_options()
        if options:  # every worker, and any that joins later, reads the store with them
            from .plugins import StorageOptions  # here: it imports distributed

            client.register_plugin(StorageOptions(options), name="bnpmix-storage-options")
        self.cache_bytes = setting("cache-bytes", cache_bytes)
        self.retries = setting("task-retries", retries)

    def map(self, fn: BatchFn, indices: Sequence[int], *shared: Any,
            payloads: Sequence[Any] | None = None) -> list[Any]:
        tasks = _tasks(indices, payloads)
        # one task: the shared arguments ride in its spec (one round trip, still recomputable);
        # several: they travel once, as the result of a task the others depend on
        wave = uuid.uuid4().hex
        shared_arg = (shared if len(indices) == 1
                      else self.client.submit(_identity, shared, pure=False, key=f"shared-{wave}"))
        futures = [
            self.client.submit(_on_worker, self.refs[i], self.cache_bytes, fn, own,
                               shared_arg, pure=False, retries=self.retries,
                               key=f"bnpmix-partition-{i}-{wave}-{n}")
            for n, (i, own) in enumerate(tasks)
        ]
        try:
            return [self._result(i, f) for i, f in zip(indices, futures, strict=True)]
        finally:
            pending = futures if len(indices) == 1 else [*futures, shared_arg]
            self.client.cancel(pending)

    def _result(self, index: int, future: Any) -> Any:
        try:
            return future.result()
        except BnpmixError:
            raise
        except Exception as exc:
            if self.client.status != "running" or not self._scheduler_alive():
                raise BnpmixError(
                    f"{self.client.scheduler.address}: lost the Dask scheduler "
                    f"({type(exc).__name__}: {exc}); the run's checkpoint is kept: "
                    "`bnpmix resume RUN_DIR` once a scheduler is back") from exc
            raise BnpmixError(f"{self.corpus_path}: partition {int(index)} failed after "
                              f"{self.retries} retries: {type(exc).__name__}: {exc}") from exc

    def _scheduler_alive(self) -> bool:
        try:  # a round trip (Client.scheduler_info() swallows OSError and returns its cache)
            self.client.sync(self.client.scheduler.identity, n_workers=0)
        except Exception:
            return False
        return True

    def describe(self) -> str:
        info = self.client.scheduler_info()
        return (f"dask at {self.client.scheduler.address} ({len(info.get('workers', {}))} "
                f"workers; dashboard {self.client.dashboard_link})")


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
    from bnpmix.pipeline.config import is_address

    client = clusters.process_client(scheduler) if client is None else client
    if client is not None:
        clusters.wait_for_a_worker(client, client.scheduler.address, worker_wait)
        yield DaskExecutor(client, corpus, cache_bytes)
        return
    if cluster is None and not is_address(scheduler):
        ex = LocalExecutor(corpus, scheduler, threads, cache_bytes)
        try:
            yield ex
        finally:
            ex.close()
        return
    with clusters.open_client(scheduler, cluster, worker_wait) as own:
        yield DaskExecutor(own, corpus, cache_bytes)
