"""What ``bnpmix info`` prints: a corpus or a finished run, described.

``run_info(RUN_DIR)``: the engine, K (all components; those with more than 1% of the weight; those
with at least one item assigned), the weights, the cluster sizes counted from the assignments, and
the figures of summary.json (objective, per item, laps, wall seconds, items, and the observation
prior's figures, initial and learned). ``bnpmix show``'s clusters: show.py; what a path is and a
run's components, which both read: finished.py.

Everything here reads; nothing writes. ``info`` needs numpy and JSON only: summary.json records
the components' weights, ids and sizes (``RECORDED``). For a run written before it did, the
model (the engines' mathematics: scipy) and the assignments (Parquet: pyarrow) are read instead,
imported then.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .declared import HELDOUT_DEQUANTISED, HELDOUT_NOTE, Declared, local_note
from .finished import (
    RECORDED,
    components,
    finished_run,
    labelled_clusters,
    numeral,
    plural,
)
from .show import format_show, run_vocabulary, show_clusters

EFFECTIVE = 0.01  # a component with more than this share of the weight counts as effective
SHOWN_WEIGHTS = 12  # weights listed by `info`'s text output


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


def run_info(path: str | Path) -> dict[str, Any]:
    """What ``bnpmix info RUN_DIR`` prints (one JSON object with ``--json``)."""
    run = finished_run(path)
    summary = run.load_summary()
    weights, weight_new, uids, sizes, obs = components(run, summary)
    clusters = labelled_clusters(weights, uids, sizes)
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
        f"K             {plural(K, 'component')}: {info['K_effective']} with more than "
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
        f"{info['objective']:<14}{numeral(info['objective_value'])} ({name}; per item "
        f"{numeral(info['objective_per_item'], '.4f')})",
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
        return "fixed: " + ", ".join(f"{k} {numeral(v, '.4g')}" for k, v in final.items())
    return "learned (initial -> final): " + ", ".join(
        f"{k} {numeral(initial.get(k), '.4g')} -> {numeral(v, '.4g')}" for k, v in final.items())


# what readers of runs import from here (defined in finished.py and show.py)
__all__ = ["RECORDED", "convergence_text", "finished_run", "format_corpus_info", "format_run_info",
           "format_show", "run_info", "run_vocabulary", "show_clusters"]
