"""The memory a process may use, and sizes given as a share of it.

``memory_limit()`` is the least of: the machine's physical memory; the memory limit of every
cgroup from this process's own up to the root (v1 ``memory.limit_in_bytes`` or v2 ``memory.max``,
whichever the machine mounts: a run started inside a capped cgroup sees that cap, which a read of
the root cgroup's files alone misses); the address-space rlimit; and, inside a Dask worker, the
worker's ``memory_limit``. A size setting such as ``cache-bytes: 20%`` is a ``Share`` of it,
resolved in the process that uses it (a worker sizes its partition cache from its own limit).
None of this changes a result: caches and spills only decide what is read or written again.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
from pathlib import Path
from typing import NamedTuple

CGROUP_ROOT = Path("/sys/fs/cgroup")
UNLIMITED = 2 ** 62  # a cgroup v1 limit at or above this reads as no limit (v1 prints ~2^63)


class Share(NamedTuple):
    """A fraction of the memory the process using it may use (``memory_limit``)."""

    fraction: float

    def nbytes(self) -> int:
        return int(self.fraction * memory_limit())

    def __str__(self) -> str:
        return f"{100 * self.fraction:g}%"


def parse_share(text: str) -> Share:
    """'20%' -> Share(0.2); a share is above 0 and at most 100 %."""
    fraction = float(text.strip().removesuffix("%")) / 100
    if not 0 < fraction <= 1:
        raise ValueError("a share of memory is above 0% and at most 100%")
    return Share(fraction)


def resolve(size: int | Share) -> int:
    """Bytes, from a number of bytes or a share of this process's memory."""
    return size.nbytes() if isinstance(size, Share) else int(size)


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
