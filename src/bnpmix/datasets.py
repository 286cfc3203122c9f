"""Synthetic data sets generated in code (nothing is downloaded).

``toy_patches`` is the data of Hughes & Sudderth (2013, Sec. 4.1): zero-mean 5x5 image patches
(D = 25) from 8 equally common Gaussian components, each with a strong edge. Our construction:
component k has covariance ``C_k = a² e_k e_kᵀ + b² G + c² I`` where ``e_k`` is a unit-norm step
edge (+1 on one side of a line through the patch, -1 on the other, 0 on it), ``G`` a smooth
background (squared-exponential kernel over pixel distance, length scale 1.5 pixels) shared by all
components, and ``c² I`` pixel noise. The 8 edges: vertical and horizontal lines at two offsets
each, and the two diagonals at two offsets each. The sign of an edge is irrelevant with zero mean.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PATCH = 5
TOY_PATCHES_OBS = "zm-gauss"  # the model the toy patches are drawn from: zero-mean Gaussians


def _edge_templates() -> np.ndarray:
    """The 8 unit-norm step edges on a 5x5 grid, as rows of an (8, 25) array."""
    r, c = np.mgrid[0:PATCH, 0:PATCH].astype(float)
    signed = [c - 1.5, c - 2.5, r - 1.5, r - 2.5,
              r + c - 3.5, r + c - 4.5, r - c - 0.5, r - c + 0.5]
    edges = np.array([np.sign(s).ravel() for s in signed])
    return edges / np.linalg.norm(edges, axis=1, keepdims=True)


def toy_patch_covariances(edge: float = 4.0, smooth: float = 0.2, noise: float = 0.1) -> np.ndarray:
    """The 8 true covariances (8, 25, 25): ``edge² e eᵀ + smooth² G + noise² I``."""
    r, c = np.mgrid[0:PATCH, 0:PATCH]
    pix = np.stack([r.ravel(), c.ravel()], axis=1).astype(float)
    d2 = ((pix[:, None, :] - pix[None, :, :]) ** 2).sum(-1)
    G = np.exp(-d2 / (2 * 1.5**2))
    E = _edge_templates()
    base = smooth**2 * G + noise**2 * np.eye(PATCH * PATCH)
    return np.array([edge**2 * np.outer(e, e) + base for e in E])


def toy_patches(n: int = 100_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` patches (n, 25) and their true component labels, 8 components in equal proportion."""
    rng = np.random.default_rng(seed)
    covs = toy_patch_covariances()
    labels = rng.integers(0, len(covs), size=n)
    chol = np.linalg.cholesky(covs)
    z = rng.standard_normal((n, PATCH * PATCH))
    X = np.einsum("nij,nj->ni", chol[labels], z)
    return X, labels


def gaussian_clusters(n: int = 200_000, D: int = 10, separated: int = 20, overlapping: int = 5,
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Full-mean Gaussian clusters of equal size: ``separated`` clusters whose means are drawn
    N(0, 15² I) (far apart relative to their unit-scale covariances) and ``overlapping`` ones
    whose means lie within N(c, 1.2² I) of one shared centre c, so their bulks overlap.
    Covariances are random: A Aᵀ / D + 0.3 I with A standard normal (D x D)."""
    rng = np.random.default_rng(seed)
    K = separated + overlapping
    means = np.concatenate([rng.normal(0, 15.0, (separated, D)),
                            rng.normal(0, 15.0, D) + rng.normal(0, 1.2, (overlapping, D))])
    A = rng.normal(size=(K, D, D))
    covs = A @ A.transpose(0, 2, 1) / D + 0.3 * np.eye(D)
    labels = rng.permutation(np.arange(n) % K)
    chol = np.linalg.cholesky(covs)
    X = means[labels] + np.einsum("nij,nj->ni", chol[labels], rng.standard_normal((n, D)))
    return X, labels


def overlapping_covariances(n: int = 25_000, D: int = 25, K: int = 16, spread: float = 0.6,
                            seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """K classes (labels uniform) whose means lie within N(0, spread² I) of each other, each
    with its own random anisotropic covariance (a random rotation, variances log-uniform over
    [0.05, 4]): they overlap in every axis-aligned view and are told apart by their
    correlations. At the defaults the true parameters' assignments have ARI 0.998 and the true
    means with only the covariances' diagonals 0.80 (the data set of
    benchmarks/acceptance/auto_obs.py)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0, spread, (K, D))
    covs = []
    for _ in range(K):
        Q, _ = np.linalg.qr(rng.normal(size=(D, D)))
        covs.append((Q * np.exp(rng.uniform(np.log(0.05), np.log(4.0), D))) @ Q.T)
    labels = rng.integers(0, K, n)
    chol = np.linalg.cholesky(np.array(covs))
    X = means[labels] + np.einsum("nij,nj->ni", chol[labels], rng.normal(size=(n, D)))
    return X, labels


