"""What ``bnpmix show`` prints: a finished run's clusters by decreasing weight with their sizes
and, for text (a bag-of-words corpus), their most probable words under the posterior mean word
distribution; for dense data their posterior mean vectors, and the one covariance they share
when the model ties them (tied-gauss). The words come from ``RUN_DIR/vocab.txt`` (a fit of a
bag-of-words corpus keeps its vocabulary there), else from the corpus the run's configuration
names, used only while it is still the vocabulary the run was fitted to (same SHA-256)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bnpmix.storage import BnpmixError, Corpus
from bnpmix.storage.corpus import vocab_sha256

from .declared import Declared, local_note
from .finished import components, finished_run, labelled_clusters, numeral, plural

if TYPE_CHECKING:
    from bnpmix.storage.rundir import RunDir

SHOWN_DIMS = 8  # mean coordinates listed per cluster by `show`'s text output (JSON: all)


def run_vocabulary(run: RunDir, summary: dict[str, Any],
                   dim: int) -> tuple[list[str] | None, str]:
    """The run's vocabulary and where it came from (or, without one, why): RUN_DIR/vocab.txt,
    else the corpus's while its SHA-256 is the one summary.json recorded."""
    data = summary.get("data") or {}
    recorded = data.get("vocab_sha256")
    words = run.load_vocab()
    where: str = str(run.vocab_path)
    if words is None:
        corpus = (summary["config"].get("run") or {}).get("corpus")
        if not corpus:
            return None, "the run keeps no vocab.txt and names no corpus"
        try:
            words = Corpus(corpus).manifest.vocab
        except BnpmixError as exc:
            return None, f"the run keeps no vocab.txt and its corpus is unreadable ({exc})"
        where = f"{corpus} (the run keeps no vocab.txt)"
        if words is None:
            return None, f"the corpus {corpus} has no vocabulary"
    if len(words) != dim:
        return None, f"{where}: {len(words)} words, but the model has {dim} columns"
    if recorded and vocab_sha256(words) != recorded:
        return None, f"{where}: not the vocabulary the run was fitted to (its SHA-256 differs)"
    return words, where


def show_clusters(path: str | Path, top_words: int = 10, top: int = 20) -> dict[str, Any]:
    """What ``bnpmix show RUN_DIR`` prints: the ``top`` heaviest clusters with their sizes and
    their ``top_words`` most probable words (text) or their mean vectors (dense)."""
    if top_words < 1 or top < 1:
        raise BnpmixError(f"show: --top-words and --top must be positive (got {top_words}, "
                          f"{top})")
    from .evaluate.fitted import load

    run = finished_run(path)
    summary = run.load_summary()
    model = load(run.path)  # its means_ in label order, as the clusters
    weights, _, uids, sizes, _ = components(run, summary)
    clusters = labelled_clusters(weights, uids, sizes)
    means = np.asarray(model.means_, float)
    data = summary.get("data") or {}
    text = data.get("kind") == "bow" if data.get("kind") else model.model.obs.text
    out: dict[str, Any] = {
        "run_dir": str(run.path),
        "engine": summary["algorithm"],
        "obs": summary.get("obs", model.model.obs.name),
        "K": int(summary["K"]),
        "n_items": summary["n_items"],
        "kind": "text" if text else "dense",
        "shown": min(top, len(clusters)),
        "weights_are": Declared.of(summary).weights_are,
        "noun": Declared.of(summary).component_noun if local_note(summary) else "cluster",
        "local": local_note(summary),
    }
    vocab: list[str] | None = None
    if text:
        vocab, where = run_vocabulary(run, summary, means.shape[1])
        out["vocab"] = where if vocab is not None else None
        if vocab is None:
            out["vocab_note"] = f"{where}; words shown by their column number"
    if not text:
        out.update(dense_notes(model))
    spans = component_spans(model)
    if spans is not None:
        out["mean_at"] = "its last epoch"
    rows = []
    for c in clusters[:top]:  # the label is the rank from 0 (pipeline/labels.py)
        row = {"cluster": c["cluster"], "weight": c["weight"], "size": c["size"],
               "fraction": None if c["size"] is None else c["size"] / summary["n_items"]}
        if spans is not None:
            row["epochs"] = spans[c["cluster"]].tolist()
        m = means[c["cluster"]] if means.ndim == 2 and len(means) > c["cluster"] else None
        if m is None:
            pass
        elif text:
            best = np.argsort(-m, kind="stable")[:top_words]
            row["top_words"] = [{"word": vocab[w] if vocab is not None else f"#{w}",
                                 "prob": round(float(m[w]), 6)} for w in best]
        else:
            row["mean"] = [round(float(v), 4) for v in m]
        rows.append(row)
    out["clusters"] = rows
    return out


