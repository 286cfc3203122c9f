"""Partition data where it is used: the LRU partition cache (local threads and Dask workers), the
driver's sampling of a corpus, and data blocks as named arrays (dense, or CSR as its parts)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from bnpmix.algorithms.obs.base import Data, stack_rows
from bnpmix.storage import Batch, BnpmixError, Corpus
from bnpmix.storage.memory import MemoryCorpus, MemoryPartition

from ..settings import setting
from .memlimit import Share, resolve


def nbytes(X: Data) -> int:
    if sp.issparse(X):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return int(X.nbytes)


def data_to_arrays(X: Data) -> dict[str, np.ndarray]:
    """A dense block as ``dense``; a CSR block as ``data``, ``indices``, ``indptr``, ``shape``."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        return {"data": X.data, "indices": X.indices, "indptr": X.indptr,
                "shape": np.array(X.shape, dtype=np.int64)}
    return {"dense": np.asarray(X)}


def data_from_arrays(arrays: dict[str, np.ndarray]) -> Data:
    """The inverse of data_to_arrays."""
    if "dense" in arrays:
        return np.asarray(arrays["dense"])
    shape = tuple(int(s) for s in arrays["shape"])
    return sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=shape)


class PartitionRef(NamedTuple):
    """A partition as the driver's manifest names it (corpus path, index, sha256): what a task
    carries, so a worker serves exactly the data the run was started on. ``source``: a corpus
    held in memory's partition (storage.memory.MemoryPartition), read in place of a file;
    caches key on the first three fields (``key``)."""

    corpus: str
    index: int
    sha256: str
    source: MemoryPartition | None = None

    @property
    def key(self) -> tuple[str, int, str]:
        return self.corpus, self.index, self.sha256


def partition_refs(corpus: Corpus) -> list[PartitionRef]:
    path = corpus.uri
    sources = (corpus.sources if isinstance(corpus, MemoryCorpus)
               else [None] * corpus.n_partitions)
    return [PartitionRef(path, i, p.sha256, s)
            for i, p, s in zip(corpus.origin, corpus.manifest.partitions, sources, strict=True)]


class PartitionCache:
    """Partitions of one or more corpora kept in memory, least recently used evicted first;
    keyed by the checksum the task carries, so a partition re-ingested at the same path is never
    served stale, and a worker's copy of the manifest is re-read when it disagrees.
    ``max_bytes``: the budget, bytes or a share of this process's memory (None: Dask config
    ``bnpmix.cache-bytes`` now). ``hits`` and
    ``misses`` count the lookups served from memory and those that read the corpus."""

    def __init__(self, max_bytes: int | Share | None = None) -> None:
        self.max_bytes = resolve(setting("cache-bytes", max_bytes))
        self._items: OrderedDict[tuple[str, int, str], Batch] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._corpora: dict[str, Corpus] = {}
        self.hits = self.misses = 0

    def get(self, ref: PartitionRef) -> Batch:
        return self.lookup(ref)[0]

    def lookup(self, ref: PartitionRef) -> tuple[Batch, bool]:
        """The partition, and whether it came from memory (True) or was read from the corpus."""
        key = ref.key
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key], True
            self.misses += 1
        batch = self._read(ref) if ref.source is None else ref.source.read()
        batch.X = batch.X.astype("float64", copy=False)
        size = nbytes(batch.X)
        with self._lock:
            if size <= self.max_bytes and key not in self._items:
                self._items[key] = batch
                self._held += size
                self._evict()
        return batch, False

    def _read(self, ref: PartitionRef) -> Batch:
        """A partition from its corpus directory, checked against the checksum ``ref`` carries
        (the directory's Corpus re-opened when its manifest disagrees)."""
        with self._lock:
            corpus = self._corpora.get(ref.corpus)
            if corpus is None or _checksum(corpus, ref.index) != ref.sha256:
                corpus = self._corpora[ref.corpus] = Corpus(ref.corpus)  # new, grown, re-ingested
        if _checksum(corpus, ref.index) != ref.sha256:
            raise BnpmixError(f"{corpus.partition_file(ref.index)}: the corpus changed while the "
                              f"run used it (the run expects checksum {ref.sha256[:12]}…, the "
                              f"manifest now says {_checksum(corpus, ref.index)}); start a new fit")
        return corpus.read(ref.index)

    @property
    def held_bytes(self) -> int:
        return self._held

    def __len__(self) -> int:
        return len(self._items)

    def _evict(self) -> None:
        """Drop least recently used partitions until the budget holds (lock held)."""
        while self._held > self.max_bytes and self._items:
            _, old = self._items.popitem(last=False)
            self._held -= nbytes(old.X)

    def resize(self, max_bytes: int | Share) -> None:
        """Change the budget, evicting the least recently used partitions beyond it."""
        with self._lock:
            self.max_bytes = resolve(max_bytes)
            self._evict()


def _checksum(corpus: Corpus, index: int) -> str | None:
    parts = corpus.manifest.partitions
    return parts[index].sha256 if 0 <= index < len(parts) else None


class BatchSource:
    """Driver-side reads of a corpus's partitions as float64 matrices, through an LRU cache
    (samples for data-scaled priors and k-means++ seeding); ``cache_bytes`` as PartitionCache's."""

    def __init__(self, corpus: Corpus, cache_bytes: int | None = None) -> None:
        self.corpus = corpus
        self.refs = partition_refs(corpus)
        self.cache = PartitionCache(cache_bytes)

    def __len__(self) -> int:
        return self.corpus.n_partitions

    def get(self, index: int) -> Data:
        return self.cache.get(self.refs[index]).X

    def release(self) -> None:
        """Once the engine has started (its samples drawn): drop the cached partitions and keep
        none read later. They stayed for the whole run beside the executor's own cache, on
        local threads in the same process: a partition or more (of 250,000 x 32: 61 MiB) for
        each context, three with --obs auto."""
        self.cache.resize(0)

    def sample(self, n: int, rng: np.random.Generator) -> Data:
        """About n items drawn uniformly from partitions chosen at random (for initialisation)."""
        order = rng.permutation(len(self))
        parts, have = [], 0
        for i in order:
            X = self.get(int(i))
            parts.append(X)
            have += X.shape[0]
            if have >= n:
                break
        X = stack_rows(parts)
        take = np.sort(rng.choice(X.shape[0], size=min(n, X.shape[0]), replace=False))
        return X[take]
