"""Errors that carry the place of the problem: the file and, where known, the line or row."""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

# a URL's scheme; Dask's own comm schemes name scheduler addresses, not storage
URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
DASK_SCHEMES = frozenset({"tcp", "tls", "ucx", "inproc", "ws", "wss"})


def is_url(path: object) -> bool:
    """Whether ``path`` is a URL string (``scheme://...``) rather than a local path."""
    return isinstance(path, str) and URL.match(path) is not None


class BnpmixError(Exception):
    """Any error bnpmix reports to a user as one line (exit code 1 from the CLI)."""


class DataError(BnpmixError):
    """Bad input data. The message names the file and the line (1-based) or row (0-based)."""

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        line: int | None = None,
        row: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.row = row
        self.field = field
        where = self.path
        if line is not None:
            where += f", line {line}"
        if row is not None:
            where += f", row {row}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")


class CorruptPartitionError(BnpmixError):
    """A partition file whose bytes no longer match the checksum recorded at ingestion."""


class DataWarning(UserWarning):
    """Input that ingests but probably not as meant (the CLI prints it as ``bnpmix: warning``)."""


class FitWarning(DataWarning):
    """A fit that finished but probably not as meant (one cluster where more were possible)."""


def local_path(path: str | Path) -> Path:
    """``path`` as a local Path, or an error for an object-storage URL (s3://, gs://, ...)
    where bnpmix would write, which ``Path`` would silently turn into a local directory named
    after the scheme."""
    match = URL.match(str(path)) if isinstance(path, str) else None
    if match and match.group(1).lower() not in DASK_SCHEMES:
        raise BnpmixError(f"{path}: {match.group(1)}:// URLs are not supported here: this "
                          "argument names a local file or directory (corpora, run "
                          "directories, reports and scheduled runs can be URLs)")
    return Path(path)


@contextlib.contextmanager
def naming(places: dict[str, str], notes: dict[str, str] | None = None) -> Iterator[None]:
    """Inside, work on temporary copies (the estimator's run, tune's sample, a run's
    local workspace) whose BnpmixErrors and warnings name what each copy stands for: each path
    of ``places`` in their text becomes its name (the user's X, corpus or run). An exception's
    notes (``bnpmix resume RUN``) get the paths of ``notes`` instead, or, without them, are
    dropped where they name a copy: the copy is gone when the exception arrives."""
    held: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            try:
                yield
            finally:
                held = list(caught)
    except BaseException as exc:
        if isinstance(exc, BnpmixError):
            exc.args = (_renamed(str(exc), places),)
        if isinstance(exc, DataError):
            exc.path = _renamed(exc.path, places)
        if hasattr(exc, "__notes__"):
            exc.__notes__ = [_renamed(n, notes) for n in exc.__notes__] if notes is not None \
                else [n for n in exc.__notes__ if _renamed(n, places) == n]
        raise
    finally:
        for w in held:
            warnings.warn_explicit(_renamed(str(w.message), places), w.category, w.filename,
                                   w.lineno)


def _renamed(text: str, places: dict[str, str]) -> str:
    for path, name in places.items():
        text = text.replace(path, name)
    return text
