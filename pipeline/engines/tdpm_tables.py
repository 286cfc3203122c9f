"""tdpm's extra tables in the run directory: samples.parquet (each kept sample's chain, and stay
indicator, per item), chains.parquet (the final sample's chains per epoch of their spans: members,
posterior means and variances of the states, or a text chain's top words), epochs.parquet
(items, alive and occupied chains, births and last members per epoch) and persistence.parquet
(membership stability: per id, appearances, returns, stays and E[ρ_u])."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from scipy.special import softmax

from bnpmix.algorithms.metrics import contingency
from bnpmix.algorithms.tdpm.gibbs import alive_per_epoch
from bnpmix.algorithms.tdpm.model import TemporalMixture
from bnpmix.algorithms.tdpm.persistence import Persistence

from ..labels import labels_of


def samples_table(items: np.ndarray, kept: list[np.ndarray],
                  stays: list[np.ndarray] | None = None) -> pa.Table:
    """One row per (kept sample, item): the item, the sample's index, its chain and whether it
    stays (membership stability)."""
    N, S = len(items), len(kept)
    samples = {"item": np.tile(items, S), "sample": np.repeat(np.arange(S, dtype=np.int32), N),
               "chain": np.concatenate(kept)}
    if stays is not None:
        samples["stay"] = np.concatenate(stays)
    return pa.table(samples)


def chains_table(model: TemporalMixture, vocab: list[str] | None = None) -> pa.Table:
    """One row per (chain, epoch of its span), the chain named as assignments/ names it: the
    members, and the smoothed state's mean and variance (text: the 20 most probable words of
    softmax(φ) and their probabilities)."""
    rows: dict[str, list[np.ndarray]] = {"chain": [], "epoch": [], "time": [], "n": []}
    label = labels_of(model.weights()[0], model.uids, model.uids)  # as assignments/ has
    for j in range(model.K):
        span = np.arange(model.first[j], model.last[j] + 1)
        rows["chain"].append(np.full(len(span), label[j]))
        rows["epoch"].append(span)
        rows["time"].append(model.times[span])
        rows["n"].append(model.counts[span, j])
    chains = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in rows.items()}
    if model.obs.text:
        top = np.argsort(-model.states, axis=1)[:, :20]
        probs = np.take_along_axis(softmax(model.states, axis=1), top, axis=1)
        words = [[vocab[w] for w in row] for row in top] if vocab else top.tolist()
        chains["top_words"], chains["top_probs"] = words, probs.tolist()
    else:
        for d in range(model.states.shape[1]):
            chains[f"state_{d}"] = model.states[:, d]
        for d in range(model.states.shape[1]):
            chains[f"state_var_{d}"] = model.state_vars[:, d]
    return pa.table(chains)


def epochs_table(model: TemporalMixture, kept: list[np.ndarray], epochs: np.ndarray,
                 window: int) -> pa.Table:
    """One row per epoch: its time and items, the chains alive in the final sample and on
    average over the kept ones, those with members, born, and ending there."""
    T = len(model.times)
    alive_kept = np.mean([alive_per_epoch(k, epochs, T, window) for k in kept], axis=0)
    return pa.table({"epoch": np.arange(T), "time": model.times,
                     "items": np.bincount(epochs, minlength=T),
                     "alive": alive_per_epoch(model.labels, epochs, T, window),
                     "alive_mean": alive_kept, "occupied": (model.counts > 0).sum(1),
                     "born": np.bincount(model.first, minlength=T),
                     "last_members": np.bincount(model.last, minlength=T)})


def persistence_table(P: Persistence, ids: np.ndarray, stay_rate: np.ndarray,
                      rho: np.ndarray) -> pa.Table:
    """Per persistent id: appearances, returns, stays (``stay_rate``: the mean over kept
    samples) and the posterior mean of its probability of staying, E[ρ_u] (``rho``)."""
    _, first = np.unique(P.ids, return_index=True)
    return pa.table({"id": ids[first],
                     "appearances": np.bincount(P.ids, minlength=P.n_ids),
                     "returns": np.bincount(P.ids, weights=P.prev >= 0,
                                            minlength=P.n_ids).astype(np.int64),
                     "stays": np.bincount(P.ids, weights=stay_rate, minlength=P.n_ids),
                     "rho_mean": rho})


def stability(final: np.ndarray, kept: list[np.ndarray]) -> np.ndarray:
    """Per item, the fraction of kept samples in which its chain maps onto its final chain (each
    sample's chain mapped to the final chain it shares most items with)."""
    hits = np.zeros(len(final))
    finals = np.unique(final)
    for z in kept:
        _, zi = np.unique(z, return_inverse=True)
        hits += finals[contingency(z, final).argmax(axis=1)][zi] == final
    return hits / len(kept)
