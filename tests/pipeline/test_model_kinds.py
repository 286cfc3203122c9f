"""A model kind registers itself where its class is defined; saved models are read back by the
class registered for their meta's kind (no shared table to edit)."""

from __future__ import annotations

from typing import ClassVar

import pytest

from bnpmix.algorithms.mixture import MODEL_KINDS, Mixture, PredictiveMixture
from bnpmix.pipeline.runtime.models import model_from_arrays


def test_a_new_kind_is_read_back_by_its_own_class():
    class Constant(PredictiveMixture):
        kind: ClassVar[str] = "test-constant"

        def __init__(self, value):
            self.value = value

        @classmethod
        def from_arrays(cls, arrays, meta):
            return cls(float(arrays["v"][0]) + meta["shift"])

    try:
        model = model_from_arrays({"v": [2.0]}, {"kind": "test-constant", "shift": 0.5})
        assert isinstance(model, Constant) and model.value == 2.5
    finally:
        MODEL_KINDS.pop("test-constant")


def test_the_built_in_kinds_and_the_errors():
    assert MODEL_KINDS["mixture"] is Mixture
    assert {"mixture", "nrm_mixture", "temporal_mixture", "ddcrp"} <= set(MODEL_KINDS)
    with pytest.raises(ValueError, match="unknown kind 'nothing'"):
        model_from_arrays({}, {"kind": "nothing"})
    with pytest.raises(TypeError, match="taken by Mixture"):
        type("Other", (PredictiveMixture,), {"kind": "mixture"})
