"""Atomic publication of files and directories: write a temporary sibling, fsync, rename.

A reader never sees a half-written file: it sees the old version or the new one. What is
published gets the modes the umask allows (as ``open`` and ``mkdir`` would give), not the
private 0600/0700 of temporary files, so workers and readers running as other users can read
it. Staged directories carry their writer's PID in their name; one whose writer is gone (killed
by SIGKILL) is removed by the next writer into the same place.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
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


def umask() -> int:
    """The process's umask (read by setting it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, fsync it, rename it into place.
    An OSError (disk full, file too large, no permission) is an error naming ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise BnpmixError(f"{path}: cannot write ({exc.strerror or exc})") from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        os.chmod(tmp_path, 0o666 & ~umask())
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    except OSError as exc:
        tmp_path.unlink(missing_ok=True)
        raise BnpmixError(f"{path}: cannot write ({exc.strerror or exc})") from None
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
def staged_directory(final: str | Path, *, overwrite: bool = False,
                     guard: Callable[[], Any] | None = None) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success rename it to ``final``.

    On any exception the temporary directory is removed and ``final`` is left as it was.
    An existing non-empty ``final`` is refused unless ``overwrite``; with ``overwrite`` the old
    directory is replaced only after the new one is complete, inside ``guard()`` (a context
    manager: a corpus's append lock) when given.
    """
    final = Path(final)
    if final.exists() and not final.is_dir():
        raise BnpmixError(f"{final}: exists and is not a directory")
    if _is_nonempty_dir(final) and not overwrite:
        raise BnpmixError(
            f"{final}: output directory exists and is not empty (use --overwrite)"
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(final)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.{os.getpid()}-", suffix=".tmp",
                                dir=final.parent))
    os.chmod(tmp, 0o777 & ~umask())
    try:
        yield tmp
        for child in tmp.iterdir():
            if child.is_file():
                with open(child, "rb") as fh:
                    os.fsync(fh.fileno())
        fsync_dir(tmp)
        if overwrite and final.exists():
            with guard() if guard is not None else contextlib.nullcontext():
                trash = Path(
                    tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".old", dir=final.parent)
                )
                os.replace(final, trash / "old")
                os.replace(tmp, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:  # never over a directory another writer filled meanwhile (rename refuses it)
            _rename_into(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _rename_into(tmp: Path, final: Path) -> None:
    """Rename the staged ``tmp`` to ``final`` if that is absent or an empty directory; else an
    error (another writer published there after this one checked: its output is kept)."""
    try:
        os.rename(tmp, final)
    except OSError as exc:
        if _is_nonempty_dir(final) or not final.is_dir():
            raise BnpmixError(f"{final}: another writer filled it while this one wrote; its "
                              "output was kept (use --overwrite to replace it)") from None
        raise BnpmixError(f"{final}: cannot publish ({exc})") from None


def remove_stale_staging(final: Path) -> list[Path]:
    """Remove staged siblings of ``final`` (``.NAME.PID-XXXX.tmp``) whose writer process no
    longer exists: debris of a writer killed where no cleanup could run. Returns them."""
    pattern = re.compile(rf"\.{re.escape(final.name)}\.(\d+)-[^/]*\.tmp")
    removed = []
    for path in final.parent.glob(f".{final.name}.*.tmp"):
        match = pattern.fullmatch(path.name)
        if match and path.is_dir() and not pid_alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists (signal 0 probes without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True
