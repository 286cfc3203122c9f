"""Membership stability (Ahmed & Xing 2008, Sec. 9.2, a sketch there; made precise here).

A persistent item (one id, at most one row per epoch) has a stickiness ρ_u ~ Beta(a, b), drawn
when it first enters. When it re-enters at epoch t, its previous chain is the chain of its
latest earlier appearance. If that chain is *available*, i.e. alive at t from the past
(m_{k,t} > 0: it has members in the W epochs before t), the item flips a coin of bias ρ_u:
heads, it stays in that chain; tails, it seats like any other item. An unavailable chain means
no coin (the item seats like any other and ρ_u learns nothing). Within an epoch the stayers
sit first, so the others see pseudo-counts m_{k,t} + s_{k,t} (s: stayers) and epoch t's prior
given the past and the stayers is Eq. 4.4's with m replaced by m + s:

    Γ(M + S + α)/Γ(M + N + α) · Π_{k: m_k > 0} Γ(m_k + n_k)/Γ(m_k + s_k) · Π_{born} α Γ(n_k)

(n counts every item, stayers included). With ρ_u integrated out, an item's coins contribute
the Beta-Binomial B(a + heads, b + tails)/B(a, b); posterior E[ρ_u] = (a + h)/(a + b + h + f).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betaln


def _appearances(ids: np.ndarray, epochs: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int] | None]:
    """Dense ids, the items ordered by (id, epoch, position), whether each consecutive pair in
    that order is one id, and a pair of items (positions, ascending) with the same id in the
    same epoch, if any."""
    _, dense = np.unique(np.asarray(ids), return_inverse=True)
    epochs = np.asarray(epochs, np.int64)
    order = np.lexsort((np.arange(len(dense)), epochs, dense))
    same = dense[order[1:]] == dense[order[:-1]]
    clash = np.flatnonzero(same & (epochs[order[1:]] == epochs[order[:-1]]))
    pair = (int(order[clash[0]]), int(order[clash[0] + 1])) if clash.size else None
    return dense.astype(np.int64), order, same, pair


def same_epoch(ids: np.ndarray, epochs: np.ndarray) -> tuple[int, int] | None:
    """Two items (positions, ascending) with the same id in the same epoch, if any."""
    return _appearances(ids, epochs)[3]


@dataclass(frozen=True)
class Persistence:
    """Which items are appearances of the same persistent id: ``ids`` (dense 0..U−1 per item),
    ``prev``/``next`` (the index of the id's previous / next appearance, −1 if none), and the
    Beta(a, b) prior of each id's stickiness."""

    ids: np.ndarray
    prev: np.ndarray
    next: np.ndarray
    a: float = 1.0
    b: float = 1.0

    @classmethod
    def from_ids(cls, ids: np.ndarray, epochs: np.ndarray, a: float = 1.0,
                 b: float = 1.0) -> Persistence:
        """Link each item to its id's previous and next appearance; an id twice in one epoch
        is an error naming both items (0-based positions)."""
        if not (a > 0 and b > 0):
            raise ValueError(f"the stickiness prior Beta(a, b) needs a, b > 0, not ({a}, {b})")
        dense, order, same, pair = _appearances(ids, epochs)
        if pair is not None:
            i1, i2 = pair
            raise ValueError(f"items {i1} and {i2} have the same id and the same epoch "
                             f"{int(epochs[i1])}: a persistent id appears at most once per epoch")
        prev = np.full(len(dense), -1, np.int64)
        nxt = np.full(len(dense), -1, np.int64)
        prev[order[1:][same]] = order[:-1][same]
        nxt[order[:-1][same]] = order[1:][same]
        return cls(dense, prev, nxt, float(a), float(b))

    @property
    def n_ids(self) -> int:
        return int(self.ids.max()) + 1 if self.ids.size else 0

    def log_coins(self, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
        """log B(a + h, b + f) − log B(a, b): the coins of ids with h heads and f tails."""
        return betaln(self.a + heads, self.b + tails) - betaln(self.a, self.b)

    def rho_mean(self, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
        """E[ρ_u | coins] = (a + h) / (a + b + h + f)."""
        return (self.a + heads) / (self.a + self.b + heads + tails)
