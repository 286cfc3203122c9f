"""A CSV file's header and rows read into numbers: every malformed row or field is a DataError
naming the file, its line and the field's column."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .dense import FLOAT_EXACT, INT64_MAX, INT64_MIN
from .errors import DataError

INT_ROLES = ("time", "sequence")  # csv columns parsed as int64


def next_row(reader: Any, path: Path) -> list[str] | None:
    """The next CSV row, or None at the end; a malformed row (e.g. a field over the csv
    module's size limit) is a DataError naming its line."""
    try:
        return next(reader, None)
    except csv.Error as exc:
        raise DataError(path, f"malformed CSV ({exc})", line=reader.line_num) from None


def parse_float(text: str, path: Path, line: int, name: str) -> float:
    """A feature field as a finite float64."""
    try:
        value = float(text)
    except ValueError:
        raise DataError(path, f"not a number: {text!r}", line=line, field=name) from None
    if not math.isfinite(value):
        raise DataError(path, f"non-finite value {text!r}", line=line, field=name)
    return value


def parse_int(text: str, path: Path, line: int, name: str) -> int:
    """An integer field, exactly: digits parse as an integer (never through float64, which
    keeps 53 bits); a float form (``3.0``, ``1e3``) must be an integer within ±2^53."""
    try:
        value = int(text.strip())
    except ValueError:
        number = parse_float(text, path, line, name)
        if number != int(number):
            raise DataError(path, f"not an integer: {text!r}", line=line, field=name) from None
        if FLOAT_EXACT < abs(number) <= INT64_MAX:
            raise DataError(path, f"integer {text!r} is written as a float beyond 2^53, where "
                            "digits are lost: write its digits", line=line, field=name) from None
        value = int(number)
    if not INT64_MIN <= value <= INT64_MAX:
        raise DataError(path, f"integer {text!r} out of the int64 range", line=line, field=name)
    return value


def column_arrays(cols: dict[str, list]) -> dict[str, np.ndarray]:
    """A chunk's per-item columns: time and sequence as int64, labels and ids as strings."""
    return {k: np.asarray(v, dtype=np.int64 if k in INT_ROLES else str) for k, v in cols.items()}


@dataclass
class CsvHeader:
    """The header row: which fields are features (by position) and which play a role (label,
    time, item, sequence: role -> column name)."""

    path: Path
    header: list[str]
    special: dict[str, str]
    position: dict[str, int]  # column name -> its field (the last, for a repeated name)
    feature_idx: list[int]
    names: list[str]

    @classmethod
    def read(cls, reader: Any, path: Path, special: dict[str, str]) -> CsvHeader:
        """The first row, every role's column checked to be in it and some feature left."""
        header = next_row(reader, path)
        if header is None:
            raise DataError(path, "empty source: no header line")
        for role, name in special.items():
            if name not in header:
                raise DataError(path, f"no column {name!r} for --{role}-column", line=1)
        feature_idx = [i for i, h in enumerate(header) if h not in special.values()]
        if not feature_idx:
            raise DataError(path, "no numeric feature columns", line=1)
        position = {name: i for i, name in enumerate(header)}
        return cls(path, header, special, position, feature_idx,
                   [header[i] for i in feature_idx])

    def parse(self, row: list[str], line: int) -> tuple[list[float], dict[str, Any]]:
        """A data row's feature values and its role fields (time and sequence as integers)."""
        path = self.path
        if len(row) != len(self.header):
            raise DataError(path, f"expected {len(self.header)} fields, found {len(row)}",
                            line=line)
        values = [parse_float(row[i], path, line, n)
                  for i, n in zip(self.feature_idx, self.names, strict=True)]
        extra = {role: parse_int(row[self.position[name]], path, line, name)
                 if role in INT_ROLES else row[self.position[name]]
                 for role, name in self.special.items()}
        return values, extra


__all__ = ["INT_ROLES", "CsvHeader", "column_arrays", "next_row", "parse_float", "parse_int"]
