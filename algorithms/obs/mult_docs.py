"""The multinomial's one-item path (ADF, EP): documents prepared once (``Mult.prepare``) and
read by position, each predictive log density the Dirichlet-multinomial
log Γ(Σλ_k) - log Γ(Σλ_k + n_d) + Σ_{w: x_dw > 0} [log Γ(λ_kw + x_dw) - log Γ(λ_kw)], and one
document absorbed into (removed from) components as λ_k' = λ_k ± w x on its words only."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from .base import Arrays

EXPAND = 16  # integer counts up to this are read as that many log terms (Docs)
BLOCK = 1 << 22  # Docs.logliks: at most this many (component, token) terms at once


class Docs:
    """Documents prepared for the one-item path (``Mult.prepare``), read by position, so a sweep
    converts and checks its partition once instead of building a one-row CSR matrix per item and
    per call.

    The Dirichlet-multinomial's word terms log Γ(λ_w + x) − log Γ(λ_w) = log λ_w + log Γ(λ_w + x)
    − log Γ(λ_w + 1) are read as: log λ_w for every word of the document (its CSR row); for an
    integer count 2 ≤ x ≤ EXPAND (nearly every count above 1) Σ_{j=1}^{x−1} log(λ_w + j), one
    "repeat" token per j; for any other count (larger or fractional) the log Γ difference. One log
    per token instead of two log Γ per word: a log is several times cheaper, and the sum avoids
    the cancellation between two large log Γ values.

    ``loglik(state, i)``: item i's predictive log density under every component of ``state``;
    ``logliks(state)``: all items at once; ``absorb`` / ``remove(state, i, ks, ws)``: item i into
    (out of) the distinct components ``ks`` with weights ``ws`` in one fancy-indexed update of λ
    (remove raises ValueError and changes nothing if some λ would not stay positive)."""

    def __init__(self, Xc: sp.csr_matrix) -> None:
        # word ids as intp: numpy converts int32 index arrays at every fancy index otherwise
        n, counts, words, indptr = Xc.shape[0], Xc.data, Xc.indices.astype(np.intp), Xc.indptr
        self.n, self.indptr, self.indices, self.data = n, indptr, words, counts
        self.n_d = np.asarray(Xc.sum(1)).ravel()
        with np.errstate(invalid="ignore"):  # nan or huge counts: not whole, the log Γ route
            extra = counts.astype(np.int32)  # (temporaries kept small: partitions are large)
        small = extra == counts
        small &= extra >= 1
        small &= extra <= EXPAND
        extra -= 1  # repeat tokens j = 1..x−1 of a small count
        extra[~small] = 0
        has = np.flatnonzero(extra)
        reps = extra[has]
        self.rep_word = np.repeat(words[has], reps)
        first = np.cumsum(reps, dtype=np.int64) - reps
        self.rep_off = (np.arange(1, len(self.rep_word) + 1) - np.repeat(first, reps)
                        ).astype(float)
        self.rep_ptr = _pointers(extra, indptr)
        big = ~small
        self.big_word, self.big_count = words[big], counts[big]
        self.big_ptr = _pointers(big, indptr) if len(self.big_word) else np.zeros(n + 1, np.int64)
        self._indptr, self._rep_ptr = indptr.tolist(), self.rep_ptr.tolist()
        self._big_ptr, self._n_d = self.big_ptr.tolist(), self.n_d.tolist()

    def _row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = self._indptr[i], self._indptr[i + 1]
        return self.indices[a:b], self.data[a:b]

    def loglik(self, state: Arrays, i: int) -> np.ndarray:
        """Item i's predictive log density under each of the K components: (K,)."""
        lam, lam_sum = state["lam"], state["lam_sum"]
        terms = lam.take(self.indices[self._indptr[i]:self._indptr[i + 1]], axis=1)
        np.log(terms, out=terms)
        out = terms.sum(1)
        a, b = self._rep_ptr[i], self._rep_ptr[i + 1]
        if b > a:
            terms = lam.take(self.rep_word[a:b], axis=1)
            terms += self.rep_off[a:b]
            np.log(terms, out=terms)
            out += terms.sum(1)
        a, b = self._big_ptr[i], self._big_ptr[i + 1]
        if b > a:
            lam_nz = lam[:, self.big_word[a:b]]
            out += (gammaln(lam_nz + self.big_count[a:b]) - gammaln(lam_nz + 1)).sum(1)
        norm = gammaln(lam_sum)
        norm -= gammaln(lam_sum + self._n_d[i])
        norm += out
        return norm

    def logliks(self, state: Arrays) -> np.ndarray:
        """Every item's predictive log density under each component: (n, K), a block of
        components at a time (the temporaries are block × tokens: bounded, whatever K)."""
        lam, lam_sum = state["lam"], state["lam_sum"]
        block = max(1, BLOCK // max(1, len(self.indices) + len(self.rep_word)))
        out = np.empty((self.n, len(lam_sum)))
        for a in range(0, len(lam_sum), block):
            out[:, a:a + block] = self._term_sums(lam[a:a + block]).T
        return out + gammaln(lam_sum)[None, :] - gammaln(lam_sum[None, :] + self.n_d[:, None])

    def _term_sums(self, lam: np.ndarray) -> np.ndarray:
        """Σ over each document's word terms, for the components ``lam``: (K', n)."""
        terms = lam[:, self.indices]
        out = _segment_sums(np.log(terms, out=terms), self.indptr)
        terms = lam[:, self.rep_word]
        terms += self.rep_off
        out += _segment_sums(np.log(terms, out=terms), self.rep_ptr)
        del terms
        if len(self.big_word):
            lam_nz = lam[:, self.big_word]
            out += _segment_sums(gammaln(lam_nz + self.big_count) - gammaln(lam_nz + 1),
                                 self.big_ptr)
        return out

    def absorb(self, state: Arrays, i: int, ks: np.ndarray, ws: np.ndarray) -> None:
        idx, counts = self._row(i)
        absorb_document(state, ks, ws, idx, counts, self._n_d[i])

    def remove(self, state: Arrays, i: int, ks: np.ndarray, ws: np.ndarray) -> None:
        idx, counts = self._row(i)
        remove_document(state, ks, ws, idx, counts, self._n_d[i])


def absorb_document(state: Arrays, ks: Any, ws: Any, idx: np.ndarray, counts: np.ndarray,
                    n: float) -> None:
    """One document (words ``idx``, ``counts``, length n) into components ``ks`` (distinct) with
    weights ``ws``: one fancy-indexed update of λ and of the row sums."""
    if len(ks) == 1:
        k, w = int(ks[0]), float(ws[0])
        row = state["lam"][k]
        row[idx] += w * counts
        state["lam_sum"][k] += w * n
    else:
        state["lam"][np.asarray(ks)[:, None], idx] += np.asarray(ws)[:, None] * counts
        state["lam_sum"][ks] += np.asarray(ws) * n


def remove_document(state: Arrays, ks: np.ndarray, ws: np.ndarray, idx: np.ndarray,
                    counts: np.ndarray, n: float) -> None:
    """The inverse of absorb_document; ValueError, and nothing changed, if some λ would not stay
    positive."""
    rows = ks[:, None]
    new = state["lam"][rows, idx] - ws[:, None] * counts
    if not np.all(new > 0):
        raise ValueError("the removal would leave a non-positive Dirichlet parameter: the "
                         "document was not absorbed into this component with this weight")
    state["lam"][rows, idx] = new
    state["lam_sum"][ks] -= ws * n


def _pointers(sizes: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Row pointers of a block holding ``sizes[j]`` entries for CSR entry j (rows ``indptr``)."""
    total = np.cumsum(sizes, dtype=np.int64)
    ptr = np.zeros(len(indptr), np.int64)
    ends = indptr[1:]
    ptr[1:] = np.where(ends > 0, total[np.maximum(ends - 1, 0)] if len(total) else 0, 0)
    return ptr


def _segment_sums(A: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Σ of A's columns ptr[i]:ptr[i+1] for every segment i: (K, n), 0 for empty segments."""
    out = np.zeros((A.shape[0], len(ptr) - 1))
    full = ptr[1:] > ptr[:-1]
    if full.any():
        out[:, full] = np.add.reduceat(A, ptr[:-1][full], axis=1)
    return out
