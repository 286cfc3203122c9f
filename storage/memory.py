"""A corpus of items held in memory (the estimator's X): the partitions and manifest that
``write_corpus`` would write, without writing them.

``memory_corpus(X)`` cuts X into the row blocks of ``matrix.blocks`` (a Dask collection's own
blocks; else storage.partition_rows rows each) and describes them by the manifest a corpus of X
records (kind, dimension, integer columns' steps, rows and non-zeros per partition); reading
partition i gives the matrix ``Corpus.read`` would give of that corpus's file, bit for bit. Each
partition is a ``MemoryPartition``, which a task carries to where its batch runs: a Dask
block is computed there (never gathered on the driver). A partition's ``bytes`` is its size in
memory and its ``sha256`` a key for caches, not a file's checksum: no file exists.
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .corpus import Batch, Corpus
from .manifest import Manifest, PartitionInfo, partition_name
from .matrix import (
    as_matrix,
    block_of,
    blocks,
    check_block,
    counts_read_back,
    dask_pieces,
    is_dask,
    manifest_of,
)
from .writer import new_corpus, partition_rows

NAME = "X"  # what errors and tasks call a corpus held in memory


@dataclass(frozen=True, eq=False)
class MemoryPartition:
    """One partition of X: its rows in memory (``rows``), or a Dask block's delayed pieces
    (``pieces``, computed by ``read`` where it runs); ``index`` and ``start`` as Batch's."""

    index: int
    start: int
    rows: Any = None
    pieces: tuple[Any, ...] = ()
    frame: bool = False

    def read(self) -> Batch:
        """The partition as Corpus.read gives it: C-ordered float64 rows, or CSR counts."""
        if self.pieces:
            import dask

            block = block_of(list(dask.compute(*self.pieces, scheduler="sync")), self.frame)
        else:
            block = self.rows
        X = counts_read_back(block) if sp.issparse(block) else np.ascontiguousarray(block)
        return Batch(X=X, index=self.index, start=self.start)


class MemoryCorpus(Corpus):
    """Corpus's interface over partitions in memory (``sources``, one MemoryPartition per
    partition of this view); ``uri`` and ``path`` are its ``name`` (X, or what the items are
    a copy of), which errors and tasks show; nothing is kept on disk."""

    kept = False  # a run records no training corpus (its job.json names none)

    def __init__(self, manifest: Manifest, sources: Sequence[MemoryPartition],
                 name: str = NAME) -> None:
        self.path = name
        self.manifest = manifest
        self.sources = list(sources)
        self.origin = list(range(len(self.sources)))
        self._starts = np.array([s.start for s in self.sources], dtype=np.int64)

    def subset(self, indices: Sequence[int]) -> MemoryCorpus:
        view = super().subset(indices)
        view.sources = [self.sources[i] for i in indices]
        return view

    @property
    def remote(self) -> bool:
        return False

    @property
    def uri(self) -> str:
        return self.path

    def partition_file(self, index: int) -> str:
        return f"{self.path}, partition {index}"

    def read(self, index: int) -> Batch:
        if not 0 <= index < self.n_partitions:
            raise IndexError(f"{self.path}: no partition {index} (has {self.n_partitions})")
        batch = self.sources[index].read()
        batch.index = index
        return batch

    @property
    def vocab_file(self) -> Path | None:
        return None


def memory_corpus(X: Any, name: str = NAME) -> MemoryCorpus:
    """X as a MemoryCorpus called ``name`` (errors as write_corpus's: X's own checks, then each
    block's)."""
    if is_dask(X):
        return _dask_corpus(X, name)
    X = as_matrix(X)
    rows = partition_rows(None, None if sp.issparse(X) else X.shape[1])
    parts = [X[a:a + rows] for a in range(0, X.shape[0], rows)]
    manifest = manifest_of(parts[0])
    facts = [_facts(part, manifest.dim) for part in parts]
    return _corpus(manifest, facts, lambda i, start: MemoryPartition(i, start, rows=parts[i]),
                   name)


