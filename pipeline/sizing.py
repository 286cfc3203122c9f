"""The sizing model (docs/user_guide/sizing.rst): a memo lap's seconds and the driver's and a
worker's memory, projected from a corpus's metadata (its manifest: never its data) and coefficients
measured on one machine by ``benchmarks/speed/sizing.py``, which writes them to ``sizing.json``
beside this module.

Each cost is a sum of named terms, each a product of the corpus's and the model's sizes (rows
of a partition r, its non-zeros z, the dimension D or vocabulary V, the components K, the
partitions P) times a coefficient fitted by non-negative least squares; ``FEATURES`` lists them
per kind of statistics (``structure`` in sizing.json: full covariances, diagonal ones, word
counts). A lap of P partitions in waves of W visits (memo's schedule: a wave's tasks run on
the same globals, then the driver applies their results one by one, each visit a global
update; with ``ahead`` A > 0 the next waves compute while it does):

    wave     = ceil(W / slots) * task + W * visit + globals + dask          (A = 0)
             = max(W * visit + globals + dask, W * task / min(slots, W (A + 1)))   (A > 0)
    lap      = ceil(P / W) * wave + lap_end + checkpoint

where slots = workers x threads, task = a partition's local step and summary on a worker
(plus its read when the worker's cache cannot hold its share of the corpus), visit = the
driver's S0 - old + new, global update and ELBO, globals = building a wave's shipped globals,
dask = a wave's round trip through the scheduler (per wave, per task and per shipped byte),
lap_end = the moves (verification, deletes, merges, reordering, the prior) + birth.per_lap
births' creation (fresh VB on a target's collected rows, up to birth.max_collect of a
component of about items / K), checkpoint = writing the engine's state after the lap end.
No more than W workers are ever busy: with more workers than W, only --wave helps, and past
the point where W * visit exceeds task the driver is the bottleneck.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bnpmix.algorithms.vb.local import block_rows as local_block_rows
from bnpmix.storage import BnpmixError, Corpus

COEFFICIENTS = Path(__file__).with_name("sizing.json")


def _features_full(s: dict[str, float]) -> dict[str, dict[str, float]]:
    r, K, D, P = s["rows"], s["K"], s["D"], s["P"]
    return {"task": {"1": 1.0, "rows*K": r * K, "rows*D^2": r * D * D,
                     "rows*K*D^2": r * K * D * D},
            "visit": {"1": 1.0, "K*D^2": K * D * D, "K*D^3": K * D ** 3},
            "globals": {"1": 1.0, "K*D^2": K * D * D},
            "lap_end": {"1": 1.0, "K*D^3": K * D ** 3, "K^2*D^2": K * K * D * D},
            "birth": {"1": 1.0, "n*D": s["n"] * D, "n*D^2": s["n"] * D * D},
            "checkpoint": {"1": 1.0, "P*K*D^2": P * K * D * D}}


def _features_diag(s: dict[str, float]) -> dict[str, dict[str, float]]:
    r, K, D, P = s["rows"], s["K"], s["D"], s["P"]
    return {"task": {"1": 1.0, "rows*K": r * K, "rows*D": r * D, "rows*K*D": r * K * D},
            "visit": {"1": 1.0, "K*D": K * D},
            "globals": {"1": 1.0, "K*D": K * D},
            "lap_end": {"1": 1.0, "K*D": K * D, "K^2*D": K * K * D},
            "birth": {"1": 1.0, "n*D": s["n"] * D},
            "checkpoint": {"1": 1.0, "P*K*D": P * K * D}}


def wave_words(V: float, z: float, W: float) -> float:
    """Distinct words among a wave's W partitions of z non-zeros each, were words uniform
    (V (1 - exp(-W z / V))): the columns of E[log θ] a wave ships."""
    return V * -math.expm1(-W * z / max(V, 1.0))


def _features_text(s: dict[str, float]) -> dict[str, dict[str, float]]:
    r, K, V, P, z, W = s["rows"], s["K"], s["D"], s["P"], s["nnz"], s["W"]
    return {"task": {"1": 1.0, "nnz": z, "nnz*K": z * K, "rows*K": r * K},
            "visit": {"1": 1.0, "K": K, "nnz": z, "adopting*K*V": s["adopting"] * K * V},
            "globals": {"1": 1.0, "K*Vw": K * wave_words(V, z, W)},
            "lap_end": {"1": 1.0, "K*V": K * V, "K^2": K * K},
            "birth": {"1": 1.0, "n*nnz/rows": s["n"] * z / max(r, 1.0), "V": V},
            "checkpoint": {"1": 1.0, "P*nnz": P * z, "K*V": K * V}}


FEATURES = {"full": _features_full, "diag": _features_diag, "text": _features_text}

# bytes of a batch summary, of S0 and of the model's q (each fitted to measured nbytes)
def _dense_bytes(s: dict[str, float]) -> dict[str, float]:
    return {"K": s["K"], "K*D": s["K"] * s["D"], "K*D^2": s["K"] * s["D"] ** 2}


MEMORY_FEATURES = {
    "full": dict.fromkeys(("summary", "S0", "post"), _dense_bytes),
    "diag": dict.fromkeys(("summary", "S0", "post"),
                          lambda s: {"K": s["K"], "K*D": s["K"] * s["D"]}),
    "text": {"summary": lambda s: {"K": s["K"], "nnz": s["nnz"]},
             "S0": lambda s: {"K": s["K"], "K*V": s["K"] * s["D"]},
             "post": lambda s: {"K": s["K"], "K*V": s["K"] * s["D"]}},
}


# a task's working set per row of a block (float64): responsibilities and their logs (3 K),
# plus the quadratic features of the fused Gaussian step (D (D + 3) / 2), the squares (diag), or
# the document's words (text); a visit runs over blocks of rows (algorithms/vb/local.blocks)
TASK_BYTES_PER_ROW = {
    "full": lambda K, D, z: 8.0 * (3 * K + D * (D + 3) / 2),
    "diag": lambda K, D, z: 8.0 * (3 * K + 2 * D),
    "text": lambda K, D, z: 8.0 * (3 * K) + 12.0 * z,
}


def features(structure: str, sizes: dict[str, float]) -> dict[str, dict[str, float]]:
    return FEATURES[structure](sizes)


def apply(coef: dict[str, float], terms: dict[str, float]) -> float:
    """Σ coefficient x term over the terms the coefficients name."""
    return sum(coef.get(name, 0.0) * value for name, value in terms.items())


@dataclass(frozen=True)
class Shape:
    """What the model reads of a corpus: kind, items, D or V, partitions, mean rows and
    non-zeros per partition (dense: rows x D) and decoded bytes per partition."""

    kind: str
    items: int
    dim: int
    partitions: int
    nnz: float  # per partition

    @property
    def rows(self) -> float:
        return self.items / self.partitions

    @property
    def partition_bytes(self) -> float:
        """A partition decoded in a worker's cache: float64 rows, or CSR (int32 ids, float64
        counts, int32 offsets)."""
        if self.kind == "bow":
            return 12.0 * self.nnz + 4.0 * self.rows
        return 8.0 * self.rows * self.dim

    @classmethod
    def of_corpus(cls, path: str) -> Shape:
        """From the corpus's manifest alone (no partition is read)."""
        m = Corpus(path).manifest
        if not m.partitions:
            raise BnpmixError(f"{path}: the corpus has no partitions")
        P = len(m.partitions)
        nnz = (m.nnz or 0) / P if m.kind == "bow" else m.n_items / P * m.dim
        return cls(m.kind, m.n_items, m.dim, P, nnz)

    @classmethod
    def described(cls, spec: str, partition_rows: int | None) -> Shape:
        """``dense:ITEMS:D`` or ``bow:ITEMS:V:NNZ`` (a corpus not yet ingested), in partitions
        of --partition-rows (default: what ingest would choose)."""
        from bnpmix.storage.writer import partition_rows as default_rows

        parts = spec.split(":")
        try:
            kind, numbers = parts[0], [int(float(p)) for p in parts[1:]]
        except ValueError:
            numbers, kind = [], ""
        if not ((kind == "dense" and len(numbers) == 2) or (kind == "bow" and len(numbers) == 3)
                ) or min(numbers) < 1:
            raise BnpmixError(f"--shape {spec!r}: expected dense:ITEMS:D or bow:ITEMS:V:NNZ "
                              "with positive numbers")
        items, dim = numbers[0], numbers[1]
        rows = default_rows(partition_rows, dim if kind == "dense" else None)
        P = -(-items // rows)
        nnz = numbers[2] / P if kind == "bow" else items / P * dim
        return cls(kind, items, dim, P, nnz)


def load_coefficients(path: Path = COEFFICIENTS) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BnpmixError(f"{path}: the sizing coefficients are unreadable ({exc}); "
                          "benchmarks/speed/sizing.py --coefficients writes them") from None


GIB = float(1 << 30)


def block_rows(shape: Shape, K: int) -> float:
    """The rows of a visit's block (algorithms/vb/local.blocks): its n × K × width temporaries
    within BLOCK_ENTRIES, width D or a document's mean stored words; at most a partition."""
    return min(shape.rows, local_block_rows(K, shape.nnz / shape.rows if shape.kind == "bow"
                                            else shape.dim))


def project(coef: dict[str, Any], obs: str, shape: Shape, K: int, workers: int,
            threads: int = 1, wave: int = 4, ahead: int = 0,
            cache_bytes: float = 2 * GIB, summary_bytes: float = GIB, births: bool = True,
            adopting: bool = True) -> dict[str, Any]:
    """Seconds per lap and memory for observation model ``obs`` (a key of coef["models"]).
    ``births``: the lap ends by creating births; ``adopting``: it adopts the last lap's (its
    visits then compute the ELBO of q whole: text's O(K V)); both hold while births go on,
    until the run settles."""
    model = coef["models"][obs]
    structure = model["structure"]
    P, W = shape.partitions, max(1, min(wave, shape.partitions))
    # a lap that creates births (what a lap costs until the run settles; later lap ends cost
    # less): birth.per_lap targets, each up to max_collect rows of a component of about
    # items / K
    n = min(coef["birth"]["max_collect"], shape.items / K)
    sizes = {"rows": shape.rows, "K": float(K), "D": float(shape.dim), "P": float(P),
             "nnz": shape.nnz, "W": float(W), "n": float(n), "adopting": float(adopting)}
    terms = features(structure, sizes)
    t = {part: apply(model[part], terms[part]) for part in terms}
    slots = workers * threads
    share, miss, read = _cache_misses(coef, shape, workers, cache_bytes)
    task = t["task"] + miss * read
    mem = {part: apply(model["memory"][part], MEMORY_FEATURES[structure][part](sizes))
           for part in model["memory"]}
    summary, held = mem["summary"], mem["summary"] * P
    spilled = 0.0 if held <= summary_bytes else 1.0 - summary_bytes / held
    visit = t["visit"] + spilled * 2.0 * summary * coef["spill_seconds_per_byte"]
    # what a wave ships: q whole (dense), E[log θ] on the wave's words (text)
    globals_bytes = (8.0 * K * (wave_words(shape.dim, shape.nnz, W) + 2) if structure == "text"
                     else mem["post"])
    dask = _dask_seconds(coef, W, globals_bytes, summary) if workers else 0.0
    serial = W * visit + t["globals"] + dask
    per_wave = _wave_seconds(W, slots, task, serial, ahead)
    waves = math.ceil(P / W)
    births = coef["birth"]["per_lap"] * t["birth"] if births else 0.0
    lap = waves * per_wave + t["lap_end"] + births + t["checkpoint"]
    busy = min(slots, W)
    bound = ("the driver (W x visit + globals + dask per wave exceeds the tasks')"
             if serial > math.ceil(W / slots) * task else "the workers' tasks")
    driver, peak = _driver_bytes(coef, shape, n, mem, held, summary_bytes, W, ahead,
                                 globals_bytes)
    working = (TASK_BYTES_PER_ROW[structure](K, shape.dim, shape.nnz / shape.rows)
               * block_rows(shape, K))
    worker = (coef["base_bytes"]["worker"] + min(share, cache_bytes)
              + threads * (working + shape.partition_bytes) + globals_bytes)
    return {
        "obs": obs, "structure": structure, "K": K, "workers": workers, "threads": threads,
        "wave": W, "ahead": ahead, "partitions": P, "waves": waves,
        "seconds": {"lap": lap, "per_wave": per_wave, "task": task, "visit": visit,
                    "globals": t["globals"], "dask": dask, "lap_end": t["lap_end"] + births,
                    "moves": t["lap_end"], "births": births, "per_birth": t["birth"],
                    "checkpoint": t["checkpoint"], "read": read, "cache_miss": miss},
        "busy_slots": busy, "bound": bound,
        "bytes": {"driver": driver, "driver_peak": peak, "worker": worker, "summary": summary,
                  "summaries": held, "S0": mem["S0"], "post": mem["post"],
                  "globals": globals_bytes, "worker_share": share,
                  "summary_budget": summary_bytes, "cache_budget": cache_bytes,
                  "spilled": spilled},
    }


def _cache_misses(coef: dict[str, Any], shape: Shape, workers: int,
                  cache_bytes: float) -> tuple[float, float, float]:
    """A worker's share of the decoded corpus, the fraction of its visits that miss its cache
    and the seconds a missed partition's read takes."""
    P = shape.partitions
    # a worker's share of the decoded corpus, and the fraction of its visits that miss its
    # cache (partitions are read again each lap; rendezvous homes keep each on one worker)
    share = shape.partition_bytes * P / max(1, min(workers, P))
    miss = 0.0 if share <= cache_bytes else 1.0 - cache_bytes / share
    read = coef["read_seconds_per_byte"][shape.kind] * shape.partition_bytes
    return share, miss, read


def _dask_seconds(coef: dict[str, Any], W: int, globals_bytes: float, summary: float) -> float:
    """A wave's round trip through Dask: per wave, per task, and per byte of its globals out
    and its W summaries back."""
    d = coef["dask"]
    return d["per_wave"] + d["per_task"] * W + d["per_byte"] * (globals_bytes + W * summary)


def _wave_seconds(W: int, slots: int, task: float, serial: float, ahead: int) -> float:
    """A wave's seconds: its tasks in ceil(W / slots) rounds then the driver's serial part, or,
    with ``ahead``, whichever of the two is longer (the driver's part overlaps the tasks)."""
    if ahead == 0:
        return math.ceil(W / slots) * task + serial
    return max(serial, W * task / min(slots, W * (ahead + 1)))


def _driver_bytes(coef: dict[str, Any], shape: Shape, n: float, mem: dict[str, float],
                  held: float, summary_bytes: float, W: int, ahead: int,
                  globals_bytes: float) -> tuple[float, float]:
    """The driver's memory in a lap that creates births, and its peak in one that also tries
    deletions: its base, S0 and q (twice), the summaries ``held`` with the births' collected
    rows within ``summary_bytes``, the waves in flight and their globals."""
    # the lap's births' collected rows are held within the summaries' budget (the rest
    # spilled); a lap's end stacks one birth's at a time beside them
    summary = mem["summary"]
    row_bytes = shape.partition_bytes / shape.rows
    collected = coef["birth"]["per_lap"] * n * row_bytes
    driver = (coef["base_bytes"]["driver"] + mem["S0"] + 2 * mem["post"]
              + min(held + collected, summary_bytes) + W * (ahead + 1) * summary
              + (ahead + 1) * globals_bytes + 2 * n * row_bytes)
    # a lap that tries deletions keeps, for each of up to delete.per_lap components, a change
    # of every batch summary, within the same budget
    peak = driver - min(held + collected, summary_bytes) + min(
        held * (1 + coef["delete_per_lap"]) + collected, summary_bytes)
    return driver, peak


def _size(n: float) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def _seconds(s: float) -> str:
    if s >= 3600:
        return f"{s:,.0f} s ({s / 3600:.1f} h)"
    if s >= 120:
        return f"{s:,.0f} s ({s / 60:.1f} min)"
    return f"{s:.3g} s"


def format_projection(p: dict[str, Any]) -> str:
    s, b = p["seconds"], p["bytes"]
    held, cached = min(b["summaries"], b["summary_budget"]), min(b["worker_share"],
                                                                 b["cache_budget"])
    lines = [
        f"{p['obs']} ({p['structure']}), K={p['K']}: {p['workers']} worker"
        f"{'s' * (p['workers'] != 1)} x {p['threads']} thread{'s' * (p['threads'] != 1)}, "
        f"wave {p['wave']}, {p['ahead']} ahead",
        f"  seconds per lap: {_seconds(s['lap'])} = {p['waves']:,} waves x {s['per_wave']:.3g} s"
        f" + lap end {s['lap_end']:.3g} s + checkpoint {s['checkpoint']:.3g} s",
        f"    a wave: task {s['task']:.3g} s on each of {p['busy_slots']} busy slot"
        f"{'s' * (p['busy_slots'] != 1)}; driver {p['wave']} x visit {s['visit']:.3g} s + "
        f"globals {s['globals']:.3g} s + dask {s['dask']:.3g} s; bound by {p['bound']}",
        f"  driver memory: {_size(b['driver'])} (S0 {_size(b['S0'])}, q x 2 "
        f"{_size(2 * b['post'])}, summaries {_size(held)} of {_size(b['summaries'])}); up to "
        f"{_size(b['driver_peak'])} in a lap that tries deletions",
        f"  per-worker memory: {_size(b['worker'])} (cache {_size(cached)} of its share "
        f"{_size(b['worker_share'])})",
    ]
    if b["spilled"] > 0:
        lines.append(f"  --summary-bytes ({_size(b['summary_budget'])}) bounds the driver: "
                     f"{b['spilled']:.0%} of the summaries spill to disk (read and written "
                     "again on each visit)")
    else:
        lines.append(f"  --summary-bytes ({_size(b['summary_budget'])}) holds every summary")
    if s["cache_miss"] > 0:
        lines.append(f"  --cache-bytes ({_size(b['cache_budget'])}) bounds each worker: "
                     f"{s['cache_miss']:.0%} of its visits read their partition again "
                     f"({s['read']:.3g} s each)")
    else:
        lines.append(f"  --cache-bytes ({_size(b['cache_budget'])}) holds each worker's share")
    if p["workers"] * p["threads"] > p["wave"]:
        lines.append(f"  only {p['wave']} of {p['workers'] * p['threads']} slots are busy: "
                     f"--wave {p['workers'] * p['threads']} would use them all")
    return "\n".join(lines)
