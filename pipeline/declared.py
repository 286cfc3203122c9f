"""What an engine declares about its runs for their readers: the objective's key and name, what
the weights are, how the report plots them and reads the trace. A fit records it in
summary.json (``"declared"``), so that ``bnpmix info``, ``show`` and ``report`` read it there,
never importing the engine (a run made by an engine not installed here reads the same).

No import beyond the standard library: ``bnpmix info`` stays quick."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

EXPECTED_WEIGHTS = "expected weights E[w_k]"
CHAINS_PANEL = "chains"  # a temporal run's chains over epochs (Declared.panels)
SEQUENCES_PANEL = "sequences"  # each sequence's tables and ELBO per item


@dataclass(frozen=True)
class Declared:
    """One engine's declaration (the defaults: a variational engine's)."""

    # the objective: its key (result().objective's first entry, the trace's column,
    # summary.json's "objective") and its name for people (fit, info and report print it)
    objective: str = "elbo"
    objective_label: str = "ELBO"
    # what summary.json's weights are (info and show say it) and the report's name for the
    # weight it plots
    weights_are: str = EXPECTED_WEIGHTS
    weight_label: str = "expected weight E[w_k]"
    # the report plots each cluster's fraction of the items instead of the weights (and info
    # lists the fractions): the weights are not E[w_k] (tdpm: next-epoch chain probabilities)
    plots_fractions: bool = False
    # trace rows are per partition (lap: the pass, batch: the partition, the objective that
    # partition's per item), not totals over the data
    trace_per_partition: bool = False
    # what each component belongs to when components are not clusters shared by all items
    # ("sequence": a ddcrp table holds items of one sequence only; "": shared), and their noun;
    # summary.json's "per_group" then counts them (local_note)
    local_to: str = ""
    component_noun: str = "component"
    # the report's panels beyond every run's (CHAINS_PANEL, SEQUENCES_PANEL), drawn from what
    # the engine wrote (chains: the model's spans and counts, epochs.parquet; sequences:
    # sequences.parquet), never guessed from the model's attributes or the files present
    panels: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, summary: dict[str, Any]) -> Declared:
        """A run's declaration from its summary.json. What a run written before a field
        existed did not record (panels, local_to, ...) is its engine's declaration now, when
        that engine is registered, else the default; a run written before summaries recorded
        any has its objective named by its key."""
        recorded = summary.get("declared")
        known = {f.name: f.default for f in dataclasses.fields(cls)}
        if isinstance(recorded, dict):
            values = {k: tuple(v) if isinstance(v, list) else v  # JSON's lists: the tuples
                      for k, v in recorded.items() if k in known}
            values = {k: v for k, v in values.items() if isinstance(v, type(known[k]))}
        else:
            key = summary.get("objective", cls.objective)
            values = {"objective": key,
                      "objective_label": cls.objective_label if key == cls.objective else key}
        if known.keys() <= values.keys():
            return cls(**values)
        engine = _engine_declared(summary.get("algorithm"))
        return cls(**{**{k: getattr(engine, k) for k in known if k not in values}, **values})


def _engine_declared(algorithm: Any) -> Declared:
    """The declaration of the engine installed as ``algorithm`` (its entry point's class; the
    defaults if none is). Read only for a run that predates one of the fields, so a run of
    today's bnpmix is read without importing its engine."""
    import importlib.metadata

    from .engines import GROUP

    points = importlib.metadata.entry_points(group=GROUP, name=str(algorithm))
    return next((point.load().declared for point in points), Declared())


def local_note(summary: dict[str, Any]) -> str | None:
    """For a run whose components are local to a group (Declared.local_to): one line saying so,
    with the groups and the components per group (summary.json's "per_group"); None for a run
    whose components are clusters shared by all items. K and the weights of such a run count
    every group's own components, which info, show and the report must not present as K
    clusters of the whole corpus."""
    declared = Declared.of(summary)
    group, noun = declared.local_to, declared.component_noun
    if not group:
        return None
    text = f"{noun}s are per {group}, not clusters shared across {group}s"
    counts = summary.get("per_group")
    if isinstance(counts, dict):
        text += (f": {counts['groups']} {group}s with {counts['min']}-{counts['max']} {noun}s "
                 f"each (mean {counts['mean']:.2f})")
    return text + f"; K = {summary['K']} counts every {group}'s own {noun}s"


# what a run's held-out scores are (summary.json's and bnpmix evaluate's heldout_kind)
HELDOUT_DEQUANTISED = "dequantised"  # a bound on log P(x) of the integer data (its cells)
HELDOUT_PLAIN = "plain"  # the predictive density (mass for counts) of the values as they are
HELDOUT_NOTE = ("held-out scores are a dequantised bound on the log probability of the "
                "integer-valued data (each item's cell), not a density (--dequantise false: "
                "the density of the values)")


def heldout_kind(obs: Any) -> str:
    """HELDOUT_DEQUANTISED for an observation model that dequantises integer columns (its
    ``dq``, algorithms/obs/dequant.py), else HELDOUT_PLAIN."""
    return HELDOUT_PLAIN if getattr(obs, "dq", None) is None else HELDOUT_DEQUANTISED
