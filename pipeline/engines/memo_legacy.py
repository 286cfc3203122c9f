"""Memo checkpoints written before the run's state was one value (MemoState, written by
state_codec): their meta lists the state's parts by name, and older ones lack some of them
(failures without their lap or count, births without their mass, no origin masses, each
deletion's whole alternative per batch instead of its change). Read so that such run
directories stay resumable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from bnpmix.algorithms.memo.state import Best, Birth, Lap, MemoState
from bnpmix.algorithms.summary import Delete, Summary
from bnpmix.storage.arrays import ArrayFile

from ..runtime.context import FitContext
from ..runtime.store import StateStore
from .common import model_from, summary_from


def legacy_state(meta: dict[str, Any], arrays: ArrayFile, ctx: FitContext,
                 cfg: Any) -> MemoState:
    """The MemoState of an old checkpoint (a birth's rows: chunks (0,) when it had some)."""
    model = model_from(arrays, "model", ctx)
    s = MemoState(model, summary_from(arrays, "S0"), summary_from(arrays, "past"))
    # failures without their lap (or count): long enough ago (-2) that only the mass rule
    # applies (retries spent)
    retried = cfg.birth.retries + 1
    failed = {int(f[0]): (float(f[1]), int(f[2]) if len(f) > 2 else -2,
                          int(f[3]) if len(f) > 3 else retried) for f in meta["failed"]}
    best = None
    if meta["best"] is not None:
        kept = model if meta.get("best_is_model") else model_from(arrays, "best", ctx)
        best = Best(float(meta["best"][0]), int(meta["best"][1]), kept,
                    s.past if meta.get("best_is_model") else kept.past)
    births = tuple(Birth(int(b["target"]), (0,) if b["rows"] else (), int(b["n"]),
                         summary_from(arrays, f"births/{i}/S_new"), int(b.get("seen", b["n"])),
                         float(b.get("mass", s.mass(int(b["target"])))))
                   for i, b in enumerate(meta["births"]))
    return MemoState(
        model, s.S0, s.past, _lap(meta["lap"], arrays, s), meta["next_lap"],
        meta["hold_globals"], births, {int(u): int(n) for u, n in meta["laps_since"]}, failed,
        {int(u): float(n) for u, n in meta.get("kept", [])}, best, meta["last_elbo"],
        bool(meta.get("settled", False)), int(meta.get("births_kept", 0)),
        tuple(meta.get("recent", [])), meta["stopped"], bool(meta["model_is_S0"]),
        bool(meta.get("model_is_prime", False)), int(meta["W"]), int(meta["ahead"]))


def _lap(lap: dict[str, Any] | None, arrays: ArrayFile, s: MemoState) -> Lap | None:
    """The lap in progress; without the adopting origins' masses before the adoption, their
    current masses."""
    if lap is None:
        return None
    origin_N = (arrays["lap/origin_N"] if "lap/origin_N" in arrays else
                np.array([s.mass(int(row[0])) for row in arrays["lap/groups"]], dtype=float))
    return Lap(lap["lap"], arrays["lap/order"], arrays["lap/pairs"] if lap["pairs"] else None,
               arrays["lap/Hpair"], summary_from(arrays, "lap/S_prime"),
               tuple(int(t) for t in lap["targets"]), lap["pos"], arrays["lap/groups"],
               arrays["lap/Hgroup"], origin_N, tuple(int(u) for u in lap.get("deletes", [])))


def legacy_changes(meta: dict[str, Any], arrays: ArrayFile,
                   store: StateStore[Summary]) -> Iterator[tuple[int, int, Summary]]:
    """(deletion, batch, change) from a checkpoint that kept each batch's whole alternative."""
    for uid, keys in meta.get("alternatives", {}).items():
        gone = Delete(int(uid))
        for key in keys:
            alt = summary_from(arrays, f"alternatives/{uid}/{key}")
            yield int(uid), int(key), alt - gone.apply(store.get(int(key)).without_pairs())
