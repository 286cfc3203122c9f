"""Blocks of a corpus as Arrow tables (dense rows as a fixed-size list column ``x``; documents as
``word_ids`` and ``counts`` list columns) and a table written as one partition file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .manifest import PartitionInfo, partition_name, sha256_bytes

if TYPE_CHECKING:
    import pyarrow as pa


def dense_table(X: np.ndarray, columns: dict[str, np.ndarray]) -> pa.Table:
    """Arrow table of a dense block: ``x`` as fixed_size_list<float>[D] plus optional columns."""
    import pyarrow as pa

    X = np.ascontiguousarray(X)
    flat = pa.array(X.reshape(-1))
    arrays = {"x": pa.FixedSizeListArray.from_arrays(flat, X.shape[1])}
    arrays.update({k: pa.array(v) for k, v in columns.items()})
    return pa.table(arrays)


def bow_table(
    indptr: np.ndarray, word_ids: np.ndarray, counts: np.ndarray, columns: dict[str, np.ndarray]
) -> pa.Table:
    """Arrow table of a bag-of-words block: CSR (indptr, word_ids, counts) as two list columns."""
    import pyarrow as pa

    offsets = pa.array(np.asarray(indptr, dtype=np.int32))
    arrays = {
        "word_ids": pa.ListArray.from_arrays(offsets, pa.array(word_ids.astype(np.int32))),
        "counts": pa.ListArray.from_arrays(offsets, pa.array(counts.astype(np.int32))),
    }
    arrays.update({k: pa.array(v) for k, v in columns.items()})
    return pa.table(arrays)


def write_partition(directory: Path, index: int, table: pa.Table, nnz: int | None) -> PartitionInfo:
    """Write one partition file into ``directory`` and describe it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    # dictionary-encoding distinct floats only wastes memory; word ids and counts repeat a lot
    dictionary = "word_ids" in table.column_names
    pq.write_table(table, sink, compression="snappy", use_dictionary=dictionary)
    data = sink.getvalue().to_pybytes()
    name = partition_name(index)
    (directory / name).write_bytes(data)
    return PartitionInfo(name, table.num_rows, len(data), sha256_bytes(data), nnz)
