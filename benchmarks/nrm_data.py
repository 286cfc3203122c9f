"""Synthetic document corpora for the streaming ADF/EP NRM-mixture experiments of Tank, Foti &
Fox (2015), Sec. 4: the 8x8 bars (4.1), Pitman-Yor power-law clusters (4.2) and a stand-in for
the KOS blog corpus (4.3). Pure numpy; every generator is deterministic given ``seed``.

Words are drawn token by token, vectorised over the whole corpus: each token's word is the
inverse CDF of its document's topic at a uniform draw, found with one ``searchsorted`` in the
concatenated, offset CDFs of all topics; counts are then summed into a CSR matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from bnpmix.storage import Manifest

CHUNK_DOCS = 20_000  # documents sampled at once (bounds the token arrays' memory)


@dataclass
class Docs:
    """A corpus: ``X`` (n, V) CSR float64 word counts, ``labels`` (n,) int64 true clusters,
    ``topics`` (K_true, V) float64 true word distributions (rows sum to 1)."""

    X: sp.csr_matrix
    labels: np.ndarray
    topics: np.ndarray


def sample_counts(rng: np.random.Generator, topics: np.ndarray, labels: np.ndarray,
                  lengths: np.ndarray) -> sp.csr_matrix:
    """Document i: ``lengths[i]`` tokens iid from ``topics[labels[i]]`` (so x_i ~ Mult)."""
    K, V = topics.shape
    cdf = np.cumsum(topics, axis=1)
    cdf[:, -1] = 1.0  # rounding: the last word closes every row
    flat = (cdf + np.arange(K)[:, None]).ravel()  # row k spans (k, k + 1]
    blocks = []
    for s in range(0, len(labels), CHUNK_DOCS):
        lab, ln = labels[s:s + CHUNK_DOCS], lengths[s:s + CHUNK_DOCS]
        doc = np.repeat(np.arange(len(lab), dtype=np.int32), ln)
        k = np.repeat(lab, ln)
        # side="right" skips zero-probability words (equal CDF values)
        word = np.searchsorted(flat, k + rng.random(len(k)), side="right") - k * V
        np.minimum(word, V - 1, out=word)  # guard k + u rounding up to k + 1
        X = sp.csr_matrix((np.ones(len(doc)), (doc, word)), shape=(len(lab), V))
        X.sum_duplicates()
        blocks.append(X)
    return sp.csr_matrix(sp.vstack(blocks, format="csr"))


def bars(seed: int, n: int = 200, length: int = 50, baseline: float = 0.05) -> Docs:
    """Sec. 4.1: 8x8 images as documents over 64 pixel-words (word 8r + c is pixel (r, c)).

    16 clusters: clusters 0-7 are the horizontal bars (row r), 8-15 the vertical bars (column
    c); topic = (bar indicator + ``baseline``) normalised. z ~ Uniform{0..15},
    x ~ Mult(``length``, topic_z).
    """
    rng = np.random.default_rng(seed)
    grid = np.arange(64).reshape(8, 8)
    ind = np.zeros((16, 64))
    for r in range(8):
        ind[r, grid[r, :]] = 1.0
        ind[8 + r, grid[:, r]] = 1.0
    topics = (ind + baseline) / (ind + baseline).sum(axis=1, keepdims=True)
    labels = rng.integers(0, 16, size=n).astype(np.int64)
    return Docs(sample_counts(rng, topics, labels, np.full(n, length)), labels, topics)


def pitman_yor_labels(rng: np.random.Generator, n: int, discount: float,
                      concentration: float) -> np.ndarray:
    """Sequential Pitman-Yor CRP: customer i (0-based) joins table k w.p. (n_k - d)/(i + c)
    and a new table w.p. (c + d K)/(i + c). Tables are numbered in order of opening."""
    d, c = discount, concentration
    counts = np.zeros(n, dtype=np.int64)
    labels = np.empty(n, dtype=np.int64)
    u = rng.random(n)
    K = 0
    for i in range(n):
        x = u[i] * (i + c) - (c + d * K)
        if x < 0:  # new table (always for i = 0)
            k, K = K, K + 1
        else:
            cs = np.cumsum(counts[:K] - d)
            k = min(int(np.searchsorted(cs, x, side="right")), K - 1)
        counts[k] += 1
        labels[i] = k
    return labels


def power_law(seed: int, n: int = 10_000, V: int = 1000, length: int = 100,
              discount: float = 0.75, concentration: float = 1.0,
              dirichlet: float = 0.75) -> Docs:
    """Sec. 4.2: a Pitman-Yor(``discount``, ``concentration``) mixture of multinomials.

    Labels come from the sequential PY CRP (:func:`pitman_yor_labels`), then are shuffled (the
    stream order carries no information). One topic per occupied table ~ Dirichlet(``dirichlet``
    1_V) (the paper's 0.75, chosen "to ensure overlap between clusters"). Document length
    ~ 1 + Poisson(``length`` - 1); x ~ Mult(length, topic_z).

    The paper gives neither V nor the document length; V = 1000 and 100 tokens per document
    make each topic identifiable from a handful of documents while a singleton stays ambiguous.
    With d = 0.75, c = 1 the number of clusters grows like n^0.75: exactly E K_n =
    (c/d) [(c + d)^(n) / c^(n) - 1] (rising factorials), 1,450 for n = 10,000 and 257 for
    n = 1,000; about three quarters of the clusters are singletons. K_n / n^d tends to a random
    limit, so K varies a lot between seeds (seeds 0-7 at n = 10,000: 592 to 2,181).
    """
    rng = np.random.default_rng(seed)
    labels = rng.permutation(pitman_yor_labels(rng, n, discount, concentration))
    K = int(labels.max()) + 1
    topics = rng.dirichlet(np.full(V, dirichlet), size=K)
    lengths = 1 + rng.poisson(length - 1, size=n)
    return Docs(sample_counts(rng, topics, labels, lengths), labels, topics)


def kos_like(seed: int, n: int = 3430, V: int = 6906, K: int = 60, mean_length: int = 136,
             concentration: float = 10.0, background_weight: float = 0.5,
             specific: float = 0.05, zipf: float = 1.0, dispersion: float = 2.0,
             discount: float = 0.0) -> Docs:
    """Sec. 4.3 stand-in: a corpus shaped like KOS (3,430 docs, V = 6,906, 467,714 tokens, so
    about 136 tokens a document). Exactly:

    * background b_w proportional to (w + 1)^-``zipf``: word id w has popularity rank w
      (Zipf-like frequencies shared by all topics);
    * topic_k = ``background_weight`` b + (1 - ``background_weight``) s_k with
      s_k ~ Dirichlet(``specific`` 1_V) (sparse, topic-specific words), k = 0..K-1;
    * cluster weights pi ~ GEM(``discount``, ``concentration``) stick-breaking truncated at K
      (v_k ~ Beta(1 - d, c + k d), k = 1..K, the last stick takes the rest: DP-like sizes for
      d = 0, the default; a power-law tail for d > 0); z_i ~ Categorical(pi), so some of the K
      topics may have no document;
    * length ~ max(1, NegBinomial(r = ``dispersion``, mean = ``mean_length``)) (coefficient of
      variation about 1/sqrt(r)); x_i ~ Mult(length_i, topic_{z_i}).
    """
    rng = np.random.default_rng(seed)
    background = (np.arange(1, V + 1, dtype=np.float64)) ** -zipf
    background /= background.sum()
    spec = rng.dirichlet(np.full(V, specific), size=K)
    topics = background_weight * background + (1.0 - background_weight) * spec
    topics /= topics.sum(axis=1, keepdims=True)
    v = rng.beta(1.0 - discount, concentration + discount * np.arange(1, K + 1))
    v[-1] = 1.0
    weights = v * np.concatenate([[1.0], np.cumprod(1.0 - v[:-1])])
    labels = rng.choice(K, size=n, p=weights / weights.sum()).astype(np.int64)
    p = dispersion / (dispersion + mean_length)
    lengths = np.maximum(1, rng.negative_binomial(dispersion, p, size=n))
    return Docs(sample_counts(rng, topics, labels, lengths), labels, topics)


def write_corpus(docs: Docs, path: str | Path, partition_size: int, *,
                 overwrite: bool = False) -> Manifest:
    """Write ``docs`` as a bnpmix bag-of-words corpus of ``partition_size`` documents a
    partition, with the true labels in column ``label`` (the corpus format's only name for
    them: ``bnpmix evaluate RUN CORPUS label``); returns its Manifest.

    Uses the writer the docword ingester uses (``ingest_docword`` itself takes no extra
    columns, so a docword file could not carry the labels); words are named w0, w1, ...
    """
    from bnpmix.storage import Manifest
    from bnpmix.storage.writer import new_corpus

    X = sp.csr_matrix(docs.X)
    X.sort_indices()
    V = X.shape[1]
    manifest = Manifest(kind="bow", dim=V, dtype="int32", columns=("label",),
                        vocab=[f"w{j}" for j in range(V)])
    with new_corpus(path, manifest, overwrite=overwrite) as writer:
        for s in range(0, X.shape[0], partition_size):
            B = X[s:s + partition_size]
            writer.add_bow(B.indptr, B.indices, B.data,
                           {"label": docs.labels[s:s + partition_size]})
    return manifest
