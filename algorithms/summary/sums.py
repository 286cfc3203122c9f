"""The Summary type: the additive summary of (allocation, observation) statistics, the currency
of memoized VB.

For components with stable ids ``uids`` a Summary holds, over some set of items,
``N_k = Σ_n r_nk`` and the observation model's statistics ``s_k = Σ_n r_nk t(x_n)`` (Hughes &
Sudderth 2013, Eq. 7), the assignment entropies ``H_k = -Σ_n r_nk log r_nk`` and, for planned
candidate pairs (a, b), the merge entropies ``H_ab = -Σ_n (r_na + r_nb) log(r_na + r_nb)``
(Sec. 3.2), and for planned groups G (a birth's origin and its newborns) the group entropies
``H_G = -Σ_n s_nG log s_nG`` with ``s_nG = Σ_{k∈G} r_nk``, so that merging a whole group back into
one component has an exact ELBO too. Summaries of disjoint item sets add (Eq. 11); ``+`` and
``-`` refuse summaries whose component ids, pairs or groups differ. A statistic is an ndarray or,
for bag-of-words counts, sparse (scipy CSR, only the (component, word) pairs a batch has); they
mix freely, a dense operand giving a dense result.

Statistics without a component axis (``shared``: a tied model's pooled scatter Σ_n (x_n - m0)
(x_n - m0)ᵀ, which does not depend on the assignment) add under ``+``, ``-`` and scaling like the
rest, and every move (``moves.py``) leaves them unchanged: moves only regroup components.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from .. import sparse_stats as ss
from ..sparse_stats import Stat


class Applicable(Protocol):
    """A logged move (``moves.py``): what ``Summary.apply`` takes."""

    def apply(self, s: Summary) -> Summary: ...

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

    def apply(self, move: Applicable) -> Summary:
        """This summary with one logged move applied."""
        return move.apply(self)

