"""summary.json of a run directory: its fields and their validation (on write and on load)."""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any

from .errors import BnpmixError

SUMMARY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "algorithm": str,
    "K": numbers.Integral,
    "laps": numbers.Real,
    "n_items": numbers.Integral,
    "wall_seconds": numbers.Real,
    "config": dict,
}
CACHE_COUNTS = ("tasks", "hits", "misses")  # summary["cache"]: counts, then rates or None
CACHE_RATES = ("hit_rate", "warm_hit_rate", "home_rate")


def validate_summary(obj: Any, path: str | Path) -> dict[str, Any]:
    """Check that a summary has every required field with the right type."""
    if not isinstance(obj, dict):
        raise BnpmixError(f"{path}: summary must be a JSON object")
    for key, kind in SUMMARY_FIELDS.items():
        if key not in obj:
            raise BnpmixError(f"{path}: field {key!r} is missing")
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise BnpmixError(f"{path}: field {key!r} has the wrong type ({type(value).__name__})")
    objective = obj.get("objective", "elbo")  # runs written before ADF/EP: always the ELBO
    for key in (objective, f"{objective}_per_item"):
        if isinstance(obj.get(key), bool) or not isinstance(obj.get(key), numbers.Real):
            raise BnpmixError(f"{path}: field {key!r} (the objective) is missing or not a number")
    if "cache" in obj:
        _validate_cache(obj["cache"], path)
    if "component_ids" in obj:
        _validate_components(obj, path)
    if "prior" in obj:
        _validate_prior(obj["prior"], path)
    return obj


def _validate_prior(prior: Any, path: str | Path) -> None:
    """summary["prior"]: ``learn`` (a boolean) and the ``initial`` and ``final`` figures of the
    observation prior (objects of numbers)."""
    if not isinstance(prior, dict) or not isinstance(prior.get("learn"), bool):
        raise BnpmixError(f"{path}: field 'prior' must be an object with a boolean 'learn'")
    for key in ("initial", "final"):
        figures = prior.get(key)
        if not isinstance(figures, dict) or not all(
                isinstance(k, str) and is_real(v) for k, v in figures.items()):
            raise BnpmixError(f"{path}: field 'prior' needs {key!r}, an object of numbers")


def _validate_components(obj: dict[str, Any], path: str | Path) -> None:
    """What `bnpmix info` reads in place of the model: weights, component_ids and sizes, one
    per component (K), ids and sizes integers (sizes >= 0), and weight_new a number."""
    K = obj["K"]
    for key, ok in (("weights", is_real), ("component_ids", is_int),
                    ("sizes", lambda v: is_int(v) and v >= 0)):
        value = obj.get(key)
        if not isinstance(value, list) or len(value) != K:
            raise BnpmixError(f"{path}: field {key!r} must be a list of K = {K} entries")
        bad = next((i for i, v in enumerate(value) if not ok(v)), None)
        if bad is not None:
            raise BnpmixError(f"{path}: field {key!r} has an invalid entry {bad} "
                              f"({value[bad]!r})")
    if not is_real(obj.get("weight_new")):
        raise BnpmixError(f"{path}: field 'weight_new' is missing or not a number")


def is_real(v: Any) -> bool:
    """A JSON number (a bool is not one)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def is_int(v: Any) -> bool:
    """A JSON integer (a bool is not one)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _validate_cache(cache: Any, path: str | Path) -> None:
    """summary["cache"]: task counts (integers) and rates (numbers in [0, 1], or None)."""
    if not isinstance(cache, dict):
        raise BnpmixError(f"{path}: field 'cache' must be an object")
    for key in (*CACHE_COUNTS, *CACHE_RATES):
        value = cache.get(key, "missing")
        if key in CACHE_COUNTS:
            ok = is_int(value) and value >= 0
        else:
            ok = value is None or (is_real(value) and 0 <= value <= 1)
        if not ok:
            raise BnpmixError(f"{path}: field 'cache' has no valid {key!r} ({value!r})")


__all__ = ["CACHE_COUNTS", "CACHE_RATES", "SUMMARY_FIELDS", "is_int", "is_real",
           "validate_summary"]
