"""What ``bnpmix info`` and ``bnpmix show`` print: a corpus or a finished run, described.

``run_info(RUN_DIR)``: the engine, K (all components; those with more than 1% of the weight; those
with at least one item assigned), the weights, the cluster sizes counted from the assignments, and
the figures of summary.json (objective, per item, laps, wall seconds, items, and the observation
prior's figures, initial and learned).

``show_clusters(RUN_DIR)``: the clusters by decreasing weight with their sizes and, for text (a
bag-of-words corpus), their most probable words under the posterior mean word distribution; for
dense data their posterior mean vectors, and the one covariance they share when the model ties
them (tied-gauss). The words come from ``RUN_DIR/vocab.txt`` (a fit of a
bag-of-words corpus keeps its vocabulary there), else from the corpus the run's configuration
names, used only while it is still the vocabulary the run was fitted to (same SHA-256).

Everything here reads; nothing writes. ``info`` needs numpy and JSON only: summary.json records
the components' weights, ids and sizes (``RECORDED``). For a run written before it did, the
model (the engines' mathematics: scipy) and the assignments (Parquet: pyarrow) are read instead,
imported then.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bnpmix.storage import BnpmixError, Corpus
from bnpmix.storage.corpus import MANIFEST, vocab_sha256
from bnpmix.storage.rundir import run_path

from .declared import HELDOUT_DEQUANTISED, HELDOUT_NOTE, Declared, local_note
from .labels import label_order

if TYPE_CHECKING:
    from bnpmix.storage.rundir import RunDir

EFFECTIVE = 0.01  # a component with more than this share of the weight counts as effective
SHOWN_WEIGHTS = 12  # weights listed by `info`'s text output
SHOWN_DIMS = 8  # mean coordinates listed per cluster by `show`'s text output (JSON: all)
# what a fit records in summary.json beside "weights": the components' ids and sizes (items
# assigned) in the order of the weights, and the mass left for new components
RECORDED = ("component_ids", "sizes", "weight_new")


# ------------------------------------------------------------------------------------------
# what a path is


def kind_of(path: str | Path) -> str:
    """``"run"`` (a finished run directory) or ``"corpus"``; otherwise an error saying what the
    path is instead."""
    path = run_path(path)  # a scheduled run's models/latest: the version it names
    if not path.exists():
        raise BnpmixError(f"{path}: not a corpus directory nor a run directory (no such "
                          "directory)")
    if not path.is_dir():
        raise BnpmixError(f"{path}: not a directory (expected a corpus or a run directory)")
    if (path / "summary.json").is_file():
        return "run"
    if (path / MANIFEST).is_file():
        return "corpus"
    if (path / "job.json").is_file():
        raise BnpmixError(f"{path}: a run directory whose fit has not finished (no summary.json; "
                          f"`bnpmix resume {path}` continues it)")
    raise BnpmixError(f"{path}: not a corpus directory (no {MANIFEST}) nor a run directory "
                      "(no summary.json)")


def finished_run(path: str | Path) -> RunDir:
    """The run directory at ``path``, or an error naming it (a corpus gets a pointer to info)."""
    from bnpmix.storage.rundir import RunDir

    if kind_of(path) != "run":
        raise BnpmixError(f"{path}: a corpus, not a run directory (`bnpmix info {path}` "
                          "describes it; `bnpmix fit` makes a run)")
    run = RunDir(path)
    run.load_summary()  # names the path when summary.json is unreadable
    for needed in (run.trace_path, run.model_path, run.model_meta_path):
        if not needed.is_file():
            raise BnpmixError(f"{path}: not a finished run directory (no {needed.name})")
    return run


# ------------------------------------------------------------------------------------------
# corpora


def format_corpus_info(info: dict[str, Any]) -> str:
    """Human-readable lines of a corpus's info (``Corpus.info()``)."""
    dim_name = "V (words)" if info["kind"] == "bow" else "D (dimension)"
    lines = [
        f"kind          {info['kind']}",
        f"items         {info['n_items']}",
        f"{dim_name:<13} {info['dim']}",
    ]
    if info["kind"] == "bow":
        lines.append(f"non-zeros     {info['nnz']}")
    lines += [
        f"partitions    {info['n_partitions']}",
        f"bytes         {info['bytes']}",
        f"columns       {', '.join(info['columns']) or '-'}",
    ]
    if "vocab_file" in info:
        where = (info["vocab_file"] if info["vocab_file"] is not None
                 else "in the manifest (pass the corpus directory)")
        lines.append(f"vocabulary    {where}: --vocab for held-out text with these columns")
    ingest = info.get("ingest") or {}
    if ingest.get("format") == "text":
        if ingest.get("vocab_file"):
            lines.append(f"text          vocabulary fixed by {ingest['vocab_file']}")
        else:
            stop = ingest.get("stopwords")
            stop_text = "none" if not stop else f"{stop['list']} ({stop['n_words']} words)"
            lines.append(f"text          stop words {stop_text}; min_df {ingest.get('min_df')}, "
                         f"max_df_fraction {ingest.get('max_df_fraction')}, min_doc_length "
                         f"{ingest.get('min_doc_length')}")
    if "integer_columns" in info:
        lines.append(f"integers      {info['integer_columns']} of {info['dim']} columns hold "
                     "only integers (dequantised unless --dequantise false)")
    labels = ingest.get("labels")
    if labels:
        k = labels["n_classes"]
        kind = ("integers" if labels.get("integer")
                else f"strings, mapped to 0..{k - 1} in the manifest")
        lines.append(f"labels        {k} classes ({kind}) from {labels['file']}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# runs


def cluster_sizes(run: RunDir) -> dict[int, int] | None:
    """Items assigned to each cluster id, counted from the assignments one partition file at a
    time (only the ``cluster`` column is read); None when the run has no assignments."""
    files = sorted(run.assignments_dir.glob("part-*.parquet"))
    if not files:
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for f in files:
        try:
            column = pq.read_table(f, columns=["cluster"]).column(0).to_numpy()
        except (OSError, KeyError, pa.ArrowException) as exc:
            raise BnpmixError(f"{f}: unreadable assignments ({exc})") from None
        u, c = np.unique(column, return_counts=True)
        ids.append(u)
        counts.append(c)
    u_all = np.concatenate(ids)
    c_all = np.concatenate(counts)
    keys, where = np.unique(u_all, return_inverse=True)
    totals = np.bincount(where, weights=c_all, minlength=len(keys))
    return {int(k): int(t) for k, t in zip(keys, totals, strict=True)}


def _clusters(weights: np.ndarray, uids: np.ndarray,
              sizes: dict[int, int] | None) -> list[dict[str, Any]]:
    """Label (pipeline/labels.py: 0..K-1 by decreasing weight), weight and size of every
    component, in label order; ``sizes`` by internal id."""
    weights = np.asarray(weights, float)
    ids = [int(i) for i in np.asarray(uids)]
    return [{"cluster": label, "weight": float(weights[k]),
             "size": None if sizes is None else sizes.get(ids[k], 0)}
            for label, k in enumerate(label_order(weights, ids))]


def _components(run: RunDir, summary: dict[str, Any]
                ) -> tuple[np.ndarray, float, np.ndarray, dict[int, int] | None, str]:
    """The components' weights, the mass left for new ones, their ids, their sizes (None
    without assignments) and the observation model: from summary.json when the fit recorded
    them (``RECORDED``), else from the model and the assignments."""
    if all(key in summary for key in RECORDED):
        ids = summary["component_ids"]
        return (np.asarray(summary["weights"], float), float(summary["weight_new"]),
                np.asarray(ids), dict(zip(ids, summary["sizes"], strict=True)), summary["obs"])
    from .runtime.models import read_model

    model = read_model(str(run.path))  # weights only: the means are not computed
    weights, weight_new = model.weights()  # a run from before summary.json recorded them: its
    return (weights, weight_new, model.uids, cluster_sizes(run),  # assignments hold the ids
            summary.get("obs", model.obs.name))


def run_info(path: str | Path) -> dict[str, Any]:
    """What ``bnpmix info RUN_DIR`` prints (one JSON object with ``--json``)."""
    run = finished_run(path)
    summary = run.load_summary()
    weights, weight_new, uids, sizes, obs = _components(run, summary)
    clusters = _clusters(weights, uids, sizes)
    weights = np.array([c["weight"] for c in clusters])
    declared = Declared.of(summary)
    objective = declared.objective
    config = summary["config"]
    info: dict[str, Any] = {
        "run_dir": str(run.path),
        "engine": summary["algorithm"],
        "obs": obs,
        "corpus": (config.get("run") or {}).get("corpus"),
        "data": summary.get("data"),
        "K": int(summary["K"]),
        "K_effective": int(np.sum(weights > EFFECTIVE)),
        "K_nonempty": None if sizes is None else sum(1 for c in clusters if c["size"]),
        "weights": weights.tolist(),
        "weights_are": declared.weights_are,
        "plots_fractions": declared.plots_fractions,
        "weight_new": float(weight_new),
        "sizes": None if sizes is None else [c["size"] for c in clusters],
        "fractions": None if sizes is None else [c["size"] / summary["n_items"]
                                                 for c in clusters],
        "objective": objective,
        "objective_label": declared.objective_label,
        "objective_value": summary.get(objective),
        "objective_per_item": summary.get(f"{objective}_per_item"),
        "laps": summary["laps"],
        "n_items": summary["n_items"],
        "wall_seconds": summary["wall_seconds"],
        "vocab_file": str(run.vocab_path) if run.vocab_path.is_file() else None,
        "local": local_note(summary),
    }
    for key in ("converged", "stopped", "returned", "executor", "restart", "prior",
                "obs_candidates", "obs_auto", "last_laps", "heldout_kind"):
        if key in summary:
            info[key] = summary[key]
    if not summary.get("converged", True):  # the tolerance the last lap's change is held to
        info["tol"] = (config.get("engine") or {}).get("tol")
    return info


def convergence_text(summary: dict[str, Any]) -> str | None:
    """For a run that stopped before its convergence test held (summary.json's ``converged``
    false): one line saying so, why it stopped and, when the engine recorded its last lap ends
    (``last_laps``: memo), what was still moving: the last lap's ELBO change per item against
    the tolerance, K over those laps, and the moves accepted in them. None for a converged run
    (or one written before summary.json said)."""
    if summary.get("converged", True):
        return None
    text = f"NOT converged: stopped at {summary.get('stopped', 'its iteration limit')}"
    laps = [lap for lap in summary.get("last_laps") or [] if isinstance(lap, dict)]
    if laps:
        last = laps[-1]
        change = last.get("elbo_change_per_item")
        tol = summary.get("tol", ((summary.get("config") or {}).get("engine") or {}).get("tol"))
        text += (f"; lap {last['lap']}: ELBO change "
                 + ("-" if change is None else f"{change:+.3g}") + " per item"
                 + ("" if tol is None else f" (tol {tol:g})"))
        Ks = [lap["K"] for lap in laps]
        moves = {name: sum(lap.get(name, 0) for lap in laps)
                 for name in ("births", "merges", "deletes")}
        text += (f"; laps {laps[0]['lap']}-{last['lap']}: K " + " ".join(str(k) for k in Ks)
                 + ", accepted " + ", ".join(f"{name} {n}" for name, n in moves.items()))
    return text + "; more laps (--laps) would go on"


def format_run_info(info: dict[str, Any]) -> str:
    """Human-readable lines of ``run_info``."""
    data = info.get("data") or {}
    shape = ""
    if data.get("kind"):
        dim = "V" if data["kind"] == "bow" else "D"
        shape = f" ({data['kind']}, {dim} = {data.get('dim')})"
    K, weights = info["K"], info["weights"]
    nonempty = ("" if info["K_nonempty"] is None
                else f", {info['K_nonempty']} with at least one item")
    name = info["objective_label"]
    lines = [
        f"engine        {info['engine']} (observation model {info['obs']})",
        f"corpus        {info['corpus'] or 'not kept (X in memory, BayesianMixture.save)'}"
        f"{shape}",
        f"K             {_plural(K, 'component')}: {info['K_effective']} with more than "
        f"{EFFECTIVE:.0%} of the weight{nonempty}",
        *([f"local         {info['local']}"] if info.get("local") else []),
        "weights       " + ", ".join(f"{w:.3f}" for w in weights[:SHOWN_WEIGHTS])
        + (f" ... ({K - SHOWN_WEIGHTS} more)" if K > SHOWN_WEIGHTS else "")
        + f"; new component {info['weight_new']:.3g} ({info['weights_are']})",
    ]
    if info["sizes"] is not None:
        sizes = info["sizes"]
        lines.append("sizes         " + ", ".join(str(s) for s in sizes[:SHOWN_WEIGHTS])
                     + (" ..." if K > SHOWN_WEIGHTS else "") + " (items, in weight order)")
        if info["plots_fractions"]:  # the report's figure (tdpm's chains)
            lines.append("fractions     " + ", ".join(f"{f:.3f}" for f in
                                                      info["fractions"][:SHOWN_WEIGHTS])
                         + (" ..." if K > SHOWN_WEIGHTS else "")
                         + " (each chain's fraction of the items, as the report plots)")
    else:
        lines.append("sizes         - (the run has no assignments)")
    lines += [
        f"{info['objective']:<14}{_number(info['objective_value'])} ({name}; per item "
        f"{_number(info['objective_per_item'], '.4f')})",
        f"laps          {info['laps']}" + (f" ({info['stopped']})" if "stopped" in info else ""),
    ]
    moving = convergence_text(info)
    if moving is not None:
        lines.append(f"converged     no: {moving.split(': ', 1)[1]}")
    lines += [
        f"items         {info['n_items']}",
        f"wall seconds  {info['wall_seconds']:.1f} (the whole fit command: corpus checks, "
        "--obs auto's race, the fit and its output; across resumes, each command's)",
    ]
    if "obs_candidates" in info:  # --obs auto: each model's bound on the corpus
        lines += auto_lines(info["obs_candidates"], info.get("obs_auto") or {})
    if "prior" in info:
        lines.append(f"prior         {prior_text(info['prior'])}")
    if info.get("heldout_kind") == HELDOUT_DEQUANTISED:
        lines.append(f"dequantised   {HELDOUT_NOTE}; the {info['objective_label']} bounds it "
                     "too")
    if info["vocab_file"]:
        lines.append(f"vocabulary    {info['vocab_file']}")
    return "\n".join(lines)


def auto_lines(scores: dict[str, float], race: dict[str, Any]) -> list[str]:
    """``--obs auto``'s lines: the candidates ranked by their bound (ELBO per item on the
    corpus), the chosen first, and, for runs that record the race (``obs_auto``), each one's
    laps, K, seconds and how it left the race."""
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    lines = ["obs auto      " + ", ".join(f"{name} {value:.4f}" for name, value in ranked)
             + " (ELBO per item on the corpus)"]
    runs = race.get("candidates") or {}
    for name, _ in ranked:
        run = runs.get(name)
        if run:
            lines.append(f"  {name:<12}{run['laps']} laps, K = {run['K']}, "
                         f"{run['seconds']:.1f} s: {run['result']}")
    if "seconds" in race:
        lines.append(f"  race         {race['seconds']:.1f} s (lap budget {race['budget']})")
    return lines


def prior_text(prior: dict[str, Any]) -> str:
    """The observation prior's figures in a line: initial -> final when the run learned it."""
    initial, final = prior["initial"], prior["final"]
    if not prior["learn"]:
        return "fixed: " + ", ".join(f"{k} {_number(v, '.4g')}" for k, v in final.items())
    return "learned (initial -> final): " + ", ".join(
        f"{k} {_number(initial.get(k), '.4g')} -> {_number(v, '.4g')}" for k, v in final.items())


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _number(value: Any, spec: str = ".6g") -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"


# ------------------------------------------------------------------------------------------
# show


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
    weights, _, uids, sizes, _ = _components(run, summary)
    clusters = _clusters(weights, uids, sizes)
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
    obs = model.model.obs
    if not text and getattr(obs, "means_note", ""):  # (a chain model's obs is a facade)
        out["note"] = obs.means_note
    if not text and getattr(obs, "shared_shapes", lambda: ())():  # one covariance for every
        # cluster (tied-gauss); a chain model (tdpm) has none
        cov = obs.covariances(model.model.post)
        if cov is not None and len(cov):
            out["shared_covariance"] = [[round(float(v), 6) for v in row] for row in cov[0]]
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


def component_spans(model: Any) -> np.ndarray | None:
    """Each cluster's first and last epoch in label order, (K, 2), for models whose components
    are chains over epochs (a ``spans`` method: tdpm), whose means are the state at the last
    one; None for the others."""
    spans = getattr(model.model, "spans", None)
    return None if spans is None else np.asarray(spans())[model.order_]


def format_show(shown: dict[str, Any]) -> str:
    """Human-readable lines of ``show_clusters``: one line per cluster."""
    K, n = shown["K"], shown["shown"]
    head = (f"{shown['engine']} ({shown['obs']}): {_plural(K, shown.get('noun', 'cluster'))} of "
            f"{_plural(shown['n_items'], 'item')}; "
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
            span = "-".join(_number(t, "g") for t in row["epochs"])
            detail = f"{span:<13}  {detail}"
        lines.append(f"{row['cluster']:>7} {row['weight']:>7.4f} {size:>8} {fraction:>8}  "
                     f"{detail}")
    lines.append(f"(cluster: its label everywhere; weight: {shown['weights_are']}; fraction: "
                 "its share of all items" + ("; epochs: the chain's first and last epoch, the "
                                             f"{what} being its state at the last)" if at
                                             else ")"))
    return "\n".join(lines)


__all__ = ["cluster_sizes", "format_corpus_info", "format_run_info", "format_show", "kind_of",
           "run_info", "run_vocabulary", "show_clusters"]
