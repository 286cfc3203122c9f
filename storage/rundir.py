"""Run directories: what a fit writes, every file published atomically.

Layout::

    RUN_DIR/.claim                    the host and PID of the fit or resume working in the
                                      directory (claim(), reclaim()); a finished run has none
    RUN_DIR/job.json                  corpus, partitions and configuration, written with the
                                      claim (pipeline/fit.py)
    RUN_DIR/summary.json              algorithm, K, objective (elbo or loglik) and its value and
                                      value per item, laps, n_items, wall_seconds, config,
                                      cache (the partition tasks' cache hits and home worker
                                      share; absent in runs written before it) (validated on
                                      load)
    RUN_DIR/trace.csv                 one row per batch visit or lap: lap, batch, [elbo,] K,
                                      seconds, and the engine's own columns
    RUN_DIR/model.npz                 the global parameters (arrays) + model.json (their meaning)
    RUN_DIR/assignments/part-00000.parquet   per corpus partition: item, cluster, prob
    RUN_DIR/vocab.txt                 a bag-of-words corpus's vocabulary, one word per line
                                      (written before summary.json; `bnpmix show` reads it)
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

# pandas and pyarrow are imported by the trace and assignment methods: summary.json and the
# model need numpy and JSON only (`bnpmix info`)
if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

from .atomic import (
    atomic_write,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)
from .claim import Claimable, Claimed
from .corpus import partition_name
from .errors import BnpmixError, local_path
from .runsummary import validate_summary

VERSION = re.compile(r"v[0-9]{4}")  # a scheduled run's published versions (pipeline/schedule.py)
LATEST = "latest"  # the file in a scheduled run's folder naming its newest version
SEEN = "partitions.json"  # the file in a published version listing the partitions it saw


def run_path(path: str | Path) -> Path:
    """The run directory at ``path``; a scheduled run's ``latest`` pointer (a file holding the
    name of a sibling version, vNNNN) stands for the version it names, so that
    ``bnpmix info models/latest`` and ``bnpmix.load("models/latest")`` read that version."""
    local = local_path(path)
    if local.name != LATEST or not local.is_file():
        return local
    try:
        name = local.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return local
    return local.parent / name if VERSION.fullmatch(name) and (local.parent / name).is_dir() \
        else local


TRACE_COLUMNS = ("lap", "batch", "K", "seconds")  # every trace has these; VB traces add elbo
MODEL_FILE, MODEL_META = "model.npz", "model.json"  # the fitted model and its description


class RunDir(Claimable):
    """Paths and atomic writers of one run directory, and its claim (storage/claim.py)."""

    def __init__(self, path: str | Path) -> None:
        self.path = run_path(path)

    @property
    def summary_path(self) -> Path:
        return self.path / "summary.json"

    @property
    def trace_path(self) -> Path:
        return self.path / "trace.csv"

    @property
    def model_path(self) -> Path:
        return self.path / MODEL_FILE

    @property
    def model_meta_path(self) -> Path:
        return self.path / MODEL_META

    @property
    def assignments_dir(self) -> Path:
        return self.path / "assignments"

    @property
    def vocab_path(self) -> Path:
        return self.path / "vocab.txt"

    def write_vocab(self, words: list[str]) -> None:
        """The fitted corpus's vocabulary, one word per line (so the run names its columns)."""
        write_text_atomic(self.vocab_path, "".join(f"{w}\n" for w in words))

    def load_vocab(self) -> list[str] | None:
        """The words of ``vocab.txt`` (None when the run has none)."""
        try:
            text = self.vocab_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise BnpmixError(f"{self.vocab_path}: unreadable ({exc})") from None
        return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")

    def create(self) -> RunDir:
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.summary_path, validate_summary(summary, self.summary_path))

    def load_summary(self) -> dict[str, Any]:
        try:
            obj = json.loads(self.summary_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BnpmixError(f"{self.path}: not a run directory (no summary.json)") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise BnpmixError(f"{self.summary_path}: unreadable ({exc})") from None
        return validate_summary(obj, self.summary_path)

    def write_trace(self, rows: list[dict[str, Any]]) -> None:
        import pandas as pd

        frame = pd.DataFrame(rows)
        missing = [c for c in TRACE_COLUMNS if c not in frame.columns]
        if rows and missing:
            raise ValueError(f"trace rows lack columns {missing}")
        first = [c for c in ("lap", "batch", "elbo", "K", "seconds") if c in frame]
        frame = frame.reindex(columns=[*first, *(c for c in frame if c not in first)])
        text = frame.to_csv(index=False, float_format="%.17g")
        write_bytes_atomic(self.trace_path, text.encode())

    def load_trace(self) -> pd.DataFrame:
        import pandas as pd

        return pd.read_csv(self.trace_path)

    def write_model(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Global parameters as arrays (``model.npz``) plus their description (``model.json``)."""
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        write_bytes_atomic(self.model_path, buf.getvalue())
        write_json_atomic(self.model_meta_path, meta)

    def load_model(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        try:
            with np.load(self.model_path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            meta = json.loads(self.model_meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BnpmixError(f"{self.path}: model unreadable ({exc})") from None
        return arrays, meta

    def write_assignments(
        self, partition: int, item: np.ndarray, cluster: np.ndarray, prob: np.ndarray
    ) -> Path:
        """Hard assignments of one corpus partition: item, cluster (its label: 0..K-1 by
        decreasing weight, pipeline/labels.py), probability."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({"item": item, "cluster": cluster, "prob": prob})
        return atomic_write(
            self.assignments_dir / partition_name(partition), lambda p: pq.write_table(table, p)
        )

    def write_table(self, name: str, table: pa.Table) -> Path:
        """An engine's extra table, RUN_DIR/NAME.parquet (written atomically)."""
        import pyarrow.parquet as pq

        return atomic_write(self.path / f"{name}.parquet", lambda p: pq.write_table(table, p))

    def load_assignments(self) -> pd.DataFrame:
        import pandas as pd
        import pyarrow.parquet as pq

        files = sorted(self.assignments_dir.glob("part-*.parquet"))
        if not files:
            raise BnpmixError(f"{self.path}: no assignments")
        return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)


__all__ = ["LATEST", "MODEL_FILE", "MODEL_META", "SEEN", "TRACE_COLUMNS", "VERSION", "Claimed",
           "RunDir", "run_path", "validate_summary"]