def dense_notes(model: Any) -> dict[str, Any]:
    """A dense model's notes for ``show``: what its means are (``note``) and the covariance
    every cluster shares (``shared_covariance``, E[Σ] rounded)."""
    out: dict[str, Any] = {}
    obs = model.model.obs
    if getattr(obs, "means_note", ""):  # (a chain model's obs is a facade)
        out["note"] = obs.means_note
    if getattr(obs, "shared_shapes", lambda: ())():  # one covariance for every
        # cluster (tied-gauss); a chain model (tdpm) has none
        cov = obs.covariances(model.model.post)
        if cov is not None and len(cov):
            out["shared_covariance"] = [[round(float(v), 6) for v in row] for row in cov[0]]
    return out


def component_spans(model: Any) -> np.ndarray | None:
    """Each cluster's first and last epoch in label order, (K, 2), for models whose components
    are chains over epochs (a ``spans`` method: tdpm), whose means are the state at the last
    one; None for the others."""
    spans = getattr(model.model, "spans", None)
    return None if spans is None else np.asarray(spans())[model.order_]


def format_show(shown: dict[str, Any]) -> str:
    """Human-readable lines of ``show_clusters``: one line per cluster."""
    K, n = shown["K"], shown["shown"]
    head = (f"{shown['engine']} ({shown['obs']}): {plural(K, shown.get('noun', 'cluster'))} of "
            f"{plural(shown['n_items'], 'item')}; "
            + (f"the {n} heaviest" if n < K else "all") + ", by decreasing weight")
    lines = [head]
    if shown.get("vocab"):
        lines.append(f"words from {shown['vocab']}")
    for key in ("local", "vocab_note", "note"):
        if shown.get(key):
            lines.append(f"note: {shown[key]}")
    if shown.get("shared_covariance"):
        sd = np.sqrt(np.maximum(np.diagonal(np.array(shown["shared_covariance"])), 0.0))
        lines.append("shared covariance E[Σ] of every cluster: standard deviations ["
                     + ", ".join(f"{v:.3g}" for v in sd[:SHOWN_DIMS])
                     + (f", ... ({len(sd)} dimensions; --json for the matrix)]"
                        if len(sd) > SHOWN_DIMS else "] (--json for the matrix)"))
    what = "top words" if shown["kind"] == "text" else "mean"
    at = shown.get("mean_at")
    lines.append(f"{'cluster':>7} {'weight':>7} {'size':>8} {'fraction':>8}  "
                 + (f"{'epochs':<13}  {what} at {at}" if at else what))
    for row in shown["clusters"]:
        size = "-" if row["size"] is None else str(row["size"])
        if "top_words" in row:
            detail = " ".join(w["word"] for w in row["top_words"])
        elif "mean" in row:
            m = row["mean"]
            detail = "[" + ", ".join(f"{v:.3g}" for v in m[:SHOWN_DIMS]) + (
                f", ... ({len(m)} dimensions; --json for all)]" if len(m) > SHOWN_DIMS else "]")
        else:
            detail = "-"
        fraction = "-" if row["fraction"] is None else f"{row['fraction']:.4f}"
        if "epochs" in row:  # the chain's first-last epoch (time values)
            span = "-".join(numeral(t, "g") for t in row["epochs"])
            detail = f"{span:<13}  {detail}"
        lines.append(f"{row['cluster']:>7} {row['weight']:>7.4f} {size:>8} {fraction:>8}  "
                     f"{detail}")
    lines.append(f"(cluster: its label everywhere; weight: {shown['weights_are']}; fraction: "
                 "its share of all items" + ("; epochs: the chain's first and last epoch, the "
                                             f"{what} being its state at the last)" if at
                                             else ")"))
    return "\n".join(lines)
