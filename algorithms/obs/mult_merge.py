"""The multinomial's merge terms, Eq. 12 per pair of components (Hughes & Sudderth 2013):
logB(λ0 + wc_a + wc_b) - logB(λ0 + wc_a) - logB(λ0 + wc_b) + logB(λ0), whose sum over words runs
over the words both components hold, found word by word or pair by pair."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from ..sparse_stats import dense
from . import base
from .base import Arrays
from .mult_counts import nonzero_entries


def held_columns(wc: Any) -> sp.csc_matrix:
    """The positive entries of counts ``wc`` (dense or sparse) as CSC, row indices increasing
    within each column: what ``tocsc`` gives of them, read off a dense array in column-major
    order directly (no CSR in between)."""
    if sp.issparse(wc):
        held = sp.csr_matrix(wc.multiply(wc > 0))
        held.eliminate_zeros()
        return held.tocsc()
    wc = np.asarray(wc, dtype=float)
    R, V = wc.shape
    flat = wc.T.ravel()  # column-major
    at = np.flatnonzero(flat > 0)
    cols = at // R
    indptr = np.zeros(V + 1, dtype=np.int64)
    np.cumsum(np.bincount(cols, minlength=V), out=indptr[1:])
    return sp.csc_matrix((flat[at], at - cols * R, indptr), shape=(R, V))


class DirichletMerges:
    """Mult's ``merge_gains`` (a mixin of ``Mult``: it reads the prior λ0 over V words)."""

    lam0: np.ndarray
    V: int

    def merge_gains(self, N: np.ndarray, stats: Arrays, a: np.ndarray,
                    b: np.ndarray) -> np.ndarray:
        """Eq. 12, logB(λ0 + wc_a + wc_b) - logB(λ0 + wc_a) - logB(λ0 + wc_b) + logB(λ0), per
        pair: a word that one of the two lacks adds log Γ(λ0 + c) - log Γ(λ0 + c) = 0, so
        the sum over words runs over the words both hold; the totals' log Γ(Σλ) terms complete
        it. The shared words are found word by word (every pair of the named components that
        hold a word, ``_gains_by_word``) or pair by pair (the intersection of the two rows,
        ``_gains_by_pair``), whichever costs less."""
        if len(a) == 0:
            return np.zeros(0)
        rows, at = np.unique(np.concatenate([a, b]), return_inverse=True)
        wc = stats["wc"][rows]  # the components the pairs name, at positions ``at``
        col = held_columns(wc)
        total = np.asarray(wc.sum(-1)).ravel()
        a, b = at[: len(a)], at[len(a):]
        L0 = self.lam0.sum()
        gains = (gammaln(L0 + total[a]) + gammaln(L0 + total[b]) - gammaln(L0)
                 - gammaln(L0 + total[a] + total[b]))
        by_word = np.diff(col.indptr)
        per_row = np.bincount(col.indices, minlength=len(rows))
        # a word path entry costs about twice a pair path's row entry (measured)
        if (by_word * (by_word - 1)).sum() <= (per_row[a] + per_row[b]).sum():
            return gains + self._gains_by_word(col, np.minimum(a, b), np.maximum(a, b))
        return gains + self._gains_by_pair(dense(wc), a, b)

    def _shared(self, word: np.ndarray, ca: np.ndarray, cb: np.ndarray) -> np.ndarray:
        """A shared word's term of Eq. 12: log Γ(λ0 + ca + cb) - log Γ(λ0 + ca) - log Γ(λ0 +
        cb) + log Γ(λ0)."""
        l0 = self.lam0[word]
        return gammaln(l0 + ca + cb) - gammaln(l0 + ca) - gammaln(l0 + cb) + gammaln(l0)

    def _gains_by_pair(self, wc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Σ over the words both rows a_i and b_i hold (positive counts ``wc``) of the shared
        terms, per pair: the rows' intersection (the pairs' held masks and-ed, read row by
        row, words increasing), chunks of pairs at a time."""
        out = np.zeros(len(a))
        held = wc > 0
        step = max(1, base.MERGE_CHUNK_ENTRIES // self.V)
        for s in range(0, len(a), step):
            ia, ib = a[s:s + step], b[s:s + step]
            both = held[ia]
            both &= held[ib]
            pair, word = nonzero_entries(both)
            out[s:s + step] = np.bincount(
                pair, self._shared(word, wc[ia[pair], word], wc[ib[pair], word]),
                minlength=len(ia))
        return out

    def _gains_by_word(self, col: sp.csc_matrix, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The same sums per pair (lo_i < hi_i), from the words' columns (``col``: the positive
        counts, held_columns): every two components holding a word form a pair sharing it
        (Σ_w c_w (c_w - 1) / 2 entries for c_w holders), kept when the pair is asked for;
        chunks of about MERGE_CHUNK_ENTRIES entries. With g(c) = log Γ(λ0 + c) - log Γ(λ0)
        per held entry, a shared term is g(ca + cb) - g(ca) - g(cb): one log Γ per pair and
        word."""
        R = col.shape[0]
        asked, which = np.unique(lo * R + hi, return_inverse=True)
        every = len(asked) == R * (R - 1) // 2  # every pair of the rows: nothing to filter
        slot = np.full(R * R, len(asked))  # a pair's place among the asked, else len(asked)
        slot[asked] = np.arange(len(asked))
        count = np.diff(col.indptr)
        l0 = np.repeat(self.lam0, count)  # per entry, in column order
        g0 = gammaln(l0)
        l0 += col.data  # λ0 + c per entry
        g = gammaln(l0) - g0
        row = col.indices.astype(np.int64)
        row_R = row * R
        later = np.repeat(col.indptr[1:], count) - np.arange(col.nnz) - 1  # holders after it
        ends = np.cumsum(later)
        sums = np.zeros(len(asked) + 1)
        e = 0
        while e < col.nnz:
            stop = max(e + 1, int(np.searchsorted(ends, ends[e] - later[e]
                                                  + base.MERGE_CHUNK_ENTRIES, side="right")))
            reps = later[e:stop]
            starts = np.arange(e, stop)
            first = np.repeat(starts, reps)
            starts += 1
            starts -= np.cumsum(reps) - reps
            second = np.repeat(starts, reps)
            second += np.arange(len(first))  # entry first + 1 + (its place among first's)
            at = row_R[first]
            at += row[second]
            at = slot[at]
            if not every:
                hit = at < len(asked)
                first, second, at = first[hit], second[hit], at[hit]
            shared = l0[first]
            shared += col.data[second]
            shared = gammaln(shared, out=shared)
            shared -= g0[first]
            shared -= g[first]
            shared -= g[second]
            sums += np.bincount(at, shared, minlength=len(sums))
            e = stop
        return sums[which]
