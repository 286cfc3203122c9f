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

import contextlib
import io
import json
import numbers
import os
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

# pandas and pyarrow are imported by the trace and assignment methods: summary.json and the
# model need numpy and JSON only (`bnpmix info`)
if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

from .atomic import (
    atomic_write,
    pid_alive,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)
from .corpus import partition_name
from .errors import BnpmixError, local_path

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


SUMMARY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "algorithm": str,
    "K": numbers.Integral,
    "laps": numbers.Real,
    "n_items": numbers.Integral,
    "wall_seconds": numbers.Real,
    "config": dict,
}
CACHE_COUNTS = ("tasks", "hits", "misses")  # summary["cache"]: counts, then rates or None
CACHE_RATES = ("hit_rate", "warm_hit_rate", "home_rate")
TRACE_COLUMNS = ("lap", "batch", "K", "seconds")  # every trace has these; VB traces add elbo


def validate_summary(obj: Any, path: str | Path) -> dict[str, Any]:
    """Check that a summary has every required field with the right type."""
    if not isinstance(obj, dict):
        raise BnpmixError(f"{path}: summary must be a JSON object")
    for key, kind in SUMMARY_FIELDS.items():
        if key not in obj:
            raise BnpmixError(f"{path}: field {key!r} is missing")
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise BnpmixError(f"{path}: field {key!r} has the wrong type ({type(value).__name__})")
    objective = obj.get("objective", "elbo")  # runs written before ADF/EP: always the ELBO
    for key in (objective, f"{objective}_per_item"):
        if isinstance(obj.get(key), bool) or not isinstance(obj.get(key), numbers.Real):
            raise BnpmixError(f"{path}: field {key!r} (the objective) is missing or not a number")
    if "cache" in obj:
        _validate_cache(obj["cache"], path)
    if "component_ids" in obj:
        _validate_components(obj, path)
    if "prior" in obj:
        _validate_prior(obj["prior"], path)
    return obj


def _validate_prior(prior: Any, path: str | Path) -> None:
    """summary["prior"]: ``learn`` (a boolean) and the ``initial`` and ``final`` figures of the
    observation prior (objects of numbers)."""
    if not isinstance(prior, dict) or not isinstance(prior.get("learn"), bool):
        raise BnpmixError(f"{path}: field 'prior' must be an object with a boolean 'learn'")
    for key in ("initial", "final"):
        figures = prior.get(key)
        if not isinstance(figures, dict) or not all(
                isinstance(k, str) and _is_real(v) for k, v in figures.items()):
            raise BnpmixError(f"{path}: field 'prior' needs {key!r}, an object of numbers")


def _validate_components(obj: dict[str, Any], path: str | Path) -> None:
    """What `bnpmix info` reads in place of the model: weights, component_ids and sizes, one
    per component (K), ids and sizes integers (sizes >= 0), and weight_new a number."""
    K = obj["K"]
    for key, ok in (("weights", _is_real), ("component_ids", _is_int),
                    ("sizes", lambda v: _is_int(v) and v >= 0)):
        value = obj.get(key)
        if not isinstance(value, list) or len(value) != K:
            raise BnpmixError(f"{path}: field {key!r} must be a list of K = {K} entries")
        bad = next((i for i, v in enumerate(value) if not ok(v)), None)
        if bad is not None:
            raise BnpmixError(f"{path}: field {key!r} has an invalid entry {bad} "
                              f"({value[bad]!r})")
    if not _is_real(obj.get("weight_new")):
        raise BnpmixError(f"{path}: field 'weight_new' is missing or not a number")


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _validate_cache(cache: Any, path: str | Path) -> None:
    """summary["cache"]: task counts (integers) and rates (numbers in [0, 1], or None)."""
    if not isinstance(cache, dict):
        raise BnpmixError(f"{path}: field 'cache' must be an object")
    for key in (*CACHE_COUNTS, *CACHE_RATES):
        value = cache.get(key, "missing")
        if key in CACHE_COUNTS:
            ok = _is_int(value) and value >= 0
        else:
            ok = value is None or (_is_real(value) and 0 <= value <= 1)
        if not ok:
            raise BnpmixError(f"{path}: field 'cache' has no valid {key!r} ({value!r})")


MODEL_FILE, MODEL_META = "model.npz", "model.json"  # the fitted model and its description


class Claimed(NamedTuple):
    """What RunDir.claim did: whether it created the directory, and whose claim it replaced
    (a description of a process that is gone; None when there was none)."""

    created: bool
    replaced: str | None = None


LEFTOVER = re.compile(r"\..+\.tmp|\.claim\.\d+\.replaced")  # atomic writes' temporary files
CLAIM_TMP = re.compile(r"\.claim\.(\d+)\.tmp")  # a claim being written (_create_claim)


