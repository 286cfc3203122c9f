"""Which Dask worker runs a partition's task: each partition ranks the workers by rendezvous
hashing (its first is its home), and a submit's tasks go to the first worker of their ranking
with room left for its share of the submit (consistent hashing with bounded loads)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .data import PartitionRef


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
