"""glibc malloc's thresholds in the Dask worker processes that run partition visits, and the
allocators of a ``bnpmix`` command's own process.

Dask's nanny starts every worker with ``MALLOC_TRIM_THRESHOLD_=65536`` (Dask config
``distributed.nanny.pre-spawn-environ``), to hand freed memory back to the system at once. Setting
any threshold turns off glibc's adaptive ones (mallopt(3)): every allocation above 128 KiB is then
mmap'd and its pages faulted in afresh, and the heap is trimmed after each free. A visit's numpy
temporaries (the quadratic-feature blocks, responsibilities, pair entropies) are such allocations:
a 10,000-item full-Gaussian visit measured 2,237 page faults and 20 ms instead of 0 and 13 ms.

``set_thresholds(trim)`` gives the process M_TRIM_THRESHOLD = ``trim`` and M_MMAP_THRESHOLD =
min(trim / 2, 32 MiB), the ceiling glibc's adaptive thresholds reach on their own (trim twice the
mmap threshold, which stops at DEFAULT_MMAP_THRESHOLD_MAX, 32 MiB on 64-bit): freed memory up to
``trim`` bytes stays with the worker for the next visit. Once per process and value; nothing
outside glibc on Linux.

``process_allocators()``, first thing in the console script: one glibc arena (M_ARENA_MAX; by
default glibc makes up to 8 per core, one per thread that allocates at once, and each keeps the
memory freed in it) and Arrow's allocations through the same malloc (ARROW_DEFAULT_MEMORY_POOL
``system``, unless the environment names another; its default jemalloc pool keeps its own). A
plain `bnpmix fit` of 300,000 documents of 200 words on 2 threads (3 laps, the budgets of a
420 MiB cgroup) peaked at 372 MiB of anonymous memory without them, 239 MiB with them, in the
same time (31-34 s either way, three runs each, beside another job). Results do not change.

It also fixes the process's thresholds at PROCESS_MMAP (1 MiB) and PROCESS_TRIM (2 MiB), unless
the environment sets glibc's own (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, or the
glibc.malloc tunables of GLIBC_TUNABLES). glibc's adaptive
mmap threshold rises to the largest block freed (up to 32 MiB), after which a visit's decoded
partition and temporaries come from the heap, whose top can be returned only when nothing above
it is live: a 2M-document text fit (142 partitions, one thread, the budgets of a 420 MiB cgroup)
held 230 MiB of anonymous memory over its laps with the adaptive thresholds and 190 MiB with
these, peaking at 298 and 244 MiB in the lap of births, with the same ELBO in 313 s against
337 s. Blocks of 1 MiB and more are mapped on demand and unmapped when freed.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
import threading

M_TRIM_THRESHOLD = -1  # glibc's <malloc.h> parameter numbers
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 1  # glibc arenas for a bnpmix command's process (process_allocators)
MMAP_THRESHOLD_MAX = 32 * 2**20  # DEFAULT_MMAP_THRESHOLD_MAX for 64-bit glibc
PROCESS_MMAP = 1 << 20  # a bnpmix command's fixed thresholds (process_allocators)
PROCESS_TRIM = 2 << 20

_lock = threading.Lock()
_applied: int | None = None  # the trim threshold this process was given


@functools.cache
def glibc() -> ctypes.CDLL | None:
    """This process's C library when it is glibc on Linux, else None (asked once per process:
    platform.libc_ver reads the interpreter's binary, and every task asks)."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL("libc.so.6")


def process_allocators() -> bool:
    """One glibc arena for this process, fixed mmap and trim thresholds, and Arrow's default pool
    the system allocator (module docstring); before any thread or Arrow allocation. True when
    the arena limit and the thresholds hold."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")  # read at Arrow's first use
    libc = glibc()
    if libc is None:
        return False
    ok = bool(libc.mallopt(M_ARENA_MAX, ARENAS))
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    for param, name, tunable, value in (
            (M_MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_", "mmap_threshold", PROCESS_MMAP),
            (M_TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_", "trim_threshold", PROCESS_TRIM)):
        if name not in os.environ and f"glibc.malloc.{tunable}=" not in tunables:
            ok = bool(libc.mallopt(param, value)) and ok  # else the user's own setting wins
    return ok


def set_thresholds(trim: int) -> bool:
    """Set this process's trim and mmap thresholds from ``trim`` bytes (0: leave malloc as the
    process started); True when they hold that value now. Safe from several threads."""
    global _applied
    if trim <= 0:
        return False
    with _lock:
        if _applied == trim:
            return True
        libc = glibc()
        if libc is None:
            return False
        mmap = min(trim // 2, MMAP_THRESHOLD_MAX)
        ok = bool(libc.mallopt(M_TRIM_THRESHOLD, trim)) and bool(
            libc.mallopt(M_MMAP_THRESHOLD, mmap))
        _applied = trim if ok else None
        return ok
