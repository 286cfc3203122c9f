"""Merges of ADF/EP clusters accepted by the model's evidence (docs/theory/nrm.rst): ADF's one
greedy pass leaves many small, redundant clusters; after a pass, pairs are pooled while the log
evidence of the partition rises.

The objective, for clusters with soft counts S_k (Σ_k S_k = N) and pooled statistics, is the log
joint of the partition and the data given U = u for a generalized-gamma NRM (Lévy intensity
a/Γ(1−σ) s^(−1−σ) e^(−τ s)), whose exchangeable partition function given u is proportional to
Π_k a Γ(S_k − σ)/Γ(1 − σ) (u + τ)^(σ − S_k) (James, Lijoi & Prünster 2009):

    F = Σ_k [log w_new + log Γ(S_k − σ) − log Γ(1 − σ)] + log M(S) + const(N, u),

with w_new = a (u + τ)^σ the predictive rule's new-cluster weight (alloc/nrm.py) and log M(S) the
observation model's evidence of the summaries (ObsModel.log_evidence, Eq. 12). For the DP (σ = 0)
w_new = a and no U enters: F is the exact log joint of the partition (Ewens) and the data. For
σ > 0, u is held at the run's Û (the point the predictive rule uses): the move compares the two
partitions' joints with U = Û, not the joints with U integrated out. Pooling clusters j and k
changes F by

    log Γ(S_j + S_k − σ) − log Γ(S_j − σ) − log Γ(S_k − σ) + log Γ(1 − σ) − log w_new
    + log M(S with k pooled into j) − log M(S),

the last difference from ObsModel.merge_gains (exact for shared parameters too). The soft counts
make Γ's arguments real; with hard responsibilities every term is exact. A tiny cluster's absorb
into its best partner is one of these pair moves.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from .obs.base import ObsModel
from .summary import Pool, Summary


def partition_gains(S: np.ndarray, a: np.ndarray, b: np.ndarray, sigma: float,
                    log_w_new: float) -> np.ndarray:
    """The partition prior's change when b_i is pooled into a_i, given U:
    log Γ(S_a + S_b − σ) − log Γ(S_a − σ) − log Γ(S_b − σ) + log Γ(1 − σ) − log w_new
    (−inf where a cluster's S ≤ σ: it has no weight to pool)."""
    Sa, Sb = S[a] - sigma, S[b] - sigma
    ok = (Sa > 0) & (Sb > 0)
    out = np.full(len(a), -np.inf)
    out[ok] = (gammaln(Sa[ok] + Sb[ok] + sigma) - gammaln(Sa[ok]) - gammaln(Sb[ok])
               + gammaln(1.0 - sigma) - log_w_new)
    return out


def log_joint(obs: ObsModel, sigma: float, log_w_new: float, total: Summary) -> float:
    """F = Σ_k [log w_new + log Γ(S_k − σ) − log Γ(1 − σ)] + log M(S) (module docstring), up to
    a constant in N and u."""
    S = total.N - sigma
    prior = total.K * (log_w_new - gammaln(1.0 - sigma)) + gammaln(S).sum()
    return float(prior + obs.log_evidence(total.N, total.obs_stats))


def pair_gains(obs: ObsModel, sigma: float, log_w_new: float, total: Summary,
               a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """F(b_i pooled into a_i) − F for each pair of positions (a_i, b_i)."""
    if len(a) == 0:
        return np.zeros(0)
    return (partition_gains(total.N, a, b, sigma, log_w_new)
            + obs.merge_gains(total.N, total.obs_stats, a, b))


def evidence_merges(obs: ObsModel, sigma: float, log_w_new: float, total: Summary
                    ) -> list[Pool]:
    """Greedy best pair first: pool the pair with the largest F gain while it is positive, the
    heavier cluster keeping its id, until no pair raises F. Returns the moves in order (apply
    them to ``total`` in that order). After a pool only the kept cluster's pairs are scored
    again, unless the components share a parameter (every pair's gain changes then)."""
    moves: list[Pool] = []
    shared = bool(obs.shared_shapes())
    G = _gain_matrix(obs, sigma, log_w_new, total)
    while total.K > 1:
        i, j = np.unravel_index(int(np.argmax(G)), G.shape)
        if not G[i, j] > 0:
            break
        keep, gone = (i, j) if total.N[i] >= total.N[j] else (j, i)
        move = Pool(int(total.uids[keep]), int(total.uids[gone]))
        moves.append(move)
        total = move.apply(total)
        if shared:
            G = _gain_matrix(obs, sigma, log_w_new, total)
            continue
        G = np.delete(np.delete(G, gone, 0), gone, 1)
        k = total.index(move.a)
        others = np.delete(np.arange(total.K), k)
        row = np.full(total.K, -np.inf)
        row[others] = pair_gains(obs, sigma, log_w_new, total, np.full(len(others), k), others)
        G[k, :], G[:, k] = row, row
    return moves


def _gain_matrix(obs: ObsModel, sigma: float, log_w_new: float, total: Summary) -> np.ndarray:
    """The symmetric K × K matrix of pair gains, −inf on the diagonal."""
    a, b = np.triu_indices(total.K, k=1)
    G = np.full((total.K, total.K), -np.inf)
    G[a, b] = G[b, a] = pair_gains(obs, sigma, log_w_new, total, a, b)
    return G