def bag_of_words_topics(n_docs: int = 20_000, V: int = 2_000, K: int = 20, min_len: int = 50,
                        max_len: int = 200, seed: int = 0):
    """Documents from a mixture of K multinomial topics (one topic per document): topics
    θ_k ~ Dir(0.05) over V words; lengths uniform in [min_len, max_len]; equal topic weights.
    Returns (CSR counts (n_docs, V), labels, topics (K, V))."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.05), size=K)
    labels = rng.integers(0, K, n_docs)
    lengths = rng.integers(min_len, max_len + 1, n_docs)
    blocks = [sp.csr_matrix(rng.multinomial(lengths[s:s + 1000], topics[labels[s:s + 1000]]))
              for s in range(0, n_docs, 1000)]
    return sp.vstack(blocks, format="csr").astype(np.float64), labels, topics


def tdpm_gaussian(n_epochs: int = 30, per_epoch: int = 100, alpha: float = 2.5, window: int = 1,
                  decay: float = 0.8, birth_var: float = 10.0, drift_var: float = 0.1,
                  noise_var: float = 0.1, dim: int = 2, seed: int = 0
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian chains of the temporal DP mixture (Ahmed & Xing 2008, Sec. 4.2, 6, 7): items of
    epoch t seated in order by the recurrent CRP (chain k ∝ m_{k,t} + n_{k,t}, new ∝ α, with
    m_{k,t} = Σ_{h=1}^{W} e^{−h/λ} n_{k,t−h}); a chain is born with φ ~ N(0, σI), walks
    φ_t = φ_{t−1} + N(0, ρI) at every epoch it is alive (m_{k,t} > 0 or n_{k,t} > 0, with or
    without items), and x ~ N(φ_{k,t}, ΣI). σ, ρ, Σ are variances: ``birth_var``, ``drift_var``,
    ``noise_var``; W = ``window``, λ = ``decay`` (``inf``: no decay).

    Returns (X (N, dim), epochs (N,), labels (N,), states (K, n_epochs, dim)) with
    N = n_epochs · per_epoch, items in epoch order and, within an epoch, in seating order. Labels
    are 0..K−1 in order of birth (first epoch, then first item), i.e. canonical as
    ``bnpmix.algorithms.tdpm.gibbs.relabel`` numbers them. ``states[k, t]`` is chain k's true
    state at epoch t where the chain is alive (its birth epoch to its last item's epoch + W,
    within the horizon) and NaN elsewhere."""
    return _tdpm(n_epochs, per_epoch, alpha, window, decay, birth_var, drift_var, noise_var, dim,
                 seed, None)[:4]


def tdpm_persistent(stickiness: np.ndarray, n_epochs: int = 20, per_epoch: int = 60,
                    **kwargs: Any) -> tuple[np.ndarray, ...]:
    """``tdpm_gaussian`` (same keyword parameters) with persistent ids of stickiness ρ_u
    (``stickiness[u]``, membership stability as in ``bnpmix.algorithms.tdpm.persistence``):
    each epoch's items are ``per_epoch`` ids drawn without replacement; a returning id whose
    previous chain is alive at t stays in it with probability ρ_u, the stayers seated first.
    Returns (X, epochs, labels, states, ids, stays), ``stays`` whether each item stayed."""
    return _tdpm(n_epochs, per_epoch, **({"alpha": 2.5, "window": 1, "decay": 0.8,
                                          "birth_var": 10.0, "drift_var": 0.1,
                                          "noise_var": 0.1, "dim": 2, "seed": 0} | kwargs),
                 stickiness=np.asarray(stickiness, float))


