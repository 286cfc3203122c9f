"""What a report shows of one finished run directory, read into plain arrays and tables.

Nothing here draws: ``load_run`` reads summary.json, trace.csv, the model and the extra tables
of the panels the run declares (``Declared.panels``: chains, sequences) and returns a
``RunData`` that the figures and the page are made from. A text run's words come from
``inspect.run_vocabulary``, as ``bnpmix show``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from bnpmix.storage import BnpmixError, Corpus, RunDir

from ..declared import CHAINS_PANEL, SEQUENCES_PANEL, Declared
from ..evaluate import evaluate
from ..evaluate.fitted import load
from ..inspect import finished_run, run_vocabulary

TOP = 30  # clusters shown in image grids and word tables: the heaviest ones


@dataclass
class Trace:
    """A run's trace as series against items seen: the objective per item and K."""

    items_seen: np.ndarray
    objective: np.ndarray  # per item; NaN where the engine had no value yet
    K: np.ndarray
    objective_name: str  # the objective's name for people (the engine's objective_label)
    per_partition: bool  # the objective of each row is that partition's, not the whole data's


@dataclass
class TopWords:
    """One cluster's most probable words."""

    cluster: int
    weight: float
    words: list[str]
    probs: list[float]


@dataclass
class Chains:
    """A temporal run's chains: spans, members per epoch, chains alive per epoch."""

    ids: np.ndarray  # (K,) chain labels (pipeline/labels.py)
    first: np.ndarray  # (K,) first epoch index with members
    last: np.ndarray  # (K,) last epoch index with members
    counts: np.ndarray  # (T, K) members per epoch
    times: np.ndarray  # (T,) the time value of each epoch
    alive: np.ndarray | None = None  # (T,) chains alive in the final sample (epochs.parquet)
    alive_mean: np.ndarray | None = None  # (T,) mean over the kept samples


@dataclass
class RunData:
    """Everything a report shows of one run."""

    path: Path
    summary: dict[str, Any]
    trace: Trace | None
    ids: np.ndarray  # (K,) cluster labels (pipeline/labels.py), heaviest first
    weights: np.ndarray  # (K,) decreasing
    weight_label: str  # what the weights are (expected weights, shares of items, ...)
    weight_new: float
    obs: str
    text: bool = False  # bag-of-words: means are word distributions
    means: np.ndarray | None = None  # (K, D), rows as ``ids``
    covariances: np.ndarray | None = None  # (K, D, D) E[Σ_k] (full-covariance Gaussians)
    variances: np.ndarray | None = None  # (K, D) E[σ²_kd] (diagonal Gaussians)
    vocab: list[str] | None = None
    vocab_note: str | None = None  # why a text run's words are not shown
    top_words: list[TopWords] = field(default_factory=list)
    chains: Chains | None = None
    sequences: pd.DataFrame | None = None
    heldout: dict[str, Any] | None = None
    progress: Trace | None = None  # a pass item by item (progress.parquet: adf's, ep's first)

    @property
    def name(self) -> str:
        """The run directory's name."""
        return self.path.resolve().name

    @property
    def D(self) -> int:
        """The dimension of the component means (0 without means)."""
        return 0 if self.means is None else int(self.means.shape[1])

    @property
    def image_side(self) -> int | None:
        """The side of the square image an item is (8 for 64 dimensions), if it is one."""
        side = math.isqrt(self.D)
        return side if side >= 2 and side * side == self.D and not self.text else None


def items_seen(trace: pd.DataFrame, summary: dict[str, Any]) -> tuple[np.ndarray, bool]:
    """Items processed up to each trace row, and whether rows are per partition (ADF and EP:
    lap is the pass and batch the partition, so rows count partitions' items; the corpus's
    partition sizes are used when it is readable, else equal partitions: the engine declares
    ``trace_per_partition``). Other engines' lap is fractional (memo: lap + position /
    partitions) or counts whole laps: lap × N."""
    n = float(summary["n_items"])
    lap = trace["lap"].to_numpy(float)
    batch = trace["batch"].to_numpy(int) if "batch" in trace else np.full(len(lap), -1)
    if not Declared.of(summary).trace_per_partition or not (batch >= 0).all():
        return lap * n, False
    sizes = _partition_rows(summary)
    P = int(batch.max()) + 1
    if sizes is None or len(sizes) < P:
        sizes = np.full(P, n / max(P, 1))
    seen, total, current = np.empty(len(lap)), 0.0, None
    for i, (ell, b) in enumerate(zip(lap, batch, strict=True)):
        if ell != current:
            current, total = ell, ell * n
        total += sizes[b]
        seen[i] = total
    return seen, True


def _partition_rows(summary: dict[str, Any]) -> np.ndarray | None:
    corpus = (summary.get("config", {}).get("run", {}) or {}).get("corpus")
    try:
        return np.array([p.rows for p in Corpus(corpus).manifest.partitions], float)
    except (BnpmixError, TypeError):
        return None


