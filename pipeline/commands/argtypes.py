"""The value types of the commands' arguments: argparse ``type=`` callables, whose errors
argparse reports as usage errors (exit code 2). Their names are argparse's in its ``invalid
NAME value`` messages, kept as they were."""

from __future__ import annotations

import argparse
import math
from typing import Any


def _prior(text: str) -> dict[str, Any] | str:
    """A --prior: a JSON table of observation-prior parameters, or a name an engine's
    prior_alias takes (config.prior_value)."""
    from bnpmix.pipeline.config import prior_value

    try:
        return prior_value(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _numbers(text: str) -> tuple[float, ...]:
    """Positive finite numbers separated by commas (a tune grid)."""
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        values = ()
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers separated by commas, "
                                         f"not {text!r}")
    return values


def _positive_int(text: str) -> int:
    """An integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text}")
    return value


def _bytes(text: str) -> int:
    """A size (pipeline/sizes.py: bytes, or 40MB, 1.5GiB, 200k)."""
    from bnpmix.pipeline.sizes import nbytes

    try:
        return nbytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
