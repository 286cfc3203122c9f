"""Checkpoints: everything needed to continue a run to the same result, with no pickle.

``RUN_DIR/checkpoint.npz`` holds named arrays plus a JSON description (storage/arrays.py): the
format tag and version, the engine's name and its JSON state, the context's random streams
(numpy ``bit_generator.state`` as JSON), next component id, observation model (name + prior)
and elapsed time, the trace so far, and the engine's arrays (streamed in as the engine produces
them). It is replaced atomically, so a run killed at any moment leaves the previous checkpoint
intact. Loading opens it with ``allow_pickle=False`` and checks the tag, the version and the
engine: a malformed or foreign checkpoint is refused with an error naming the file.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from bnpmix.algorithms.obs import obs_from_prior
from bnpmix.storage import BnpmixError, RunDir
from bnpmix.storage.arrays import ArrayFile, read_arrays, write_arrays_atomic

from .context import FitContext
from .engine import Best, Engine, Fitted
from .models import model_from_arrays

FORMAT = "bnpmix-checkpoint"
VERSION = 1
LEGACY = "checkpoint.pkl"  # written by bnpmix before checkpoints were arrays; never loaded
BEST = "best_restart"  # arrays of the best finished restart's model


def checkpoint_path(run: RunDir) -> Path:
    return run.path / "checkpoint.npz"


def chunks_dir(run: RunDir) -> Path:
    """Where an engine writes what it keeps as it goes (tdpm's kept samples), each file once and
    never rewritten, so that its checkpoint holds only the part since its last chunk; removed
    when the run is published."""
    return run.path / "chunks"


def exists(run: RunDir) -> bool:
    return checkpoint_path(run).exists() or (run.path / LEGACY).exists()


def save(run: RunDir, engine: Engine, laps_done: int, restart: int = 0,
         best: Best | None = None, auto: dict[str, Any] | None = None) -> None:
    """Atomically write the engine's and the context's state, the restart it belongs to, the
    best finished restart before it and (``auto``) the --obs auto choice's record, which a
    resume takes instead of choosing again."""
    ctx = engine.ctx
    state, arrays = engine.state()
    kept = None
    if best is not None:
        model_arrays, model_meta = best.fitted.model.to_arrays()
        kept = {"restart": best.restart, "laps": best.laps, "trace": best.trace,
                "objective": best.fitted.objective, "info": best.fitted.info,
                "converged": best.fitted.converged,
                "objectives": best.objectives, "model": model_meta}
        arrays = itertools.chain(((f"{BEST}/{k}", v) for k, v in model_arrays.items()), arrays)
    meta = {
        "restart": restart,
        "best": kept,
        "format": FORMAT,
        "version": VERSION,
        "engine": engine.name,
        "state": state,
        "trace": engine.trace,
        "laps_done": laps_done,
        "rng": ctx.rng.states(),
        "next_uid": ctx.next_uid,
        "obs": {"name": ctx.obs.name, "prior": ctx.obs.prior()},
        "elapsed": ctx.elapsed(),
    }
    if auto is not None:
        meta["auto"] = auto
    write_arrays_atomic(checkpoint_path(run), meta, arrays)


def open_checkpoint(run: RunDir, engine_name: str) -> ArrayFile | None:
    """The run's checkpoint, checked (None if there is none)."""
    if (run.path / LEGACY).exists():
        raise BnpmixError(f"{run.path / LEGACY}: a pickle checkpoint of an older bnpmix; it is "
                          "never loaded (loading a pickle can run code). Start a new fit")
    path = checkpoint_path(run)
    if not path.exists():
        return None
    ckpt = read_arrays(path, FORMAT, VERSION)
    if ckpt.meta.get("engine") != engine_name:
        ckpt.close()
        raise BnpmixError(f"{path}: a checkpoint of engine {ckpt.meta.get('engine')!r}, but the "
                          f"run's job.json names {engine_name!r}")
    return ckpt


def restarts(ckpt: ArrayFile, ctx: FitContext) -> tuple[int, Best | None]:
    """The restart a checkpoint belongs to and the best finished restart before it."""
    meta = ckpt.meta
    try:
        kept = meta["best"]
        if kept is None:
            return int(meta["restart"]), None
        model = model_from_arrays(ckpt.tree(BEST), kept["model"])
        fitted = Fitted(model, dict(kept["objective"]), dict(kept["info"]),
                        converged=bool(kept.get("converged", True)))
        return int(meta["restart"]), Best(int(kept["restart"]), fitted, list(kept["trace"]),
                                          int(kept["laps"]), list(kept["objectives"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise BnpmixError(f"{ckpt.path}: checkpoint incomplete or inconsistent "
                          f"({type(exc).__name__}: {exc})") from None


def restore(engine: Engine, ckpt: ArrayFile) -> int:
    """Put a checkpoint into a fresh engine and its context; returns the laps done."""
    meta, ctx = ckpt.meta, engine.ctx
    try:
        ctx.rng.set_states(meta["rng"])
        ctx.next_uid = int(meta["next_uid"])
        ctx.obs = obs_from_prior(meta["obs"]["name"], meta["obs"]["prior"])
        ctx.started -= float(meta["elapsed"])  # the time before the checkpoint, added
        engine.trace = list(meta["trace"])
        engine.restore(meta["state"], ckpt)
        return int(meta["laps_done"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BnpmixError(f"{ckpt.path}: checkpoint incomplete or inconsistent "
                          f"({type(exc).__name__}: {exc})") from None
