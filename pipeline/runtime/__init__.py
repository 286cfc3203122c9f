"""The runtime every engine runs under: the engine contract and registry, executors, the
per-partition state store, checkpoints, progress and the fit context."""

from ..declared import Declared
from .engine import (
    ENGINES,
    Engine,
    Fitted,
    Step,
    TuneFlag,
    engine_class,
    engine_names,
    register,
)

__all__ = ["ENGINES", "Declared", "Engine", "Fitted", "Step", "TuneFlag", "engine_class",
           "engine_names", "register"]
