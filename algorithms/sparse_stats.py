"""Statistics sparse in (component, word): a batch's bag-of-words counts per component.

With text the responsibilities are nearly one-hot: a 90-word abstract's log-likelihoods under
different topics differ by hundreds of nats, and once r_nk < ε (Mult.responsibility_floor) is
set to 0, wc = Rᵀ X has non-zeros only where a word meets a component that some document
holding it belongs to (a PubMed-shaped batch: about 1 % of K × V). Such statistics are
scipy.sparse CSR matrices (K, V). Sums of sparse statistics stay sparse; anything dense they
meet makes the result dense. Rows are components, and select, fold (a merge) and stack (an
insert) like the rows of an array, so a Summary and its moves treat both kinds alike through
the functions below.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

Stat = np.ndarray | sp.csr_matrix


def canonical(v: sp.spmatrix) -> sp.csr_matrix:
    """CSR with sorted indices and no duplicates: the form every sparse statistic keeps, so
    no later reader sorts its arrays in place (scipy's products leave indices unsorted)."""
    v = sp.csr_matrix(v)
    v.sum_duplicates()
    return v


def dense(v: Stat) -> np.ndarray:
    """``v`` as an ndarray."""
    return v.toarray() if sp.issparse(v) else np.asarray(v)


def add(a: Stat, b: Stat, sign: float = 1.0) -> Stat:
    """a + sign · b: sparse when both are, else dense (a is never modified)."""
    if sp.issparse(a) and sp.issparse(b):
        return canonical(a + b if sign == 1.0 else a + sign * b)
    if sp.issparse(b):
        out = np.array(a, dtype=float)
        add_into(out, b, sign)
        return out
    if sp.issparse(a):
        out = sign * np.asarray(b, dtype=float)
        add_into(out, a)
        return out
    return np.asarray(a) + sign * np.asarray(b)


def add_into(out: np.ndarray, b: Stat, sign: float = 1.0) -> None:
    """out += sign · b in place: O(nnz(b)) for a sparse b."""
    if sp.issparse(b):
        if out.shape != b.shape:
            raise ValueError(f"shapes differ: {out.shape} vs {b.shape}")
        if not out.flags.c_contiguous:
            raise ValueError("add_into writes through a flat view: out must be C-contiguous")
        out.reshape(-1)[flat_index(b)] += sign * b.data  # canonical: each entry once
    else:
        out += sign * b


def entries(v: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of a canonical CSR matrix's stored entries, in storage order."""
    if not v.has_canonical_format:
        raise ValueError("sparse statistics must be canonical (sparse_stats.canonical)")
    return np.repeat(np.arange(v.shape[0]), np.diff(v.indptr)), v.indices.astype(np.int64)


def flat_index(v: sp.csr_matrix) -> np.ndarray:
    """Positions of a canonical CSR matrix's stored entries in its C-ordered dense array."""
    rows, cols = entries(v)
    rows *= v.shape[1]
    rows += cols
    return rows


def pattern(v: Stat) -> sp.csr_matrix | None:
    """Where a sparse statistic can be non-zero, as a 0/1 CSR matrix (None: dense)."""
    if not sp.issparse(v):
        return None
    v = canonical(v)
    return sp.csr_matrix((np.ones(len(v.data)), v.indices.copy(), v.indptr.copy()),
                         shape=v.shape)


def rows(v: Stat, keep: np.ndarray) -> Stat:
    """Rows ``keep`` (an index array or a mask)."""
    return canonical(v[keep]) if sp.issparse(v) else v[keep]


def fold(v: Stat, keep: int, gone: list[int]) -> Stat:
    """Row ``keep`` plus the rows ``gone`` (a merge: r_keep <- r_keep + Σ r_gone), in a copy."""
    if sp.issparse(v):
        K = v.shape[0]
        rows = np.concatenate([np.arange(K), np.full(len(gone), keep)])
        cols = np.concatenate([np.arange(K), np.asarray(gone, dtype=np.int64)])
        fold_ = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(K, K))
        fold_.sort_indices()  # each row's terms summed in column order
        return canonical(fold_ @ v)
    out = v.copy()
    out[keep] += out[gone].sum(axis=0)
    return out


def folded_rows(v: Stat, keep: int, gone: list[int], rows_kept: np.ndarray) -> Stat:
    """rows(fold(v, keep, gone), rows_kept) (``rows_kept``: a mask holding ``keep``), with
    one copy of a dense v: the kept rows, then row keep plus the rows gone."""
    if sp.issparse(v):
        return rows(fold(v, keep, gone), rows_kept)
    out = v[rows_kept]
    out[np.count_nonzero(rows_kept[:keep])] += v[gone].sum(axis=0)
    return out


def stack(a: Stat, b: Stat) -> Stat:
    """The rows of a, then the rows of b (an insert of components)."""
    if sp.issparse(a) and sp.issparse(b):
        return canonical(sp.vstack([a, b], format="csr"))
    return np.concatenate([dense(a), dense(b)])


def zero_rows(v: Stat, n: int) -> Stat:
    """n rows of zeros of v's kind and width."""
    if sp.issparse(v):
        return sp.csr_matrix((n, v.shape[1]))
    return np.zeros((n, *np.shape(v)[1:]))


def place(out: np.ndarray, at: np.ndarray, v: Stat) -> None:
    """out[at] = v, for a dense ``out``."""
    out[at] = dense(v)


def nbytes(v: Stat) -> int:
    if sp.issparse(v):
        return int(v.data.nbytes + v.indices.nbytes + v.indptr.nbytes)
    return int(np.asarray(v).nbytes)


def to_arrays(name: str, v: Stat) -> dict[str, np.ndarray]:
    """Named arrays of a statistic: ``name`` (an array, or a sparse one's values) and for a
    sparse one ``name@indices``, ``name@indptr``, ``name@shape``."""
    if sp.issparse(v):
        v = sp.csr_matrix(v)
        return {name: v.data, f"{name}@indices": v.indices, f"{name}@indptr": v.indptr,
                f"{name}@shape": np.array(v.shape, dtype=np.int64)}
    return {name: np.asarray(v)}


def from_arrays(arrays: dict[str, np.ndarray], name: str) -> Stat:
    """The inverse of to_arrays."""
    if f"{name}@indptr" in arrays:
        shape = tuple(int(s) for s in arrays[f"{name}@shape"])
        return canonical(sp.csr_matrix((np.asarray(arrays[name]),
                                        np.asarray(arrays[f"{name}@indices"]),
                                        np.asarray(arrays[f"{name}@indptr"])), shape=shape))
    return np.asarray(arrays[name])
