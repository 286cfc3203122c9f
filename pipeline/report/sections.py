"""A run report's sections that every run has: its figures (summary.json's scalars, the data,
the prior, held-out figures), its trace (and a pass item by item), its cluster weights and its
configuration; and what the other sections share (``image``: a figure as a page image)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..declared import Declared, local_note
from . import figures as F
from .page import Image, Section, paragraph, table
from .rundata import TOP, RunData

MIN_TRACE_ROWS = 3  # a trace of fewer rows is not drawn beside a pass item by item
SUMMARY_KEYS = ("algorithm", "obs", "n_items", "K", "K_effective", "objective", "laps",
                "stopped", "wall_seconds", "executor", "restart", "merges", "kept_samples")


def image(file: str, make: Callable[[], Any], alt: str, caption: str) -> Image:
    """The figure ``make`` draws as the page's image ``file`` (PNG), with its alt text and
    caption."""
    return Image(file, F.png(make()), alt, caption)


def flatten(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """A nested configuration as (dotted key, value) rows."""
    if isinstance(config, dict) and config:
        rows = []
        for key, value in config.items():
            rows.extend(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return rows
    return [(prefix, config)]


def objective_rows(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """The objective and the objective per item, named for a person."""
    declared = Declared.of(summary)
    name, label = declared.objective, declared.objective_label
    return [(f"{label} ({name})", summary.get(name)),
            (f"{label} per item", summary.get(f"{name}_per_item"))]


def figures_rows(data: RunData) -> list[tuple[str, Any]]:
    """The run's figures: summary.json's scalars, the data it was fitted to, held-out ones."""
    s = data.summary
    rows: list[tuple[str, Any]] = [("run directory", str(data.path.resolve()))]
    rows += [(k, s[k]) for k in SUMMARY_KEYS if k in s]
    rows += objective_rows(s)
    if isinstance(s.get("data"), dict):
        rows += [(f"data.{k}", v) for k, v in s["data"].items()]
    if isinstance(s.get("prior"), dict):
        rows += prior_rows(s["prior"])
    if data.heldout:
        rows += [(f"held-out {k}", v) for k, v in data.heldout.items() if k != "K"]
    return rows


def prior_rows(prior: dict[str, Any]) -> list[tuple[str, Any]]:
    """The observation prior's figures: learned (initial -> final) or fixed."""
    how = "learned from the components" if prior.get("learn") else "fixed"
    rows: list[tuple[str, Any]] = [("observation prior", how)]
    initial = prior.get("initial") or {}
    for key, value in (prior.get("final") or {}).items():
        shown = (f"{initial[key]:.4g} -> {value:.4g}" if prior.get("learn") and key in initial
                 else f"{value:.4g}")
        rows.append((f"prior {key}", shown))
    return rows


def trace_series(data: RunData, label: str) -> F.Series | None:
    """The run's trace as a plotted series (None: an empty trace)."""
    t = data.trace
    if t is None:
        return None
    return F.Series(label, t.items_seen, t.objective, t.K, t.objective_name, t.per_partition)


def cluster_titles(data: RunData, n: int) -> list[str]:
    """The ``n`` heaviest clusters' panel titles: id and weight."""
    return [f"#{data.ids[k]}  w={data.weights[k]:.3f}" for k in range(n)]


def heaviest(data: RunData, noun: str = "components") -> str:
    """Which components a panel shows: the TOP heaviest, or all of them."""
    K = len(data.ids)
    return (f"the {TOP} heaviest of K = {K} {noun}" if K > TOP
            else f"all K = {K} {noun}, heaviest first")


def progress_image(data: RunData) -> Image | None:
    """A pass item by item (RunData.progress), None for a run that has none."""
    p = data.progress
    if p is None or not len(p.K):
        return None
    series = F.Series(F.literal(data.name), p.items_seen, p.objective, p.K, p.objective_name)
    name = p.objective_name
    return image(
        "pass.png", lambda: F.trace_figure([series], f"{F.literal(data.name)}: the pass item "
                                           "by item"),
        f"{name} per item and K as the pass absorbs the items",
        f"{name} per item of the items absorbed so far in the pass (top) and the number of "
        "clusters K (bottom), against items seen, at up to 32 items of each partition "
        "(before the merges at the pass's end).")


def trace_section(data: RunData) -> Section:
    """The objective per item and K against items seen; for a run that records a pass item by
    item, that pass first, and the trace only when it has more than a few rows (a pass over
    one or two partitions has a row each: dots on empty axes)."""
    section = Section("Trace: objective and K against items seen", anchor="trace")
    progress = progress_image(data)
    if progress is not None:
        section.images.append(progress)
    series = trace_series(data, F.literal(data.name))
    if series is None or (progress is not None and len(series.K) < MIN_TRACE_ROWS):
        if progress is None:
            section.html.append(paragraph("The run's trace is empty."))
        return section
    name = series.objective_name
    section.images.append(image(
        "trace.png", lambda: F.trace_figure([series], f"{F.literal(data.name)}: {name} and K"),
        f"{name} per item and K against items seen",
        f"{name} per item (top) and the number of components K (bottom) at each trace row; "
        "items seen = laps × N" + (" (each row: one partition's figure)"
                                   if series.per_partition else "") + "."))
    return section


def weights_section(data: RunData) -> Section:
    """The weights' tail plot and the heaviest weights as a table."""
    section = Section("Cluster weights", anchor="weights")
    local = local_note(data.summary)
    if local is not None:  # (ddcrp: each sequence's own tables, not K clusters of the corpus)
        section.html.append(paragraph(f"Not clusters of the whole corpus: {local}."))
    new = data.weight_new if data.weight_label.startswith("expected") else None
    section.images.append(image(
        "weights.png", lambda: F.weights_figure(
            [(F.literal(data.name), data.weights)], data.weight_label,
            f"Cluster weights in decreasing order (K = {len(data.weights)})", new),
        "cluster weights in decreasing order on log axes",
        "Weights against rank on log–log axes: the tail of small clusters (a straight line "
        "is a power law)."))
    rows = [(int(data.ids[k]), float(data.weights[k])) for k in range(min(TOP, len(data.ids)))]
    declared = Declared.of(data.summary)
    noun = declared.component_noun if local is not None else "component"
    chains = (" bnpmix info and show give this fraction too, and as weights the "
              f"{declared.weights_are}." if declared.plots_fractions else "")
    section.html.append(paragraph(f"The {len(rows)} heaviest of {len(data.ids)} {noun}s "
                                  "(cluster: the label bnpmix show, predict and assignments/ "
                                  f"give it).{chains}"))
    section.html.append(table(rows, ("cluster", data.weight_label), "weights-table"))
    return section


def figures_section(data: RunData) -> Section:
    """The run's figures (summary.json's scalars, held-out figures)."""
    section = Section("Summary", anchor="figures")
    section.html.append(table(figures_rows(data), ("figure", "value"), "figures-table"))
    return section


def config_section(data: RunData) -> Section:
    """The run's resolved configuration, one option per row."""
    section = Section("Configuration", anchor="config")
    section.html.append(paragraph("The run's resolved configuration (summary.json's config)."))
    section.html.append(table(flatten(data.summary.get("config", {})), ("option", "value"),
                              "config-table"))
    return section