def _tdpm(n_epochs: int, per_epoch: int, alpha: float, window: int, decay: float,
          birth_var: float, drift_var: float, noise_var: float, dim: int, seed: int,
          stickiness: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """The simulation behind ``tdpm_gaussian`` and ``tdpm_persistent``."""
    from bnpmix.algorithms.alloc.rcrp import decay_weights

    rng = np.random.default_rng(seed)
    w = decay_weights(window, decay)
    T, N = int(n_epochs), int(n_epochs) * int(per_epoch)
    X = np.empty((N, dim))
    epochs = np.repeat(np.arange(T), per_epoch)
    labels = np.empty(N, dtype=np.int64)
    ids = np.arange(N)
    stays = np.zeros(N, dtype=bool)
    where: dict[int, int] = {}          # per id: the chain of its latest appearance
    if stickiness is not None and len(stickiness) < per_epoch:
        raise ValueError(f"per_epoch = {per_epoch} needs at least as many ids, not "
                         f"{len(stickiness)}")
    counts: list[np.ndarray] = []       # per epoch: items per chain (chains 0..K_t − 1)
    phi: list[list[np.ndarray]] = []   # per chain: its states at its alive epochs, in order
    first: list[int] = []              # per chain: birth epoch
    pos = 0
    for t in range(T):
        cand, weights = _inherited(phi, counts, w, t, drift_var, rng)
        stayed: list[tuple[int, int]] = []
        if stickiness is not None:                   # the ids; stayers sit first
            stayed, ids[pos:pos + per_epoch] = _stayers(stickiness, per_epoch, where, cand, rng)
        for r in range(per_epoch):
            total = float(np.sum(weights))
            u = rng.random() * (total + alpha)
            if r < len(stayed):
                k = stayed[r][1]
                j = cand.index(k)
                stays[pos] = True
            elif u < total:
                j = min(int(np.searchsorted(np.cumsum(weights), u, side="right")),
                        len(weights) - 1)
                k = cand[j]
            else:                                    # a new chain, born at t
                k, j = len(phi), len(cand)
                phi.append([np.sqrt(birth_var) * rng.standard_normal(dim)])
                first.append(t)
                cand.append(k)
                weights.append(0.0)
            weights[j] += 1.0
            labels[pos] = k
            where[int(ids[pos])] = k
            X[pos] = phi[k][-1] + np.sqrt(noise_var) * rng.standard_normal(dim)
            pos += 1
        n_t = np.zeros(len(phi), dtype=np.int64)
        np.add.at(n_t, labels[pos - per_epoch:pos], 1)
        counts.append(n_t)
    states = np.full((len(phi), T, dim), np.nan)
    for k, path in enumerate(phi):
        states[k, first[k]:first[k] + len(path)] = np.array(path)
    return X, epochs, labels, states, ids, stays


def _inherited(phi: list[list[np.ndarray]], counts: list[np.ndarray], w: np.ndarray, t: int,
               drift_var: float, rng: np.random.Generator) -> tuple[list[int], list[float]]:
    """The chains alive at epoch t (m_{k,t} > 0, Eq. 4.4's pseudo-counts from the W epochs
    before), each moved one step of its walk, and their weights m_{k,t}."""
    m = np.zeros(len(phi))
    for h, weight in enumerate(w, start=1):
        if t - h >= 0:
            m[:len(counts[t - h])] += weight * counts[t - h]
    inherited = np.flatnonzero(m > 0)
    for k in inherited:                          # alive at t: one step of the walk
        phi[k].append(phi[k][-1] + np.sqrt(drift_var) * rng.standard_normal(len(phi[k][-1])))
    return [int(k) for k in inherited], list(m[inherited])


def _stayers(stickiness: np.ndarray, per_epoch: int, where: dict[int, int], cand: list[int],
             rng: np.random.Generator) -> tuple[list[tuple[int, int]], list[int]]:
    """Epoch t's ids: which returning ids stay in their previous chain (id u with probability
    ρ_u when that chain is alive), as (id, chain), and the epoch's ids, stayers first."""
    present = rng.permutation(len(stickiness))[:per_epoch]
    back = [int(v) for v in present if where.get(int(v), -1) in cand]
    stayed = [(v, where[v]) for v in back if rng.random() < stickiness[v]]
    movers = [int(v) for v in present if v not in {s for s, _ in stayed}]
    return stayed, [s for s, _ in stayed] + movers
