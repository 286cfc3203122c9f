"""A frozen state value written to a checkpoint and read back field by field, whatever its
class: scalars, strings, lists and dicts go to the JSON meta, arrays, summaries and models to
the array file under their field's path (``lap/order``, ``births/0/S_new``), records
(dataclasses) as their fields. A model met a second time (the best lap-end state while it is
the current q) is written once and read back as the same object."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np

from bnpmix.algorithms.mixture import Mixture
from bnpmix.algorithms.summary import Summary
from bnpmix.storage.arrays import ArrayFile

from ..runtime.context import FitContext
from .common import Items, model_from, model_items, summary_from, summary_items

TAG = "$"


def join(name: str, child: Any) -> str:
    """The array path of a field (or item) ``child`` of ``name``."""
    return f"{name}/{child}" if name else str(child)


class _Writer:
    def __init__(self) -> None:
        self.items: list[Iterable[tuple[str, np.ndarray]]] = []
        self.models: dict[int, str] = {}

    def encode(self, value: Any, name: str) -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
            return value.item() if isinstance(value, np.generic) else value
        if isinstance(value, np.ndarray):
            self.items.append([(name, value)])
            return {TAG: "array"}
        if isinstance(value, Summary):
            self.items.append(summary_items(name, value))
            return {TAG: "summary"}
        if isinstance(value, Mixture):
            if id(value) in self.models:
                return {TAG: "ref", "to": self.models[id(value)]}
            self.models[id(value)] = name
            self.items.append(model_items(name, value))
            return {TAG: "model"}
        if dataclasses.is_dataclass(value):
            return {TAG: type(value).__name__,
                    **{f.name: self.encode(getattr(value, f.name), join(name, f.name))
                       for f in dataclasses.fields(value)}}
        if isinstance(value, tuple):
            return {TAG: "tuple", "items": self.encode(list(value), name)}
        if isinstance(value, list):
            return [self.encode(v, join(name, i)) for i, v in enumerate(value)]
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return {k: self.encode(v, join(name, k)) for k, v in value.items()}
        if isinstance(value, dict):
            return {TAG: "dict", "items": [[self.encode(k, name), self.encode(v, join(name, k))]
                                           for k, v in value.items()]}
        raise TypeError(f"{name}: cannot checkpoint a {type(value).__name__}")


def write_state(state: Any) -> tuple[dict[str, Any], Items]:
    """The JSON meta of a frozen state and its arrays (produced as the checkpoint streams)."""
    writer = _Writer()
    meta = writer.encode(state, "")
    return meta, (item for part in writer.items for item in part)


class _Reader:
    def __init__(self, arrays: ArrayFile, ctx: FitContext, classes: Iterable[type]) -> None:
        self.arrays, self.ctx = arrays, ctx
        self.classes = {cls.__name__: cls for cls in classes}
        self.models: dict[str, Mixture] = {}

    def decode(self, value: Any, name: str) -> Any:
        if isinstance(value, list):
            return [self.decode(v, join(name, i)) for i, v in enumerate(value)]
        if not isinstance(value, dict):
            return value
        tag = value.get(TAG)
        if tag is None:
            return {k: self.decode(v, join(name, k)) for k, v in value.items()}
        if tag == "array":
            return self.arrays[name]
        if tag == "summary":
            return summary_from(self.arrays, name)
        if tag == "model":
            self.models[name] = model_from(self.arrays, name, self.ctx)
            return self.models[name]
        if tag == "ref":
            return self.models[value["to"]]
        if tag == "tuple":
            return tuple(self.decode(value["items"], name))
        if tag == "dict":
            return {k: self.decode(v, join(name, k)) for k, v in value["items"]}
        cls = self.classes[tag]
        return cls(**{f.name: self.decode(value[f.name], join(name, f.name))
                      for f in dataclasses.fields(cls) if f.name in value})


def read_state(meta: dict[str, Any], arrays: ArrayFile, ctx: FitContext,
               classes: Iterable[type]) -> Any:
    """The state write_state wrote (``classes``: the dataclasses it may hold; a field a
    checkpoint lacks takes its default)."""
    return _Reader(arrays, ctx, classes).decode(meta, "")
