"""Errors that carry the place of the problem: the file and, where known, the line or row."""

from __future__ import annotations

from pathlib import Path


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
