"""Fitted models in run directories, by kind: ``model.npz`` (arrays) + ``model.json`` (what
they mean, with a ``kind``). Reading dispatches on the kind, never on an engine's name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from bnpmix.algorithms import nrm_mixture
from bnpmix.algorithms.ddcrp import model as sequential
from bnpmix.algorithms.mixture import KIND, Mixture, PredictiveMixture
from bnpmix.algorithms.tdpm import model as temporal
from bnpmix.storage import BnpmixError, RunDir
from bnpmix.storage.rundir import MODEL_FILE, MODEL_META

from ..remote_run import local_copy

# kind -> reader(arrays, meta); models saved before kinds existed are DP mixtures
READERS: dict[str, Callable[[dict[str, np.ndarray], dict[str, Any]], Any]] = {
    KIND: Mixture.from_arrays,
    nrm_mixture.KIND: nrm_mixture.NRMMixture.from_arrays,
    temporal.KIND: temporal.TemporalMixture.from_arrays,
    sequential.KIND: sequential.SequenceMixture.from_arrays,
}


def write_model(run: RunDir, model: PredictiveMixture) -> None:
    arrays, meta = model.to_arrays()
    run.write_model(arrays, meta)


def read_model(run_dir: str) -> PredictiveMixture:
    """The fitted model saved in a run directory (a local path, or a URL: read from a
    downloaded copy), whatever engine produced it."""
    with local_copy(run_dir, (MODEL_FILE, MODEL_META)) as local:
        arrays, meta = RunDir(local).load_model()
    kind = meta.get("kind", KIND)
    if kind not in READERS:
        raise BnpmixError(f"{run_dir}: model of unknown kind {kind!r} (known: {sorted(READERS)})")
    try:
        return READERS[kind](arrays, meta)
    except (KeyError, TypeError, ValueError) as exc:
        raise BnpmixError(f"{run_dir}: model unreadable ({type(exc).__name__}: {exc})") from None
