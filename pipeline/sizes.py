"""Sizes in bytes as people write them: the one parser of every byte-size flag (fit's and plan's
``--cache-bytes``, ``--summary-bytes``, plan's ``--memory``), job-file key and Dask setting (a
leaf module: the options, the command line and the settings read it without importing one
another).

A size is a whole number of bytes or a number and a unit, case ignored and a space allowed, as
Dask reads its own settings (``dask.utils.parse_bytes``): decimal units are powers of 1000
(``k``/``kB``, ``M``/``MB``, ``G``/``GB``, ``T``/``TB``, ``P``/``PB``), binary ones powers of 1024
(``KiB``, ``MiB``, ``GiB``, ``TiB``, ``PiB``); ``B`` is one byte. So 40MB is 40,000,000 bytes,
1.5GiB is 1,610,612,736 and 200k is 200,000. A size that is not a whole number of bytes
(``0.5B``) is refused; a negative one by ``nbytes``, or by the option table's interval (config.py's
one range check, which names the option and its interval).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

DECIMAL = {"": 1, "b": 1, **{f"{p}{b}": 1000 ** (i + 1) for i, p in enumerate("kmgtp")
                             for b in ("", "b")}}
BINARY = {f"{p}ib": 1024 ** (i + 1) for i, p in enumerate("kmgtp")}
UNITS = {**DECIMAL, **BINARY}
SIZE = re.compile(r"\s*([+-]?[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*")
EXAMPLES = "a number of bytes, or with a unit: 40MB, 1.5GiB, 200k"


def parse_size(value: Any) -> int:
    """Bytes from a number (TOML, YAML), or from text such as ``40MB``, ``1.5GiB`` or ``200k``
    (decimal units powers of 1000, binary ones of 1024), sign kept; ValueError saying what a size
    looks like."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number, unit = Decimal(value), ""
    elif isinstance(value, str) and (match := SIZE.fullmatch(value.lower())):
        number, unit = Decimal(match.group(1)), match.group(2)
    else:
        raise ValueError(f"expected a size ({EXAMPLES}), not {value!r}")
    if unit not in UNITS:
        raise ValueError(f"{value!r}: unknown unit {unit!r} (decimal: kB, MB, GB, TB, PB; "
                         "binary: KiB, MiB, GiB, TiB, PiB)")
    size = number * UNITS[unit]
    if size != size.to_integral_value():
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(size)


def nbytes(value: Any) -> int:
    """A size as ``parse_size`` reads it, at least 0 (where no interval checks it after)."""
    size = parse_size(value)
    if size < 0:
        raise ValueError(f"{value!r}: a size cannot be negative")
    return size
