"""Executors: where partition visits run. One interface: two kinds, and a view of either.

``executor.submit(fn, indices, *shared)`` starts ``fn(batch, *shared)`` on each partition in
``indices`` and returns a ``Pending`` at once; ``pending.result()`` waits and returns the results
in the order of ``indices`` (never in completion order), so local and distributed runs reduce
identically, and several submits may be outstanding while the driver works on earlier results.
``executor.map(...)`` is ``submit(...).result()``. ``shared`` (the global parameters, the lap's
merge pairs, ...) is shipped once per call, not once per task. With ``payloads=[p_1, ...]`` (one
per index: a partition's own state from the driver's store, its random seed) the call is
``fn(batch, p_i, *shared)``: a payload travels with its partition's task only.
``executor.parallelism``: how many visits can run at once.

- ``LocalExecutor``: in this process, ``threads`` (a thread pool) or ``synchronous`` (each
  submit runs at once). A pool of more than one thread limits BLAS to one thread per call while
  it is open (as Dask's worker processes do): the pool's threads are the parallelism, and BLAS
  threads on top of them oversubscribe the cores, busy-waiting (measured 3-5x slower fits).
- ``SubsetExecutor``: another executor's visits to some of its partitions (a ``Corpus.subset``
  view: --obs auto's race on a large corpus).
- ``DaskExecutor``: a ``distributed.Client`` (opened for the run, or the caller's own, which the
  run never closes). The driver's BLAS runs on one thread while it is open: its own work is
  small products, which BLAS threads slowed 3x (births' fresh VB, 200,000 x 32 on a local
  cluster: a fit of 45 s took 10 s). Each worker reads its partitions itself (pyarrow) and
  keeps them in a per-process LRU cache across laps. Each partition ranks the workers present
  by rendezvous hashing; its first is its home. A submit's tasks go to their homes, except that
  no worker is given more than its share of the submit (its threads' share, rounded up): a task
  whose home is full goes to the next worker in its own ranking (consistent hashing with
  bounded loads),
  so a wave of W tasks keeps W threads busy and a partition is only ever read by its first few
  workers. Another worker may still run a task. The shared arguments travel as the result of a
  task (``submit(identity, ...)``), which Dask can recompute after losing a worker, unlike
  scattered data. Failed tasks are retried; a partition that still fails stops the run with an
  error naming it. Each task also sets its worker's malloc thresholds (``malloc.py``).

Every task reports whether its partition came from the cache (and, on Dask, the worker that ran
it); ``executor.cache_stats()`` sums these reports, counted on the driver.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from threadpoolctl import threadpool_limits

from bnpmix.storage import BnpmixError, Corpus
from bnpmix.storage.objectstore import storage_options

from ..malloc import set_thresholds
from ..settings import setting
from .data import PartitionCache, PartitionRef, partition_refs
from .memlimit import Share, resolve

BatchFn = Callable[..., Any]


class Pending:
    """The results of one submit. ``result()`` waits for them and returns them in the order of
    the submit's indices, or raises the first failed partition's error (as ``map`` does); the
    outcome is kept, so later calls return (or raise) the same."""

    def __init__(self, collect: Callable[[], list[Any]]) -> None:
        self._collect: Callable[[], list[Any]] | None = collect
        self._values: list[Any] = []
        self._error: BaseException | None = None

    def result(self) -> list[Any]:
        if self._collect is not None:
            collect, self._collect = self._collect, None
            try:
                self._values = collect()
            except BaseException as exc:
                self._error = exc
        if self._error is not None:
            raise self._error
        return self._values


class TaskCounts(NamedTuple):
    """One partition's collected tasks: how many, how many read it from a cache, how many ran on
    its home worker, and of the tasks after its first (``warm``) how many hit."""

    tasks: int = 0
    hits: int = 0
    at_home: int = 0
    warm: int = 0
    warm_hits: int = 0


class Executor(ABC):
    """Runs ``fn(batch, *shared)`` over partitions, returning results in the given order."""

    corpus_path: str
    has_homes = False  # whether tasks have home workers (home_rate is None without)

    def __init__(self) -> None:
        self._counts: dict[int, TaskCounts] = {}
        self._submitted: set[int] = set()
        self._count_lock = threading.Lock()

    @abstractmethod
    def submit(self, fn: BatchFn, indices: Sequence[int], *shared: Any,
               payloads: Sequence[Any] | None = None) -> Pending:
        """Start fn on partitions ``indices``; the Pending's result() is their results, in
        that order."""

    def map(self, fn: BatchFn, indices: Sequence[int], *shared: Any,
            payloads: Sequence[Any] | None = None) -> list[Any]:
        """Results of fn on partitions ``indices``, in that order."""
        return self.submit(fn, indices, *shared, payloads=payloads).result()

    @property
    @abstractmethod
    def parallelism(self) -> int:
        """How many partition visits can run at once (at least 1)."""

    def close(self) -> None:
        """Release what the executor holds (threads, the client)."""
        return None

    def describe(self) -> str:
        return type(self).__name__

    def _warm(self, indices: Iterable[int]) -> list[bool]:
        """Whether each index had a task submitted before (in this call or an earlier one)."""
        with self._count_lock:
            warm = []
            for i in indices:
                warm.append(i in self._submitted)
                self._submitted.add(i)
        return warm

    def _record(self, index: int, hit: bool, warm: bool, at_home: bool) -> None:
        with self._count_lock:
            c = self._counts.get(index, TaskCounts())
            self._counts[index] = TaskCounts(c.tasks + 1, c.hits + hit, c.at_home + at_home,
                                             c.warm + warm, c.warm_hits + (warm and hit))

    def task_counts(self) -> dict[int, TaskCounts]:
        """Per partition, the counts of its collected tasks so far."""
        with self._count_lock:
            return dict(self._counts)

    def cache_stats(self) -> dict[str, Any]:
        """The collected tasks so far: ``tasks``, cache ``hits`` and ``misses``, ``hit_rate``,
        ``warm_hit_rate`` (the hit rate of the tasks after each partition's first: a lap-based
        engine's hit rate after its first lap) and ``home_rate`` (the share of tasks that ran
        on their partition's home worker; None for local executors). Rates are None without
        tasks to count."""
        counts = list(self.task_counts().values())
        t = TaskCounts(*map(sum, zip(*counts, strict=True))) if counts else TaskCounts()
        return {"tasks": t.tasks, "hits": t.hits, "misses": t.tasks - t.hits,
                "hit_rate": t.hits / t.tasks if t.tasks else None,
                "warm_hit_rate": t.warm_hits / t.warm if t.warm else None,
                "home_rate": t.at_home / t.tasks if t.tasks and self.has_homes else None}


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
        tasks = _tasks(indices, payloads)
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


def ranking(key: str, workers: Iterable[str]) -> list[str]:
    """The workers by decreasing sha256(key, w): highest-random-weight (rendezvous) hashing.
    Removing a worker leaves the others' order; the same on every machine and in every
    process."""
    return sorted(workers, key=lambda w: hashlib.sha256(f"{key}\0{w}".encode()).digest(),
                  reverse=True)


def rendezvous(key: str, workers: Iterable[str]) -> str | None:
    """A key's home: the first of its ranking (None without workers). Removing a worker moves
    only the keys it had; adding one takes keys only for itself."""
    return next(iter(ranking(key, workers)), None)


def bounded_placement(rankings: Sequence[Sequence[str]],
                      threads: Mapping[str, int]) -> list[str | None]:
    """Each task's worker, in order: the first worker of its ranking that still has room, a
    worker's room being its share of the tasks, ceil(n · threads_w / Σ threads), so that no
    worker queues more than its share while another idles (consistent hashing with bounded
    loads, Mirrokni, Thorup & Zadimoghaddam 2018). None for a task with no worker."""
    total = sum(threads.values())
    room = {w: -(-len(rankings) * t // total) for w, t in threads.items()} if total else {}
    placed: list[str | None] = []
    for workers in rankings:
        worker = next((w for w in workers if room.get(w, 0) > 0), None)
        if worker is not None:
            room[worker] -= 1
        placed.append(worker)
    return placed


def partition_key(ref: PartitionRef) -> str:
    """What a partition's home is hashed on: its content's checksum and its index."""
    return f"{ref.sha256}:{ref.index}"


def submit_kwargs(worker: str | None) -> dict[str, Any]:
    """A task's placement in Client.submit: the worker chosen for it, others allowed (a lost or
    busy worker never holds it up); none before any worker is present."""
    return {} if worker is None else {"workers": [worker], "allow_other_workers": True}


class WorkerOptions(NamedTuple):
    """What a task tells the worker process running it: its partition cache's size and glibc's
    trim threshold (0: malloc left as the worker started)."""

    cache_bytes: int | Share
    malloc_trim: int


# one cache per worker process; only a cache: anything in it can be read again from the corpus
_WORKER_CACHE: PartitionCache | None = None


def _worker_cache(max_bytes: int | Share) -> PartitionCache:
    """This worker's cache, of ``max_bytes`` (a share: of this worker's memory)."""
    global _WORKER_CACHE
    max_bytes = resolve(max_bytes)
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


def _on_worker(ref: PartitionRef, opts: WorkerOptions, fn: BatchFn, own: tuple,
               shared: tuple) -> tuple[Any, bool, str]:
    """fn's value, whether the partition came from this worker's cache, and where it ran."""
    from distributed import get_worker

    set_thresholds(opts.malloc_trim)
    batch, hit = _worker_cache(opts.cache_bytes).lookup(ref)
    return fn(batch, *own, *shared), hit, get_worker().address


class DaskExecutor(Executor):
    """Partition visits as tasks on a Dask cluster (workers read the corpus themselves).
    ``cache_bytes`` (each worker's partition cache) and ``retries`` (per task) are fixed here,
    on the driver, and travel with the tasks; None: Dask config ``bnpmix.cache-bytes`` and
    ``bnpmix.task-retries``; ``bnpmix.worker-malloc-trim`` likewise. The list of workers is
    asked of the scheduler at most once every ``workers_ttl`` seconds (sooner after a task ran
    on a worker not in it); rankings are recomputed only when it changes."""

    has_homes = True
    workers_ttl = 1.0

    def __init__(self, client: Any, corpus: Corpus, cache_bytes: int | None = None,
                 retries: int | None = None) -> None:
        super().__init__()
        self.client = client
        self.address = client.scheduler.address  # a closed client forgets it
        self.refs = partition_refs(corpus)
        self.corpus_path = corpus.uri
        options = storage_options()
        if options:  # every worker, and any that joins later, reads the store with them
            from .plugins import StorageOptions  # here: it imports distributed

            client.register_plugin(StorageOptions(options), name="bnpmix-storage-options")
        self.worker_options = WorkerOptions(setting("cache-bytes", cache_bytes),
                                            setting("worker-malloc-trim"))
        self.retries = setting("task-retries", retries)
        self._workers: tuple[str, ...] = ()
        self._threads: dict[str, int] = {}
        self._listed = -float("inf")  # time.monotonic() of the last listing
        self._rankings: dict[int, list[str]] = {}
        # the driver's own work (births' fresh VB, merges, global steps) is small products,
        # which BLAS threads slow down, most of all beside the workers of a local cluster
        self._blas = threadpool_limits(1, user_api="blas")

    def close(self) -> None:
        if self._blas is not None:
            self._blas.restore_original_limits()
            self._blas = None

    def _list_workers(self) -> None:
        """The workers present (one round trip, unless listed within workers_ttl seconds);
        the rankings are forgotten when the set differs from the last one."""
        now = time.monotonic()
        if now - self._listed < self.workers_ttl:
            return
        info = self.client.scheduler_info().get("workers")
        if info is None:  # a client that gave up reconnecting has closed and cleared its cache
            raise self._lost_scheduler(f"the client is {self.client.status}")
        self._listed = now
        self._threads = {a: int(w["nthreads"]) for a, w in info.items()}
        workers = tuple(sorted(info))
        if workers != self._workers:
            self._workers, self._rankings = workers, {}

    def _ranking(self, index: int) -> list[str]:
        if index not in self._rankings:
            self._rankings[index] = ranking(partition_key(self.refs[index]), self._workers)
        return self._rankings[index]

    def _home(self, index: int) -> str | None:
        return next(iter(self._ranking(index)), None)

    def home(self, index: int) -> str | None:
        """The address of partition ``index``'s home worker among the workers present (None
        while there are none)."""
        self._list_workers()
        return self._home(int(index))

    def placement(self, indices: Sequence[int]) -> list[str | None]:
        """The workers one submit of these partitions sends their tasks to (bounded_placement
        over the workers present)."""
        self._list_workers()
        return bounded_placement([self._ranking(int(i)) for i in indices], self._threads)

    @property
    def parallelism(self) -> int:
        """The total threads of the workers present (as of the last listing; at least 1)."""
        self._list_workers()
        return max(1, sum(self._threads.values()))

    def submit(self, fn: BatchFn, indices: Sequence[int], *shared: Any,
               payloads: Sequence[Any] | None = None) -> Pending:
        tasks = _tasks(indices, payloads)
        placed = self.placement([i for i, _ in tasks])
        homes = [self._home(i) for i, _ in tasks]
        warm = self._warm(i for i, _ in tasks)
        # one task: the shared arguments ride in its spec (one round trip, still recomputable);
        # several: they travel once, as the result of a task the others depend on
        wave = uuid.uuid4().hex
        try:
            shared_arg = (shared if len(tasks) == 1 else
                          self.client.submit(_identity, shared, pure=False, key=f"shared-{wave}"))
            futures = [
                self.client.submit(_on_worker, self.refs[i], self.worker_options, fn, own,
                                   shared_arg, pure=False, retries=self.retries,
                                   key=f"bnpmix-partition-{i}-{wave}-{n}", **submit_kwargs(at))
                for n, ((i, own), at) in enumerate(zip(tasks, placed, strict=True))
            ]
        except Exception as exc:
            if self.client.status == "running":
                raise
            raise self._lost_scheduler(f"{type(exc).__name__}: {exc}") from exc

        def collect() -> list[Any]:
            try:
                outcomes = [self._result(i, f) for (i, _), f in zip(tasks, futures, strict=True)]
            finally:
                self._release(futures if len(tasks) == 1 else [*futures, shared_arg])
            values = []
            for (i, _), home, was_warm, (value, hit, where) in zip(tasks, homes, warm, outcomes,
                                                                   strict=True):
                self._record(i, hit, was_warm, where == home)
                if where not in self._workers:  # a worker joined: list them at the next submit
                    self._listed = -float("inf")
                values.append(value)
            return values

        return Pending(collect)

    def _result(self, index: int, future: Any) -> Any:
        try:
            return future.result()
        except BnpmixError:
            raise
        except Exception as exc:
            if self.client.status != "running" or not self._scheduler_alive():
                raise self._lost_scheduler(f"{type(exc).__name__}: {exc}") from exc
            raise BnpmixError(f"{self.corpus_path}: partition {int(index)} failed after "
                              f"{self.retries} retries: {type(exc).__name__}: {exc}") from exc

    def _release(self, futures: list[Any]) -> None:
        """Cancel a collected wave's futures; a client that has closed holds none (its error
        would hide the one that says why the wave failed)."""
        try:
            self.client.cancel(futures)
        except Exception:
            if self.client.status == "running":
                raise

    def _lost_scheduler(self, cause: str) -> BnpmixError:
        return BnpmixError(f"{self.address}: lost the Dask scheduler ({cause}); "
                           "the run's checkpoint is kept: `bnpmix resume RUN_DIR` once a "
                           "scheduler is back")

    def _scheduler_alive(self) -> bool:
        try:  # a round trip (Client.scheduler_info() swallows OSError and returns its cache)
            self.client.sync(self.client.scheduler.identity, n_workers=0)
        except Exception:
            return False
        return True

    def describe(self) -> str:
        info = self.client.scheduler_info()
        return (f"dask at {self.address} ({len(info.get('workers', {}))} "
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
