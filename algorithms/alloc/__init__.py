"""Allocation models behind one interface (bnpmix.algorithms.alloc): the predictive rule every
engine uses (Allocation), and the variational treatment the VB engines add (VariationalAllocation);
ALLOCATIONS holds the ones the variational engines can take."""

from __future__ import annotations

from typing import Any

from .base import Allocation, VariationalAllocation
from .nrm import NRM
from .stick import StickBreaking

ALLOCATIONS: dict[str, type[VariationalAllocation]] = {StickBreaking.name: StickBreaking}


def alloc_from_params(name: str, params: dict[str, Any]) -> VariationalAllocation:
    """The allocation model called ``name`` with saved parameters ``params``."""
    if name not in ALLOCATIONS:
        raise ValueError(f"unknown allocation model {name!r}; choose from {sorted(ALLOCATIONS)}")
    return ALLOCATIONS[name](**params)


__all__ = ["ALLOCATIONS", "NRM", "Allocation", "StickBreaking", "VariationalAllocation",
           "alloc_from_params"]
