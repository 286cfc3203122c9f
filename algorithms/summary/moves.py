"""Moves over a Summary's components as values (insert, merge, group merge, pool, delete,
reorder), so that a stored summary can be brought up to date by replaying a log of them (Hughes &
Sudderth 2013, Sec. 3.2: a merge's r_a <- r_a + r_b adds N and the statistics, H_a <- H_ab).
Every move leaves the shared statistics unchanged: moves only regroup components.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from .. import sparse_stats as ss
from .sums import Summary


@dataclass(frozen=True)
class Insert:
    """Append components ``uids`` (with zero mass unless ``source`` supplies their sums)."""

    uids: tuple[int, ...]

    def apply(self, s: Summary, source: Summary | None = None) -> Summary:
        if np.isin(self.uids, s.uids).any():
            raise ValueError(f"components {self.uids} already present")
        new = source if source is not None else Summary(
            np.array(self.uids), np.zeros(len(self.uids)),
            {k: ss.zero_rows(v, len(self.uids)) for k, v in s.stats.items()},
            np.zeros(len(self.uids)))
        if source is not None and not np.array_equal(source.uids, self.uids):
            raise ValueError("inserted summary ids do not match the move")
        return Summary(
            np.concatenate([s.uids, new.uids]),
            np.concatenate([s.N, new.N]),
            {k: ss.stack(v, new.stats[k]) for k, v in s.stats.items()},
            np.concatenate([s.H, new.H]),
            s.n_items,
            s.pairs,
            s.Hpair,
            s.groups,
            s.Hgroup,
            s._shared_copy(),
        )


def _absorb(s: Summary, keep: int, gone: tuple[int, ...], H_new: float) -> Summary:
    """r_keep <- r_keep + Σ_gone r_gone: N and statistics add, H_keep becomes the union's
    entropy; the gone components, and every pair or group that involved any of them, leave."""
    ik = s.index(keep)
    ig = [s.index(b) for b in gone]
    N = s.N.copy()
    N[ik] += N[ig].sum()
    H = s.H.copy()
    H[ik] = H_new
    kept = ~np.isin(s.uids, gone)
    stats = {k: ss.folded_rows(v, ik, ig, kept) for k, v in s.stats.items()}
    return s._select(kept, np.array([keep, *gone]), H, N, stats)


@dataclass(frozen=True)
class Merge:
    """Component ``b`` is absorbed into ``a``: r_a <- r_a + r_b, so N, s add and H_a <- H_ab."""

    a: int
    b: int

    def apply(self, s: Summary) -> Summary:
        Hab = s.pair_entropy(self.a, self.b)
        if Hab is None:
            raise ValueError(f"no merge entropy recorded for pair ({self.a}, {self.b})")
        return _absorb(s, self.a, (self.b,), Hab)


@dataclass(frozen=True)
class MergeGroup:
    """Components ``gone`` are all absorbed into ``keep`` at once (a birth undone: its newborns
    returned to their origin), with H_keep <- H_G of the planned group (keep, *gone)."""

    keep: int
    gone: tuple[int, ...]

    def apply(self, s: Summary) -> Summary:
        HG = s.group_entropy((self.keep, *self.gone))
        if HG is None:
            raise ValueError(f"no merge entropy recorded for group {(self.keep, *self.gone)}")
        return _absorb(s, self.keep, self.gone, HG)


@dataclass(frozen=True)
class Pool:
    """Component ``b``'s sums join ``a``'s (r_a <- r_a + r_b) for summaries that carry no
    assignment entropies (EP's sites, H = 0): N, statistics and H add, no pair is needed."""

    a: int
    b: int

    def apply(self, s: Summary) -> Summary:
        return _absorb(s, self.a, (self.b,), float(s.H[s.index(self.a)] + s.H[s.index(self.b)]))


@dataclass(frozen=True)
class Delete:
    """Remove component ``uid`` (only exact when it carries no mass)."""

    uid: int

    def apply(self, s: Summary) -> Summary:
        return s._select(s.uids != self.uid, np.array([self.uid]))


@dataclass(frozen=True)
class Reorder:
    """Put the components in the order ``uids`` (a permutation of the current ids)."""

    uids: tuple[int, ...]

    def apply(self, s: Summary) -> Summary:
        if len(self.uids) != s.K or set(self.uids) != set(s.uids.tolist()):
            raise ValueError("reorder must list every component exactly once")
        order = np.array([s.index(u) for u in self.uids])
        return s._select(order, np.zeros(0, dtype=np.int64))


Move = Union[Insert, Merge, MergeGroup, Pool, Delete, Reorder]  # noqa: UP007 (a runtime alias)
