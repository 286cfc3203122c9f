"""``DaskExecutor``: partition visits as tasks on a ``distributed.Client`` (opened for the run, or
the caller's own, which the run never closes).

The driver's BLAS runs on one thread while it is open: its own work is small products, which BLAS
threads slowed 3x (births' fresh VB, 200,000 x 32 on a local cluster: a fit of 45 s took 10 s).
Each worker reads its partitions itself (pyarrow) and keeps them in a per-process LRU cache
across laps; a corpus held in memory (storage.memory) has its partitions scattered once, each
task taking its own (a Dask block's is its graph, computed on the worker). Each partition ranks
the workers present by rendezvous hashing; its first is its home. A submit's tasks go to their
homes, except that no worker is given more than its share of the submit (its threads' share,
rounded up): a task whose home is full goes to the next worker in its own ranking (consistent
hashing with bounded loads, placement.py), so a wave of W tasks keeps W threads busy and a
partition is only ever read by its first few workers. Another worker may still run a task. The
shared arguments travel as the result of a task (``submit(identity, ...)``), which Dask can
recompute after losing a worker, unlike scattered data. Failed tasks are retried; a partition
that still fails stops the run with an error naming it. Each task also sets its worker's malloc
thresholds (``malloc.py``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from threadpoolctl import threadpool_limits

from bnpmix.storage import BnpmixError, Corpus
from bnpmix.storage.objectstore import storage_options

from ..malloc import set_thresholds
from ..settings import setting
from .data import PartitionCache, PartitionRef, partition_refs
from .executor_base import BatchFn, Executor, Pending, task_list
from .memlimit import Share, resolve
from .placement import bounded_placement, partition_key, ranking, submit_kwargs


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


def _on_worker(ref: PartitionRef, opts: WorkerOptions, fn: BatchFn, own: tuple,
               shared: tuple, source: Any = None) -> tuple[Any, bool, str]:
    """fn's value, whether the partition came from this worker's cache, and where it ran
    (``source``: the partition of a corpus held in memory, scattered by the driver)."""
    from distributed import get_worker

    set_thresholds(opts.malloc_trim)
    batch, hit = _worker_cache(opts.cache_bytes).lookup(ref._replace(source=source))
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
        # a corpus in memory: its partitions on the workers once, each task naming its own;
        # the driver keeps them (they are X) to scatter one again if its worker is lost
        self._held = [ref.source for ref in self.refs]
        self._sources = (client.scatter(self._held, hash=False) if any(self._held)
                         else [None] * len(self._held))
        self.refs = [ref._replace(source=None) for ref in self.refs]
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
        self._sources = [None] * len(self._sources)  # a corpus in memory leaves the workers
        self._held = [None] * len(self._held)
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
        tasks = task_list(indices, payloads)
        placed = self.placement([i for i, _ in tasks])
        homes = [self._home(i) for i, _ in tasks]
        warm = self._warm(i for i, _ in tasks)
        # one task: the shared arguments ride in its spec (one round trip, still recomputable);
        # several: they travel once, as the result of a task the others depend on
        wave = uuid.uuid4().hex
        launched: list[Any] = []

        def launch(n: int, at: str | None = None) -> Any:
            """Task n of the submit (launched again: a key of its own)."""
            (i, own), again = tasks[n], len(launched) >= len(tasks)
            launched.append(self.client.submit(
                _on_worker, self.refs[i], self.worker_options, fn, own, shared_arg,
                self._source(i), pure=False, retries=self.retries,
                key=f"bnpmix-partition-{i}-{wave}-{n}" + (f"-{len(launched)}" if again else ""),
                **submit_kwargs(at)))
            return launched[-1]

        try:
            shared_arg = (shared if len(tasks) == 1 else
                          self.client.submit(_identity, shared, pure=False, key=f"shared-{wave}"))
            futures = [launch(n, at) for n, at in enumerate(placed)]
        except Exception as exc:
            if self.client.status == "running":
                raise
            raise self._lost_scheduler(f"{type(exc).__name__}: {exc}") from exc

        def collect() -> list[Any]:
            try:
                outcomes = [self._result(i, f, lambda n=n: launch(n))
                            for n, ((i, _), f) in enumerate(zip(tasks, futures, strict=True))]
            finally:
                self._release(launched if len(tasks) == 1 else [*launched, shared_arg])
            values = []
            for (i, _), home, was_warm, (value, hit, where) in zip(tasks, homes, warm, outcomes,
                                                                   strict=True):
                self._record(i, hit, was_warm, where == home)
                if where not in self._workers:  # a worker joined: list them at the next submit
                    self._listed = -float("inf")
                values.append(value)
            return values

        return Pending(collect)

    def _source(self, index: int) -> Any:
        """Partition ``index``'s copy on the workers when the corpus is held in memory (None
        for a corpus on disk), scattered again if it was lost: Dask cannot recompute scattered
        data, and cancels it with the worker that held it."""
        held, future = self._held[index], self._sources[index]
        if held is not None and future.status != "finished":
            future = self._sources[index] = self.client.scatter(held, hash=False)
        return future

    def _result(self, index: int, future: Any, again: Any = None) -> Any:
        """A task's value; a task cancelled because its partition of a corpus in memory went
        with a lost worker is launched ``again`` (``again()``: the same task, which scatters
        the partition anew), once."""
        from distributed.client import FutureCancelledError

        try:
            return future.result()
        except BnpmixError:
            raise
        except Exception as exc:
            if self.client.status != "running" or not self._scheduler_alive():
                raise self._lost_scheduler(f"{type(exc).__name__}: {exc}") from exc
            if (again is not None and isinstance(exc, FutureCancelledError)
                    and self._held[index] is not None):
                self._sources[index].cancel()  # a lost copy may not be cancelled here yet
                return self._result(index, again())
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
