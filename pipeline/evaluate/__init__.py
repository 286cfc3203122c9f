"""Held-out evaluation of fitted models (``bnpmix evaluate``) and loading them (``bnpmix.load``).

Held-out partitions are scored where they are read, through an executor, a few at a time: only
per-partition sums, cluster ids and labels come back to the driver. Without a held-out corpus
the run's training corpus (job.json's) is scored, in-sample, and the result says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bnpmix.algorithms.metrics import (
    adjusted_rand_index,
    alignment_accuracy,
    normalized_mutual_info,
    variation_of_information,
)
from bnpmix.algorithms.obs.mult import log_multinomial_coefficient
from bnpmix.storage import Batch, BnpmixError, Corpus, RunDir

from ..declared import heldout_kind
from ..runtime.context import check_heldout
from ..runtime.executors import open_executor
from ..runtime.models import read_model
from ..usage import LABEL_NAMES, renamed_keyword
from .fitted import FittedModel, load


@dataclass(frozen=True)
class HeldoutPlan:
    """How the workers score a held-out partition, decided on the driver from the model, the
    run's configuration and the held-out corpus's manifest (never its rows).

    ``sequence_column`` / ``sequence``: a ddcrp model scores each item within its sequence
    (from that column, or the one sequence of a run fitted to a corpus without sequences);
    ``position_column``: by the run's decay from those positions, else linking uniformly.
    ``time_column`` / ``next_time``: a tdpm model predicts the epoch after its last only, so a
    held-out item's time, when the corpus has the column, must be ``next_time``.
    ``coefficient``: also sum the multinomial coefficients (bag-of-words token models).
    ``scoring``: what the per-item figure is, for the output."""

    scoring: str
    coefficient: bool = False
    sequence_column: str | None = None
    sequence: int | None = None
    position_column: str | None = None
    time_column: str | None = None
    next_time: int | None = None

    @property
    def by_sequence(self) -> bool:
        """Items are scored within their sequences (a ddcrp model's plan)."""
        return self.sequence_column is not None or self.sequence is not None


def _rows_error(batch: Batch, what: str) -> BnpmixError:
    return BnpmixError(f"held-out partition {batch.index} (rows {batch.start}.."
                       f"{batch.start + len(batch) - 1}): {what}")


def score_partition(batch: Batch, model: Any, label_column: str | None,
                    plan: HeldoutPlan | None = None
                    ) -> tuple[float, int, np.ndarray, np.ndarray | None, float]:
    """Σ_n log p(x_n | fit), n, the most probable active component id of each item (−1 if it
    can only be a new one), labels, and (bag-of-words) Σ_n of the multinomial coefficient
    log(n_d! / Π_w x_dw!) that the first excludes. log p(x_n | fit) is the model's held-out
    predictive: log Σ_k π_k p(x_n | k) + π_new p(x_n | prior) (mixtures: expected weights and
    posterior predictives; NRM: the predictive rule; tdpm: the next epoch's chains), or for a
    ddcrp model its Eq. 7 within the item's sequence: the model kind's ``heldout_scores``."""
    plan = plan if plan is not None else plan_for(model, {}, None)
    try:
        model.obs.check_data(batch.X)
    except ValueError as exc:
        raise BnpmixError(f"held-out partition {batch.index}: does not fit the model's "
                          f"{model.obs.name} observations: {exc}") from None
    try:
        per_item, best = model.heldout_scores(batch.X, batch.columns, plan, batch.start)
    except ValueError as exc:
        raise _rows_error(batch, str(exc)) from None
    labels = None if label_column is None else batch.columns[label_column]
    coefficient = float(log_multinomial_coefficient(batch.X).sum()) if plan.coefficient \
        else 0.0
    return float(np.sum(per_item)), len(batch), best, labels, coefficient


def plan_for(model: Any, config: dict[str, Any], corpus: Corpus | None) -> HeldoutPlan:
    """The scoring plan of ``model`` (whose run recorded ``config``, summary.json's) for the
    held-out ``corpus`` (its manifest only; None: no columns known). Errors when a model cannot
    score the corpus, saying why."""
    columns = () if corpus is None else tuple(corpus.manifest.columns)
    where = "the held-out corpus" if corpus is None else str(corpus.path)
    try:
        fields = model.heldout_plan(config, columns, where)
    except ValueError as exc:
        raise BnpmixError(str(exc)) from None
    return HeldoutPlan(**fields, coefficient=model.obs.text)  # token densities: ObsModel.text


def fitted_facts(run_dir: str | Path, model: Any) -> dict[str, Any]:
    """What the run was fitted to (summary.json's ``data``); for runs written before it was
    recorded, the kind and dimension the model's observations imply."""
    summary = RunDir(run_dir).load_summary()
    if isinstance(summary.get("data"), dict):
        return summary["data"]
    obs = model.obs
    return {"kind": "bow" if obs.text else "dense",
            "dim": int(getattr(obs, "V", getattr(obs, "D", 0))), "vocab_sha256": None}


def evaluate(run_dir: str | Path, heldout: str | Path | None = None,
             label_column: str | None = None, scheduler: str = "threads", wave: int = 8,
             cluster: str | None = None, *, labels_column: str | None = None) -> dict[str, Any]:
    """Held-out predictive log-likelihood per item, (1/N) Σ_n log p(x_n | fit), as the model
    defines it for new items (``plan_for``; the model's own ``score_samples`` /
    ``score_sequences``); with a label column also ARI, NMI (arithmetic mean), VI (nats) and the
    majority-label accuracy of each item's most probable component against the labels.
    ``heldout`` None: the run's training corpus (``training_corpus``), in-sample; ``corpus`` and
    ``scored`` (heldout or training) in the result say which. ``labels_column``: the former
    name of ``label_column``."""
    label_column = renamed_keyword(label_column, labels_column, LABEL_NAMES)
    scored = "heldout" if heldout is not None else "training"
    heldout = heldout if heldout is not None else training_corpus(run_dir)
    model = read_model(str(run_dir))
    corpus = Corpus(heldout)
    check_heldout(corpus, fitted_facts(run_dir, model), run_dir)
    if label_column is not None and label_column not in corpus.manifest.columns:
        raise BnpmixError(f"{heldout}: no column {label_column!r} "
                          f"(has {list(corpus.manifest.columns)})")
    config = RunDir(run_dir).load_summary().get("config") or {}
    plan = plan_for(model, config, corpus)
    total, coefficient, n, clusters, labels = 0.0, 0.0, 0, [], []
    with open_executor(corpus, scheduler, cluster) as executor:
        for start in range(0, corpus.n_partitions, wave):
            indices = list(range(start, min(corpus.n_partitions, start + wave)))
            for s, m, best, y, c in executor.map(score_partition, indices, model,
                                                 label_column, plan):
                total += s
                coefficient += c
                n += m
                clusters.append(best)
                if y is not None:
                    labels.append(y)
    if n == 0:
        raise BnpmixError(f"{heldout}: no items to score")
    out: dict[str, Any] = {"heldout_loglik_per_item": total / n, "K": model.K, "n_items": n,
                           "scoring": plan.scoring, "scored": scored, "corpus": str(heldout),
                           "heldout_kind": heldout_kind(getattr(model, "obs", None))}
    # documents: say which scale, and give the other one too; dense data: None, not applicable
    out["multinomial_coefficient_included"] = False if plan.coefficient else None
    if plan.coefficient:
        out["heldout_loglik_per_item_with_coefficient"] = (total + coefficient) / n
    if label_column is not None:
        c, y = np.concatenate(clusters), np.concatenate(labels)
        out["ari"] = adjusted_rand_index(y, c)
        out["nmi"] = normalized_mutual_info(y, c)
        out["vi"] = variation_of_information(y, c)
        out["accuracy"] = alignment_accuracy(c, y)
    return out


def training_corpus(run_dir: str | Path) -> str:
    """The corpus a run was fitted to, as job.json records it (a path or a URL), while it still
    holds exactly the partitions the fit read (an appended or rewritten corpus is not)."""
    from ..fit import partitions_of

    job_file = RunDir(run_dir).path / "job.json"  # a scheduled run's latest: its version's
    try:
        job = json.loads(job_file.read_text(encoding="utf-8"))
        uri, fitted = str(job["corpus"]), job["partitions"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BnpmixError(f"{job_file}: no training corpus recorded ({type(exc).__name__}: "
                          f"{exc}); give --heldout CORPUS_DIR") from None
    try:
        corpus = Corpus(uri)
    except BnpmixError as exc:
        raise BnpmixError(f"{run_dir}: its training corpus {uri} (job.json) cannot be read "
                          f"({exc}); give --heldout CORPUS_DIR") from None
    if partitions_of(corpus) != fitted:
        raise BnpmixError(f"{uri}: not the corpus {run_dir} was fitted to any more "
                          f"({len(fitted)} partitions then, {corpus.n_partitions} now, or "
                          "rewritten); give --heldout CORPUS_DIR to score it as it is")
    return uri


__all__ = ["FittedModel", "HeldoutPlan", "evaluate", "load", "plan_for", "score_partition",
           "training_corpus"]
