"""The local step and the batch summary: the one way a batch is run, by every engine.

``batch_step`` is a pure function of (batch data, global parameters) -> summary, so the same call
runs in the driver's thread, in a Dask worker or inside a birth's fresh VB run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp, xlogy

from .. import sparse_stats as ss
from ..obs.base import Arrays, Data, ObsModel, stack_rows
from ..summary import Delete, Summary, positions

PAIR_BLOCK = 64  # pairs per block when computing merge entropies (bounds memory at 64 x n)
# below this a responsibility's share of a pair's merge entropy is under 4e-14 nats an item
PAIR_FLOOR = 1e-15
# shared_parts' cost per (item, pair of held components) over the direct path's per (item,
# planned pair): its gathers against contiguous rows (measured 69 ns against 4.4 ns, n = 6,250)
SHARED_COST = 16
# a batch step runs over blocks of items whose n × K × width temporaries (width D, or a CSR
# row's stored entries) hold at most this many entries: 16 MiB each in float64, so a visit's
# memory is a few times its partition, not a few times that per K
BLOCK_ENTRIES = 1 << 21
MIN_BLOCK_ROWS = 1024


@dataclass
class Globals:
    """What a batch step needs of the global parameters: component ids, q(phi), E[log w]."""

    uids: np.ndarray
    post: Arrays
    Elogw: np.ndarray


# E[log w] given to a component no item may join: exp of it minus any log-likelihood is exactly
# 0 in float64, and finite, so r log r = 0 · ABSENT = 0 with no inf or nan anywhere
ABSENT = -1e30


@dataclass(frozen=True)
class Plan:
    """What a lap asks of every local step besides the summary: merge entropies of the planned
    pairs and groups, the rows collected for birth targets (r_nk' > tau, suppl. Eq. 23), the
    summary with each of components ``deletes`` removed (delete moves' alternatives), and
    components ``absent`` that no item may join (births' origins while their newborns are
    adopted)."""

    pairs: np.ndarray | None = None
    groups: np.ndarray | None = None
    targets: tuple[int, ...] = ()
    tau: float = 0.1
    deletes: tuple[int, ...] = ()
    absent: tuple[int, ...] = ()
    # the statistics as ObsModel.stats gives them, not the batch form (Mult: dense K x V, not
    # sparse): a birth's fresh model has K' rows, and its many steps on the same few items
    # pay a sparse product's fixed costs for nothing (the same sums, in the same order)
    dense: bool = False
    # how many rows each target still wants (None: all): a batch returns its first that many
    # of those that qualify, and the count of all of them (BatchResult.qualified), so a
    # target's collection does not ship a partition's rows that its cap drops
    wanted: tuple[int, ...] | None = None


@dataclass
class BatchResult:
    """A batch's summary, for each birth target the rows with r_nk' > tau (suppl. Eq. 23), and
    for each planned deletion how the summary changes without that component."""

    summary: Summary
    collected: dict[int, np.ndarray | sp.csr_matrix] = field(default_factory=dict)
    delete_changes: dict[int, Summary] = field(default_factory=dict)
    qualified: dict[int, int] = field(default_factory=dict)  # per target, rows past tau


def responsibilities(X: Data, obs: ObsModel, g: Globals) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 9: r_nk ∝ exp(E[log w_k] + E[log p(x_n|phi_k)]); returns (R, log R), in log space;
    truncated below the model's responsibility floor."""
    log_r = obs.E_loglik(X, g.post) + g.Elogw
    log_r -= logsumexp_rows(log_r)
    R = np.exp(log_r)
    return truncate(R, log_r, obs.responsibility_floor) if obs.responsibility_floor else (R, log_r)


def logsumexp_rows(A: np.ndarray) -> np.ndarray:
    """log Σ_k exp(A_nk) per row, as a column (n, 1): with m_n the row's maximum, taken c_n
    times, m_n + log c_n + log1p(s_n / c_n), s_n = Σ_{k: A_nk < m_n} exp(A_nk - m_n) (scipy's
    logsumexp separates the maximum the same way since 1.15, and gives these bits; this is
    its finite real 2-d case without its checks and second, unshifted pass). Rows holding a
    non-finite entry go to scipy's."""
    if A.shape[1] == 0 or not np.isfinite(A).all():
        return logsumexp(A, axis=1, keepdims=True)
    top = A.max(axis=1, keepdims=True)
    at_top = np.equal(A, top)
    E = np.exp(A - top)
    E[at_top] = 0.0
    s = E.sum(axis=1, keepdims=True)
    m = at_top.sum(axis=1, keepdims=True, dtype=float)
    np.divide(s, m, out=s, where=s != 0)
    out = np.log1p(s)
    out += np.log(m)
    out += top
    return out


def truncate(R: np.ndarray, log_r: np.ndarray, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """q(z_n) with every r_nk < floor set to 0 and the rest renormalised: a distribution whose
    ELBO is below the exact local step's by KL = -log(1 - δ_n) ≤ K·floor / (1 - K·floor) nats
    for item n, δ_n being the mass dropped; it makes bag-of-words statistics sparse."""
    drop = np.less(R, floor)
    if not drop.any():
        return R, log_r
    R[drop] = 0.0
    kept = R.sum(axis=1, keepdims=True)
    R /= kept
    log_r -= np.log(kept)  # where r_nk = 0 it stays finite: only ever multiplied by r_nk
    return R, log_r


def entropies(R: np.ndarray, log_r: np.ndarray) -> np.ndarray:
    """H_k = -Σ_n r_nk log r_nk (0 log 0 = 0)."""
    return -np.where(R > 0, R * log_r, 0.0).sum(axis=0)


def row_entropies(S: np.ndarray) -> np.ndarray:
    """-Σ_n s_jn log s_jn for each row j of S ≥ 0 (0 log 0 = 0), by numpy's vectorised log and
    one product-sum: about 3x faster than scipy.special.xlogy."""
    logs = np.log(S, out=np.zeros_like(S), where=S > 0)
    return -np.einsum("jn,jn->j", S, logs)


def pair_entropies(R: np.ndarray, H: np.ndarray, uids: np.ndarray,
                   pairs: np.ndarray) -> np.ndarray:
    """H_ab = -Σ_n s_n log s_n, s_n = r_na + r_nb, for each planned pair of ids (Sec. 3.2).
    Where the items hold few components each (R ≥ PAIR_FLOOR sparse, as in any well-separated
    fit), H_a + H_b - C_ab from every item's pairs of held components (shared_parts); otherwise
    directly, pair by pair, over the whole batch: whichever costs less (SHARED_COST)."""
    if len(pairs) == 0:
        return np.zeros(0)
    ia, ib = positions(uids, pairs[:, 0]), positions(uids, pairs[:, 1])
    held = (R >= PAIR_FLOOR).sum(axis=1)
    if SHARED_COST * (held * (held - 1) // 2).sum() <= R.shape[0] * len(pairs):
        return H[ia] + H[ib] - shared_parts(R)[ia, ib]
    RT = np.ascontiguousarray(R.T)  # components' rows: the pairs' gathers read contiguously
    out = np.empty(len(pairs))
    for s in range(0, len(pairs), PAIR_BLOCK):
        out[s:s + PAIR_BLOCK] = row_entropies(RT[ia[s:s + PAIR_BLOCK]] + RT[ib[s:s + PAIR_BLOCK]])
    return out


def shared_parts(R: np.ndarray) -> np.ndarray:
    """C (K, K), symmetric: C_ab = Σ_n c_n, c_n = s_n log s_n - r_na log r_na - r_nb log r_nb
    ≥ 0 (s_n = r_na + r_nb), so that H_ab = H_a + H_b - C_ab; summed over the items where both
    r ≥ PAIR_FLOOR (elsewhere c_n ≤ r_min (1 + ln(1 + 1/r_min)) < 4e-14 nats, r_min the
    smaller). Each item's held components are contiguous in row-major order, so entry i pairs
    with entry i + d of the same item, d = 1, 2, ...; only entries paired at d are tried at
    d + 1: O(Σ_n m_n²) for m_n held components."""
    K = R.shape[1]
    item, comp = np.nonzero(R >= PAIR_FLOOR)  # by item, components increasing within one
    r = R[item, comp]
    rlogr = xlogy(r, r)
    keys, parts = [], []
    i = np.arange(len(item))
    for d in range(1, K):
        # entries with a same-item partner d ahead: a subset of those with one d - 1 ahead
        i = i[i + d < len(item)]
        i = i[item[i + d] == item[i]]
        if not len(i):  # no item holds more than d components
            break
        s = r[i] + r[i + d]
        keys.append(comp[i] * K + comp[i + d])
        parts.append(xlogy(s, s) - rlogr[i] - rlogr[i + d])
    C = np.bincount(np.concatenate(keys or [np.zeros(0, np.int64)]),
                    weights=np.concatenate(parts or [np.zeros(0)]), minlength=K * K)
    C = C.reshape(K, K)
    return C + C.T


def group_entropies(R: np.ndarray, uids: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """H_G = -Σ_n s_nG log s_nG, s_nG = Σ_{k∈G} r_nk, for rows of ids padded with -1: the
    entropy a component would have after absorbing the rest of its group."""
    if len(groups) == 0:
        return np.zeros(0)
    pos = {int(u): i for i, u in enumerate(uids)}
    M = np.zeros((len(uids), len(groups)))
    for j, row in enumerate(groups):
        M[[pos[int(u)] for u in row if u >= 0], j] = 1.0
    return row_entropies(M.T @ R.T)


def summarize(X: Data, obs: ObsModel, R: np.ndarray, log_r: np.ndarray | None,
              uids: np.ndarray, pairs: np.ndarray | None = None,
              groups: np.ndarray | None = None, dense: bool = False) -> Summary:
    """Eq. 7 statistics of a batch (``obs.stats`` when ``dense``, else ``obs.batch_stats``),
    its entropies and the planned pairs' and groups' merge entropies."""
    H = entropies(R, np.log(np.maximum(R, 1e-300)) if log_r is None else log_r)
    stats = obs.stats(X, R) if dense else obs.batch_stats(X, R)
    return assemble(obs, R, R.sum(axis=0), stats, H, uids, pairs, groups)


def assemble(obs: ObsModel, R: np.ndarray, N: np.ndarray, stats: dict, H: np.ndarray,
             uids: np.ndarray, pairs: np.ndarray | None, groups: np.ndarray | None) -> Summary:
    """A batch's Summary from its responsibilities R (n, K), N, statistics (per component and
    shared, as ``obs`` returns them) and entropies, with the merge entropies of the planned
    pairs and groups."""
    pairs = np.zeros((0, 2), np.int64) if pairs is None else pairs
    groups = np.zeros((0, 0), np.int64) if groups is None else groups
    stats, shared = obs.split_stats(stats)
    return Summary(uids=uids.copy(), N=N, stats=stats, H=H, n_items=R.shape[0],
                   pairs=pairs, Hpair=pair_entropies(R, H, uids, pairs),
                   groups=groups, Hgroup=group_entropies(R, uids, groups), shared=shared)


def local_summary(X: Data, obs: ObsModel, g: Globals, pairs: np.ndarray | None = None,
                  groups: np.ndarray | None = None, dense: bool = False
                  ) -> tuple[np.ndarray, Summary]:
    """Eq. 9 on one batch and its summary (Eq. 7) with the planned merge entropies: (R,
    summary)."""
    fused = obs.local_step(X, g.post, g.Elogw)  # the Gaussians: Eq. 9 and Eq. 7 in one pass
    if fused is None:
        R, log_r = responsibilities(X, obs, g)
        return R, summarize(X, obs, R, log_r, g.uids, pairs, groups, dense)
    R, N, stats, H = fused
    return R, assemble(obs, R, N, stats, H, g.uids, pairs, groups)


def excluding(g: Globals, uids: tuple[int, ...]) -> Globals:
    """The globals with E[log w_k] = ABSENT for k in ``uids``: a local step under them gives
    those components r_nk = 0 and renormalises q(z_n) over the others (r'_nk = r_nk / (1 -
    Σ_absent r_n) in exact arithmetic; in log space, so exact also for items wholly in them)."""
    return Globals(g.uids, g.post, np.where(np.isin(g.uids, uids), ABSENT, g.Elogw))


def delete_change(X: Data, obs: ObsModel, g: Globals, uid: int, R: np.ndarray,
                  summary: Summary) -> Summary:
    """How the batch's summary changes when no item may join component ``uid`` (``excluding``):
    the summary then, without ``uid``'s empty row, minus Delete(uid) of ``summary`` (the
    batch's, from its responsibilities R under ``g``; pairs and groups dropped). Only the
    items A with r_n,uid > 0 change (exactly: q(z_n) of the others is already normalised over
    the other components), so the change is S'(A) − S(A) over those items (a local step on A
    alone), non-zero only on their entries; when they are more than half the batch, the whole
    batch's local step runs again and the change is its summary minus the batch's. Both are
    exact."""
    gone = Delete(uid)
    rows = np.flatnonzero(R[:, int(np.flatnonzero(g.uids == uid)[0])] > 0)
    if 2 * len(rows) > R.shape[0]:
        return (gone.apply(local_summary(X, obs, excluding(g, (uid,)))[1])
                - gone.apply(summary.without_pairs()))
    if not len(rows):
        others = int(np.sum(g.uids != uid))
        return Summary(g.uids[g.uids != uid], np.zeros(others),
                       {k: ss.zero_rows(v, others) for k, v in summary.stats.items()},
                       np.zeros(others), shared={k: np.zeros_like(v)
                                                 for k, v in summary.shared.items()})
    XA = X[rows]
    old = gone.apply(summarize(XA, obs, R[rows], None, g.uids))
    new = gone.apply(local_summary(XA, obs, excluding(g, (uid,)))[1])
    return new - old


def block_rows(K: int, width: float) -> int:
    """The rows of a block whose n × K × width temporaries stay within BLOCK_ENTRIES (at least
    MIN_BLOCK_ROWS)."""
    return max(MIN_BLOCK_ROWS, int(BLOCK_ENTRIES // max(K * width, 1.0)))


def blocks(X: Data, K: int) -> Iterator[Data]:
    """A batch in blocks of rows whose n × K × width temporaries (width D, or a CSR row's mean
    stored entries) stay within BLOCK_ENTRIES whatever the partition's size; a function of the
    data's shape and K only, so every executor splits a batch alike. One block at a time: a
    CSR block is a copy of its rows, so only the block in hand is held beside the batch (all
    at once, a visit held its partition twice); a batch of one block is X itself. Anything
    else an observation model takes as data (a birth's precomputed features) is one block."""
    if sp.issparse(X):
        width = X.nnz / max(X.shape[0], 1)
    elif isinstance(X, np.ndarray):
        width = X.shape[1]
    else:
        yield X
        return
    rows = block_rows(K, width)
    if rows >= X.shape[0]:
        yield X
        return
    for s in range(0, X.shape[0], rows):
        yield X[s:s + rows]


def batch_step(X: Data, obs: ObsModel, g: Globals, plan: Plan | None = None) -> BatchResult:
    """Local step on one batch (Eq. 9), its summary (Eq. 7), any birth collection and the
    summary's change without each planned deletion, over ``blocks`` of items: every
    part of a BatchResult is a sum (or for the collection a concatenation) over items, so the
    blocks' results add up to the batch's."""
    plan = plan or Plan()
    if plan.absent:
        g = excluding(g, plan.absent)
    summary, changes, collected = None, {}, {uid: [] for uid in plan.targets}
    wanted: dict[int, int | None] = dict(zip(plan.targets, plan.wanted, strict=True)) \
        if plan.wanted is not None else dict.fromkeys(plan.targets)
    qualified = dict.fromkeys(plan.targets, 0)
    for block in blocks(X, len(g.uids)):  # folded as they go: not K x D² held per block
        part = _block_step(block, obs, g, plan, wanted)
        summary = part.summary if summary is None else summary + part.summary
        for uid, change in part.delete_changes.items():
            changes[uid] = change if uid not in changes else changes[uid] + change
        for uid, rows in part.collected.items():
            collected[uid].append(rows)
            qualified[uid] += part.qualified[uid]
    return BatchResult(summary, {uid: rows[0] if len(rows) == 1 else stack_rows(rows)
                                 for uid, rows in collected.items()}, changes, qualified)


def _block_step(X: Data, obs: ObsModel, g: Globals, plan: Plan,
                wanted: dict[int, int | None]) -> BatchResult:
    """``batch_step`` on one block of items, under globals that already exclude plan.absent;
    each target collects up to ``wanted[uid]`` rows (None: all), less by those taken."""
    R, summary = local_summary(X, obs, g, plan.pairs, plan.groups, plan.dense)
    collected, qualified = {}, {}
    for uid in plan.targets:
        k = int(np.flatnonzero(g.uids == uid)[0])
        rows = np.flatnonzero(R[:, k] > plan.tau)
        qualified[uid] = rows.size
        collected[uid] = X[rows[:wanted[uid]]]
        if wanted[uid] is not None:
            wanted[uid] -= collected[uid].shape[0]
    changes = {uid: delete_change(X, obs, g, uid, R, summary) for uid in plan.deletes}
    return BatchResult(summary, collected, changes, qualified)


def hard_assignments(X: Data, obs: ObsModel, g: Globals) -> tuple[np.ndarray, np.ndarray]:
    """Most probable component id of each item under q(z) and its responsibility (over
    ``blocks`` of items, as ``batch_step``)."""
    ids, resp = [], []
    for block in blocks(X, len(g.uids)):
        R, _ = responsibilities(block, obs, g)
        k = R.argmax(axis=1)
        ids.append(g.uids[k])
        resp.append(R[np.arange(len(k)), k])
    return np.concatenate(ids), np.concatenate(resp)
