"""What a run's report and a comparison of runs hold: their sections, pictures and tables,
made from ``RunData`` by the functions of ``figures`` and laid out by ``page``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..declared import Declared, local_note
from . import figures as F
from .page import Image, Section, paragraph, table
from .rundata import TOP, RunData

COVARIANCE_PANELS = 12  # full covariance matrices drawn (the heaviest components)
MAX_MATRIX_D = 400  # larger covariance matrices are not drawn
MAX_HEATMAP_D = 400  # means of more dimensions are not drawn as a heatmap
MIN_TRACE_ROWS = 3  # a trace of fewer rows is not drawn beside a pass item by item
SUMMARY_KEYS = ("algorithm", "obs", "n_items", "K", "K_effective", "objective", "laps",
                "stopped", "wall_seconds", "executor", "restart", "merges", "kept_samples")


def _image(file: str, make: Callable[[], Any], alt: str, caption: str) -> Image:
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


def _cluster_titles(data: RunData, n: int) -> list[str]:
    return [f"#{data.ids[k]}  w={data.weights[k]:.3f}" for k in range(n)]


def _heaviest(data: RunData, noun: str = "components") -> str:
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
    return _image(
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
    section.images.append(_image(
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
    section.images.append(_image(
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


def components_section(data: RunData) -> Section | None:
    """Means and covariances: as images when an item is a square image, else a heatmap or (two
    dimensions) points; covariance matrices for full-covariance Gaussians."""
    if data.means is None or not len(data.means) or data.text:  # text: see words_section
        return None
    section = Section("Components", anchor="components")
    n = min(TOP, len(data.means))
    which = _heaviest(data)
    side = data.image_side
    titles = _cluster_titles(data, n)
    zero_means = not np.any(data.means)
    if side and not zero_means:
        images = data.means[:n].reshape(n, side, side)
        section.images.append(_image(
            "means.png", lambda: F.image_grid_figure(
                images, titles, f"Component means as {side}×{side} images ({which})",
                colorbar_label="mean value"),
            "component means as images", f"E[μ_k] of {which}, one shared gray scale."))
    elif data.D == 2 and not zero_means:
        section.images.append(_image(
            "means.png", lambda: F.means_scatter_figure(
                data.means, data.weights, data.ids, f"Component means (K = {len(data.ids)})"),
            "component means", "E[μ_k] of every component; area follows the weight."))
    elif 2 < data.D <= MAX_HEATMAP_D and not zero_means:
        section.images.append(_image(
            "means.png", lambda: F.heatmap_figure(
                data.means[:n], titles, f"Component means ({which})", "dimension",
                "mean value"),
            "component means", f"E[μ_k] of {which}, one row each."))
    elif zero_means:
        section.html.append(paragraph("Zero-mean components: they differ only in covariance."))
    variances = data.variances
    if variances is None and data.covariances is not None:
        variances = np.diagonal(data.covariances, axis1=1, axis2=2)
    if side and variances is not None:
        std = np.sqrt(np.maximum(variances[:n], 0)).reshape(n, side, side)
        section.images.append(_image(
            "stddev.png", lambda: F.image_grid_figure(
                std, titles, f"Per-pixel standard deviation √E[Σ_dd] ({which})",
                cmap="viridis", colorbar_label="standard deviation"),
            "per-pixel standard deviations as images",
            f"The diagonal of E[Σ_k] as {side}×{side} images of standard deviations."))
    if data.covariances is not None and data.D <= MAX_MATRIX_D:
        m = min(COVARIANCE_PANELS, len(data.covariances))
        section.images.append(_image(
            "covariances.png", lambda: F.matrix_grid_figure(
                data.covariances[:m], _cluster_titles(data, m),
                f"Covariance matrices E[Σ_k] of the {m} heaviest components"),
            "covariance matrices as images",
            "Each panel on its own color scale, symmetric about zero (red positive, blue "
            "negative); rows and columns are dimensions" +
            (f" (pixels in reading order of the {side}×{side} image)." if side else ".")))
    elif data.covariances is not None:
        section.html.append(paragraph(f"Covariance matrices not drawn: D = {data.D} > "
                                      f"{MAX_MATRIX_D}."))
    return section if section.images or section.html else None


def words_section(data: RunData) -> Section | None:
    """Text runs: each heavy cluster's top words, as a table and as bars."""
    if not data.top_words and data.vocab_note is None:
        return None
    section = Section("Top words per cluster", anchor="words")
    if not data.top_words:
        section.html.append(paragraph(f"Words not shown: {data.vocab_note}."))
        return section
    K = len(data.ids)
    section.html.append(paragraph(
        f"The ten most probable words of {_heaviest(data, 'clusters')} (vocabulary of "
        f"{len(data.vocab or [])} words)" + ("." if K <= TOP else f"; {K - TOP} more not shown.")))
    rows = [(t.cluster, t.weight, ", ".join(t.words)) for t in data.top_words]
    section.html.append(table(rows, ("cluster", "weight", "top words"), "top-words"))
    shown = data.top_words[:12]
    section.images.append(_image(
        "top_words.png", lambda: F.top_words_figure(
            [(f"#{t.cluster}  w={t.weight:.3f}", [F.literal(w) for w in t.words], t.probs)
             for t in shown],
            f"Top words of the {len(shown)} heaviest clusters"),
        "top words per cluster", "Word probabilities E[θ_kw] of each cluster's ten most "
        "probable words."))
    return section


