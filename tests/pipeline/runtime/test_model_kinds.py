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


def test_the_held_out_plan_and_the_text_question_are_the_models():
    """evaluate asks the model how it scores held-out items and its observations whether they
    are text (whose density omits the multinomial coefficient): a new kind needs no edit there."""
    from bnpmix.algorithms.obs import obs_class
    from bnpmix.pipeline.evaluate import plan_for
    from bnpmix.storage import BnpmixError

    class Scored(PredictiveMixture):
        def __init__(self, obs):
            self.obs = obs

        def heldout_plan(self, config, columns, where):
            if "need" not in columns:
                raise ValueError(f"{where}: needs the column 'need'")
            return {"scoring": f"by {config['how']}", "time_column": "need", "next_time": 4}

    assert obs_class("mult").text and not obs_class("gauss").text
    model = Scored(obs_class("mult")(V=3, lam0=0.5))

    class Corpus:
        path = "heldout"

        class manifest:
            columns = ("need",)

    plan = plan_for(model, {"how": "rule"}, Corpus)
    assert (plan.scoring, plan.coefficient, plan.time_column, plan.next_time) == \
        ("by rule", True, "need", 4)
    with pytest.raises(BnpmixError, match="the held-out corpus: needs the column 'need'"):
        plan_for(model, {"how": "rule"}, None)
