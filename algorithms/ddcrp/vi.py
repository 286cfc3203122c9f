"""Coordinate ascent on the links of the sequential ddCRP (docs/theory/ddcrp.rst):
q(c) = Π_i q(c_i), each q(c_i) categorical over i's self-link and its W most recent predecessors.

Under q, A_ij = q(c_i = j) (j < i) and R = (I − A)⁻¹ holds the path probabilities
R_sj = P_q(s's path reaches j) (R_ss = 1; the paths only go backwards, so L = I − A is unit
lower triangular). Customer s sits at table j with Z_sj = R_sj q(c_j = j), Σ_j Z_sj = 1. With
ℓ_sk = E_q log p(x_s | θ_k) the ELBO's link part is

    Σ_i Σ_d q_i,d (log p_i,d − log q_i,d) + Σ_s Σ_k Z_sk ℓ_sk,

linear in each row q_i· (a path passes i at most once). With v_k = Σ_{s>=i} R_si ℓ_sk the exact
coordinate update is log q(c_i = t) = log p_it + Σ_k Z_tk v_k + const (t < i) and
log q(c_i = i) = log p_ii + v_i + const. Changing row i by δ changes R by the rank-one
R[:, i] (δᵀ R) (Sherman-Morrison; its denominator 1 − δᵀ R[:, i] is 1 since R_ti = 0 for t < i),
and leaves column i itself unchanged.

Only the columns of R at live tables (q(c_j = j) > 0) are kept: N × K, not N × N. Column i of a
customer that is not a live table is one triangular solve of the banded L from row i on,
O(N·W). So a step costs O(N·(W + K)) and a sweep O(N²·(W + K)); without a window (W = N − 1) it
is O(N³) as for the full R. With ``prune`` > 0 a self-link whose coordinate optimum is below
``prune`` is set to 0 and the row renormalised (the optimum on that face of the simplex), so
tables that hold almost nothing are never opened.

The state is a frozen ``LinkState``; ``update`` (one q(c_i), the exact step above) writes
the rows of q, of L's band and of R that it changes into the state's own arrays (a copy per step
would cost O(N·K), the step's own order), and returns a new state when a table opens (a column
more); ``sweep`` copies its state first, so the state it is given is left as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.linalg.lapack import dtbtrs

from .links import dense


@dataclass(frozen=True, eq=False)
class LinkState:
    """q(c) as an (N, W + 1) band ``q`` (q[i, d] = q(c_i = i − d)) beside the log prior ``logp``
    in the same layout, ``prune``; ``ab`` L = I − A in LAPACK's lower band layout (column-major,
    so that the slice from a row on reaches dtbtrs without a copy); ``cols`` the live tables,
    ``slot`` each customer's column among them (−1: not live) and ``R`` their columns of the
    path matrix R = (I − A)⁻¹."""

    logp: np.ndarray
    q: np.ndarray
    prune: float
    ab: np.ndarray
    slot: np.ndarray
    cols: np.ndarray
    R: np.ndarray

    @classmethod
    def of(cls, logp: np.ndarray, q: np.ndarray, prune: float = 0.0) -> LinkState:
        """The state of q (copied), self-links below ``prune`` closed (rows renormalised) and
        the live tables' columns of R solved."""
        q, prune = np.array(q, float), float(prune)
        N, width = q.shape
        ab = np.zeros((width, N), order="F")
        for d in range(1, width):
            ab[d, :N - d] = -q[d:, d]
        for i in np.flatnonzero((q[:, 0] < prune) & (q[:, 0] > 0)):
            if i > 0:
                row = q[i].copy()
                row[0] = 0.0
                _set_row(q, ab, int(i), row / row.sum())
        slot = np.full(N, -1)
        cols = np.flatnonzero(q[:, 0] > 0)
        slot[cols] = np.arange(len(cols))
        R = _paths(ab, cols) if len(cols) else np.zeros((N, 0))
        return cls(np.asarray(logp, float), q, prune, ab, slot, cols, R)

    @property
    def N(self) -> int:
        return self.q.shape[0]

    @property
    def W(self) -> int:
        return self.q.shape[1] - 1

    def column(self, i: int) -> np.ndarray:
        """R[i:, i]: the probability that each later customer's path reaches i."""
        if self.slot[i] >= 0:
            return self.R[i:, self.slot[i]]
        return _paths(self.ab, np.array([i]))[i:, 0]

    @property
    def q_self(self) -> np.ndarray:
        """q(c_j = j) of the live tables."""
        return self.q[self.cols, 0]

    @property
    def responsibilities(self) -> np.ndarray:
        """Z_sk = E z_s,cols[k] (N × K; rows sum to 1), clipped to [0, 1] against the rank-one
        updates' rounding (entries of −1e−43 were seen)."""
        return np.clip(self.R * self.q_self[None, :], 0.0, 1.0)

    def dense_q(self) -> np.ndarray:
        """q as the N × N lower-triangular matrix q(c_i = j)."""
        return dense(self.q)

    def link_term(self) -> float:
        """Σ_i Σ_d q_i,d (log p_i,d − log q_i,d): the links' E log p(c) − E log q(c)."""
        q, logp = self.q, self.logp
        pos = q > 0
        return float(np.sum(q[pos] * (logp[pos] - np.log(q[pos]))))

    def bound(self, ell: np.ndarray) -> float:
        """The links' part of the ELBO given ℓ (N × K, the live tables): link_term + Σ Z ℓ."""
        return self.link_term() + float(np.sum(self.responsibilities * ell))

    def copy(self) -> LinkState:
        """The same state in arrays of its own (each array's memory layout kept)."""
        return replace(self, q=self.q.copy(order="K"), ab=self.ab.copy(order="K"),
                       slot=self.slot.copy(), cols=self.cols.copy(), R=self.R.copy(order="K"))


