"""Bag-of-words multinomial likelihood with a Dirichlet prior (Hughes & Sudderth 2013, Sec. 2).

A document x_d ∈ ℕ^V of n_d = Σ_w x_dw tokens has p(x_d | θ_k) = Π_w θ_kw^{x_dw}: the
probability of its *ordered token sequence*, with no multinomial coefficient n_d! / Π_w x_dw!.
The coefficient does not depend on k or θ, so responsibilities and posteriors are unchanged by
this convention, but every log likelihood, log evidence and ELBO here excludes it.

θ_k ~ Dir(λ0) (symmetric or full λ0 ∈ ℝ₊^V). Statistics: wc_k = Σ_n r_nk x_n (Eq. 7).
Posterior: λ_k = λ0 + wc_k (Eq. 10), with E[log θ_kw] = ψ(λ_kw) - ψ(Σ_v λ_kv).
logB(λ) = Σ_w log Γ(λ_w) - log Γ(Σ_w λ_w) is the log normaliser of Dir(λ).
One document x with weight w: λ_k' = λ_k + w x, on x's non-zero words only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from .base import Arrays, Data, ObsModel, check_component, check_weight


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


def as_csr(X: Data) -> sp.csr_matrix:
    """X as float CSR in canonical form (sorted, duplicates summed), never modifying X."""
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


class Mult(ObsModel):
    """Multinomial (bag-of-words) components over a vocabulary of V words."""

    name = "mult"

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

    @classmethod
    def default(cls, X: Data, lam0: float | np.ndarray = 0.1) -> Mult:
        """Symmetric Dir(λ0) over the columns of X (λ0 = 0.1: sparse topics)."""
        return cls(np.shape(X)[1], lam0)

    def prior(self) -> dict[str, Any]:
        symmetric = bool(np.all(self.lam0 == self.lam0[0]))
        return {"V": self.V, "lam0": float(self.lam0[0]) if symmetric else self.lam0.tolist()}

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

    def post(self, N: np.ndarray, stats: Arrays) -> Arrays:
        """Eq. 10: λ_k = λ0 + wc_k; E[log θ_kw] = ψ(λ_kw) - ψ(Σ_v λ_kv)."""
        lam = self.lam0 + stats["wc"]
        Elogtheta = digamma(lam) - digamma(lam.sum(-1, keepdims=True))
        return {"lam": lam, "Elogtheta": Elogtheta}

    def E_loglik(self, X: Data, post: Arrays) -> np.ndarray:
        """Eq. 9: E[log p(x_n | θ_k)] = Σ_w x_nw E[log θ_kw] = X E[log θ]ᵀ (n, K)."""
        return np.asarray(as_csr(X) @ post["Elogtheta"].T)

    def elbo(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """Eq. 8 observation terms for any q(θ_k) = Dir(λ_k), with Elogθ from post:
        Σ_k [Σ_w wc_kw Elogθ_kw + E log Dir(θ_k|λ0) - E log Dir(θ_k|λ_k)]
        = Σ_k [Σ_w (wc_kw + λ0_w - λ_kw) Elogθ_kw - logB(λ0) + logB(λ_k)]."""
        lam, Elog = post["lam"], post["Elogtheta"]
        linear = ((stats["wc"] + self.lam0 - lam) * Elog).sum(-1)
        return float(np.sum(linear - self._log_B0 + log_B(lam)))

    def log_marginal(self, N: np.ndarray, stats: Arrays) -> np.ndarray:
        """Eq. 12: log M(S_k) = logB(λ0 + wc_k) - logB(λ0), per k."""
        return log_B(self.lam0 + stats["wc"]) - self._log_B0

    def predictive_logpdf(self, X: Data, post: Arrays) -> np.ndarray:
        """Dirichlet-multinomial of the token sequence of each row (n, K):
        log Γ(Σλ_k) - log Γ(Σλ_k + n_d) + Σ_{w: x_dw > 0} [log Γ(λ_kw + x_dw) - log Γ(λ_kw)]."""
        Xc = as_csr(X)
        lam = post["lam"]
        n_d = np.asarray(Xc.sum(1)).ravel()
        rows = np.repeat(np.arange(Xc.shape[0]), np.diff(Xc.indptr))
        lam_sum = lam.sum(-1)
        out = gammaln(lam_sum)[None, :] - gammaln(lam_sum[None, :] + n_d[:, None])
        for k in range(lam.shape[0]):
            lam_nz = lam[k, Xc.indices]
            terms = gammaln(lam_nz + Xc.data) - gammaln(lam_nz)
            out[:, k] += np.bincount(rows, weights=terms, minlength=Xc.shape[0])
        return out

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
        at each document's non-zero words: O(K nnz), independent of V."""
        Xc = self._docs(X)
        lam, lam_sum = state["lam"], state["lam_sum"]
        n, nnz = Xc.shape[0], Xc.nnz
        n_d = np.asarray(Xc.sum(1)).ravel()
        lam_nz = lam[:, Xc.indices]  # (K, nnz)
        terms = gammaln(lam_nz + Xc.data) - gammaln(lam_nz)
        per_doc = sp.csr_matrix((np.ones(nnz), np.arange(nnz), Xc.indptr), shape=(n, nnz))
        return (gammaln(lam_sum)[None, :] - gammaln(lam_sum[None, :] + n_d[:, None])
                + per_doc @ terms.T)

    def absorb(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """λ_kw' = λ_kw + w x_w on the document's non-zero words and Σ_w λ_kw' = Σ_w λ_kw + w n_d:
        a sparse row update, O(nnz)."""
        k = check_component(k, len(state["lam_sum"]))
        idx, counts = self._doc(x)
        w = check_weight(w)
        state["lam"][k, idx] += w * counts
        state["lam_sum"][k] += w * counts.sum()

    def remove(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """λ_kw = λ_kw' - w x_w on the document's non-zero words, and the row sum likewise
        (ValueError if some λ_kw would not stay positive)."""
        k = check_component(k, len(state["lam_sum"]))
        idx, counts = self._doc(x)
        w = check_weight(w)
        new = state["lam"][k, idx] - w * counts
        if not np.all(new > 0):
            raise ValueError("the removal would leave a non-positive Dirichlet parameter: the "
                             "document was not absorbed into this component with this weight")
        state["lam"][k, idx] = new
        state["lam_sum"][k] -= w * counts.sum()

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
        """The non-zero words of one document and their counts (non-negative, finite)."""
        Xc = self._docs(x)
        if Xc.shape[0] != 1:
            raise ValueError(f"expected one document, got {Xc.shape[0]}")
        keep = Xc.data != 0
        idx, counts = Xc.indices[keep], Xc.data[keep]
        if not np.all(np.isfinite(counts) & (counts > 0)):
            raise ValueError("word counts must be finite and non-negative")
        return idx, counts
