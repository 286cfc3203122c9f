"""A finished run directory as ``bnpmix info``, ``show`` and the report read it: what a path is
(``kind_of``, ``finished_run``) and the run's components, their weights, ids and sizes, in
label order (pipeline/labels.py), from summary.json when the fit recorded them (``RECORDED``),
else from the model and the assignments. Everything here reads; nothing writes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bnpmix.storage import BnpmixError
from bnpmix.storage.corpus import MANIFEST
from bnpmix.storage.rundir import run_path

from .labels import label_order

if TYPE_CHECKING:
    from bnpmix.storage.rundir import RunDir

# what a fit records in summary.json beside "weights": the components' ids and sizes (items
# assigned) in the order of the weights, and the mass left for new components
RECORDED = ("component_ids", "sizes", "weight_new")


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


def labelled_clusters(weights: np.ndarray, uids: np.ndarray,
              sizes: dict[int, int] | None) -> list[dict[str, Any]]:
    """Label (pipeline/labels.py: 0..K-1 by decreasing weight), weight and size of every
    component, in label order; ``sizes`` by internal id."""
    weights = np.asarray(weights, float)
    ids = [int(i) for i in np.asarray(uids)]
    return [{"cluster": label, "weight": float(weights[k]),
             "size": None if sizes is None else sizes.get(ids[k], 0)}
            for label, k in enumerate(label_order(weights, ids))]


def components(run: RunDir, summary: dict[str, Any]
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


def plural(n: int, noun: str) -> str:
    """``1 component``, ``3 components``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def numeral(value: Any, spec: str = ".6g") -> str:
    """A number in ``spec``'s format, ``-`` for anything else (a missing figure)."""
    return format(value, spec) if isinstance(value, int | float) else "-"
