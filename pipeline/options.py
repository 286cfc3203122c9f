"""The option parsers and the field helper every configuration dataclass uses (run, model and
each engine's ``Config``): a leaf module, standard library only, so that an engine imports its
parsers without importing the option table (pipeline/config.py), which imports the engines.

A parser turns a value as given (a TOML value from a job file, or the text of a flag) into the
option's value, raising ValueError with what was expected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import field
from typing import Any


def integer(value: Any) -> int:
    """An integer: a TOML integer, or its text on the command line."""
    try:
        if isinstance(value, str):
            return int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    except ValueError:
        pass
    raise ValueError(f"expected an integer, not {value!r}")


def number(value: Any) -> float:
    """A finite number: a TOML integer or float, or its text on the command line."""
    try:
        if isinstance(value, str) or (isinstance(value, int | float)
                                      and not isinstance(value, bool)):
            result = float(value)
            if math.isfinite(result):
                return result
    except ValueError:
        pass
    raise ValueError(f"expected a finite number, not {value!r}")


def optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``parse`` for an option whose None means unset (its default comes from elsewhere)."""
    return lambda value: None if value is None else parse(value)


def boolean(value: Any) -> bool:
    """true or false: a TOML boolean, or its text on the command line."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, not {value!r}")


def string(value: Any) -> str:
    """A string, as given."""
    if not isinstance(value, str):
        raise ValueError(f"expected a string, not {value!r}")
    return value


def names(value: Any) -> tuple[str, ...]:
    """A list of names: a TOML/JSON list or a comma-separated string."""
    if isinstance(value, str):
        return tuple(v for v in (p.strip() for p in value.split(",")) if v)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"expected a list of names, not {value!r}")


def table(value: Any) -> dict[str, Any]:
    """A table of parameters: a TOML table, or a JSON object on the command line."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"expected a JSON object ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a table, not {value!r}")
    return dict(value)


# the parser of a field given none, by its default's type
PARSERS: dict[type, Callable[[Any], Any]] = {bool: boolean, int: integer, float: number,
                                             str: string}


def meta(help: str, parse: Callable[[Any], Any] | None = None,
         choices: tuple[str, ...] | Callable[[], list[str]] | None = None,
         within: str | None = None) -> dict[str, Any]:
    """A field's row of the table: help text, parser (default: by the default's type), choices,
    and the interval its value must lie in (``"[0, 1)"``, ``"(0, inf)"``; see
    ``ranges.in_range``)."""
    return {"help": help, "parse": parse, "choices": choices, "range": within}


def opt(default: Any, help: str, *, parse: Callable[[Any], Any] | None = None,
        choices: tuple[str, ...] | Callable[[], list[str]] | None = None,
        within: str | None = None) -> Any:
    """A configuration field with an immutable default and its row of the table."""
    return field(default=default, metadata=meta(help, parse, choices, within))
