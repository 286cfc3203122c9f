"""The report's plots over epochs and sequences (the panels an engine declares: tdpm's chains,
ddcrp's sequences): each function takes plain arrays and returns a matplotlib Figure, made as
in ``figures``."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from .figures import COLORS, LABEL_SIZE, TITLE_SIZE, figure, note


def _epoch_axis(ax, times: np.ndarray) -> None:
    ax.set_xlabel("epoch (time)", fontsize=LABEL_SIZE)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(times):
        ax.set_xlim(float(times[0]) - 0.7, float(times[-1]) + 0.7)


def _epoch_steps(times: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Epoch edges (T + 1: each epoch a unit-wide step centred on its time) and each value
    array with its last value repeated, for step="post" drawing."""
    t = np.asarray(times, float)
    edges = np.concatenate([t - 0.5, t[-1:] + 0.5])
    padded = (np.asarray(v, float) for v in values)
    return (edges, *(np.concatenate([v, v[..., -1:]], axis=-1) for v in padded))


def chain_durations_figure(ids: np.ndarray, first: np.ndarray, last: np.ndarray,
                           members: np.ndarray, times: np.ndarray, title: str) -> Figure:
    """Each chain's span, first to last epoch with members, as a bar; chains in order of
    birth (ties: more members first)."""
    order = np.lexsort((-members, first))
    n = len(order)
    fig = figure(9, min(12.0, 2.0 + 0.22 * max(n, 5)))
    ax = fig.subplots()
    starts = times[first[order]].astype(float)
    spans = (times[last[order]] - times[first[order]]).astype(float) + 0.8
    shade = members[order] / max(float(members.max()), 1.0) if n else []
    ax.barh(np.arange(n), spans, left=starts - 0.4, height=0.7,
            color=[(0.12, 0.47, 0.71, 0.35 + 0.65 * s) for s in shade], edgecolor="#0b3d66",
            linewidth=0.5)
    ax.set_yticks(np.arange(n))
    ax.set_yticklabels([f"#{ids[k]}" for k in order], fontsize=7 if n > 20 else 9)
    ax.invert_yaxis()
    ax.set_ylabel("chain", fontsize=LABEL_SIZE)
    _epoch_axis(ax, times)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title, fontsize=TITLE_SIZE)
    return fig


def chain_popularity_figure(counts: np.ndarray, ids: np.ndarray, times: np.ndarray,
                            title: str, top: int = 10) -> Figure:
    """Members per epoch, stacked: the ``top`` chains with the most members, the rest as one
    band."""
    totals = counts.sum(0)
    order = np.argsort(-totals, kind="stable")[:top]
    rest = counts.sum(1) - counts[:, order].sum(1)
    fig = figure(9, 5)
    ax = fig.subplots()
    layers = [counts[:, k] for k in order]
    labels = [f"chain #{ids[k]}" for k in order]
    colors = [COLORS[i % len(COLORS)] for i in range(len(order))]
    if rest.any():
        layers.append(rest)
        labels.append(f"the other {counts.shape[1] - len(order)} chains")
        colors.append("#cccccc")
    if layers and len(times):
        edges, stacked = _epoch_steps(times, np.vstack(layers))
        ax.stackplot(edges, stacked, labels=labels, colors=colors, alpha=0.9, step="post")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        note(ax, "no chains")
    ax.set_ylabel("members per epoch", fontsize=LABEL_SIZE)
    _epoch_axis(ax, times)
    ax.grid(True, alpha=0.3)
    ax.set_title(title, fontsize=TITLE_SIZE)
    return fig


def alive_figure(times: np.ndarray, occupied: np.ndarray, alive: np.ndarray | None,
                 alive_mean: np.ndarray | None, title: str) -> Figure:
    """Chains alive and chains with members at each epoch."""
    fig = figure(9, 4.2)
    ax = fig.subplots()
    if alive is not None:
        ax.step(*_epoch_steps(times, alive), where="post", color=COLORS[0], linewidth=2.2,
                label="alive (members now or within the window), final sample")
    if alive_mean is not None:
        ax.step(*_epoch_steps(times, alive_mean), where="post", color=COLORS[1],
                linestyle="--", linewidth=1.3, label="alive, mean over the kept samples")
    ax.step(*_epoch_steps(times, occupied), where="post", color=COLORS[2], linewidth=1.2,
            label="with members this epoch")
    ax.set_ylabel("chains", fontsize=LABEL_SIZE)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    _epoch_axis(ax, times)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    ax.set_title(title, fontsize=TITLE_SIZE)
    return fig


def histogram_figure(values: np.ndarray, title: str, xlabel: str, ylabel: str) -> Figure:
    """A histogram of integer values, one bin per integer (grouped when there are many)."""
    fig = figure(8, 4.2)
    ax = fig.subplots()
    values = np.asarray(values, float)
    if len(values):
        lo, hi = int(values.min()), int(values.max())
        step = max(1, math.ceil((hi - lo + 1) / 60))
        ax.hist(values, bins=np.arange(lo - 0.5, hi + step + 0.5, step), color=COLORS[0],
                edgecolor="white")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        note(ax, "nothing to count")
    ax.set_xlabel(xlabel, fontsize=LABEL_SIZE)
    ax.set_ylabel(ylabel, fontsize=LABEL_SIZE)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(title, fontsize=TITLE_SIZE)
    return fig


def sequences_figure(items: np.ndarray, tables: np.ndarray, elbo: np.ndarray,
                     title: str) -> Figure:
    """Per sequence: tables against length, and the ELBO per item against length."""
    fig = figure(10, 4.2)
    left, right = fig.subplots(1, 2)
    left.scatter(items, tables, s=18, color=COLORS[0], alpha=0.7)
    left.set_xlabel("items in the sequence", fontsize=LABEL_SIZE)
    left.set_ylabel("tables (clusters)", fontsize=LABEL_SIZE)
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.grid(True, alpha=0.3)
    right.scatter(items, elbo / np.maximum(items, 1), s=18, color=COLORS[1], alpha=0.7)
    right.set_xlabel("items in the sequence", fontsize=LABEL_SIZE)
    right.set_ylabel("ELBO per item", fontsize=LABEL_SIZE)
    right.grid(True, alpha=0.3)
    fig.suptitle(title, fontsize=TITLE_SIZE)
    return fig