def read_trace(run: RunDir, summary: dict[str, Any]) -> Trace | None:
    """The trace against items seen, the objective per item (None: an empty trace)."""
    try:
        frame = run.load_trace()
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        if isinstance(exc, pd.errors.EmptyDataError):
            return None
        raise BnpmixError(f"{run.trace_path}: unreadable trace ({exc})") from None
    if frame.empty or "lap" not in frame or "K" not in frame:
        return None
    declared = Declared.of(summary)
    name = declared.objective
    x, per_partition = items_seen(frame, summary)
    if name in frame:
        values = frame[name].to_numpy(float)
        if not per_partition:  # totals over the data; ADF/EP rows are already per item
            values = values / max(summary["n_items"], 1)
    else:
        values = np.full(len(frame), np.nan)
    return Trace(x, values, frame["K"].to_numpy(float), declared.objective_label, per_partition)


def read_progress(run: RunDir, summary: dict[str, Any]) -> Trace | None:
    """RUN_DIR/progress.parquet, which an engine whose trace has a row per partition writes of
    its pass item by item (items seen, K, its objective per item over the pass so far); None
    for a run without one."""
    path = run.path / "progress.parquet"
    if not path.is_file():
        return None
    declared = Declared.of(summary)
    try:
        frame = pq.read_table(path, columns=["items", "K", declared.objective]).to_pandas()
    except (OSError, ValueError, KeyError) as exc:
        raise BnpmixError(f"{path}: unreadable ({exc})") from None
    return Trace(frame["items"].to_numpy(float), frame[declared.objective].to_numpy(float),
                 frame["K"].to_numpy(float), declared.objective_label, False)


def top_words(means: np.ndarray, ids: np.ndarray, weights: np.ndarray, vocab: list[str],
              n_clusters: int = TOP, n_words: int = 10) -> list[TopWords]:
    """The ``n_words`` most probable words of the ``n_clusters`` first (heaviest) clusters."""
    out = []
    for k in range(min(n_clusters, len(ids))):
        order = np.argsort(-means[k], kind="stable")[:n_words]
        out.append(TopWords(int(ids[k]), float(weights[k]), [vocab[w] for w in order],
                            [float(means[k, w]) for w in order]))
    return out


def read_chains(run: RunDir, model: Any, labels: np.ndarray) -> Chains:
    """A temporal model's chains (``labels``: each one's label, in the model's order), with
    epochs.parquet's chains alive when the run has it."""
    chains = Chains(np.asarray(labels), np.asarray(model.first), np.asarray(model.last),
                    np.asarray(model.counts, float), np.asarray(model.times))
    epochs_path = run.path / "epochs.parquet"
    if epochs_path.is_file():
        try:
            epochs = pq.read_table(epochs_path).to_pandas()
        except (OSError, ValueError) as exc:
            raise BnpmixError(f"{epochs_path}: unreadable ({exc})") from None
        if "alive" in epochs:
            chains.alive = epochs["alive"].to_numpy(float)
        if "alive_mean" in epochs:
            chains.alive_mean = epochs["alive_mean"].to_numpy(float)
    return chains


def read_sequences(run: RunDir) -> pd.DataFrame:
    """sequences.parquet's items, tables and ELBO of each sequence (a run declaring the
    sequences panel)."""
    path = run.path / "sequences.parquet"
    try:
        return pq.read_table(path, columns=["sequence", "items", "tables", "elbo"]).to_pandas()
    except (OSError, ValueError, KeyError) as exc:
        raise BnpmixError(f"{path}: unreadable ({exc})") from None


def load_run(run_dir: str | Path, heldout: str | Path | None = None,
             label_column: str | None = None) -> RunData:
    """Read a finished run directory for its report; with ``heldout`` (a corpus) the held-out
    figures of ``bnpmix evaluate`` are computed too."""
    run = finished_run(run_dir)
    summary = run.load_summary()
    fitted = load(run.path)
    model = fitted.model
    weights = np.asarray(fitted.weights_, float)  # fitted's arrays: in label order
    declared = Declared.of(summary)
    if declared.plots_fractions:  # each cluster's items (by label) over all items
        sizes = np.asarray(summary["sizes"], float)
        weights = sizes / max(sizes.sum(), 1.0)
    order = np.argsort(-weights, kind="stable")  # the labels, heaviest shown first
    data = RunData(run.path, summary, read_trace(run, summary), order, weights[order],
                   declared.weight_label,
                   float(fitted.weight_new_), model.obs.name)
    means = np.asarray(fitted.means_, float)
    if means.ndim == 2 and means.shape[0] == len(weights):
        data.means = means[order]
    covariances = model.obs.covariances(model.post)  # full (K, D, D) or diagonal (K, D)
    if covariances is not None:
        covariances = covariances[fitted.order_]
    if covariances is not None and covariances.ndim == 3:
        data.covariances = covariances[order]
    elif covariances is not None:
        data.variances = covariances[order]
    facts = summary.get("data") if isinstance(summary.get("data"), dict) else {}
    data.text = facts.get("kind") == "bow" or model.obs.text
    if data.text:
        vocab, where = run_vocabulary(run, summary, data.D)
        data.vocab, data.vocab_note = (vocab, None) if vocab is not None else (None, where)
        if data.vocab is not None and data.means is not None:
            data.top_words = top_words(data.means, data.ids, data.weights, data.vocab)
    if CHAINS_PANEL in declared.panels:
        data.chains = read_chains(run, model, fitted.labels_of(model.uids))
    if SEQUENCES_PANEL in declared.panels:
        data.sequences = read_sequences(run)
    data.progress = read_progress(run, summary)
    if heldout is not None:
        data.heldout = evaluate(run.path, heldout, label_column)
    return data
