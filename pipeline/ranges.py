"""Option values' intervals: ``in_range`` reads an interval written ``[lo, hi]`` / ``(lo, hi)``,
``check_ranges`` holds every field of a config dataclass to its row's (the one range check),
and the errors that name the option: ``RangeError`` (a value outside its interval) and
``OptionError`` (an option or value refused, with where it was given)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from bnpmix.storage import BnpmixError

_INTERVAL = re.compile(r"^([\[(])\s*(-?inf|[-+0-9.e]+)\s*,\s*(-?inf|[-+0-9.e]+)\s*([\])])$")


def in_range(value: float, interval: str) -> bool:
    """Whether ``value`` lies in an interval written ``[lo, hi]``, ``(lo, hi)`` or mixed; ``inf``
    for an open end."""
    match = _INTERVAL.match(interval)
    if match is None:
        raise TypeError(f"not an interval: {interval!r}")
    left, lo, hi, right = match.group(1), float(match.group(2)), float(match.group(3)), \
        match.group(4)
    above = value >= lo if left == "[" else value > lo
    below = value <= hi if right == "]" else value < hi
    return above and below


class RangeError(ValueError):
    """An option's value outside its interval; ``key`` is the option's name in the table,
    ``reason`` what is wrong with the value."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key, self.reason = key, reason


class OptionError(BnpmixError):
    """An option the engine does not take or a bad value of one: ``origin`` is where it was
    given ("flags": the command line, so the CLI reports a usage error naming the flag), ``key``
    its name in the table, ``reason`` what is wrong."""

    def __init__(self, origin: str, key: str, reason: str) -> None:
        super().__init__(f"{origin}: {key}: {reason}")
        self.origin, self.key, self.reason = origin, key, reason


def check_ranges(cfg: Any, prefix: tuple[str, ...] = ()) -> None:
    """Every field of a config dataclass (nested ones too) inside its table row's interval; the
    one place option values are range-checked, whichever way the configuration was built."""
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            check_ranges(value, (*prefix, f.name))
            continue
        interval = f.metadata.get("range")
        if interval is not None and value is not None and not in_range(value, interval):
            key = "_".join((*prefix, f.name))
            raise RangeError(key, f"{value!r} is not in {interval}")
