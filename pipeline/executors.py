"""Executors: where partition visits run. One interface, two kinds.

``executor.map(fn, indices, *shared)`` applies ``fn(batch, *shared)`` to each partition in
``indices`` and returns the results in the order of ``indices`` (never in completion order), so
local and distributed runs reduce identically. ``shared`` (the global parameters, the lap's merge
pairs, ...) is shipped once per call, not once per task.

- ``LocalExecutor``: in this process, ``threads`` (a thread pool) or ``synchronous``.
- ``DaskExecutor``: a ``distributed.Client``. Each worker reads its partitions itself (pyarrow)
  and keeps them in a per-process LRU cache across laps; the shared arguments travel as the
  result of a task (``submit(identity, ...)``), which Dask can recompute after losing a worker,
  unlike scattered data. Failed tasks are retried; a partition that still fails stops the run
  with an error naming it.
"""

from __future__ import annotations

import threading
import uuid
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bnpmix.storage import Batch, BnpmixError, Corpus

from .batches import nbytes

BatchFn = Callable[..., Any]


class PartitionCache:
    """Partitions of one or more corpora kept in memory, least recently used evicted first."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, int, str], Batch] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._corpora: dict[str, Corpus] = {}

    def get(self, corpus_path: str, index: int) -> Batch:
        with self._lock:
            corpus = self._corpora.get(corpus_path)
            if corpus is None or index >= corpus.n_partitions:  # new, or grown by --append
                corpus = self._corpora[corpus_path] = Corpus(corpus_path)
            key = (corpus_path, index, corpus.manifest.partitions[index].sha256)
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        batch = corpus.read(index)
        batch.X = batch.X.astype("float64", copy=False)
        size = nbytes(batch.X)
        with self._lock:
            if size <= self.max_bytes and key not in self._items:
                self._items[key] = batch
                self._held += size
                self._evict()
        return batch

    def _evict(self) -> None:
        """Drop least recently used partitions until the budget holds (lock held)."""
        while self._held > self.max_bytes and self._items:
            _, old = self._items.popitem(last=False)
            self._held -= nbytes(old.X)

    def resize(self, max_bytes: int) -> None:
        """Change the budget, evicting the least recently used partitions beyond it."""
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()


class Executor(ABC):
    """Runs ``fn(batch, *shared)`` over partitions, returning results in the given order."""

    corpus_path: str

    @abstractmethod
    def map(self, fn: BatchFn, indices: Sequence[int], *shared: Any) -> list[Any]:
        """Results of fn on partitions ``indices``, in that order."""

    def close(self) -> None:
        """Release what the executor holds (threads, the client)."""
        return None

    def describe(self) -> str:
        return type(self).__name__


class LocalExecutor(Executor):
    """Partition visits in this process: a thread pool (``threads``) or one after another."""

    def __init__(self, corpus_path: str | Path, mode: str = "threads", workers: int = 2,
                 cache_bytes: int = 2 << 30) -> None:
        if mode not in ("threads", "synchronous"):
            raise ValueError(f"local scheduler must be threads or synchronous, not {mode!r}")
        self.corpus_path = str(Path(corpus_path).resolve())
        self.mode = mode
        self.cache = PartitionCache(cache_bytes)
        self._pool = ThreadPoolExecutor(workers) if mode == "threads" else None

    def map(self, fn: BatchFn, indices: Sequence[int], *shared: Any) -> list[Any]:
        def one(i: int) -> Any:
            return fn(self.cache.get(self.corpus_path, i), *shared)

        if self._pool is None or len(indices) == 1:
            return [one(i) for i in indices]
        return list(self._pool.map(one, indices))

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


def _on_worker(corpus_path: str, index: int, cache_bytes: int, fn: BatchFn,
               shared: tuple) -> Any:
    return fn(_worker_cache(cache_bytes).get(corpus_path, index), *shared)


class DaskExecutor(Executor):
    """Partition visits as tasks on a Dask cluster (workers read the corpus themselves)."""

    def __init__(self, client: Any, corpus_path: str | Path, cache_bytes: int = 2 << 30,
                 retries: int = 3) -> None:
        self.client = client
        self.corpus_path = str(Path(corpus_path).resolve())
        self.cache_bytes = cache_bytes
        self.retries = retries

    def map(self, fn: BatchFn, indices: Sequence[int], *shared: Any) -> list[Any]:
        # one task: the shared arguments ride in its spec (one round trip, still recomputable);
        # several: they travel once, as the result of a task the others depend on
        wave = uuid.uuid4().hex
        shared_arg = (shared if len(indices) == 1
                      else self.client.submit(_identity, shared, pure=False, key=f"shared-{wave}"))
        futures = [
            self.client.submit(_on_worker, self.corpus_path, int(i), self.cache_bytes, fn,
                               shared_arg, pure=False, retries=self.retries,
                               key=f"bnpmix-partition-{int(i)}-{wave}")
            for i in indices
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
            raise BnpmixError(f"{self.corpus_path}: partition {int(index)} failed after "
                              f"{self.retries} retries: {type(exc).__name__}: {exc}") from exc

    def describe(self) -> str:
        info = self.client.scheduler_info()
        return (f"dask at {self.client.scheduler.address} ({len(info.get('workers', {}))} "
                f"workers; dashboard {self.client.dashboard_link})")
