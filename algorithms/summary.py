"""The additive summary of (allocation, observation) statistics: the currency of memoized VB.

For components with stable ids ``uids`` a Summary holds, over some set of items,
``N_k = Σ_n r_nk`` and the observation model's statistics ``s_k = Σ_n r_nk t(x_n)`` (Hughes &
Sudderth 2013, Eq. 7), the assignment entropies ``H_k = -Σ_n r_nk log r_nk`` and, for planned
candidate pairs (a, b), the merge entropies ``H_ab = -Σ_n (r_na + r_nb) log(r_na + r_nb)``
(Sec. 3.2), and for planned groups G (a birth's origin and its newborns) the group entropies
``H_G = -Σ_n s_nG log s_nG`` with ``s_nG = Σ_{k∈G} r_nk``, so that merging a whole group back into
one component has an exact ELBO too. Summaries of disjoint item sets add (Eq. 11); ``+`` and
``-`` refuse summaries whose component ids, pairs or groups differ. Moves (insert, merge, group
merge, delete, reorder) are values of their own so that a stored summary can be brought up to date
by replaying a log of them. A statistic is an ndarray or, for bag-of-words counts, sparse
(scipy CSR, only the (component, word) pairs a batch has); they mix freely, a dense operand
giving a dense result.

Statistics without a component axis (``shared``: a tied model's pooled scatter Σ_n (x_n - m0)
(x_n - m0)ᵀ, which does not depend on the assignment) add under ``+``, ``-`` and scaling like the
rest, and every move leaves them unchanged: moves only regroup components.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np
import scipy.sparse as sp

from . import sparse_stats as ss
from .sparse_stats import Stat


def _empty_pairs() -> np.ndarray:
    return np.zeros((0, 2), dtype=np.int64)


def _empty_groups() -> np.ndarray:
    return np.zeros((0, 0), dtype=np.int64)


def positions(uids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Positions in ``uids`` (distinct component ids) of ``ids``, each of which must be there."""
    uids = np.asarray(uids, dtype=np.int64)
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(uids, kind="stable")
    at = np.minimum(np.searchsorted(uids, ids, sorter=order), max(len(uids) - 1, 0))
    pos = order[at] if len(uids) else np.zeros(len(ids), dtype=np.int64)
    if len(ids) and (len(uids) == 0 or np.any(uids[pos] != ids)):
        missing = sorted(set(ids.tolist()) - set(uids.tolist()))
        raise KeyError(f"component ids {missing} not in summary ({uids.tolist()})")
    return pos


