"""Scheduler names every layer shares (a leaf module: the options, the cluster profiles and the
executors read them without importing one another)."""

from __future__ import annotations

import re

CURRENT_CLIENT = "distributed"  # the scheduler name of this process's current Client


def is_address(scheduler: str) -> bool:
    """Whether ``scheduler`` is a Dask scheduler's address (tcp://, tls://, inproc://, ...)."""
    return re.match(r"^[a-z][a-z0-9+.-]*://.", scheduler) is not None