def _facts(block: Any, dim: int) -> tuple[int, np.ndarray | None, int | None, int]:
    """What the manifest records of a block (check_block's checks passed): rows, integer
    columns (None for counts), non-zeros (None for dense rows) and bytes in memory."""
    integer = check_block(block, dim)
    if not sp.issparse(block):
        return block.shape[0], integer, None, int(block.nbytes)
    return block.shape[0], None, int(block.nnz), 12 * int(block.nnz) + 8 * (block.shape[0] + 1)


def _corpus(manifest: Manifest, facts: Sequence[tuple[int, np.ndarray | None, int | None, int]],
            source: Callable[[int, int], MemoryPartition], name: str) -> MemoryCorpus:
    """The corpus of the blocks ``facts`` describes (``source(i, start)``: block i, its first
    row ``start``): their partitions, and a dense corpus's steps (1 where every block's column
    holds only integers), as write_corpus records them."""
    integer = np.ones(manifest.dim, dtype=bool)
    token, sources, start = uuid.uuid4().hex, [], 0
    for i, (rows, columns, nnz, nbytes) in enumerate(facts):
        if columns is not None:
            integer &= columns
        key = hashlib.sha256(f"{token}:{i}".encode()).hexdigest()
        manifest.partitions.append(PartitionInfo(partition_name(i), rows, nbytes, key, nnz))
        sources.append(source(i, start))
        start += rows
    if manifest.kind == "dense":
        manifest.steps = integer.astype(float).tolist()
    return MemoryCorpus(manifest, sources, name)


def _dask_facts(values: list[Any], frame: bool) -> tuple[Any, ...] | None:
    """One Dask block's (columns, sparse, _facts), computed where the block is; None where the
    block is refused (the driver then reads that block alone to raise its error)."""
    try:
        block = block_of(values, frame)
        return block.shape[1], sp.issparse(block), _facts(block, block.shape[1])
    except ValueError:
        return None


def _dask_corpus(X: Any, name: str) -> MemoryCorpus:
    """A Dask collection's blocks as partitions: their facts computed by Dask (each block where
    Dask runs it, only the facts returned), the blocks themselves read where batches run."""
    import dask

    cut = dask_pieces(X)
    found = dask.compute(*(dask.delayed(_dask_facts)(pieces, frame) for pieces, frame in cut))
    for (pieces, frame), fact in zip(cut, found, strict=True):
        if fact is None or fact[:2] != found[0][:2]:
            _refuse(pieces, frame, found[0])
    dim, sparse = found[0][:2]
    manifest = manifest_of(sp.csr_matrix((0, dim)) if sparse else np.zeros((0, dim)))
    return _corpus(manifest, [fact[2] for fact in found],
                   lambda i, start: MemoryPartition(i, start, pieces=tuple(cut[i][0]),
                                                    frame=cut[i][1]), name)


def _refuse(pieces: list[Any], frame: bool, first: tuple[Any, ...] | None) -> None:
    """Raise what write_corpus raises of this block (computed here, alone): X's own checks, a
    width other than the first block's, counts that are not counts; or a kind other than the
    first block's."""
    import dask

    block = block_of(list(dask.compute(*pieces)), frame)
    check_block(block, block.shape[1] if first is None else first[0])
    raise ValueError(f"a block of X is {'sparse' if sp.issparse(block) else 'dense'}, unlike "
                     "the first")


def write_corpus(X: Any, out: Path) -> Path:
    """X as a corpus at ``out``: dense rows, or bag-of-words for sparse counts (the kind and
    width from the first block); dense columns holding only integers are recorded as such
    (the manifest's steps, as ``bnpmix ingest`` records them)."""
    parts = blocks(X)
    first = next(parts, None)
    if first is None:
        raise ValueError("X has no items")
    manifest = manifest_of(first)
    integer = np.ones(manifest.dim, dtype=bool)
    with new_corpus(out, manifest) as w:
        for block in itertools.chain([first], parts):
            columns = check_block(block, manifest.dim)
            if columns is not None:
                integer &= columns
                w.add_dense(block)
            else:
                w.add_bow(block.indptr, block.indices, block.data.astype(np.int32))
        if manifest.kind == "dense":  # the manifest is written as the block ends
            manifest.steps = integer.astype(float).tolist()
    return out
