"""A corpus's ``manifest.json``: what the corpus holds (kind, dimension, vocabulary, optional
columns, each partition's file, rows, size, SHA-256 and non-zeros), validated field by field
when read.

A dense corpus's manifest also records each column's ``steps``: 1 where every value ingested is
an integer, 0 for a continuous column (the Gaussian models dequantise the integer columns:
algorithms/obs/dequant.py). An append with a non-integer value in an integer column turns it
continuous. A manifest without the field (written before it existed) reads as all continuous.
The manifest's optional ``ingest`` object records how the source was read (the stop-word list,
the document-frequency limits, where the labels came from).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import BnpmixError

FORMAT_NAME = "bnpmix-corpus"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
VOCAB_FILE = "vocab.txt"
KINDS = ("dense", "bow")
OPTIONAL_COLUMNS = ("item", "label", "time", "sequence")
DENSE_DTYPES = ("float32", "float64")


def integer_columns(X: np.ndarray) -> np.ndarray:
    """Which columns of X (n, D) hold only integers: (D,) bool (an integer dtype: all)."""
    if X.dtype.kind in "iub":
        return np.ones(X.shape[1], dtype=bool)
    return np.all(np.round(X) == X, axis=0)


def combined_steps(old: list[float] | None, new: list[float] | None) -> list[float] | None:
    """The steps of a corpus after an append: a column keeps its step where the new rows have
    the same, else it turns continuous (0); unknown (None) on either side stays unknown."""
    if old is None or new is None:
        return None
    return [a if a == b else 0.0 for a, b in zip(old, new, strict=True)]


def partition_name(index: int) -> str:
    """File name of partition ``index``."""
    return f"part-{index:05d}.parquet"


@dataclass(frozen=True)
class PartitionInfo:
    """One partition file: its rows, size, checksum and (bag-of-words) non-zeros."""

    file: str
    rows: int
    bytes: int
    sha256: str
    nnz: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "file": self.file,
            "rows": self.rows,
            "bytes": self.bytes,
            "sha256": self.sha256,
        }
        if self.nnz is not None:
            out["nnz"] = self.nnz
        return out


def _partition_info(entry: Any, i: int, path: str | Path) -> PartitionInfo:
    """One manifest partition entry, its fields checked; errors name partitions[i].field."""
    where = f"{path}: partitions[{i}]"
    if not isinstance(entry, dict):
        raise BnpmixError(f"{where} must be an object")
    try:
        info = PartitionInfo(**entry)
    except TypeError as exc:
        raise BnpmixError(f"{where} is malformed ({exc})") from None
    if not isinstance(info.file, str) or partition_name(i) != info.file:
        raise BnpmixError(f"{where}.file must be {partition_name(i)!r}, not {info.file!r}")
    for key in ("rows", "bytes"):
        value = getattr(info, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BnpmixError(f"{where}.{key} must be a non-negative integer, not {value!r}")
    if not isinstance(info.sha256, str) or len(info.sha256) != 64:
        raise BnpmixError(f"{where}.sha256 must be 64 hexadecimal digits")
    return info


@dataclass
class Manifest:
    """What a corpus holds: kind, dimension, vocabulary, optional columns and partitions."""

    kind: str
    dim: int
    dtype: str
    columns: tuple[str, ...] = ()
    vocab: list[str] | None = None
    partitions: list[PartitionInfo] = field(default_factory=list)
    ingest: dict[str, Any] | None = None  # how the source was read (stop words, labels, ...)
    steps: list[float] | None = None  # dense: each column's step (1: integers, 0: continuous)

    @property
    def integer_steps(self) -> np.ndarray | None:
        """The columns' steps Δ (D,) when some column is integer-valued, else None."""
        if self.steps is None or not any(self.steps):
            return None
        return np.asarray(self.steps, dtype=float)

    @property
    def n_items(self) -> int:
        return sum(p.rows for p in self.partitions)

    @property
    def nnz(self) -> int | None:
        if self.kind != "bow":
            return None
        return sum(p.nnz or 0 for p in self.partitions)

    @property
    def n_bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def vocab_sha256(self) -> str | None:
        """sha256 of the vocabulary (None without one): see ``vocab_sha256``."""
        return None if self.vocab is None else vocab_sha256(self.vocab)

    def facts(self) -> dict[str, Any]:
        """What a model fitted to this corpus depends on: kind, dimension, vocabulary."""
        return {"kind": self.kind, "dim": self.dim, "vocab_sha256": self.vocab_sha256}

    def to_json(self) -> dict[str, Any]:
        out = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "dim": self.dim,
            "dtype": self.dtype,
            "columns": list(self.columns),
            "n_items": self.n_items,
            "nnz": self.nnz,
            "vocab": self.vocab,
            "partitions": [p.to_json() for p in self.partitions],
        }
        if self.ingest is not None:
            out["ingest"] = self.ingest
        if self.steps is not None:
            out["steps"] = self.steps
        return out

    @classmethod
    def from_json(cls, obj: Any, path: str | Path) -> Manifest:
        """Validate a parsed manifest; errors name the manifest file and the field."""
        if not isinstance(obj, dict):
            raise BnpmixError(f"{path}: a manifest is a JSON object, not a "
                              f"{type(obj).__name__}")

        def need(key: str, kind: type | tuple[type, ...]) -> Any:
            if key not in obj:
                raise BnpmixError(f"{path}: field {key!r} is missing")
            if not isinstance(obj[key], kind) or isinstance(obj[key], bool):
                raise BnpmixError(f"{path}: field {key!r} has the wrong type "
                                  f"({type(obj[key]).__name__})")
            return obj[key]

        if obj.get("format") != FORMAT_NAME:
            raise BnpmixError(f"{path}: not a bnpmix corpus manifest (field 'format')")
        if need("version", int) > FORMAT_VERSION:
            raise BnpmixError(
                f"{path}: corpus format version {obj['version']} is newer than this bnpmix"
            )
        kind = need("kind", str)
        if kind not in KINDS:
            raise BnpmixError(f"{path}: field 'kind' must be one of {KINDS}, not {kind!r}")
        columns = tuple(need("columns", list))
        unknown = set(columns) - set(OPTIONAL_COLUMNS)
        if unknown:
            raise BnpmixError(f"{path}: field 'columns' names unknown columns {sorted(unknown)}")
        dim = need("dim", int)
        if dim < 1:
            raise BnpmixError(f"{path}: field 'dim' must be a positive integer, not {dim}")
        dtype = need("dtype", str)
        allowed = DENSE_DTYPES if kind == "dense" else ("int32",)
        if dtype not in allowed:
            raise BnpmixError(f"{path}: field 'dtype' must be one of {list(allowed)} for a "
                              f"{kind} corpus, not {dtype!r}")
        vocab = obj.get("vocab")
        if vocab is not None and (not isinstance(vocab, list) or len(vocab) != dim
                                  or not all(isinstance(w, str) for w in vocab)):
            raise BnpmixError(f"{path}: field 'vocab' must be a list of {dim} words (dim)")
        entries = need("partitions", list)
        if not entries:
            raise BnpmixError(f"{path}: field 'partitions' is empty: a corpus has at least one")
        parts = [_partition_info(p, i, path) for i, p in enumerate(entries)]
        ingest = obj.get("ingest")
        if ingest is not None and not isinstance(ingest, dict):
            raise BnpmixError(f"{path}: field 'ingest' must be an object, not a "
                              f"{type(ingest).__name__}")
        steps = obj.get("steps")
        if steps is not None and (
                not isinstance(steps, list) or len(steps) != dim
                or not all(isinstance(v, int | float) and not isinstance(v, bool)
                           and math.isfinite(v) and v >= 0 for v in steps)):
            raise BnpmixError(f"{path}: field 'steps' must be a list of {dim} non-negative "
                              "numbers (dim)")
        return cls(kind=kind, dim=dim, dtype=dtype, columns=columns,
                   vocab=list(vocab) if vocab is not None else None, partitions=parts,
                   ingest=ingest, steps=steps)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def vocab_sha256(words: list[str]) -> str:
    """sha256 of a vocabulary, one word per line: how a fit records the columns it saw."""
    return sha256_bytes("\n".join(words).encode())
