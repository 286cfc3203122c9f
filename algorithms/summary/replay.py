"""A log of moves composed into one map of a summary's rows (RowMap, ``compose``) and the
replay that shares it between the summaries with the same ids, pairs and groups (``Replay``):
bit for bit the move-by-move replay of ``moves.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import sparse_stats as ss
from .moves import Merge, MergeGroup, Move, Pool, Reorder
from .sums import Summary


@dataclass(frozen=True)
class _Event:
    """One row-folding move of a composed log: final row ``row`` is ``keep`` plus ``gone``
    (positions in the starting summary; ``K`` stands for an inserted, all-zero row)."""

    row: int
    keep: int
    gone: tuple[int, ...]


@dataclass(frozen=True)
class RowMap:
    """A log of moves composed into one map of a summary's rows (for summaries with these ids,
    pairs and groups): final row j is row ``anchor[j]`` of the start (K: a zero row, inserted)
    except that each event's row is ``keep + Σ gone``; H is gathered from [0, H, Hpair, Hgroup]
    at ``H_at``; the pairs and groups left are the start's at positions ``pair_ok`` /
    ``group_ok``."""

    uids: np.ndarray
    anchor: np.ndarray
    events: tuple[_Event, ...]
    H_at: np.ndarray
    pair_ok: np.ndarray  # positions, increasing
    group_ok: np.ndarray
    fold: sp.csr_matrix  # (K', K) 0/1: the rows each final row sums, columns sorted

    def apply(self, s: Summary) -> Summary:
        """The moves' result on ``s``, with the arithmetic of their sequential replay: a folded
        row is keep + Σ gone (dense: gone summed in the move's order; sparse: one product
        with the 0/1 fold whose columns are in position order, as ``sparse_stats.fold``)."""
        ext = np.append(s.N, 0.0)
        N = ext[self.anchor]
        for e in self.events:
            N[e.row] = ext[e.keep] + ext[list(e.gone)].sum()
        stats = {k: self._stat(v) for k, v in s.stats.items()}
        H = np.concatenate([[0.0], s.H, s.Hpair, s.Hgroup])[self.H_at]
        return Summary(self.uids.copy(), N, stats, H, s.n_items, s.pairs[self.pair_ok],
                       s.Hpair[self.pair_ok], s.groups[self.group_ok], s.Hgroup[self.group_ok],
                       s._shared_copy())

    def _stat(self, v: ss.Stat) -> ss.Stat:
        if sp.issparse(v):
            if self.events:  # a fold's product, which also drops stored zeros, as a fold does
                return ss.canonical(self.fold @ v)
            return ss.rows(ss.stack(v, ss.zero_rows(v, 1)), self.anchor)
        ext = np.concatenate([v, np.zeros((1, *v.shape[1:]))])
        out = ext[self.anchor]
        for e in self.events:
            out[e.row] = ext[e.keep] + ext[list(e.gone)].sum(axis=0)
        return out


_FOLDS = (Merge, MergeGroup)


def compose(moves: list[Move], s: Summary) -> RowMap | None:
    """The moves composed into one RowMap for summaries with s's ids, pairs and groups, found
    by replaying them on a skeleton of s (no statistics; H, Hpair and Hgroup replaced by the
    positions they are gathered from), so that a move that cannot apply raises as it would on
    s (a fold voids the pairs and groups of its components, so no component is folded twice:
    there is no chain (a + b) + c to compose). None where one map would not repeat the
    replay's arithmetic exactly: a Pool (its H is a sum) or a fold after a Reorder (the
    sparse sums' order follows the positions at the move)."""
    K, P = s.K, len(s.pairs)
    codes = np.arange(1, K + P + len(s.groups) + 1, dtype=float)  # 0: an inserted row's H
    sk = Summary(s.uids, np.zeros(K), {}, codes[:K], 0, s.pairs, codes[K:K + P], s.groups,
                 codes[K + P:])
    origin = {int(u): i for i, u in enumerate(s.uids)}
    reordered = False
    raw: list[tuple[int, tuple[int, ...]]] = []
    for move in moves:
        if isinstance(move, Pool) or (reordered and isinstance(move, _FOLDS)):
            return None
        if isinstance(move, _FOLDS):
            raw.append((move.a, (move.b,)) if isinstance(move, Merge) else (move.keep, move.gone))
        reordered = reordered or isinstance(move, Reorder)
        sk = move.apply(sk)
    at = {int(u): j for j, u in enumerate(sk.uids)}
    anchor = np.array([origin.get(int(u), K) for u in sk.uids], dtype=np.int64)
    events = tuple(_Event(at[keep], origin.get(keep, K), tuple(origin.get(g, K) for g in gone))
                   for keep, gone in raw)
    rows = [[anchor[j]] if anchor[j] < K else [] for j in range(sk.K)]
    for e in events:
        rows[e.row] = sorted(p for p in (e.keep, *e.gone) if p < K)
    fold = sp.csr_matrix((np.ones(sum(map(len, rows))),
                          np.array([p for r in rows for p in r], dtype=np.int64),
                          np.cumsum([0, *map(len, rows)])), shape=(sk.K, K))
    pair_ok = (sk.Hpair - (K + 1)).astype(np.int64)  # the pairs and groups left, in order
    group_ok = (sk.Hgroup - (K + P + 1)).astype(np.int64)
    return RowMap(sk.uids.copy(), anchor, events, sk.H.astype(np.int64), pair_ok, group_ok,
                  fold)


class Replay:
    """Replays logged moves on stored summaries through one composed RowMap per (moves, ids,
    pairs, groups), kept for the summaries that share them (a lap's batches all do); the
    sequential replay where ``compose`` declines. Equal, bit for bit, to the sequential
    replay."""

    def __init__(self, keep: int = 8) -> None:
        self._maps: dict[tuple, RowMap | None] = {}
        self._keep = keep

    def __call__(self, s: Summary, moves: list[Move]) -> Summary:
        if not moves:
            return s
        key = (tuple(moves), s.uids.tobytes(), s.pairs.tobytes(), s.groups.tobytes(),
               s.groups.shape)
        if key not in self._maps:
            if len(self._maps) >= self._keep:
                self._maps.pop(next(iter(self._maps)))
            self._maps[key] = compose(moves, s)
        rowmap = self._maps[key]
        if rowmap is None:
            for move in moves:
                s = move.apply(s)
            return s
        return rowmap.apply(s)
