"""Allocation models behind one interface (bnpmix.algorithms.alloc)."""

from __future__ import annotations

from typing import Any

from .base import Allocation
from .stick import StickBreaking

ALLOCATIONS: dict[str, type[Allocation]] = {StickBreaking.name: StickBreaking}


def alloc_from_params(name: str, params: dict[str, Any]) -> Allocation:
    """The allocation model called ``name`` with saved parameters ``params``."""
    if name not in ALLOCATIONS:
        raise ValueError(f"unknown allocation model {name!r}; choose from {sorted(ALLOCATIONS)}")
    return ALLOCATIONS[name](**params)


__all__ = ["ALLOCATIONS", "Allocation", "StickBreaking", "alloc_from_params"]
