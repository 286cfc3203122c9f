"""The command line's usage error and former spellings of flags and keywords: a leaf module, so
that every command's module (the main CLI and report/cli.py) and the Python functions behind
them raise and warn alike without importing one another."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

# a Python keyword's current name and its former one (the flags: --label-column, --labels-column)
LABEL_NAMES = ("label_column", "labels_column")


class UsageError(Exception):
    """A command line that cannot run (exit code 2)."""


class RenamedFlag(argparse.Action):
    """A flag's former spelling, hidden from --help: it sets the current flag's value and says
    on stderr which spelling to use (one name per concept across the commands)."""

    def __init__(self, option_strings: list[str], dest: str, current: str = "",
                 **kwargs: Any) -> None:
        self.current = current
        super().__init__(option_strings, dest, help=argparse.SUPPRESS,
                         default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"bnpmix: warning: {option_string} is deprecated; use {self.current} (the same "
              "flag in every command)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def renamed_flag(parser: argparse.ArgumentParser, former: str, current: str, dest: str) -> None:
    """Accept ``former`` as a deprecated spelling of ``current`` (whose value is ``dest``)."""
    parser.add_argument(former, dest=dest, action=RenamedFlag, current=current,
                        metavar=dest.upper())


def renamed_keyword(current: Any, former: Any, names: tuple[str, str]) -> Any:
    """The value of a keyword given by its current name or, with a DeprecationWarning, by its
    former one (``names``: current, former); both given is a TypeError."""
    if former is None:
        return current
    if current is not None:
        raise TypeError(f"{names[0]} and {names[1]} (its former name) both given; give "
                        f"{names[0]}")
    warnings.warn(f"{names[1]} is deprecated; use {names[0]}", DeprecationWarning, stacklevel=3)
    return former
