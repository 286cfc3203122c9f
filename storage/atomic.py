"""Atomic publication of files and directories: write a temporary sibling, fsync, rename.

A reader never sees a half-written file: it sees the old version or the new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .errors import BnpmixError


def fsync_dir(path: str | Path) -> None:
    """Flush a directory's entries (the rename itself) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, fsync it, rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Atomically replace ``path`` by ``data``."""
    return atomic_write(path, lambda p: p.write_bytes(data))


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Atomically replace ``path`` by ``text`` (UTF-8)."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, obj: Any) -> Path:
    """Atomically replace ``path`` by ``obj`` as indented JSON."""
    return write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def _is_nonempty_dir(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


@contextlib.contextmanager
def staged_directory(final: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success rename it to ``final``.

    On any exception the temporary directory is removed and ``final`` is left as it was.
    An existing non-empty ``final`` is refused unless ``overwrite``; with ``overwrite`` the old
    directory is replaced only after the new one is complete.
    """
    final = Path(final)
    if final.exists() and not final.is_dir():
        raise BnpmixError(f"{final}: exists and is not a directory")
    if _is_nonempty_dir(final) and not overwrite:
        raise BnpmixError(
            f"{final}: output directory exists and is not empty (use --overwrite)"
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        yield tmp
        for child in tmp.iterdir():
            if child.is_file():
                with open(child, "rb") as fh:
                    os.fsync(fh.fileno())
        fsync_dir(tmp)
        if final.exists():
            trash = Path(
                tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".old", dir=final.parent)
            )
            os.replace(final, trash / "old")
            os.replace(tmp, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
