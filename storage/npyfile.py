"""Ingestion of a 2-D real ``.npy`` file, one partition memory-mapped at a time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .corpus import Manifest
from .dense import Chunk, dense_dtype, write_dense
from .errors import DataError
from .labels import open_labels, streaming
from .writer import partition_rows as rows_per_partition


def ingest_npy(
    path: str | Path,
    out: str | Path,
    *,
    labels: str | Path | None = None,
    partition_rows: int | None = None,
    overwrite: bool = False,
) -> Manifest:
    """Ingest a 2-D real ``.npy`` array, mapping one partition's rows into memory at a time
    (None for ``partition_rows``: storage.partition_rows' default for its width).
    ``labels``: a text file with one label per row, or a .npy 1-D array of them (see
    storage/labels.py), stored as the ``label`` column."""
    path = Path(path)
    try:
        header = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(path, f"not a readable .npy file ({exc})") from None
    shape, dtype, offset = header.shape, header.dtype, header.offset
    fortran = header.ndim == 2 and not header.flags.c_contiguous
    del header
    if len(shape) != 2:
        raise DataError(path, f"expected a 2-D array, got shape {shape}")
    if dtype.kind not in "fiu":
        raise DataError(path, f"expected a real numeric array, got dtype {dtype}")
    n, d = shape
    partition_rows = rows_per_partition(partition_rows, d)
    label_file = open_labels(labels)
    if label_file is not None:
        label_file.check_count(n, path, "rows")

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        if fortran:
            full = np.load(path, mmap_mode="r")
            for s in range(0, n, partition_rows):
                yield s, np.array(full[s : s + partition_rows])
            return
        for s in range(0, n, partition_rows):
            rows = min(partition_rows, n - s)
            view = np.memmap(
                path, dtype=dtype, mode="r", offset=offset + s * d * dtype.itemsize, shape=(rows, d)
            )
            block = np.array(view)
            del view  # unmap now: resident pages stay bounded by one partition
            yield s, block

    def chunks() -> Iterator[Chunk]:
        with streaming(label_file) as stream:
            for s, block in blocks():
                yield s, block, {} if stream is None else {"label": stream.take(len(block))}

    columns = () if label_file is None else ("label",)
    ingest = None if label_file is None else {"format": "npy", "labels": label_file.meta()}
    return write_dense(out, path, d, dense_dtype(dtype), columns, chunks(), overwrite, ingest)


__all__ = ["ingest_npy"]
