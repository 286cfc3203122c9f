"""Reading text sources (plain or gzipped) with errors that name the file and line."""

from __future__ import annotations

import contextlib
import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .errors import DataError

COMPRESSION_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def open_binary(path: Path) -> IO[bytes]:
    """The file's bytes, decompressed when its name ends in ``.gz``."""
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as exc:
        raise DataError(path, f"cannot open ({exc})") from None


@contextlib.contextmanager
def decoding_errors(path: Path) -> Iterator[None]:
    """Turn decompression and decoding failures inside the block into a DataError on ``path``."""
    try:
        yield
    except COMPRESSION_ERRORS as exc:
        raise DataError(path, f"not a valid gzip file ({exc})") from None
    except UnicodeDecodeError as exc:
        raise DataError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of each line, decoded one line at a time."""
    with decoding_errors(path), open_binary(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(path, f"not UTF-8 text (byte {exc.start} of the line)",
                                line=lineno) from None
