"""Reading a configuration file (a TOML job file, a YAML cluster profile) with errors that name
it: a leaf module, shared by pipeline/jobfile.py and pipeline/clusters.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bnpmix.storage import BnpmixError


def read_config_file(path: Path, parse: Callable[[str], Any],
                     errors: type[Exception] | tuple[type[Exception], ...], what: str) -> Any:
    """Parse a configuration file; unreadable or malformed files raise a BnpmixError naming it."""
    try:
        return parse(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BnpmixError(f"{path}: cannot read {what} ({exc})") from None
    except errors as exc:
        raise BnpmixError(f"{path}: not a valid {what} ({exc})") from None
