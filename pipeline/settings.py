"""bnpmix's operational settings in Dask's configuration, as Dask's downstream libraries keep
theirs: the shipped ``bnpmix.yaml`` becomes Dask's defaults for the ``bnpmix.`` keys when this
module is imported (every module that reads a setting imports it), and each value is read with
``dask.config.get`` where it is used, so ``dask.config.set``, Dask's YAML files and
``DASK_BNPMIX__<KEY>`` environment variables override it as they override Dask's own settings.

Importing this module does not import Dask (``bnpmix --help`` and ``bnpmix info`` never need
it): the defaults are added at once when ``dask.config`` is already imported, else the moment it
is, so whichever of bnpmix and Dask comes first, Dask's configuration has bnpmix's keys.

The file is not copied into ``~/.config/dask`` (``dask.config.ensure_file``): importing a library
should not write into the user's home (read-only or shared on many clusters, where every worker
would race to write it), and a copy there would outrank the defaults of later versions.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from bnpmix.storage.errors import BnpmixError

from .sizes import nbytes

FILE = "bnpmix.yaml"


def shipped_defaults() -> dict[str, Any]:
    """The shipped file's content: ``{"bnpmix": {key: value}}``."""
    import importlib.resources

    import yaml

    text = importlib.resources.files(__package__).joinpath(FILE).read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _size(value: Any) -> Any:
    """A size (sizes.nbytes), or a share of the memory the process using it may use ("20%":
    runtime.memlimit.Share, resolved where it is used)."""
    if isinstance(value, str) and value.strip().endswith("%"):
        from .runtime.memlimit import parse_share

        return parse_share(value)
    return nbytes(value)


def _seconds(value: Any) -> float:
    """A duration in seconds: a number, or a string with units ("60s", "2 minutes"); above 0."""
    seconds = _duration(value)
    if not seconds > 0:
        raise ValueError("a duration must be positive")
    return seconds


def _duration(value: Any) -> float:
    """A duration in seconds as ``_seconds``, 0 allowed."""
    from dask.utils import parse_timedelta

    seconds = parse_timedelta(value, default="seconds")
    if not seconds >= 0:
        raise ValueError("a duration must not be negative")
    return seconds


def _count(least: int) -> Callable[[Any], int]:
    """The parser of a whole number no less than ``least``."""

    def count(value: Any) -> int:
        n = operator.index(value)
        if n < least:
            raise ValueError(f"must be at least {least}")
        return n

    return count


# each key of bnpmix.yaml and how its value is read
PARSERS: dict[str, Callable[[Any], Any]] = {
    "cache-bytes": _size, "summary-bytes": _size, "worker-wait": _seconds,
    "task-retries": _count(0), "scheduler-timeout": _seconds, "connect-timeout": _seconds,
    "worker-malloc-trim": nbytes,
    "assign-wave": _count(1), "schedule-lease": _seconds, "checkpoint-interval": _duration,
}


def setting(key: str, given: Any = None) -> Any:
    """``given`` (a job option or an argument) when it is not None, else the value of
    ``bnpmix.<key>`` in Dask's configuration now, parsed (sizes in bytes, times in seconds);
    a bad value is an error naming the key."""
    if given is not None:
        return given
    import dask.config  # adds the shipped defaults if this is Dask's first import

    value = dask.config.get(f"bnpmix.{key}")
    try:
        return PARSERS[key](value)
    except (TypeError, ValueError, KeyError) as exc:
        raise BnpmixError(f"Dask config bnpmix.{key}: {value!r} is not valid ({exc})") from None


def _add_defaults(dask_config: ModuleType) -> None:
    """The shipped file as Dask's defaults (``dask.config.update_defaults``)."""
    dask_config.update_defaults(shipped_defaults())


class _AddDefaultsOnImport:
    """A finder on ``sys.meta_path`` for ``dask.config`` alone, used once: the module is found
    by the other finders and executed as usual, then gets the shipped defaults."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != "dask.config":
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            _add_defaults(module)

        spec.loader.exec_module = exec_module
        return spec


if "dask.config" in sys.modules:
    _add_defaults(sys.modules["dask.config"])
else:
    sys.meta_path.insert(0, _AddDefaultsOnImport())