def chains_section(data: RunData) -> Section | None:
    """Temporal runs: durations, popularity, chains alive, lifespans."""
    c = data.chains
    if c is None:
        return None
    section = Section("Chains over epochs", anchor="chains")
    if not len(c.ids):
        section.html.append(paragraph("The run has no chains."))
        return section
    members = c.counts.sum(0)
    keep = np.sort(np.argsort(-members, kind="stable")[:60])
    more = len(c.ids) - len(keep)
    note = f" (the 60 with the most members of {len(c.ids)})" if more > 0 else ""
    section.images.append(_image(
        "chain_durations.png", lambda: F.chain_durations_figure(
            c.ids[keep], c.first[keep], c.last[keep], members[keep], c.times,
            f"Chain durations{note}"),
        "chain durations", "Each chain from its first to its last epoch with members, in "
        "order of birth; the darker the bar, the more members."))
    section.images.append(_image(
        "chain_popularity.png", lambda: F.chain_popularity_figure(
            c.counts, c.ids, c.times, "Popularity: members per epoch"),
        "chain popularity per epoch", "Members of the ten largest chains at each epoch, "
        "stacked; the others as one grey band."))
    section.images.append(_image(
        "chains_alive.png", lambda: F.alive_figure(
            c.times, (c.counts > 0).sum(1), c.alive, c.alive_mean, "Chains alive per epoch"),
        "chains alive per epoch", "Chains alive (with members now or in the last W epochs) "
        "and chains with members at each epoch."))
    section.images.append(_image(
        "chain_lifespans.png", lambda: F.histogram_figure(
            c.last - c.first + 1, f"Lifespans of the {len(c.ids)} chains",
            "lifespan (epochs from first to last member)", "chains"),
        "chain lifespan histogram", "Epochs from each chain's first to its last member."))
    return section


def sequences_section(data: RunData) -> Section | None:
    """ddcrp runs: tables and ELBO per item of each sequence."""
    s = data.sequences
    if s is None or s.empty:
        return None
    section = Section("Sequences", anchor="sequences")
    items, tables = s["items"].to_numpy(float), s["tables"].to_numpy(float)
    section.images.append(_image(
        "sequences.png", lambda: F.sequences_figure(
            items, tables, s["elbo"].to_numpy(float),
            f"{len(s)} sequences: tables and ELBO per item against length"),
        "tables and ELBO per item of each sequence", "One point per sequence."))
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
        traces.images.append(_image(
            "compare_traces.png", lambda: F.trace_figure(
                series, f"{len(series)} runs: objective per item and K"),
            "the runs' objectives and K against items seen",
            "Each run's objective per item and K against items seen (one panel per kind "
            "of objective)."))
    else:
        traces.html.append(paragraph("No run has a trace."))
    weights = Section("Cluster weights", anchor="weights")
    weights.images.append(_image(
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
