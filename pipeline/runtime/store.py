"""The driver's per-partition state store: the authoritative copy of each partition's state.

Memo keeps each batch's Summary here; EP will keep its per-item sites. Values are stored with the
length of the store's move log at the time; a value read back has the moves logged since replayed
on it (a memo birth inserts components, a merge merges the same pair), never guessed from
positions. Beyond ``max_bytes`` held in memory (None: Dask config ``bnpmix.summary-bytes`` when
the store is made), values are spilled to ``.npz`` files (no pickle) in a temporary directory,
so the driver's memory stays bounded whatever the number of partitions. Stores made with one
``Budget`` (memo's batch summaries and its deletions' changes) share its bytes: their values held
in memory add up to at most its ``max_bytes`` together, not each.
A worker may cache a copy next to its partition only keyed by ``version(partition)``, the count
of puts the driver has seen, so a stale or lost worker copy is rebuilt from this one.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from ..settings import setting
from .memlimit import resolve

T = TypeVar("T")


class Replayable(Protocol[T]):
    def apply(self, value: T) -> T: ...


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How a state value becomes named arrays and back (spill files, checkpoints)."""

    to_arrays: Callable[[T], dict[str, np.ndarray]]
    from_arrays: Callable[[dict[str, np.ndarray]], T]

    def nbytes(self, value: T) -> int:
        return int(sum(np.asarray(v).nbytes for v in self.to_arrays(value).values()))


ARRAYS: Codec[dict[str, np.ndarray]] = Codec(dict, dict)  # values that are dicts of arrays


@dataclass
class Budget:
    """Bytes of values that one or more stores may hold in memory between them (``held``: what
    they hold now); a value beyond it is spilled. One per store unless given: memo's deletions'
    changes share its summaries' budget, else each of up to delete.per_lap stores would hold a
    whole budget of them (a change per batch, so their number grows with the corpus)."""

    max_bytes: int
    held: int = 0


@dataclass
class StateStore(Generic[T]):
    """Per-partition values plus a log of moves replayed on values stored before them.
    ``budget``: shared with other stores (None: the store's own, of ``max_bytes``)."""

    codec: Codec[T]
    max_bytes: int | None = None
    moves: list[Any] = field(default_factory=list)
    # how a value takes the moves logged since it was stored (default: each move in turn; memo
    # passes summary.Replay, the moves composed into one row map shared by the batches)
    replay: Callable[[T, list[Any]], T] | None = None
    _items: dict[int, tuple[T | None, int]] = field(default_factory=dict)
    _versions: dict[int, int] = field(default_factory=dict)
    _held: int = 0  # this store's share of budget.held
    _spill: str | None = None
    _removal: weakref.finalize | None = None  # of the spill directory, if the store is dropped
    budget: Budget | None = None

    def __post_init__(self) -> None:
        if self.budget is None:
            self.budget = Budget(resolve(setting("summary-bytes", self.max_bytes)))
        self.max_bytes = self.budget.max_bytes

    def _hold(self, change: int) -> None:
        self._held += change
        self.budget.held += change

    def _spill_path(self, key: int) -> Path:
        if self._spill is None:
            self._spill = tempfile.mkdtemp(prefix="bnpmix-state-")
            # removed with the store even if nobody closes it (a program that drops it)
            self._removal = weakref.finalize(self, shutil.rmtree, self._spill, True)
        return Path(self._spill) / f"{key}.npz"

    def _load(self, key: int) -> T:
        """The stored value with the moves logged since it was stored replayed on it."""
        value, seen = self._items[key]
        if value is None:
            with np.load(self._spill_path(key), allow_pickle=False) as z:
                value = self.codec.from_arrays({k: z[k] for k in z.files})
        if self.replay is not None:
            return self.replay(value, self.moves[seen:])
        for move in self.moves[seen:]:
            value = move.apply(value)
        return value

    def _write_spill(self, key: int, value: T) -> None:
        """The partition's value to its spill file, as of the move log's present length."""
        np.savez(self._spill_path(key), **self.codec.to_arrays(value))
        self._items[key] = (None, len(self.moves))

    def _current(self, key: int) -> T:
        """``_load``, keeping a value held in memory in its replayed form (a spilled one is
        not written back), so the moves are replayed on it once; a replayed value that no
        longer fits the budget (a birth's inserted components grow it) is spilled instead."""
        value = self._load(key)
        held, seen = self._items[key]
        if held is not None and seen < len(self.moves):
            old, size = self.codec.nbytes(held), self.codec.nbytes(value)
            if self.budget.held - old + size > self.budget.max_bytes:
                self._hold(-old)
                self._write_spill(key, value)
            else:
                self._hold(size - old)
                self._items[key] = (value, len(self.moves))
        return value

    def get(self, key: int) -> T | None:
        """The partition's value, up to date (None if never stored)."""
        if key not in self._items:
            return None
        return self._current(key)

    def put(self, key: int, value: T) -> None:
        """Store a partition's new value: in memory within the budget, else in a spill file."""
        old = self._items.get(key)
        if old is not None and old[0] is not None:
            self._hold(-self.codec.nbytes(old[0]))
        size = self.codec.nbytes(value)
        if self.budget.held + size > self.budget.max_bytes:
            self._write_spill(key, value)
        else:
            self._items[key] = (value, len(self.moves))
            self._hold(size)
        self._versions[key] = self._versions.get(key, 0) + 1

    def version(self, key: int) -> int:
        """How many times the partition's value was stored (0: never)."""
        return self._versions.get(key, 0)

    def log(self, move: Replayable[T]) -> None:
        self.moves.append(move)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: int) -> bool:
        return key in self._items

    def keys(self) -> list[int]:
        return sorted(self._items)

    def items(self) -> Iterator[tuple[int, T]]:
        """Every stored value, up to date, one at a time in key order (checkpoints stream
        through this, so spilled values are never all in memory at once; held ones keep their
        replayed form, as with ``get``)."""
        for key in sorted(self._items):
            yield key, self._current(key)

    def close(self) -> None:
        """Forget every value (its bytes return to the budget) and remove the spill files."""
        self._hold(-self._held)
        self._items.clear()
        if self._removal is not None:
            self._removal()  # removes the spill directory, once
            self._spill = self._removal = None
