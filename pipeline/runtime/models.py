"""Fitted models in run directories, by kind: ``model.npz`` (arrays) + ``model.json`` (what
they mean, with a ``kind``). Reading dispatches on the kind, never on an engine's name: the
model classes register their kinds where they are defined (algorithms/mixture.py's MODEL_KINDS),
and every engine's module imports the models it writes."""

from __future__ import annotations

from typing import Any

import numpy as np

from bnpmix.algorithms.mixture import KIND, MODEL_KINDS, PredictiveMixture
from bnpmix.storage import BnpmixError, RunDir
from bnpmix.storage.rundir import MODEL_FILE, MODEL_META

from ..remote_run import local_copy
from .engine import load_entry_points


def model_from_arrays(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> PredictiveMixture:
    """A saved model, by the class registered for its meta's kind (models saved before kinds
    existed are DP mixtures); an unknown kind is a ValueError."""
    load_entry_points()  # the engines' modules import the model classes they write
    kind = meta.get("kind", KIND)
    if kind not in MODEL_KINDS:
        raise ValueError(f"model of unknown kind {kind!r} (known: {sorted(MODEL_KINDS)})")
    return MODEL_KINDS[kind].from_arrays(arrays, meta)


def write_model(run: RunDir, model: PredictiveMixture) -> None:
    arrays, meta = model.to_arrays()
    run.write_model(arrays, meta)


def read_model(run_dir: str) -> PredictiveMixture:
    """The fitted model saved in a run directory (a local path, or a URL: read from a
    downloaded copy), whatever engine produced it."""
    with local_copy(run_dir, (MODEL_FILE, MODEL_META)) as local:
        arrays, meta = RunDir(local).load_model()
    try:
        return model_from_arrays(arrays, meta)
    except (KeyError, TypeError, ValueError) as exc:
        raise BnpmixError(f"{run_dir}: model unreadable ({type(exc).__name__}: {exc})") from None
