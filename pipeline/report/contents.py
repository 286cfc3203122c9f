"""What a run's report and a comparison of runs hold: their sections in page order and their
subtitles, made from ``RunData`` (the run report's sections: sections.py, component_sections.py,
panel_sections.py) and laid out by ``page``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..declared import Declared, local_note
from . import figures as F
from .component_sections import components_section, words_section
from .page import Section, paragraph, table
from .panel_sections import chains_section, sequences_section
from .rundata import RunData
from .sections import (
    config_section,
    figures_section,
    flatten,
    image,
    trace_section,
    trace_series,
    weights_section,
)

# the sections tests and engines' checks import from here (defined in sections.py)
__all__ = ["compare_sections", "compare_subtitle", "run_sections", "run_subtitle",
           "trace_section", "weights_section"]


def run_sections(data: RunData) -> list[Section]:
    """Every section of one run's report, in page order."""
    made = [figures_section(data), trace_section(data), weights_section(data),
            components_section(data), words_section(data), chains_section(data),
            sequences_section(data), config_section(data)]
    return [s for s in made if s is not None]


def run_subtitle(data: RunData) -> str:
    """One line under the title: engine, data, K, objective, laps, time."""
    s = data.summary
    declared = Declared.of(s)
    per_item = s.get(f"{declared.objective}_per_item")
    value = f"{per_item:.4f}" if isinstance(per_item, int | float) else "-"
    local = (f" {declared.component_noun}s, each of one {declared.local_to}"
             if local_note(s) is not None else "")
    return (f"{s['algorithm']} on {s['n_items']} items ({s.get('obs', data.obs)}): "
            f"K = {s['K']}{local}, "
            f"{declared.objective_label} per item {value}, {s['laps']} laps, "
            f"{s['wall_seconds']:.1f} s")


# ---- comparisons ---------------------------------------------------------------------------

def labels_of(runs: Sequence[RunData]) -> list[str]:
    """Short, distinct labels: the directory names (with their parents where names repeat)."""
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{r.path.resolve().parent.name}/{r.name}" if names.count(r.name) > 1 else r.name
            for r in runs]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def heldout_keys(runs: Sequence[RunData]) -> tuple[list[str], list[str]]:
    """The held-out figures' keys: numbers (table columns) and texts (said once below)."""
    keys = list(dict.fromkeys(k for r in runs for k in (r.heldout or {}) if k != "K"))
    numbers = [k for k in keys if any(_is_number((r.heldout or {}).get(k)) for r in runs)]
    return numbers, [k for k in keys if k not in numbers
                     and any((r.heldout or {}).get(k) is not None for r in runs)]


def compare_rows(runs: Sequence[RunData], labels: Sequence[str]) -> tuple[list[str], list]:
    """One row per run: its figures and, where computed, its numeric held-out ones."""
    numbers, _ = heldout_keys(runs)
    header = ["run", "algorithm", "obs", "items", "K", "K > 1%", "objective", "per item",
              "laps", "seconds", *(f"held-out {k}" for k in numbers)]
    rows = []
    for label, r in zip(labels, runs, strict=True):
        s = r.summary
        declared = Declared.of(s)
        rows.append([label, s["algorithm"], s.get("obs", r.obs), s["n_items"], s["K"],
                     s.get("K_effective"), declared.objective_label,
                     s.get(f"{declared.objective}_per_item"),
                     s["laps"], s["wall_seconds"],
                     *((r.heldout or {}).get(k) for k in numbers)])
    return header, rows


def config_differences(runs: Sequence[RunData], labels: Sequence[str]) -> tuple[list, list]:
    """The configuration options whose values differ between the runs (corpus and output
    paths included)."""
    flat = [dict(flatten(r.summary.get("config", {}))) for r in runs]
    keys = list(dict.fromkeys(k for f in flat for k in f))
    rows = [[k, *(f.get(k, "(absent)") for f in flat)] for k in keys
            if len({repr(f.get(k, "(absent)")) for f in flat}) > 1]
    return ["option", *labels], rows


def compare_sections(runs: Sequence[RunData]) -> list[Section]:
    """A comparison's sections: the runs' figures, traces and weights side by side."""
    labels = labels_of(runs)
    figures = Section("Summary", anchor="figures")
    header, rows = compare_rows(runs, labels)
    figures.html.append(table(rows, header, "compare-table"))
    if any(r.heldout for r in runs):
        figures.html.append(paragraph("Held-out figures as printed by `bnpmix evaluate`."))
        for key in heldout_keys(runs)[1]:
            values = dict.fromkeys(str((r.heldout or {}).get(key, "-")) for r in runs)
            figures.html.append(paragraph(f"held-out {key}: {' | '.join(values)}"))
    traces = Section("Traces", anchor="traces")
    series = [s for s in (trace_series(r, F.literal(label))
                          for r, label in zip(runs, labels, strict=True))
              if s is not None]
    if series:
        traces.images.append(image(
            "compare_traces.png", lambda: F.trace_figure(
                series, f"{len(series)} runs: objective per item and K"),
            "the runs' objectives and K against items seen",
            "Each run's objective per item and K against items seen (one panel per kind "
            "of objective)."))
    else:
        traces.html.append(paragraph("No run has a trace."))
    weights = Section("Cluster weights", anchor="weights")
    weights.images.append(image(
        "compare_weights.png", lambda: F.weights_figure(
            [(F.literal(label), r.weights) for r, label in zip(runs, labels, strict=True)],
            "weight (or fraction of the items)", "Cluster weights in decreasing order"),
        "the runs' cluster weights in decreasing order on log axes",
        "Each run's weights against rank, log–log."))
    config = Section("Configuration differences", anchor="config")
    header, rows = config_differences(runs, labels)
    config.html.append(table(rows, header, "config-diff-table") if rows
                       else paragraph("The runs have the same configuration."))
    return [figures, traces, weights, config]


def compare_subtitle(runs: Sequence[RunData]) -> str:
    """One line under the title: the compared run directories."""
    return "Runs: " + "; ".join(str(r.path.resolve()) for r in runs)
