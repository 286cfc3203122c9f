"""Merge moves that optimise the full-data objective (Hughes & Sudderth 2013, Sec. 3.2)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..alloc import VariationalAllocation
from ..mixture import optimal_elbo
from ..obs.base import ObsModel
from ..summary import Merge, Summary


@dataclass(frozen=True)
class MergeConfig:
    """Pairs to plan per lap (all pairs up to ``max_pairs``) and merge attempts per lap."""

    max_pairs: int = field(default=5000, metadata={
        "help": "plan all pairs up to this many, else each component's best partners",
        "range": "[0, inf)"})
    partners: int = field(default=10, metadata={
        "help": "partners planned per component beyond max_pairs (Eq. 12 score)",
        "range": "[1, inf)"})
    max_attempts: int = field(default=50, metadata={"help": "merges tried per lap",
                                                     "range": "[0, inf)"})


def merge_scores(obs: ObsModel, S: Summary, pairs: np.ndarray) -> np.ndarray:
    """Eq. 12 for each pair of ids: the change in log evidence when the pair merges
    (ObsModel.merge_gains; log M(S_a + S_b) - log M(S_a) - log M(S_b) for separable models)."""
    if len(pairs) == 0:
        return np.zeros(0)
    return obs.merge_gains(S.N, S.obs_stats, S.positions(pairs[:, 0]), S.positions(pairs[:, 1]))


def plan_pairs(obs: ObsModel, S: Summary, cfg: MergeConfig) -> np.ndarray:
    """Candidate pairs (lo id, hi id) whose merge entropies the next lap records: all pairs when
    there are at most ``max_pairs``, else each component's best ``partners`` by Eq. 12."""
    iu, ju = np.triu_indices(S.K, k=1)
    pairs = np.stack([S.uids[iu], S.uids[ju]], axis=1)
    if len(pairs) <= cfg.max_pairs:
        return _sorted(pairs)
    score = merge_scores(obs, S, pairs)
    end = np.concatenate([iu, ju])  # each pair once under each of its components
    pair = np.tile(np.arange(len(pairs)), 2)
    order = np.lexsort((pair, end))  # by component, then pair order
    bounds = np.searchsorted(end[order], np.arange(S.K + 1))
    keep = np.zeros(len(pairs), bool)
    for k in range(S.K):
        mine = pair[order[bounds[k]:bounds[k + 1]]]
        keep[mine[np.argsort(-score[mine])[: cfg.partners]]] = True
    return _sorted(pairs[keep])


def _sorted(pairs: np.ndarray) -> np.ndarray:
    pairs = np.sort(pairs, axis=1)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def merge_round(obs: ObsModel, alloc: VariationalAllocation, S: Summary, rng: np.random.Generator,
                cfg: MergeConfig) -> tuple[Summary, list[Merge], float]:
    """Several merges after a lap: k_a uniformly among components with untried pairs, k_b with
    probability ∝ exp(Eq. 12 score); accept only if the exact full-data ELBO rises. A component
    touched by an accepted merge takes part in no further merge this round (its pair
    entropies are no longer known). The optimal ELBO after a merge is the current one plus the
    pair's Eq. 12 score (the exact change of log M(S), the observation terms at the optimal
    q(phi)) and the change of the allocation terms and entropy (O(K)); the open pairs' scores
    are computed together, at the start and, unless a pair's gain depends on its two
    components alone (ObsModel.pairwise_gains: the open pairs after a merge are untouched
    ones, their scores unchanged), after each accepted merge. While the attempts left cover
    every open pair (a birth's rounds try them all), the open pairs' allocation and entropy
    changes are computed together too, again after an accepted merge."""
    elbo = optimal_elbo(obs, alloc, S)
    accepted: list[Merge] = []
    untried = np.ones(len(S.pairs), bool)  # S.pairs not tried yet
    score = rest = ids = None
    before = allocation_terms(alloc, S.N)  # S's, for every candidate until one is accepted
    for attempt in range(cfg.max_attempts):
        if not untried.any():
            break
        if score is None:  # every open pair's score in one call
            score = np.zeros(len(S.pairs))
            score[untried] = merge_scores(obs, S, S.pairs[untried])
        if rest is None and cfg.max_attempts - attempt >= untried.sum():
            rest = np.zeros(len(S.pairs))
            rest[untried] = merge_rest_changes(alloc, S, np.flatnonzero(untried), before)
        if ids is None:  # S's pair ids (sorted), each id's place and its untried pairs
            ids, at = np.unique(S.pairs, return_inverse=True)
            at = at.reshape(S.pairs.shape)
            open_pairs = np.bincount(at[untried].ravel(), minlength=len(ids))
        a = int(rng.choice(ids[open_pairs > 0]))  # np.unique(S.pairs[untried])
        mine = np.flatnonzero(untried & (S.pairs == a).any(axis=1))
        p = np.exp(score[mine] - score[mine].max())
        pick = int(mine[rng.choice(len(mine), p=p / p.sum())])
        untried[pick] = False
        open_pairs[at[pick]] -= 1
        change = (rest[pick] if rest is not None
                  else merge_rest_changes(alloc, S, np.array([pick]), before)[0])
        cand_elbo = elbo + score[pick] + change
        if cand_elbo > elbo:
            move = merge_move(S, pick)
            left = ~np.isin(S.pairs, (move.a, move.b)).any(axis=1)  # the merged S's pairs
            S, elbo = move.apply(S), cand_elbo
            accepted.append(move)
            untried = untried[left]
            score = score[left] if obs.pairwise_gains else None
            rest = ids = None
            before = allocation_terms(alloc, S.N)
    return S, accepted, elbo


def merge_move(S: Summary, at: int) -> Merge:
    """The merge of S's planned pair at position ``at``: the component with the larger mass
    (the pair's first on a tie) keeps its id."""
    lo, hi = (int(v) for v in S.pairs[at])
    return Merge(lo, hi) if S.N[S.index(lo)] >= S.N[S.index(hi)] else Merge(hi, lo)


def allocation_terms(alloc: VariationalAllocation, N: np.ndarray) -> float:
    """The allocation terms of Eq. 8 at their global update from the masses N."""
    return alloc.elbo(N, alloc.post(N))


def merge_rest_changes(alloc: VariationalAllocation, S: Summary, at: np.ndarray,
                       before: float | None = None) -> np.ndarray:
    """For S's planned pairs at positions ``at``, each merged as ``merge_move`` merges it: the
    change of the allocation terms of Eq. 8 at their global update, plus the entropy's (the
    gone component's mass joins the kept one's and leaves its place; H_a + H_b becomes the
    pair's merge entropy H_ab, Sec. 3.2). O(K) per pair from the masses alone, the pairs'
    allocation terms in one call (VariationalAllocation.optimal_terms); ``before``: S's
    allocation terms (allocation_terms(alloc, S.N)) when the caller has them."""
    at = np.asarray(at, dtype=np.int64)
    lo, hi = S.positions(S.pairs[at, 0]), S.positions(S.pairs[at, 1])
    flip = S.N[lo] < S.N[hi]
    keep, gone = np.where(flip, hi, lo), np.where(flip, lo, hi)
    rows = np.arange(len(at))
    N = np.repeat(S.N[None, :], len(at), axis=0)
    N[rows, keep] += N[rows, gone]
    merged = N[np.arange(S.K)[None, :] != gone[:, None]].reshape(len(at), S.K - 1)
    before = allocation_terms(alloc, S.N) if before is None else before
    return alloc.optimal_terms(merged) - before + S.Hpair[at] - S.H[keep] - S.H[gone]
