"""The report's plots: each function takes plain arrays and returns a matplotlib Figure.

Figures are made with ``matplotlib.figure.Figure`` directly, never through pyplot: no global
state, no interactive backend, nothing left open between reports. ``png`` renders one. The
plots over epochs and sequences: epoch_figures.py.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator

DPI = 100
TITLE_SIZE = 13
LABEL_SIZE = 10
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#17becf", "#7f7f7f", "#bcbd22")


def literal(text: str) -> str:
    """Text from the data (run names, words) drawn as it is: a ``$`` would start mathtext."""
    return str(text).replace("$", r"\$")


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def figure(width: float, height: float) -> Figure:
    """A new figure of that size in inches, laid out by matplotlib's constrained layout."""
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def note(ax, text: str) -> None:
    """``text`` in the middle of axes that have nothing to draw."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=11,
            color="#555555", wrap=True)


@dataclass
class Series:
    """One run's trace: the objective per item and K against items seen."""

    label: str
    items_seen: np.ndarray
    objective: np.ndarray
    K: np.ndarray
    objective_name: str  # its name for people (what the engine declares)
    per_partition: bool = False


def _objective_label(name: str, per_partition: bool) -> str:
    label = f"{name} per item"
    return label + "\n(each partition's)" if per_partition else label


def trace_figure(series: Sequence[Series], title: str) -> Figure:
    """The objective per item (one panel per kind of objective) and K, against items seen."""
    names = list(dict.fromkeys(s.objective_name for s in series))
    fig = figure(9, 3.0 * (len(names) + 1) + 0.4)
    axes = fig.subplots(len(names) + 1, 1, sharex=True, squeeze=False)[:, 0]
    many = len(series) > 1
    for ax, name in zip(axes, names, strict=False):
        drawn = False
        for i, s in enumerate(series):
            if s.objective_name != name:
                continue
            ok = np.isfinite(s.objective)
            if ok.any():
                ax.plot(s.items_seen[ok], s.objective[ok], color=COLORS[i % len(COLORS)],
                        marker="o" if ok.sum() <= 60 else None, markersize=3, linewidth=1.4,
                        label=s.label)
                drawn = True
        per_partition = any(s.per_partition for s in series if s.objective_name == name)
        ax.set_ylabel(_objective_label(name, per_partition), fontsize=LABEL_SIZE)
        ax.grid(True, alpha=0.3)
        if not drawn:
            note(ax, f"the trace has no {name} values")
        elif many:
            ax.legend(fontsize=8, loc="best")
    ax = axes[-1]
    for i, s in enumerate(series):
        ax.step(s.items_seen, s.K, where="post", color=COLORS[i % len(COLORS)], linewidth=1.4,
                label=s.label)
        if len(s.K) <= 60:
            ax.plot(s.items_seen, s.K, "o", color=COLORS[i % len(COLORS)], markersize=3)
    ax.set_ylabel("K (components)", fontsize=LABEL_SIZE)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    Ks = np.concatenate([s.K[np.isfinite(s.K)] for s in series] or [np.zeros(0)])
    if len(Ks) and Ks.max() - Ks.min() < 4:  # a flat K: whole numbers around it, not 3.95
        ax.set_ylim(max(0.0, float(Ks.min()) - 1.5), float(Ks.max()) + 1.5)
    ends = [float(np.max(s.items_seen)) for s in series if len(s.items_seen)]
    starts = [float(np.min(s.items_seen)) for s in series if len(s.items_seen)]
    if many and ends and min(starts) > 0 and max(ends) > 20 * min(ends):  # runs of very
        ax.set_xscale("log")  # different lengths: each readable on a log axis
        ax.set_xlabel("items seen (log scale)", fontsize=LABEL_SIZE)
    else:
        ax.set_xlabel("items seen", fontsize=LABEL_SIZE)
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.grid(True, alpha=0.3)
    if many:
        ax.legend(fontsize=8, loc="best")
    fig.suptitle(title, fontsize=TITLE_SIZE)
    return fig


def weights_figure(series: Sequence[tuple[str, np.ndarray]], ylabel: str, title: str,
                   weight_new: float | None = None) -> Figure:
    """Weights in decreasing order against their rank, both axes logarithmic (the tail plot);
    zero weights cannot be drawn on log axes and are counted in the legend."""
    fig = figure(8, 5)
    ax = fig.subplots()
    drawn = False
    for i, (label, weights) in enumerate(series):
        w = np.sort(np.asarray(weights, float))[::-1]
        positive = w[w > 0]
        zeros = len(w) - len(positive)
        if len(positive) == 0:
            continue
        text = label + (f" ({zeros} zero weights not drawn)" if zeros else "")
        ax.plot(np.arange(1, len(positive) + 1), positive, color=COLORS[i % len(COLORS)],
                marker="o" if len(positive) <= 100 else None, markersize=4, linewidth=1.4,
                label=text)
        drawn = True
    if weight_new is not None and weight_new > 0:
        ax.axhline(weight_new, color="#555555", linestyle="--", linewidth=1,
                   label=f"mass left for new components ({weight_new:.2g})")
    if drawn:
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.xaxis.set_major_formatter(plain)  # ranks 1, 10, 100 rather than 10^0, 10^1, 10^2
        few = max(len(w) for _, w in series) <= 30
        ax.xaxis.set_minor_formatter(FuncFormatter(
            lambda v, _: f"{v:g}" if few and v >= 1 and abs(v - round(v)) < 1e-9 else ""))
        ax.yaxis.set_major_formatter(plain)
        ax.legend(fontsize=8, loc="lower left")
        low, high = ax.get_ylim()
        decades = np.log10(high / low)
        if decades <= 2.5:  # few powers of ten shown: label the minor ticks too (all, or the
            digits = "23456789" if decades < 1 else "25"  # 2 and 5 times each power)
            ax.yaxis.set_minor_formatter(FuncFormatter(
                lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in digits else ""))
    else:
        note(ax, "no positive weights")
    ax.set_xlabel("rank (heaviest first)", fontsize=LABEL_SIZE)
    ax.set_ylabel(ylabel, fontsize=LABEL_SIZE)
    ax.grid(True, which="both", alpha=0.25)
    ax.set_title(title, fontsize=TITLE_SIZE)
    return fig


