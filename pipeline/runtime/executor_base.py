"""The executor interface: where partition visits run (executors.py holds the kinds).

``executor.submit(fn, indices, *shared)`` starts ``fn(batch, *shared)`` on each partition in
``indices`` and returns a ``Pending`` at once; ``pending.result()`` waits and returns the results
in the order of ``indices`` (never in completion order), so local and distributed runs reduce
identically, and several submits may be outstanding while the driver works on earlier results.
``executor.map(...)`` is ``submit(...).result()``. ``shared`` (the global parameters, the lap's
merge pairs, ...) is shipped once per call, not once per task. With ``payloads=[p_1, ...]`` (one
per index: a partition's own state from the driver's store, its random seed) the call is
``fn(batch, p_i, *shared)``: a payload travels with its partition's task only.
``executor.parallelism``: how many visits can run at once.

Every task reports whether its partition came from the cache (and, on Dask, the worker that ran
it); ``executor.cache_stats()`` sums these reports, counted on the driver.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

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


def task_list(indices: Sequence[int], payloads: Sequence[Any] | None) -> list[tuple[int, tuple]]:
    """(partition, its own leading arguments): (payload,) when payloads are given, else ()."""
    if payloads is None:
        return [(int(i), ()) for i in indices]
    if len(payloads) != len(indices):
        raise ValueError(f"{len(payloads)} payloads for {len(indices)} partitions")
    return [(int(i), (p,)) for i, p in zip(indices, payloads, strict=True)]


