"""Batches for the local driver: partitions read from the corpus, kept in memory while they fit."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import scipy.sparse as sp

from bnpmix.storage import Corpus

Data = np.ndarray | sp.csr_matrix


def nbytes(X: Data) -> int:
    if sp.issparse(X):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return int(X.nbytes)


class BatchSource:
    """Partition i of a corpus as a float64 matrix, with an LRU cache bounded in bytes."""

    def __init__(self, corpus: Corpus, cache_bytes: int = 2 << 30) -> None:
        self.corpus = corpus
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[int, Data] = OrderedDict()
        self._held = 0

    def __len__(self) -> int:
        return self.corpus.n_partitions

    def get(self, index: int) -> Data:
        if index in self._cache:
            self._cache.move_to_end(index)
            return self._cache[index]
        X = self.corpus.read(index).X
        X = X.astype(np.float64, copy=False)
        size = nbytes(X)
        if size <= self.cache_bytes:
            self._cache[index] = X
            self._held += size
            while self._held > self.cache_bytes:
                _, old = self._cache.popitem(last=False)
                self._held -= nbytes(old)
        return X

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
        X = sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.concatenate(parts)
        take = np.sort(rng.choice(X.shape[0], size=min(n, X.shape[0]), replace=False))
        return X[take]