def _grid(n: int, max_cols: int) -> tuple[int, int]:
    cols = max(1, min(max_cols, n))
    return math.ceil(n / cols), cols


def image_grid_figure(images: np.ndarray, titles: Sequence[str], title: str, *,
                      cmap: str = "gray_r", colorbar_label: str = "") -> Figure:
    """Small images (n, h, w) in a grid, on one shared color scale with one colorbar."""
    n = len(images)
    rows, cols = _grid(n, 10)
    fig = figure(1.35 * cols + 1.4, 1.45 * rows + 0.9)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    finite = images[np.isfinite(images)]
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if vmax <= vmin:
        vmax = vmin + 1.0
    shown = None
    for ax, image, text in zip(axes, images, titles, strict=False):
        shown = ax.imshow(image, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
        ax.set_title(text, fontsize=8)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in axes[n:]:
        ax.set_axis_off()
    if shown is not None:
        bar = fig.colorbar(shown, ax=axes.tolist(), shrink=0.8, pad=0.01)
        bar.set_label(colorbar_label, fontsize=9)
    fig.suptitle(title, fontsize=TITLE_SIZE)
    return fig


def matrix_grid_figure(matrices: np.ndarray, titles: Sequence[str], title: str) -> Figure:
    """Square matrices (covariances), each on its own color scale symmetric about zero."""
    n = len(matrices)
    rows, cols = _grid(n, 4)
    fig = figure(2.7 * cols + 0.6, 2.75 * rows + 0.9)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for ax, matrix, text in zip(axes, matrices, titles, strict=False):
        finite = matrix[np.isfinite(matrix)]
        scale = float(np.abs(finite).max()) if finite.size else 1.0
        scale = scale if scale > 0 else 1.0
        shown = ax.imshow(matrix, cmap="RdBu_r", vmin=-scale, vmax=scale,
                          interpolation="nearest")
        ax.set_title(text, fontsize=8)
        ax.set_xlabel("dimension", fontsize=7)
        ax.set_ylabel("dimension", fontsize=7)
        bar = fig.colorbar(shown, ax=ax, shrink=0.75, pad=0.02)
        bar.ax.tick_params(labelsize=7)
        ax.tick_params(labelsize=7)
    for ax in axes[n:]:
        ax.set_axis_off()
    fig.suptitle(title, fontsize=TITLE_SIZE)
    return fig


def heatmap_figure(matrix: np.ndarray, row_labels: Sequence[str], title: str, xlabel: str,
                   colorbar_label: str) -> Figure:
    """Rows (clusters) against columns (dimensions) as one heatmap."""
    rows, cols = matrix.shape
    fig = figure(min(14.0, 4 + 0.12 * cols), min(14.0, 1.8 + 0.28 * rows))
    ax = fig.subplots()
    shown = ax.imshow(matrix, aspect="auto", cmap="viridis", interpolation="nearest")
    ax.set_yticks(range(rows))
    ax.set_yticklabels(row_labels, fontsize=7 if rows > 15 else 9)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel, fontsize=LABEL_SIZE)
    ax.set_ylabel("cluster (heaviest first)", fontsize=LABEL_SIZE)
    fig.colorbar(shown, ax=ax, pad=0.01).set_label(colorbar_label, fontsize=9)
    ax.set_title(title, fontsize=TITLE_SIZE)
    return fig


def means_scatter_figure(means: np.ndarray, weights: np.ndarray, ids: Sequence[int],
                         title: str) -> Figure:
    """Two-dimensional component means as points whose area follows the weight."""
    fig = figure(7, 6)
    ax = fig.subplots()
    w = np.asarray(weights, float)
    sizes = 30 + 900 * w / max(float(w.max()), 1e-300) if len(w) else []
    ax.scatter(means[:, 0], means[:, 1], s=sizes, alpha=0.55, color=COLORS[0],
               edgecolor="black", linewidth=0.6)
    for k in range(min(15, len(means))):
        ax.annotate(f"#{ids[k]}", means[k], fontsize=8, ha="center", va="center")
    ax.set_xlabel("dimension 0", fontsize=LABEL_SIZE)
    ax.set_ylabel("dimension 1", fontsize=LABEL_SIZE)
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=TITLE_SIZE)
    return fig


def top_words_figure(clusters: Sequence[tuple[str, Sequence[str], Sequence[float]]],
                     title: str) -> Figure:
    """Each cluster's most probable words as horizontal bars of their probabilities."""
    n = len(clusters)
    rows, cols = _grid(n, 3)
    n_words = max((len(words) for _, words, _ in clusters), default=1)
    fig = figure(4.2 * cols, (0.24 * n_words + 0.9) * rows + 0.7)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    for i, (ax, (text, words, probs)) in enumerate(zip(axes, clusters, strict=False)):
        y = np.arange(len(words))
        ax.barh(y, probs, color=COLORS[i % len(COLORS)], alpha=0.85)
        ax.set_yticks(y)
        ax.set_yticklabels(words, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(text, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("probability", fontsize=8)
    for ax in axes[n:]:
        ax.set_axis_off()
    fig.suptitle(title, fontsize=TITLE_SIZE)
    return fig
