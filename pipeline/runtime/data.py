"""Partition data where it is used: the LRU partition cache (local threads and Dask workers), the
driver's sampling of a corpus, and data blocks as named arrays (dense, or CSR as its parts)."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import scipy.sparse as sp

from bnpmix.storage import Batch, Corpus

Data = np.ndarray | sp.csr_matrix


def nbytes(X: Data) -> int:
    if sp.issparse(X):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return int(X.nbytes)


def stack_rows(blocks: list[Data]) -> Data:
    """Row-wise concatenation of dense arrays or CSR matrices."""
    return sp.vstack(blocks, format="csr") if sp.issparse(blocks[0]) else np.concatenate(blocks)


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


class PartitionCache:
    """Partitions of one or more corpora kept in memory, least recently used evicted first;
    keyed by corpus, partition and checksum, so a changed partition is never served stale."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, int, str], Batch] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self._corpora: dict[str, Corpus] = {}

    def get(self, corpus_path: str, index: int) -> Batch:
        with self._lock:
            corpus = self._corpora.get(corpus_path)
            if corpus is None or index >= corpus.n_partitions:  # new, or grown by --append
                corpus = self._corpora[corpus_path] = Corpus(corpus_path)
            key = (corpus_path, index, corpus.manifest.partitions[index].sha256)
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        batch = corpus.read(index)
        batch.X = batch.X.astype("float64", copy=False)
        size = nbytes(batch.X)
        with self._lock:
            if size <= self.max_bytes and key not in self._items:
                self._items[key] = batch
                self._held += size
                self._evict()
        return batch

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

    def resize(self, max_bytes: int) -> None:
        """Change the budget, evicting the least recently used partitions beyond it."""
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()


class BatchSource:
    """Driver-side reads of a corpus's partitions as float64 matrices, through an LRU cache
    (samples for data-scaled priors and k-means++ seeding)."""

    def __init__(self, corpus: Corpus, cache_bytes: int = 2 << 30) -> None:
        self.corpus = corpus
        self.path = str(corpus.path.resolve())
        self.cache = PartitionCache(cache_bytes)

    def __len__(self) -> int:
        return self.corpus.n_partitions

    def get(self, index: int) -> Data:
        return self.cache.get(self.path, index).X

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