@dataclass
class Summary:
    """Per-component sums over a set of items, tagged with stable component ids."""

    uids: np.ndarray
    N: np.ndarray
    stats: dict[str, Stat]
    H: np.ndarray
    n_items: int = 0
    pairs: np.ndarray = field(default_factory=_empty_pairs)
    Hpair: np.ndarray = field(default_factory=lambda: np.zeros(0))
    groups: np.ndarray = field(default_factory=_empty_groups)  # rows of ids, padded with -1
    Hgroup: np.ndarray = field(default_factory=lambda: np.zeros(0))
    shared: dict[str, np.ndarray] = field(default_factory=dict)  # no component axis

    def __post_init__(self) -> None:
        self.uids = np.asarray(self.uids, dtype=np.int64)
        self.pairs = np.asarray(self.pairs, dtype=np.int64).reshape(-1, 2)
        self.groups = np.asarray(self.groups, dtype=np.int64)
        self.shared = {k: np.asarray(v, dtype=float) for k, v in self.shared.items()}
        if self.groups.ndim != 2 or self.Hgroup.shape != (len(self.groups),):
            raise ValueError("groups must be a 2-d array with one Hgroup entry per row")
        K = len(self.uids)
        if len(set(self.uids.tolist())) != K:
            raise ValueError(f"component ids must be unique: {self.uids.tolist()}")
        if self.N.shape != (K,) or self.H.shape != (K,):
            raise ValueError(f"N {self.N.shape} and H {self.H.shape} must have shape ({K},)")
        for name, value in self.stats.items():
            if value.shape[0] != K:
                raise ValueError(f"statistic {name!r} has {value.shape[0]} rows for {K} components")
        if self.Hpair.shape != (len(self.pairs),):
            raise ValueError("Hpair must have one entry per pair")
        if self.shared.keys() & self.stats.keys():
            raise ValueError(f"statistics {sorted(self.shared.keys() & self.stats.keys())} are "
                             "both per component and shared")

    @property
    def K(self) -> int:
        return len(self.uids)

    @property
    def obs_stats(self) -> dict[str, Stat]:
        """The per-component and the shared statistics in one dict: what the observation
        model's methods (post, elbo, merge_gains, ...) read."""
        return {**self.stats, **self.shared}

    @classmethod
    def zeros(cls, uids: np.ndarray, stat_shapes: dict[str, tuple[int, ...]],
              shared_shapes: dict[str, tuple[int, ...]] | None = None) -> Summary:
        """The summary of no items for components ``uids`` (``ObsModel.stat_shapes`` and
        ``shared_shapes``)."""
        K = len(uids)
        return cls(
            uids=np.asarray(uids, dtype=np.int64),
            N=np.zeros(K),
            stats={k: np.zeros((K, *s)) for k, s in stat_shapes.items()},
            H=np.zeros(K),
            shared={k: np.zeros(s) for k, s in (shared_shapes or {}).items()},
        )

    def index(self, uid: int) -> int:
        """Position of component ``uid``."""
        hits = np.flatnonzero(self.uids == uid)
        if len(hits) != 1:
            raise KeyError(f"component id {uid} not in summary ({self.uids.tolist()})")
        return int(hits[0])

    def positions(self, uids: np.ndarray) -> np.ndarray:
        """Positions of components ``uids`` (each must be here): ``index`` for many at once."""
        return positions(self.uids, uids)

    def over(self, uids: np.ndarray) -> Summary:
        """The same sums over components ``uids`` in that order, zero for ids this summary lacks
        (every id it has must be listed; pairs and groups are not carried)."""
        uids = np.asarray(uids, dtype=np.int64)
        missing = np.setdiff1d(self.uids, uids)
        if len(missing):
            raise ValueError(f"components {missing.tolist()} are not among the target ids")
        out = Summary.zeros(uids, {k: v.shape[1:] for k, v in self.stats.items()})
        out.shared = self._shared_copy()
        pos = np.searchsorted(uids, self.uids, sorter=np.argsort(uids))
        at = np.argsort(uids)[pos]
        out.N[at] = self.N
        out.H[at] = self.H
        for k, v in self.stats.items():
            ss.place(out.stats[k], at, v)
        out.n_items = self.n_items
        return out

    def _check_compatible(self, other: Summary) -> None:
        if not np.array_equal(self.uids, other.uids):
            raise ValueError(f"component ids differ: {self.uids.tolist()} vs {other.uids.tolist()}")
        if not np.array_equal(self.pairs, other.pairs):
            raise ValueError("candidate merge pairs differ")
        if not np.array_equal(self.groups, other.groups):
            raise ValueError("candidate merge groups differ")
        if self.stats.keys() != other.stats.keys() or self.shared.keys() != other.shared.keys():
            raise ValueError("statistics differ")

    def _combine(self, other: Summary, sign: float) -> Summary:
        self._check_compatible(other)
        return Summary(
            self.uids.copy(),
            self.N + sign * other.N,
            {k: ss.add(v, other.stats[k], sign) for k, v in self.stats.items()},
            self.H + sign * other.H,
            self.n_items + int(sign) * other.n_items,
            self.pairs.copy(),
            self.Hpair + sign * other.Hpair,
            self.groups.copy(),
            self.Hgroup + sign * other.Hgroup,
            {k: v + sign * other.shared[k] for k, v in self.shared.items()},
        )

    def __add__(self, other: Summary) -> Summary:
        return self._combine(other, 1.0)

    def __sub__(self, other: Summary) -> Summary:
        return self._combine(other, -1.0)

    def add_in_place(self, other: Summary, sign: float = 1.0) -> None:
        """self += sign · other, writing into this summary's (dense) arrays: O(K + nnz) for sparse
        statistics, where ``+`` would copy every K × V array. Pairs and
        groups must agree as for ``+``."""
        self._check_compatible(other)
        self.N += sign * other.N
        self.H += sign * other.H
        self.Hpair += sign * other.Hpair
        self.Hgroup += sign * other.Hgroup
        self.n_items += int(sign) * other.n_items
        for k, v in self.shared.items():
            v += sign * other.shared[k]
        for k, v in self.stats.items():
            if sp.issparse(v):
                raise TypeError(f"statistic {k!r} is sparse: add in place into dense only")
            ss.add_into(v, other.stats[k], sign)

    def changed_pattern(self) -> sp.csr_matrix | None:
        """Where adding or removing this summary can change the statistics: the union of its
        sparse statistics' non-zero patterns (0/1, components x columns); None when some
        statistic is dense."""
        patterns = [ss.pattern(v) for v in self.stats.values()]
        if not patterns or any(p is None for p in patterns):
            return None
        return ss.canonical(sum(patterns[1:], patterns[0]).sign())

    @property
    def nbytes(self) -> int:
        """Bytes held by the summary's arrays."""
        return int(sum(np.asarray(v).nbytes for v in self.to_arrays().values()))

    def copy(self) -> Summary:
        """The same sums in arrays of its own (``add_in_place`` writes into them)."""
        return self.scaled(1.0)

    def scaled(self, c: float) -> Summary:
        """Every sum multiplied by ``c`` (stochastic VB's amplification N/|B|)."""
        return Summary(self.uids.copy(), c * self.N, {k: c * v for k, v in self.stats.items()},
                       c * self.H, self.n_items, self.pairs.copy(), c * self.Hpair,
                       self.groups.copy(), c * self.Hgroup,
                       {k: c * v for k, v in self.shared.items()})

    def without_pairs(self) -> Summary:
        """The summary without planned pairs and groups and their merge entropies (S^0)."""
        return self.with_pairs(_empty_pairs(), np.zeros(0))

    def with_pairs(self, pairs: np.ndarray, Hpair: np.ndarray,
                   groups: np.ndarray | None = None, Hgroup: np.ndarray | None = None) -> Summary:
        """The same sums with these planned pairs (and groups) and their merge entropies."""
        groups = _empty_groups() if groups is None else groups
        Hgroup = np.zeros(0) if Hgroup is None else Hgroup
        return Summary(self.uids, self.N, self.stats, self.H, self.n_items, pairs, Hpair,
                       groups, Hgroup, self.shared)

    def pair_entropy(self, uid_a: int, uid_b: int) -> float | None:
        """H_ab for the pair, if it was planned."""
        lo, hi = min(uid_a, uid_b), max(uid_a, uid_b)
        hits = np.flatnonzero((self.pairs[:, 0] == lo) & (self.pairs[:, 1] == hi))
        return float(self.Hpair[hits[0]]) if len(hits) else None

    def group_entropy(self, members: tuple[int, ...]) -> float | None:
        """H_G for the group with exactly these members (in this order), if it was planned."""
        row = np.full(self.groups.shape[1], -1, dtype=np.int64)
        if len(members) > len(row):
            return None
        row[: len(members)] = members
        hits = np.flatnonzero((self.groups == row).all(axis=1))
        return float(self.Hgroup[hits[0]]) if len(hits) else None

    def _select(self, keep: np.ndarray, touched: np.ndarray, H: np.ndarray | None = None,
                N: np.ndarray | None = None, stats: dict[str, np.ndarray] | None = None
                ) -> Summary:
        """Components at positions ``keep`` (a mask or an order), without the pairs and groups
        that involve any id in ``touched``; N and H optionally replaced first, and ``stats``:
        the kept components' statistics, when the caller has selected them."""
        N = self.N if N is None else N
        H = self.H if H is None else H
        if stats is None:
            stats = {k: ss.rows(v, keep) for k, v in self.stats.items()}
        pair_ok = ~np.isin(self.pairs, touched).any(axis=1)
        group_ok = ~np.isin(self.groups, touched).any(axis=1)
        return Summary(self.uids[keep], N[keep], stats,
                       H[keep], self.n_items, self.pairs[pair_ok], self.Hpair[pair_ok],
                       self.groups[group_ok], self.Hgroup[group_ok], self._shared_copy())

    def _shared_copy(self) -> dict[str, np.ndarray]:
        """The shared statistics in arrays of their own (a moved summary's add_in_place must
        not write into the summary it came from)."""
        return {k: v.copy() for k, v in self.shared.items()}

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The summary as named arrays (for checkpoints and spill files; no pickle)."""
        arrays = {"uids": self.uids, "N": self.N, "H": self.H, "n_items": np.array(self.n_items),
                  "pairs": self.pairs, "Hpair": self.Hpair, "groups": self.groups,
                  "Hgroup": self.Hgroup}
        for k, v in self.stats.items():
            arrays.update(ss.to_arrays(f"stat_{k}", v))
        arrays.update({f"shared_{k}": np.asarray(v) for k, v in self.shared.items()})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Summary:
        """The inverse of to_arrays."""
        stats = {k.removeprefix("stat_"): ss.from_arrays(arrays, k) for k in arrays
                 if k.startswith("stat_") and "@" not in k}
        shared = {k.removeprefix("shared_"): np.array(v, dtype=float) for k, v in arrays.items()
                  if k.startswith("shared_")}
        return cls(np.asarray(arrays["uids"]), np.asarray(arrays["N"]), stats,
                   np.asarray(arrays["H"]), int(arrays["n_items"]), np.asarray(arrays["pairs"]),
                   np.asarray(arrays["Hpair"]), np.asarray(arrays["groups"]),
                   np.asarray(arrays["Hgroup"]), shared)

    def apply(self, move: Move) -> Summary:
        """This summary with one logged move applied."""
        return move.apply(self)


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
