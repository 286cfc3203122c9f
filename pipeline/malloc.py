"""glibc malloc's thresholds in the Dask worker processes that run partition visits.

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
"""

from __future__ import annotations

import ctypes
import functools
import platform
import sys
import threading

M_TRIM_THRESHOLD = -1  # glibc's <malloc.h> parameter numbers
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 2**20  # DEFAULT_MMAP_THRESHOLD_MAX for 64-bit glibc

_lock = threading.Lock()
_applied: int | None = None  # the trim threshold this process was given


@functools.cache
def glibc() -> ctypes.CDLL | None:
    """This process's C library when it is glibc on Linux, else None (asked once per process:
    platform.libc_ver reads the interpreter's binary, and every task asks)."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL("libc.so.6")


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
