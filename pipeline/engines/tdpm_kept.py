"""tdpm's kept samples (after the burn-in, every ``thin`` sweeps): their canonical labels, their
stay indicators and the running sum of E[ρ_u] (membership stability). They are written in chunk
files of CHUNK samples as they are kept (checkpoint.chunks_dir), each file once, so a checkpoint
holds only the samples kept since the last chunk, whatever the sweeps done."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bnpmix.storage import BnpmixError
from bnpmix.storage.arrays import read_arrays, write_arrays_atomic

# kept samples a chunk file holds (checkpoint.chunks_dir): a checkpoint holds fewer than this
# many, whatever the sweeps done
CHUNK = 256
CHUNK_META = {"format": "bnpmix-kept-samples", "version": 1}


@dataclass
class KeptSamples:
    """The kept samples' labels and (membership stability) stayers, Σ E[ρ_u] over them, and the
    directory of their chunk files (None: none written)."""

    chunks: Path | None
    rho_sum: np.ndarray
    labels: list[np.ndarray] = field(default_factory=list)
    stays: list[np.ndarray] = field(default_factory=list)

    def keep(self, labels: np.ndarray, stays: np.ndarray | None = None,
             rho: np.ndarray | None = None) -> None:
        """One more sample: its canonical labels, stayers and E[ρ_u]; a chunk file written
        when CHUNK more are kept."""
        self.labels.append(labels.astype(np.int32))
        if stays is not None:
            self.stays.append(stays.copy())
        if rho is not None:
            self.rho_sum += rho
        if self.chunks is not None and len(self.labels) % CHUNK == 0:
            self._write_chunk(len(self.labels) // CHUNK - 1)

    def _chunk_path(self, j: int) -> Path:
        """The j-th chunk file."""
        assert self.chunks is not None
        return self.chunks / f"kept-{j:06d}.npz"

    def _write_chunk(self, j: int) -> None:
        """Kept samples j·CHUNK .. (j + 1)·CHUNK − 1 (and their stayers), written once."""
        assert self.chunks is not None
        part = slice(j * CHUNK, (j + 1) * CHUNK)
        arrays = [("kept", np.stack(self.labels[part]))]
        if self.stays:
            arrays.append(("kept_stays", np.stack(self.stays[part])))
        self.chunks.mkdir(parents=True, exist_ok=True)
        write_arrays_atomic(self._chunk_path(j), CHUNK_META, arrays)

    def chunked(self) -> int:
        """Kept samples in chunk files (none without a chunks directory)."""
        return 0 if self.chunks is None else len(self.labels) // CHUNK * CHUNK

    def meta(self) -> dict[str, int]:
        """The checkpoint's count of kept samples and of those in chunk files."""
        return {"kept": len(self.labels), "chunked": self.chunked()}

    def arrays(self) -> Iterator[tuple[str, np.ndarray]]:
        """The checkpoint's arrays: the samples kept since the last chunk, and Σ E[ρ_u]."""
        tail = slice(self.chunked(), None)
        if self.labels[tail]:
            yield "kept", np.stack(self.labels[tail])
        if self.stays[tail]:
            yield "kept_stays", np.stack(self.stays[tail])
        yield "rho_sum", self.rho_sum

    @classmethod
    def restore(cls, chunks: Path | None, n_ids: int, persist: bool, meta: Mapping[str, Any],
                arrays: Mapping[str, np.ndarray]) -> KeptSamples:
        """The kept samples a checkpoint (``meta``, ``arrays``) and its chunk files hold."""
        rho_sum = (np.asarray(arrays["rho_sum"], float).copy() if "rho_sum" in arrays
                   else np.zeros(n_ids))  # checkpoints from before membership stability
        kept = cls(chunks, rho_sum)
        chunked = int(meta.get("chunked", 0))  # (checkpoints before chunks hold them all)
        parts = [kept._read_chunk(j) for j in range(chunked // CHUNK)]
        if meta["kept"] > chunked:
            parts.append(arrays)
        for part in parts:
            kept.labels += list(np.asarray(part["kept"], np.int32))
            if persist:
                kept.stays += list(np.asarray(part["kept_stays"], bool))
        if len(kept.labels) != meta["kept"]:
            raise BnpmixError(f"{chunks}: the checkpoint keeps {meta['kept']} samples, its "
                              f"chunks and itself hold {len(kept.labels)}")
        return kept

    def _read_chunk(self, j: int) -> Mapping[str, np.ndarray]:
        """The j-th chunk file's arrays; an error naming it if it is missing."""
        path = self._chunk_path(j)
        if not path.exists():
            raise BnpmixError(f"{path}: missing (the checkpoint keeps its samples there)")
        with read_arrays(path, CHUNK_META["format"], CHUNK_META["version"]) as chunk:
            return {k: np.array(chunk[k]) for k in chunk}
