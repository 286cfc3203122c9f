"""The memory a process may use, and sizes given as a share of it.

``memory_limit()`` is the least of: the machine's physical memory; the memory limit of every
cgroup from this process's own up to the root (v1 ``memory.limit_in_bytes`` or v2 ``memory.max``,
whichever the machine mounts: a run started inside a capped cgroup sees that cap, which a read of
the root cgroup's files alone misses); the address-space rlimit; and, inside a Dask worker, the
worker's ``memory_limit``. A size setting such as ``cache-bytes: 20%`` is a ``Share`` of it
beyond the process's start-up memory, resolved in the process that uses it (a worker sizes its
partition cache from its own limit).
None of this changes a result: caches and spills only decide what is read or written again.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from bnpmix.storage import Corpus

CGROUP_ROOT = Path("/sys/fs/cgroup")
UNLIMITED = 2 ** 62  # a cgroup v1 limit at or above this reads as no limit (v1 prints ~2^63)
# what a Python process running bnpmix holds before any data (numpy, scipy, pandas, pyarrow
# and dask imported: 150-200 MiB resident, measured), and a visit's working memory beyond its
# partition (a batch step's blocks: local.BLOCK_ENTRIES entries per temporary; the full
# Gaussian's Mahalanobis blocks of up to 32 MiB)
PROCESS_BASE = 200 * 2 ** 20
VISIT_WORK = 64 * 2 ** 20


class Share(NamedTuple):
    """A fraction of the memory the process using it may use (``memory_limit``) beyond what it
    holds from the start (PROCESS_BASE): of a 400 MB Dask worker, 20 % is 40 MB, not 80 MB
    of the 230 MB left once its libraries are loaded."""

    fraction: float

    def nbytes(self) -> int:
        return self.of(memory_limit())

    def of(self, memory: int) -> int:
        """The share of a process that may use ``memory`` bytes."""
        return int(self.fraction * max(memory - PROCESS_BASE, 0))

    def __str__(self) -> str:
        return f"{100 * self.fraction:g}%"


def parse_share(text: str) -> Share:
    """'20%' -> Share(0.2); a share is above 0 and at most 100 %."""
    fraction = float(text.strip().removesuffix("%")) / 100
    if not 0 < fraction <= 1:
        raise ValueError("a share of memory is above 0% and at most 100%")
    return Share(fraction)


def resolve(size: int | Share, memory: int | None = None) -> int:
    """Bytes, from a number of bytes or a share of ``memory`` (None: this process's)."""
    if isinstance(size, Share):
        return size.nbytes() if memory is None else size.of(memory)
    return int(size)


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text or text == "max":
        return None
    value = int(text)
    return None if value >= UNLIMITED else value


def cgroup_limits(proc_cgroup: str, root: Path = CGROUP_ROOT) -> list[int]:
    """The memory limits of the cgroups from the process's own (as /proc/self/cgroup lists it)
    up to the root. Where the listed path is not under the mount (a container that mounts its
    own cgroup as the root), the mount's root files are read."""
    limits = []
    for line in proc_cgroup.splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if hierarchy == "0" and controllers == "":  # v2: the unified hierarchy
            base, name = root, "memory.max"
            if not (base / "cgroup.controllers").exists():
                continue  # a v1 machine lists an empty v2 line too
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        here = base / path.lstrip("/")
        if not here.is_dir():
            here = base
        while True:
            limit = _read_limit(here / name)
            if limit is not None:
                limits.append(limit)
            if here == base:
                break
            here = here.parent
    return limits


def _worker_limit() -> int | None:
    """The Dask worker's memory_limit when this runs in one (None: not a worker or no limit)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import get_worker

    try:
        limit = get_worker().memory_manager.memory_limit
    except (ValueError, AttributeError):
        return None
    return int(limit) if limit else None


def memory_limit() -> int:
    """Bytes this process may use (module docstring)."""
    candidates = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
    with contextlib.suppress(OSError):
        candidates += cgroup_limits(Path("/proc/self/cgroup").read_text())
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        candidates.append(soft)
    worker = _worker_limit()
    if worker is not None:
        candidates.append(worker)
    return min(candidates)


def _decoded(corpus: Corpus) -> list[int]:
    """Each partition's decoded size: n × D values, or a CSR's values, indices and row
    pointers."""
    m = corpus.manifest
    if corpus.kind == "dense":
        item = np.dtype(m.dtype).itemsize
        return [p.rows * corpus.dim * item for p in m.partitions]
    return [12 * (p.nnz or 0) + 8 * (p.rows + 1) for p in m.partitions]


def partition_bytes(corpus: Corpus) -> int:
    """The largest partition's decoded size."""
    return max(_decoded(corpus))


def corpus_bytes(corpus: Corpus) -> int:
    """The whole corpus decoded: what a cache of any size beyond it holds at most."""
    return sum(_decoded(corpus))


def visit_bytes(corpus: Corpus) -> int:
    """A visit's peak beyond the process's base: the partition's file (mapped, resident while
    it is checked and decoded) beside its decoded values, and the batch step's blocks."""
    largest = max(p.bytes for p in corpus.manifest.partitions)
    return largest + partition_bytes(corpus) + VISIT_WORK


def fitting_threads(most: int, need: Callable[[int], int]) -> int:
    """The most local threads, up to ``most``, whose ``need(threads)`` fits in
    ``memory_limit()``; 1 where none does (visits run one at a time, the least they can)."""
    limit = memory_limit()
    return next((t for t in range(most, 1, -1) if need(t) <= limit), 1)


def row_bytes(corpus: Corpus) -> int:
    """An item's decoded size: D values, or a CSR row's mean values and indices and its
    pointer."""
    if corpus.kind == "dense":
        return corpus.dim * np.dtype(corpus.manifest.dtype).itemsize
    return math.ceil(12 * (corpus.manifest.nnz or 0) / max(corpus.n_items, 1)) + 8


def estimate(corpus: Corpus, threads: int, cache: int | Share, summary: int | Share,
             local: bool, birth_rows: int = 0, wave: int = 1) -> tuple[str, int, int]:
    """What a fit's driver process (with ``local``: running the visits on ``threads`` threads
    too) may need, the option that bounds each part, and (that need, ``memory_limit()``). The
    cache counts at most the corpus; the summaries at their budget, an upper bound (the rows
    memo collects for births are held within it); ``birth_rows``: the rows of one birth, which
    a lap's end stacks (beside the held ones) and runs a fresh VB on, one birth at a time; with
    births, a wave's ``wave`` results, each up to a partition of collected rows until the
    driver has taken what its births lack."""
    mib = 2 ** 20
    limit, summary_b = memory_limit(), resolve(summary)
    cache_b = min(resolve(cache), corpus_bytes(corpus)) if local else 0
    visits = (threads if local else 0) * visit_bytes(corpus)
    birth = 2 * min(birth_rows, corpus.n_items) * row_bytes(corpus)
    returned = wave * partition_bytes(corpus) if birth_rows else 0
    need = PROCESS_BASE + visits + cache_b + summary_b + birth + returned
    parts = [f"{PROCESS_BASE // mib} MiB to start"]
    if local:
        parts += [f"{visits // mib} MiB for {threads} visit{'s' * (threads != 1)} at once "
                  "(--threads; partitions of "
                  f"up to {partition_bytes(corpus) // mib} MiB decoded)",
                  f"up to {cache_b // mib} MiB of cached partitions (--cache-bytes)"]
    parts.append(f"up to {summary_b // mib} MiB of per-partition state and births' collected "
                 "rows (--summary-bytes)")
    if birth:
        parts += [f"{birth // mib} MiB for a birth's rows (--birth-max-collect)",
                  f"{returned // mib} MiB for the rows a wave's {wave} visits collect (--wave)"]
    text = (f"memory: up to {need // mib} MiB here ({'; '.join(parts)}) of the "
            f"{limit // mib} MiB this process may use")
    if not local:
        text += (f"; each worker needs {(PROCESS_BASE + visit_bytes(corpus)) // mib} MiB per "
                 "thread plus its cache (--cache-bytes, default a share of its memory)")
    return text, need, limit