def _set_row(q: np.ndarray, ab: np.ndarray, i: int, row: np.ndarray) -> None:
    """Row i of q and its links in L's band, in place."""
    q[i] = row
    d = np.arange(1, min(q.shape[1] - 1, i) + 1)
    ab[d, i - d] = -row[d]


def _paths(ab: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Columns R[:, targets]: (I − A) X = E_targets solved from the first target's row on."""
    N, first = ab.shape[1], int(targets.min())
    E = np.zeros((N - first, len(targets)))
    E[targets - first, np.arange(len(targets))] = 1.0
    X, info = dtbtrs(ab[:, first:], E, uplo="L", diag="U")
    if info != 0:
        raise np.linalg.LinAlgError(f"banded triangular solve failed (info {info})")
    return np.vstack([np.zeros((first, len(targets))), X])


def update(s: LinkState, i: int, ell: np.ndarray, ell_empty: np.ndarray | None = None
           ) -> tuple[LinkState, np.ndarray]:
    """q(c_i) set to its coordinate maximiser given the other rows (the module docstring's
    exact step), ℓ of the live tables and ``ell_empty`` (ℓ of a table with no data, for i's own
    table if it is not live), with R's rank-one update: rows of q, L and R written in place.
    Returns the state (a new one, with a column more, if i's table went live) and ℓ (with that
    column appended)."""
    d = np.arange(min(s.W, i) + 1)
    t = i - d[1:]
    col = s.column(i).copy()
    v = col @ ell[i:]
    own = s.slot[i]
    score = s.logp[i, d].copy()
    score[1:] += s.R[t] @ (s.q_self * v)
    score[0] += v[own] if own >= 0 else col @ ell_empty[i:]
    row = np.exp(score - score.max())
    row /= row.sum()
    if i > 0 and row[0] < s.prune:
        row[0] = 0.0
        row /= row.sum()
    delta = row[1:] - s.q[i, d[1:]]
    s.R[i:] += np.outer(col, delta @ s.R[t])
    full = np.zeros(s.W + 1)
    full[d] = row
    _set_row(s.q, s.ab, i, full)
    if own < 0 and row[0] > 0:
        s.slot[i] = len(s.cols)
        s = replace(s, cols=np.append(s.cols, i),
                    R=np.column_stack([s.R, np.concatenate([np.zeros(i), col])]))
        ell = np.column_stack([ell, ell_empty])
    return s, ell


def sweep(s: LinkState, ell: np.ndarray, ell_empty: np.ndarray | None,
          rng: np.random.Generator) -> LinkState:
    """Every q(c_i) once, in a random order (the paper: far better than a fixed one), then the
    tables left empty dropped from R; on a copy of ``s``."""
    s = s.copy()
    for i in rng.permutation(s.N):
        s, ell = update(s, int(i), ell, ell_empty)
    return compact(s)


def compact(s: LinkState) -> LinkState:
    """The state without the columns of tables whose self-link probability is 0."""
    keep = s.q[s.cols, 0] > 0
    if keep.all():
        return s
    slot = s.slot.copy()
    slot[s.cols[~keep]] = -1
    cols = s.cols[keep]
    slot[cols] = np.arange(len(cols))
    return replace(s, slot=slot, cols=cols, R=s.R[:, keep])
