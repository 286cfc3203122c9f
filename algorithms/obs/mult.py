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
from scipy.special import digamma, gammaln, logsumexp

from ..sparse_stats import canonical, dense, flat_index
from .base import Arrays, Data, ObsModel, log_gamma_draw
from .checks import check_component, check_weight

# as_csr, held_columns, log_multinomial_coefficient, nonzero_entries: importable from here
from .mult_counts import (  # noqa: F401
    as_csr,
    log_B,
    log_multinomial_coefficient,
    nonzero_entries,
)
from .mult_docs import Docs, absorb_document, remove_document
from .mult_merge import DirichletMerges, held_columns  # noqa: F401
from .mult_prior import dirichlet_scale

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


class Mult(DirichletMerges, ObsModel):
    """Multinomial (bag-of-words) components over a vocabulary of V words; Eq. 12's merge gains
    from DirichletMerges (mult_merge.py), the one-item path's documents Docs (mult_docs.py)."""

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
        """λ0 = s λ0 at the scale s maximising the ELBO over λ0 and q(θ) together, Eq. 12's
        log evidences at the posteriors' counts (mult_prior.dirichlet_scale; ``base``: the
        run's initial model, whose λ0 bounds s); the model itself where nothing is learned."""
        s = dirichlet_scale(post["lam"], self.lam0, base.lam0)
        return self if s is None else Mult(self.V, s * self.lam0)


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
        absorb_document(state, [k], [w], idx, counts, counts.sum())

    def remove(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """λ_kw = λ_kw' - w x_w on the document's non-zero words, and the row sum likewise
        (ValueError if some λ_kw would not stay positive)."""
        k = check_component(k, len(state["lam_sum"]))
        idx, counts = self._doc(x)
        w = check_weight(w)
        remove_document(state, np.array([k]), np.array([w]), idx, counts, counts.sum())

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
