"""The runtime every engine runs under: the engine contract and registry, executors, the
per-partition state store, checkpoints, progress and the fit context."""

from .engine import ENGINES, Engine, Fitted, Step, engine_class, engine_names, register

__all__ = ["ENGINES", "Engine", "Fitted", "Step", "engine_class", "engine_names", "register"]
