"""Bag-of-words multinomial likelihood with a Dirichlet prior (Hughes & Sudderth 2013, Sec. 2).

A document x_d ∈ ℕ^V of n_d = Σ_w x_dw tokens has p(x_d | θ_k) = Π_w θ_kw^{x_dw}: the
probability of its *ordered token sequence*, with no multinomial coefficient n_d! / Π_w x_dw!.
The coefficient does not depend on k or θ, so responsibilities and posteriors are unchanged by
this convention, but every log likelihood, log evidence and ELBO here excludes it.

θ_k ~ Dir(λ0) (symmetric or full λ0 ∈ ℝ₊^V). Statistics: wc_k = Σ_n r_nk x_n (Eq. 7).
Posterior: λ_k = λ0 + wc_k (Eq. 10), with E[log θ_kw] = ψ(λ_kw) - ψ(Σ_v λ_kv).
logB(λ) = Σ_w log Γ(λ_w) - log Γ(Σ_w λ_w) is the log normaliser of Dir(λ).
One document x with weight w: λ_k' = λ_k + w x, on x's non-zero words only.
Draws (draw): θ_k = G_k / Σ_w G_kw with G_kw ~ Gamma(λ_kw, 1), all in log space: log θ_kw =
log G_kw - logsumexp_v log G_kv (small λ, such as λ0 = 0.1 on unseen words, underflows a direct
draw of G).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.special import digamma, gammaln, logsumexp

from ..sparse_stats import canonical, dense, flat_index
from . import base
from .base import Arrays, Data, ObsModel, log_gamma_draw
from .checks import check_component, check_weight
from .prior_learning import MIN_COMPONENTS, widened

# the learned λ0 stays within these multiples of the run's initial one (learn_prior)
LAM_RANGE = (1e-3, 1e2)


def log_B(lam: np.ndarray) -> np.ndarray:
    """logB(λ) = Σ_w log Γ(λ_w) - log Γ(Σ_w λ_w), over the last axis."""
    return gammaln(lam).sum(-1) - gammaln(lam.sum(-1))


def log_multinomial_coefficient(X: Data) -> np.ndarray:
    """log(n_d! / Π_w x_dw!) per document: what turns the token-sequence likelihoods here into
    the probability of the count vector (the scale of Tank et al.'s Table 1)."""
    Xc = as_csr(X)
    rows = np.repeat(np.arange(Xc.shape[0]), np.diff(Xc.indptr))
    n_d = np.asarray(Xc.sum(1)).ravel()
    return gammaln(n_d + 1) - np.bincount(rows, weights=gammaln(Xc.data + 1),
                                          minlength=Xc.shape[0])


def nonzero_entries(wc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.nonzero of a 2-d array: the rows and columns of its non-zero entries in row-major
    order, from the flat positions of a boolean mask (about half np.nonzero's time on K x V
    counts)."""
    flat = np.flatnonzero(np.ravel(wc) != 0)
    rows = flat // wc.shape[1]
    flat -= rows * wc.shape[1]
    return rows, flat


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


def as_csr(X: Data) -> sp.csr_matrix:
    """X as float CSR in canonical form (sorted, duplicates summed), never modifying X (X itself
    when it is one)."""
    if type(X) is sp.csr_matrix and X.dtype == np.float64 and X.has_canonical_format:
        return X
    if sp.issparse(X):
        Xc = sp.csr_matrix(X, dtype=float)
        if not Xc.has_canonical_format:
            Xc = Xc.copy()  # the conversion may share X's arrays; sum_duplicates works in place
            Xc.sum_duplicates()
        return Xc
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"expected a 2-d count matrix, got shape {X.shape}")
    return sp.csr_matrix(X)


_KEPT = {"lam", "dig", "lam_sum", "gl_sum"}


def _kept(post: Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ψ(λ), Σ_v λ_kv and Σ_v log Γ(λ_kv) of a post: kept by ``Mult.post``, else (a post read
    from an older model file) computed from λ."""
    lam = post["lam"]
    if post.keys() >= _KEPT:
        return post["dig"], post["lam_sum"], post["gl_sum"]
    return digamma(lam), lam.sum(-1), gammaln(lam).sum(-1)


def _log_B_kept(post: Arrays) -> np.ndarray:
    """logB(λ_k) per k from the kept sums."""
    _, lam_sum, gl_sum = _kept(post)
    return gl_sum - gammaln(lam_sum)


class Mult(ObsModel):
    """Multinomial (bag-of-words) components over a vocabulary of V words."""

    name = "mult"
    text = True
    default_for = "bow"
    # r_nk < 1e-10 dropped (vb.local.truncate): ≤ K·1e-10 nats of ELBO per document, and the
    # batch statistics become sparse (text responsibilities are nearly one-hot)
    responsibility_floor = 1e-10

    def __init__(self, V: int, lam0: float | np.ndarray) -> None:
        V = int(V)
        lam0 = np.broadcast_to(np.asarray(lam0, dtype=float), (V,)).copy()
        if V < 1:
            raise ValueError("V must be positive")
        if not np.all(np.isfinite(lam0) & (lam0 > 0)):
            raise ValueError("lam0 must be positive and finite")
        self.V = V
        self.lam0 = lam0
        self._log_B0 = float(log_B(lam0))
        self._dig0, self._gl0 = digamma(lam0), gammaln(lam0)  # a word no count has reached
        self._gl0_sum = self._gl0.sum()

    @classmethod
    def default(cls, X: Data, lam0: float | np.ndarray = 0.1) -> Mult:
        """Symmetric Dir(λ0) over the columns of X (λ0 = 0.1: sparse topics)."""
        return cls(np.shape(X)[1], lam0)

    def prior(self) -> dict[str, Any]:
        symmetric = bool(np.all(self.lam0 == self.lam0[0]))
        return {"V": self.V, "lam0": float(self.lam0[0]) if symmetric else self.lam0.tolist()}

    def learn_prior(self, post: Arrays, base: ObsModel) -> Mult:
        """The scale s of λ0 = s m (m: this prior's λ0, its shape kept: a symmetric prior stays
        symmetric) maximising the ELBO over λ0 and q(θ) together at the counts wc_k = λ_k − λ0
        the posteriors hold: with each q(θ_k) at its optimum Dir(s m + wc_k) the observation
        terms are Eq. 12's log evidences, G(s) = Σ_k [logB(s m + wc_k) − logB(s m)], the
        Dirichlet-multinomial likelihood whose precision Minka (2000) fits by a fixed point
        (its limit is what alternating the prior's update and Eq. 10 would reach). With
        n_k = Σ_v wc_kv and M = Σ_v m_v, G'(s) is
        Σ_{k,v: wc_kv > 0} m_v [ψ(s m_v + wc_kv) − ψ(s m_v)] − M Σ_k [ψ(s M + n_k) − ψ(s M)],
        +∞ as s → 0 and below 0 for large s when the components' words are more concentrated
        than m; its root in [LAM_RANGE of the run's initial λ0, widened to hold the current] is
        kept only where G is higher than at the current λ0 (G may have several stationary
        points), so the ELBO after the global update never falls. Every component holding
        words counts, however few (only an empty one adds 0 for every s); nothing is learned
        unless MIN_COMPONENTS components hold a word or more."""
        lam, m = post["lam"], self.lam0
        wc = lam - m  # >= 0: λ = λ0 + wc rounds to at least λ0
        wc = wc[wc.sum(-1) > 0]  # an empty component's evidence is 0 at every s
        if int(np.sum(wc.sum(-1) >= 1.0)) < MIN_COMPONENTS:  # three holding a word or more
            return self
        rows, cols = nonzero_entries(wc)
        c, mv, n, M = wc[rows, cols], m[cols], wc.sum(-1), float(m.sum())

        def gain(s: float) -> float:
            return float(np.sum(gammaln(s * mv + c) - gammaln(s * mv))
                         - np.sum(gammaln(s * M + n) - gammaln(s * M)))

        def slope(log_s: float) -> float:
            s = np.exp(log_s)
            return float(mv @ (digamma(s * mv + c) - digamma(s * mv))
                         - M * np.sum(digamma(s * M + n) - digamma(s * M)))

        lo, hi = widened(*(base.lam0.mean() * r for r in LAM_RANGE), float(m.mean()))
        lo, hi = np.log(lo / m.mean()), np.log(hi / m.mean())
        if slope(hi) >= 0:
            log_s = hi
        elif slope(lo) <= 0:
            log_s = lo
        else:
            log_s = brentq(slope, lo, hi, xtol=1e-10)
        if gain(np.exp(log_s)) <= gain(1.0):
            return self
        return Mult(self.V, np.exp(log_s) * m)

    def prior_figures(self) -> dict[str, float]:
        """λ0's mean over the vocabulary (its one value when symmetric)."""
        return {"lam0": float(self.lam0.mean())}

    def check_data(self, X: Data) -> None:
        Xc = as_csr(X)
        if Xc.shape[1] != self.V:
            raise ValueError(f"expected {self.V} columns (vocabulary size), got shape {Xc.shape}")
        if Xc.nnz and not np.all(np.isfinite(Xc.data)):
            raise ValueError("word counts must be finite")
        if Xc.nnz and Xc.data.min() < 0:
            raise ValueError("word counts must be non-negative")

    def stat_shapes(self) -> dict[str, tuple[int, ...]]:
        return {"wc": (self.V,)}

    def stats(self, X: Data, R: np.ndarray) -> Arrays:
        """wc = Rᵀ X: (K, V), computed as (Xᵀ R)ᵀ with X sparse."""
        wc = as_csr(X).T @ np.asarray(R, dtype=float)
        return {"wc": np.ascontiguousarray(np.asarray(wc).T)}

    def batch_stats(self, X: Data, R: np.ndarray) -> dict[str, sp.csr_matrix]:
        """wc = Rᵀ X as a sparse (K, V) matrix: non-zero only where a word meets a component
        holding (r_nk > 0) a document that has it."""
        return {"wc": canonical(sp.csr_matrix(np.asarray(R, dtype=float)).T.tocsr() @ as_csr(X))}

    def batch_columns(self, X: Data) -> np.ndarray:
        """The words X contains (sorted): the columns of E[log θ] its local step reads."""
        return np.unique(as_csr(X).indices).astype(np.int64)

    def post(self, N: np.ndarray, stats: Arrays) -> Arrays:
        """Eq. 10: λ_k = λ0 + wc_k, with ψ(λ) (``dig``), Σ_v λ_kv (``lam_sum``) and
        Σ_v log Γ(λ_kv) (``gl_sum``) kept beside λ, so that E[log θ_kw] = ψ(λ_kw) - ψ(Σ_v λ_kv)
        is formed only for the columns a batch reads and an update can touch only some columns
        (post_update). ψ and log Γ run on the non-zero counts only: elsewhere λ = λ0, whose
        values are kept."""
        wc = dense(stats["wc"])
        lam = self.lam0 + wc
        flat = np.flatnonzero(np.ravel(wc) != 0)  # row-major, as nonzero_entries
        rows = flat // self.V
        at = lam.reshape(-1)[flat]
        dig = np.empty_like(lam)
        dig[...] = self._dig0
        dig.reshape(-1)[flat] = digamma(at)
        gl = gammaln(at)
        flat -= rows * self.V  # the columns
        gl -= self._gl0[flat]
        gl_sum = self._gl0_sum + np.bincount(rows, gl, minlength=lam.shape[0])
        return {"lam": lam, "dig": dig, "lam_sum": lam.sum(-1), "gl_sum": gl_sum}

    def post_update(self, post: Arrays, N: np.ndarray, stats: Arrays,
                    changed: sp.csr_matrix | None) -> Arrays:
        """Eq. 10 on the changed entries (k, w) only, writing into ``post``'s λ and ψ(λ): O(K +
        entries), with Σ_v λ_kv and Σ_v log Γ(λ_kv) moved by the entries' differences. The
        whole update when nothing says what changed, K changed or post lacks the kept sums."""
        wc = stats["wc"]
        if (changed is None or sp.issparse(wc) or not post.keys() >= _KEPT
                or post["lam"].shape != wc.shape
                or not all(a.flags.c_contiguous for a in (post["lam"], post["dig"], wc))):
            return self.post(N, stats)
        at = flat_index(canonical(changed))
        rows = at // self.V
        lam, dig = post["lam"].reshape(-1), post["dig"].reshape(-1)  # views of C-ordered arrays
        old = lam.take(at)
        new = wc.reshape(-1).take(at)
        new += self.lam0.take(at - rows * self.V)
        lam[at] = new
        dig[at] = digamma(new)
        K = len(N)
        gl = gammaln(new)
        gl -= gammaln(old)
        new -= old
        return {"lam": post["lam"], "dig": post["dig"],
                "lam_sum": post["lam_sum"] + np.bincount(rows, new, minlength=K),
                "gl_sum": post["gl_sum"] + np.bincount(rows, gl, minlength=K)}

    def saved_post(self, post: Arrays) -> Arrays:
        """λ and the kept sums, without ψ(λ) (as large as λ, and a function of it entry by
        entry: ``restored_post`` recomputes it to the same bits)."""
        return {k: v for k, v in post.items() if k != "dig"}

    def restored_post(self, saved: Arrays) -> Arrays:
        """The saved arrays with ψ(λ) when the kept sums are there (a model file written before
        ψ(λ) was kept has λ alone; one written before it was dropped has it)."""
        if "dig" in saved or "lam_sum" not in saved:
            return saved
        return {**saved, "dig": digamma(saved["lam"])}

    def E_log_theta(self, post: Arrays) -> np.ndarray:
        """E[log θ_kw] = ψ(λ_kw) - ψ(Σ_v λ_kv): (K, V)."""
        dig, lam_sum, _ = _kept(post)
        return dig - digamma(lam_sum)[:, None]

    def restrict(self, post: Arrays, cols: np.ndarray | None) -> Arrays:
        """E[log θ] on the columns ``cols`` only (K, |cols|), and the columns: all a local step
        on a batch with those words reads (E_loglik), instead of λ and ψ(λ) over V; with no
        columns, E[log θ] over V."""
        if cols is None:  # new arrays: the caller may update post in place meanwhile
            return {"Elogtheta": self.E_log_theta(post)}
        dig, lam_sum, _ = _kept(post)
        return {"cols": np.asarray(cols, np.int64),
                "Elogtheta": dig[:, cols] - digamma(lam_sum)[:, None]}

    def E_loglik(self, X: Data, post: Arrays) -> np.ndarray:
        """Eq. 9: E[log p(x_n | θ_k)] = Σ_w x_nw E[log θ_kw] = X E[log θ]ᵀ (n, K); from a
        restricted post (``restrict``), X's columns are first mapped into its columns."""
        Xc = as_csr(X)
        if "cols" not in post:
            Elog = post["Elogtheta"] if "Elogtheta" in post else self.E_log_theta(post)
            return np.asarray(Xc @ Elog.T)
        cols = post["cols"]
        pos = np.searchsorted(cols, Xc.indices)
        if Xc.nnz and (pos.max() >= len(cols) or np.any(cols[pos] != Xc.indices)):
            raise ValueError("the data has words outside the columns the parameters were "
                             "restricted to")
        local = sp.csr_matrix((Xc.data, pos, Xc.indptr), shape=(Xc.shape[0], len(cols)))
        return np.asarray(local @ post["Elogtheta"].T)

    def draw(self, post: Arrays, rng: np.random.Generator) -> Arrays:
        """θ_k ~ Dir(λ_k) as θ = {"logtheta": log θ (K, V)}, normalised in log space."""
        logG = log_gamma_draw(post["lam"], rng)
        return {"logtheta": logG - logsumexp(logG, axis=-1, keepdims=True)}

    def sample_items(self, theta: Arrays, rng: np.random.Generator,
                     n_words: np.ndarray | None = None) -> sp.csr_matrix:
        """Counts x_i ~ Multinomial(n_words_i, θ_i) as CSR (n, V) of int64."""
        if n_words is None:
            raise ValueError("multinomial items need their lengths: give n_words")
        theta_ = np.exp(theta["logtheta"])
        counts = rng.multinomial(np.asarray(n_words, np.int64),
                                 theta_ / theta_.sum(-1, keepdims=True))
        return sp.csr_matrix(counts.reshape(len(theta_), self.V))

    def loglik(self, X: Data, theta: Arrays) -> np.ndarray:
        """log p(x_n | θ_k) = Σ_w x_nw log θ_kw = X log θᵀ (n, K), sparse @ dense; like E_loglik,
        without the multinomial coefficient."""
        return np.asarray(as_csr(X) @ theta["logtheta"].T)

    def elbo(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """Eq. 8 observation terms for any q(θ_k) = Dir(λ_k):
        Σ_k [Σ_w wc_kw Elogθ_kw + E log Dir(θ_k|λ0) - E log Dir(θ_k|λ_k)]
        = Σ_k [Σ_w (wc_kw + λ0_w - λ_kw) Elogθ_kw - logB(λ0) + logB(λ_k)]."""
        lam = post["lam"]
        linear = ((dense(stats["wc"]) + self.lam0 - lam) * self.E_log_theta(post)).sum(-1)
        return float(np.sum(linear - self._log_B0 + _log_B_kept(post)))

    def elbo_at_optimum(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """With λ = λ0 + wc the linear terms vanish: Σ_k [logB(λ_k) - logB(λ0)], O(K) from the
        kept sums."""
        return float(np.sum(_log_B_kept(post) - self._log_B0))

    def log_marginal(self, N: np.ndarray, stats: Arrays) -> np.ndarray:
        """Eq. 12: log M(S_k) = logB(λ0 + wc_k) - logB(λ0) = Σ_{w: wc_kw ≠ 0} [log Γ(λ0_w +
        wc_kw) - log Γ(λ0_w)] - log Γ(Σλ0 + n_k) + log Γ(Σλ0), n_k = Σ_w wc_kw, per k: a word
        the component lacks adds 0, so log Γ runs on the non-zero counts only (O(K + nnz))."""
        wc = stats["wc"]
        if sp.issparse(wc):
            coo = wc.tocoo()
            rows, cols, counts = coo.row, coo.col, coo.data
            total = np.asarray(wc.sum(-1)).ravel()
        else:
            wc = np.asarray(wc, dtype=float)
            rows, cols = nonzero_entries(wc)
            counts, total = wc[rows, cols], wc.sum(-1)
        l0, L0 = self.lam0[cols], self.lam0.sum()
        words = np.bincount(rows, gammaln(l0 + counts) - gammaln(l0), minlength=wc.shape[0])
        return words - gammaln(L0 + total) + gammaln(L0)

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

    def predictive_logpdf(self, X: Data, post: Arrays) -> np.ndarray:
        """Dirichlet-multinomial of the token sequence of each row (n, K):
        log Γ(Σλ_k) - log Γ(Σλ_k + n_d) + Σ_{w: x_dw > 0} [log Γ(λ_kw + x_dw) - log Γ(λ_kw)]
        (computed as in Docs)."""
        lam = post["lam"]
        return self.prepare(X).logliks({"lam": lam, "lam_sum": lam.sum(-1)})

    def features(self, X: Data) -> sp.csr_matrix:
        """Hellinger embedding sqrt(x_d / n_d): Euclidean distance ∝ Hellinger distance between
        empirical word distributions. Empty documents map to the zero vector. Kept sparse: n x V
        dense would be gigabytes for a news vocabulary."""
        Xc = as_csr(X)
        n_d = np.asarray(Xc.sum(1)).ravel()
        rows = np.repeat(np.arange(Xc.shape[0]), np.diff(Xc.indptr))
        denom = n_d[rows]
        Y = Xc.copy()
        Y.data = np.sqrt(Xc.data / np.where(denom > 0, denom, 1.0))
        return Y

    def predictive_state(self, post: Arrays) -> Arrays:
        """λ (K, V), copied, and its row sums Σ_w λ_kw (K,), kept up to date by absorb/remove."""
        lam = np.array(post["lam"], dtype=float)
        return {"lam": lam, "lam_sum": lam.sum(-1)}

    def predictive_logpdf_state(self, state: Arrays, X: Data) -> np.ndarray:
        """The Dirichlet-multinomial of predictive_logpdf from the state's row sums, reading λ only
        at each document's non-zero words: O(K nnz) (one log per token of count up to EXPAND,
        see Docs), independent of V."""
        return self.prepare(X).logliks(state)

    def absorb(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """λ_kw' = λ_kw + w x_w on the document's non-zero words and Σ_w λ_kw' = Σ_w λ_kw + w n_d:
        a sparse row update, O(nnz)."""
        k = check_component(k, len(state["lam_sum"]))
        idx, counts = self._doc(x)
        w = check_weight(w)
        _absorb(state, [k], [w], idx, counts, counts.sum())

    def remove(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """λ_kw = λ_kw' - w x_w on the document's non-zero words, and the row sum likewise
        (ValueError if some λ_kw would not stay positive)."""
        k = check_component(k, len(state["lam_sum"]))
        idx, counts = self._doc(x)
        w = check_weight(w)
        _remove(state, np.array([k]), np.array([w]), idx, counts, counts.sum())

    def prepare(self, X: Data) -> Docs:
        """The rows of X checked once (V columns; counts finite and positive, explicit zeros
        dropped) and held for repeated one-item calls by position: what ADF and EP sweep."""
        Xc = self._docs(X)
        if Xc.nnz and not np.all(Xc.data != 0):
            Xc = Xc.copy()
            Xc.eliminate_zeros()
        if not np.all(np.isfinite(Xc.data) & (Xc.data > 0)):
            raise ValueError("word counts must be finite and non-negative")
        return Docs(Xc)

    def means(self, post: Arrays) -> np.ndarray:
        """E[θ_k] = λ_k / Σ_w λ_kw: the expected word distributions (K, V)."""
        lam = post["lam"]
        return lam / lam.sum(-1, keepdims=True)

    def _docs(self, X: Data) -> sp.csr_matrix:
        """One document (V,) or a few (n, V), dense or sparse, as canonical float CSR."""
        if not sp.issparse(X):
            X = np.asarray(X, dtype=float)
            X = X[None, :] if X.ndim == 1 else X
        Xc = as_csr(X)
        if Xc.shape[1] != self.V:
            raise ValueError(f"expected {self.V} columns (vocabulary size), got shape {Xc.shape}")
        return Xc

    def _doc(self, x: Data) -> tuple[np.ndarray, np.ndarray]:
        """The non-zero words (as intp) of one document and their counts (finite, positive)."""
        Xc = self._docs(x)
        if Xc.shape[0] != 1:
            raise ValueError(f"expected one document, got {Xc.shape[0]}")
        keep = Xc.data != 0
        idx, counts = Xc.indices[keep].astype(np.intp), Xc.data[keep]
        if not np.all(np.isfinite(counts) & (counts > 0)):
            raise ValueError("word counts must be finite and non-negative")
        return idx, counts


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
        _absorb(state, ks, ws, idx, counts, self._n_d[i])

    def remove(self, state: Arrays, i: int, ks: np.ndarray, ws: np.ndarray) -> None:
        idx, counts = self._row(i)
        _remove(state, ks, ws, idx, counts, self._n_d[i])


def _absorb(state: Arrays, ks: Any, ws: Any, idx: np.ndarray, counts: np.ndarray,
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


def _remove(state: Arrays, ks: np.ndarray, ws: np.ndarray, idx: np.ndarray, counts: np.ndarray,
            n: float) -> None:
    """The inverse of _absorb; ValueError, and nothing changed, if some λ would not stay
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
