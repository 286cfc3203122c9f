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
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dtbtrs

from .links import dense


class Links:
    """q(c) as an (N, W + 1) band ``q`` (q[i, d] = q(c_i = i − d)) beside the log prior ``logp``
    in the same layout; ``cols`` the live tables and ``R`` their columns of the path matrix."""

    def __init__(self, logp: np.ndarray, q: np.ndarray, prune: float = 0.0) -> None:
        self.logp = np.asarray(logp, float)
        self.q = np.array(q, float)
        self.prune = float(prune)
        N, width = self.q.shape
        # L = I − A in LAPACK's lower band layout, column-major so that the slice from a row on
        # reaches dtbtrs without a copy
        self._ab = np.zeros((width, N), order="F")
        for d in range(1, width):
            self._ab[d, :N - d] = -self.q[d:, d]
        for i in np.flatnonzero((self.q[:, 0] < self.prune) & (self.q[:, 0] > 0)):
            if i > 0:
                row = self.q[i].copy()
                row[0] = 0.0
                self._set_row(int(i), row / row.sum())
        self.slot = np.full(N, -1)
        cols = np.flatnonzero(self.q[:, 0] > 0)
        self.slot[cols] = np.arange(len(cols))
        self.cols = cols
        self.R = self._paths(cols) if len(cols) else np.zeros((N, 0))

    @property
    def N(self) -> int:
        return self.q.shape[0]

    @property
    def W(self) -> int:
        return self.q.shape[1] - 1

    def _set_row(self, i: int, row: np.ndarray) -> None:
        self.q[i] = row
        d = np.arange(1, min(self.W, i) + 1)
        self._ab[d, i - d] = -row[d]

    def _paths(self, targets: np.ndarray) -> np.ndarray:
        """Columns R[:, targets]: (I − A) X = E_targets solved from the first target's row on."""
        N, first = self.N, int(targets.min())
        E = np.zeros((N - first, len(targets)))
        E[targets - first, np.arange(len(targets))] = 1.0
        X, info = dtbtrs(self._ab[:, first:], E, uplo="L", diag="U")
        if info != 0:
            raise np.linalg.LinAlgError(f"banded triangular solve failed (info {info})")
        return np.vstack([np.zeros((first, len(targets))), X])

    def column(self, i: int) -> np.ndarray:
        """R[i:, i]: the probability that each later customer's path reaches i."""
        if self.slot[i] >= 0:
            return self.R[i:, self.slot[i]]
        return self._paths(np.array([i]))[i:, 0]

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

    def update(self, i: int, ell: np.ndarray, ell_empty: np.ndarray | None = None) -> np.ndarray:
        """Set q(c_i) to its coordinate maximiser given the other rows, ℓ of the live tables and
        ``ell_empty`` (ℓ of a table with no data, for i's own table if it is not live), and R
        with it. Returns ℓ with a column appended if i's table went live."""
        d = np.arange(min(self.W, i) + 1)
        t = i - d[1:]
        col = self.column(i).copy()
        v = col @ ell[i:]
        own = self.slot[i]
        score = self.logp[i, d].copy()
        score[1:] += self.R[t] @ (self.q_self * v)
        score[0] += v[own] if own >= 0 else col @ ell_empty[i:]
        row = np.exp(score - score.max())
        row /= row.sum()
        if i > 0 and row[0] < self.prune:
            row[0] = 0.0
            row /= row.sum()
        delta = row[1:] - self.q[i, d[1:]]
        self.R[i:] += np.outer(col, delta @ self.R[t])
        full = np.zeros(self.W + 1)
        full[d] = row
        self._set_row(i, full)
        if own < 0 and row[0] > 0:
            self.slot[i] = len(self.cols)
            self.cols = np.append(self.cols, i)
            self.R = np.column_stack([self.R, np.concatenate([np.zeros(i), col])])
            ell = np.column_stack([ell, ell_empty])
        return ell

    def sweep(self, ell: np.ndarray, ell_empty: np.ndarray | None,
              rng: np.random.Generator) -> None:
        """Every q(c_i) once, in a random order (the paper: far better than a fixed one), then
        the tables left empty dropped from R."""
        for i in rng.permutation(self.N):
            ell = self.update(int(i), ell, ell_empty)
        self.compact()

    def compact(self) -> None:
        """Drop the columns of tables whose self-link probability is 0."""
        keep = self.q[self.cols, 0] > 0
        if keep.all():
            return
        self.slot[self.cols[~keep]] = -1
        self.cols, self.R = self.cols[keep], self.R[:, keep]
        self.slot[self.cols] = np.arange(len(self.cols))
