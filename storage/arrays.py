"""Files of named arrays plus JSON, never pickle: checkpoints and anything else read back.

``write_arrays_atomic`` streams arrays one at a time into an ``.npz`` (a zip of ``.npy``
members), with the JSON description stored as a UTF-8 byte array under ``META``, and publishes the
file atomically. ``read_arrays`` opens one with ``allow_pickle=False`` and checks its format tag
and version: a malformed or foreign file (a pickle, an object array, another program's zip) is
refused with an error naming it and is never executed.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .atomic import atomic_write
from .errors import BnpmixError

META = "__meta__"


def write_arrays_atomic(path: str | Path, meta: dict[str, Any],
                        arrays: Iterable[tuple[str, np.ndarray]]) -> Path:
    """Atomically write ``meta`` (JSON) and the arrays, each written as it is produced."""

    def write(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
            for name, value in [(META, blob), *arrays]:
                if name != META and name.startswith("__"):
                    raise ValueError(f"array name {name!r} is reserved")
                with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, np.asarray(value), allow_pickle=False)

    return atomic_write(path, write)


class ArrayFile(Mapping[str, np.ndarray]):
    """A read-only view of an arrays file: ``meta`` and lazily read arrays by name."""

    def __init__(self, path: Path, npz: Any, meta: dict[str, Any]) -> None:
        self.path, self._npz, self.meta = path, npz, meta
        self._names = [n for n in npz.files if n != META]
        self._groups: dict[str, list[str]] | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self._npz[name]
        except (KeyError, ValueError, OSError, zipfile.BadZipFile) as exc:
            raise BnpmixError(f"{self.path}: array {name!r} unreadable ({exc})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def group(self, prefix: str) -> dict[str, np.ndarray]:
        """The arrays named ``prefix/NAME`` (one level below ``prefix``), keyed by NAME."""
        if self._groups is None:  # indexed once: a checkpoint may hold thousands of groups
            self._groups = {}
            for n in self._names:
                parent, _, leaf = n.rpartition("/")
                self._groups.setdefault(parent, []).append(leaf)
        prefix = prefix.rstrip("/")
        return {leaf: self[f"{prefix}/{leaf}"] for leaf in self._groups.get(prefix, [])}

    def tree(self, prefix: str) -> dict[str, np.ndarray]:
        """The arrays named ``prefix/...`` at any depth, keyed by the rest of their names."""
        head = prefix.rstrip("/") + "/"
        return {n[len(head):]: self[n] for n in self._names if n.startswith(head)}

    def close(self) -> None:
        self._npz.close()

    def __enter__(self) -> ArrayFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_arrays(path: str | Path, fmt: str, version: int) -> ArrayFile:
    """Open an arrays file whose meta has ``format == fmt`` and ``version == version``."""
    path = Path(path)
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise BnpmixError(f"{path}: not a bnpmix {fmt} file ({exc})") from None
    try:
        if not hasattr(npz, "files") or META not in npz.files:
            raise ValueError("it has no description")
        blob = npz[META]
        if blob.dtype != np.uint8 or blob.ndim != 1:
            raise ValueError("its description is not text")
        meta = json.loads(blob.tobytes().decode("utf-8"))
        found = meta.get("format") if isinstance(meta, dict) else meta
        if found != fmt:
            raise ValueError(f"its format is {found!r}")
        if meta.get("version") != version:
            raise ValueError(f"version {meta.get('version')} is not {version}")
    except (ValueError, KeyError, OSError, UnicodeDecodeError, zipfile.BadZipFile) as exc:
        if hasattr(npz, "close"):
            npz.close()
        raise BnpmixError(f"{path}: not a bnpmix {fmt} file ({exc})") from None
    return ArrayFile(path, npz, meta)