def parse_claim(text: str) -> dict[str, Any]:
    """A claim's holder: {"host", "pid"}; an older bnpmix's bare PID gives {"pid"} alone
    (its host unknown); {} when unreadable."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return {}
    if isinstance(obj, int) and not isinstance(obj, bool):
        return {"pid": obj}
    if not (isinstance(obj, dict) and isinstance(obj.get("host"), str) and _is_int(obj.get("pid"))):
        return {}
    return {"host": obj["host"], "pid": int(obj["pid"])}


def claim_is_stale(holder: dict[str, Any]) -> bool:
    """Whether a claim's process is known to be gone: it ran on this host and no process has
    its PID (a process elsewhere cannot be checked: its claim stands)."""
    return (holder.get("host") == socket.gethostname() and "pid" in holder
            and not pid_alive(holder["pid"]))


def describe_claim(holder: dict[str, Any]) -> str:
    if "pid" not in holder:
        return "another fit (an unreadable claim)"
    return f"process {holder['pid']}" + (f" on {holder['host']}" if "host" in holder else "")


class RunDir:
    """Paths and atomic writers of one run directory."""

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

    @property
    def claim_path(self) -> Path:
        return self.path / ".claim"

    def claim(self) -> Claimed:
        """Take the directory for one new fit before any work, atomically: the ``.claim`` file
        (this host and PID) is created exclusively (O_EXCL), so of two fits racing for one
        empty or missing directory exactly one wins. A directory holding anything else is
        refused, except what a fit leaves that stopped before its first checkpoint (its claim,
        job.json, temporary files) once its process is gone: that is taken over (a process on
        another host cannot be checked, so its claim stands). Returns whether this call created
        the directory (``release`` then removes it) and whose claim it replaced."""
        try:
            self.path.mkdir(parents=True)
            created = True
        except FileExistsError:
            if not self.path.is_dir():
                raise BnpmixError(f"{self.path}: the output exists and is not a directory; "
                                  "choose another --out") from None
            created = False
        replaced = None
        if not self._create_claim():
            text = self._claim_text()
            holder = parse_claim(text)
            if not (self._leftovers_only() and claim_is_stale(holder)
                    and self._replace_claim(text)):
                raise BnpmixError(f"{self.path}: the output directory {self._held(holder)}; "
                                  "choose another --out")
            self._remove_leftovers()
            replaced = describe_claim(holder)
        self._remove_dead_claim_files()
        others = [p.name for p in self.path.iterdir() if p.name != self.claim_path.name
                  and not CLAIM_TMP.fullmatch(p.name)]
        if others:
            self.claim_path.unlink()
            what = "holds a run (use `bnpmix resume`)" if "job.json" in others else "is not empty"
            raise BnpmixError(f"{self.path}: the output directory {what}; choose another --out")
        return Claimed(created, replaced)

    def reclaim(self) -> None:
        """Take the claim of a run that is being resumed: refused while the process holding it
        runs on this host (another process's fit or resume is writing the directory); a claim
        whose process is gone, this process's own, or another host's (which cannot be
        checked) is replaced."""
        if self._create_claim():
            return
        text = self._claim_text()
        holder = parse_claim(text)
        if holder.get("host") == socket.gethostname() and holder.get("pid") != os.getpid() \
                and not claim_is_stale(holder):
            raise BnpmixError(f"{self.path}: {describe_claim(holder)} is working in this run; "
                              "wait for it to end, or stop it, then resume")
        if not self._replace_claim(text):
            raise BnpmixError(f"{self.path}: another process claimed the run meanwhile")

    def _create_claim(self) -> bool:
        """Create ``.claim`` with this host and PID, exclusively; False if one exists. The
        text is written to a temporary file first and hard-linked into place (the link fails
        if ``.claim`` exists), so no process ever sees a claim without its holder: a fit
        killed between an exclusive create and its write left an empty claim, which no later
        fit could judge stale."""
        tmp = self.path / f".claim.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}) + "\n",
                           encoding="utf-8")
            os.link(tmp, self.claim_path)
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def _claim_text(self) -> str:
        try:
            return self.claim_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:  # released meanwhile: nobody's
            return ""

    def _replace_claim(self, text: str) -> bool:
        """Replace the claim read as ``text`` by this process's: it is renamed aside first (of
        two processes replacing it, one renames it), checked to be the claim that was judged,
        then ours is created exclusively. False when another process got there first."""
        aside = self.path / f".claim.{os.getpid()}.replaced"
        try:
            os.rename(self.claim_path, aside)
        except FileNotFoundError:
            return self._create_claim()
        if aside.read_text(encoding="utf-8", errors="replace") != text:
            with contextlib.suppress(OSError):  # a newer claim: put it back unless replaced
                os.link(aside, self.claim_path)
            aside.unlink()
            return False
        aside.unlink()
        return self._create_claim()

    def _leftovers_only(self) -> bool:
        """Whether the directory holds only what a fit writes before its first checkpoint."""
        return all(p.name in (".claim", "job.json") or LEFTOVER.fullmatch(p.name)
                   for p in self.path.iterdir())

    def _remove_dead_claim_files(self) -> None:
        """The temporary claim files of fits killed before linking theirs (a live racer's
        file is its own to remove)."""
        for p in self.path.iterdir():
            m = CLAIM_TMP.fullmatch(p.name)
            if m and not pid_alive(int(m.group(1))):
                p.unlink(missing_ok=True)

    def _remove_leftovers(self) -> None:
        for p in self.path.iterdir():
            if p.name == "job.json" or LEFTOVER.fullmatch(p.name):
                p.unlink(missing_ok=True)

    def _held(self, holder: dict[str, Any]) -> str:
        """Why the directory cannot be taken, for the refusal."""
        if (self.path / "job.json").exists() and not claim_is_stale(holder):
            if holder.get("host") == socket.gethostname() and "pid" in holder:
                return f"is being written by {describe_claim(holder)}"
            return (f"is claimed by {describe_claim(holder)} (if that process is gone, "
                    f"`bnpmix resume {self.path}` continues the run)")
        if (self.path / "job.json").exists():
            return f"holds a run that stopped (continue it: `bnpmix resume {self.path}`)"
        if claim_is_stale(holder) or not holder:
            return "is not empty"
        return f"is claimed by {describe_claim(holder)}"

    def release(self, created: bool = False) -> None:
        """Drop the claim: after a finished fit, or for a fit that failed before writing
        anything (then also the directory if claim() made it and nothing else is in it)."""
        self.claim_path.unlink(missing_ok=True)
        if created:
            with contextlib.suppress(OSError):  # something else was written into it: keep it
                self.path.rmdir()

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
