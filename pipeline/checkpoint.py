"""Checkpoints of a memoized run: everything needed to continue to the same result.

``RUN_DIR/checkpoint.pkl`` holds the run's state (global parameters, S^0, per-batch summaries
with the move log, birth and merge state, the position inside the lap, the trace), the random
streams' states, the next component id and the elapsed time. It is replaced atomically (temporary
file, fsync, rename), so a run killed at any moment leaves the previous checkpoint intact.
"""

from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Any

from bnpmix.storage import BnpmixError, RunDir
from bnpmix.storage.atomic import write_bytes_atomic

from .context import FitContext
from .memo import MemoRun

FORMAT = 1


def checkpoint_path(run: RunDir) -> Path:
    return run.path / "checkpoint.pkl"


def save(run: RunDir, memo: MemoRun) -> None:
    """Atomically write the run's state."""
    ctx = memo.ctx
    state = {
        "format": FORMAT,
        "run": {name: getattr(memo, name) for name in MemoRun.STATE},
        "rng": {name: getattr(ctx.rng, name).bit_generator.state for name in
                ("init", "order", "birth", "merge")},
        "next_uid": ctx.next_uid,
        "obs": ctx.obs,
        "elapsed": ctx.elapsed(),
    }
    write_bytes_atomic(checkpoint_path(run), pickle.dumps(state, protocol=5))


def load(run: RunDir) -> dict[str, Any] | None:
    path = checkpoint_path(run)
    if not path.exists():
        return None
    try:
        state = pickle.loads(path.read_bytes())
    except Exception as exc:
        raise BnpmixError(f"{path}: unreadable checkpoint ({exc})") from None
    if state.get("format") != FORMAT:
        raise BnpmixError(f"{path}: checkpoint format {state.get('format')} is not {FORMAT}")
    return state


def restore(ctx: FitContext, state: dict[str, Any], memo: MemoRun) -> MemoRun:
    """Put a saved state into a fresh MemoRun and context."""
    for name, value in state["run"].items():
        setattr(memo, name, value)
    for name, value in state["rng"].items():
        getattr(ctx.rng, name).bit_generator.state = value
    ctx.next_uid = state["next_uid"]
    ctx.obs = state["obs"]
    ctx.started = time.perf_counter() - state["elapsed"]
    return memo


__all__ = ["checkpoint_path", "load", "restore", "save"]
