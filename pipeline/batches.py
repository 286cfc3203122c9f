"""Driver-side access to a corpus's partitions (samples for priors and seeding, tests)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from bnpmix.storage import Corpus

Data = np.ndarray | sp.csr_matrix


def nbytes(X: Data) -> int:
    if sp.issparse(X):
        return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return int(X.nbytes)


def stack_rows(blocks: list[Data]) -> Data:
    """Row-wise concatenation of dense arrays or CSR matrices."""
    return sp.vstack(blocks, format="csr") if sp.issparse(blocks[0]) else np.concatenate(blocks)


class BatchSource:
    """Partition i of a corpus as a float64 matrix, read through an LRU PartitionCache."""

    def __init__(self, corpus: Corpus, cache_bytes: int = 2 << 30) -> None:
        from .executors import PartitionCache

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
