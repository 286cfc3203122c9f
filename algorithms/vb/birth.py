"""Birth moves (Hughes & Sudderth 2013, Sec. 3.1; supplement Sec. 2): choose a target, create
new components by a fresh DP-mixture VB run on the collected data, adopt them over a lap."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..alloc import VariationalAllocation
from ..mixture import Mixture, optimal_elbo
from ..obs.base import Data, ObsModel
from ..summary import MergeGroup, Summary
from .init import seeded_summary
from .local import Plan, batch_step
from .merge import MergeConfig, merge_round


@dataclass(frozen=True)
class BirthConfig:
    """Supplement Sec. 2 settings: tau (Eq. 23), N' (collection cap), K', I', prune fraction."""

    per_lap: int = field(default=1, metadata={"help": "birth targets per lap",
                                              "range": "[1, inf)"})
    settled_per_lap: int = field(default=10, metadata={
        "help": "birth targets per lap after a lap that adopted, kept and merged nothing (a "
                "run converges only once every component's birth has failed)",
        "range": "[1, inf)"})
    tau: float = field(default=0.1, metadata={
        "help": "collect an item for a target when its responsibility exceeds this (Eq. 23)",
        "range": "[0, 1)"})
    max_collect: int = field(default=10_000, metadata={
        "help": "items collected per birth (N')", "range": "[2, inf)"})
    fresh_K: int = field(default=10, metadata={
        "help": "components of a birth's fresh VB run", "range": "[2, inf)"})
    max_iter: int = field(default=100, metadata={
        "help": "iterations of a birth's fresh VB", "range": "[1, inf)"})
    prune_fraction: float = field(default=1 / 20, metadata={
        "help": "keep new components with at least this fraction of the collected items",
        "range": "(0, 0.5]"})
    tol: float = field(default=1e-3, metadata={
        "help": "relative ELBO change that stops a birth's fresh VB (a proposal: its "
                "components are refined by the adoption lap and judged on the exact ELBO; "
                "1e-4 took 1.8x the local steps on toy patches for the same model)",
        "range": "[0, inf)"})
    attempts: int = field(default=3, metadata={
        "help": "fresh VB runs a birth tries before it counts as failed, while the model has one "
                "component (a failure there ends the run at K = 1: digits did, from one bad run)",
        "range": "[1, inf)"})
    attempts_grown: int = field(default=1, metadata={
        "help": "fresh VB runs a birth tries once the model has more than one component (a "
                "failed component is targeted again when its mass changes; 3 tries cost 2.7x "
                "the birth time on toy patches for the same model)",
        "range": "[1, inf)"})

    def attempts_at(self, K: int) -> int:
        """Fresh VB runs for a birth in a model of K components."""
        return self.attempts if K == 1 else self.attempts_grown


def choose_targets(uids: np.ndarray, N: np.ndarray, laps_since: np.ndarray, n: int,
                   rng: np.random.Generator) -> list[int]:
    """Supplement Eq. 22: p(k' = k) ∝ N_k · L_k², drawn without replacement."""
    w = np.maximum(N, 0) * np.maximum(laps_since, 1) ** 2
    if w.sum() <= 0:
        return []
    n = min(n, int((w > 0).sum()))
    return [int(u) for u in rng.choice(uids, size=n, replace=False, p=w / w.sum())]


def fresh_vb(X: Data, obs: ObsModel, alloc: VariationalAllocation, K: int, rng: np.random.Generator,
             max_iter: int, tol: float, scale: float = 1.0, repeated: Data | None = None
             ) -> Summary:
    """Full-data VB for a K-component DP mixture on X (Sec. 2.2), from k-means++ seeds, with
    X's statistics amplified by ``scale`` in every global update (see ``create``); its local
    steps read ``repeated`` (obs.repeated(X)) when given."""
    S = seeded_summary(X, obs, K, np.arange(K), rng)
    return iterate(X if repeated is None else repeated, obs, alloc, S, max_iter, tol, scale)


def iterate(X: Data, obs: ObsModel, alloc: VariationalAllocation, S: Summary, max_iter: int,
            tol: float, scale: float = 1.0) -> Summary:
    """Alternate global (Eq. 5, from the summary times ``scale``) and local (Eq. 4) updates on
    X from the summary S of X; stops after ``max_iter`` local steps or when the ELBO's relative
    change falls below ``tol``. Returns X's own (unamplified) summary."""
    old = -np.inf
    model = Mixture.from_summary(obs, alloc, S.scaled(scale))
    for _ in range(max_iter):
        S = batch_step(X, obs, model.globals()).summary
        amplified = S.scaled(scale)
        model = Mixture.from_summary(obs, alloc, amplified)  # the next step's too
        elbo = model.elbo(amplified)  # optimal_elbo
        if abs(elbo - old) <= tol * abs(elbo):
            break
        old = elbo
    return S


def refine(X: Data, obs: ObsModel, alloc: VariationalAllocation, S: Summary,
           rng: np.random.Generator, max_iter: int, tol: float, scale: float = 1.0) -> Summary:
    """Merge rounds inside a birth's fresh model: with every pair's exact merge entropy on the
    collected data (Sec. 3.2), merges that raise the fresh ELBO of the amplified statistics
    are accepted, then VB runs again from the merged model; until a round accepts nothing.
    Fresh VB from K' seeds often cuts one cluster into wedges that only a chain of merges puts
    back together."""
    for _ in range(S.K):
        model = Mixture.from_summary(obs, alloc, S.scaled(scale))
        iu, ju = np.triu_indices(S.K, k=1)
        pairs = np.stack([S.uids[iu], S.uids[ju]], axis=1)
        S_p = batch_step(X, obs, model.globals(), Plan(pairs)).summary
        merged, accepted, _ = merge_round(obs, alloc, S_p.scaled(scale), rng,
                                          MergeConfig(max_attempts=len(pairs)))
        if not accepted:
            return S
        S = iterate(X, obs, alloc, merged.without_pairs().scaled(1 / scale), max_iter, tol, scale)
    return S


def create(X: Data, obs: ObsModel, alloc: VariationalAllocation, new_uids: np.ndarray,
           cfg: BirthConfig, rng: np.random.Generator, scale: float = 1.0,
           attempts: int | None = None) -> Summary | None:
    """Creation: fresh VB on the targeted data, merges inside it (refine), prune components with
    N_j < ε N', and return the kept components' summary S' under ``new_uids`` — or None when
    J' <= 1 in each of ``attempts`` runs (abort; default ``cfg.attempts``).

    When X is a sample of the rows that qualified (the collection cap N' was reached),
    ``scale`` = qualified / collected amplifies X's statistics to the whole target's, as
    stochastic VB amplifies a minibatch's (N/|B|): the fresh model and its merges are then
    judged with the evidence the full data holds (a split that only pays at the target's full
    mass is not merged away on a sample a tenth its size), and S' is returned amplified. The
    newborns are still kept only if the exact full-data ELBO prefers them (``verify``)."""
    n = X.shape[0]
    if n < 2 * cfg.fresh_K:
        return None
    repeated = obs.repeated(X)  # read by every local step below
    for _ in range(cfg.attempts if attempts is None else attempts):  # new seeds each run
        S = fresh_vb(X, obs, alloc, cfg.fresh_K, rng, cfg.max_iter, cfg.tol, scale, repeated)
        S = refine(repeated, obs, alloc, S, rng, cfg.max_iter, cfg.tol, scale)
        keep = np.flatnonzero(cfg.prune_fraction * n <= S.N)
        if len(keep) > 1:
            break
    else:
        return None
    keep = keep[np.argsort(-S.N[keep], kind="stable")]
    return Summary(uids=new_uids[: len(keep)], N=S.N[keep],
                   stats={k: v[keep] for k, v in S.stats.items()},
                   H=np.zeros(len(keep)), shared=S.shared).scaled(scale)


def verify(obs: ObsModel, alloc: VariationalAllocation, S: Summary,
           families: list[tuple[int, tuple[int, ...]]]) -> tuple[Summary, list[MergeGroup]]:
    """Propose-and-verify births: after their adoption lap, a birth's newborns stay only if the
    exact full-data ELBO with them exceeds the ELBO with all of them merged back into their
    origin (MergeGroup, exact from the recorded group entropy). Returns the summary after the
    undone births and the moves that undid them."""
    undone = []
    for origin, newborns in families:
        move = MergeGroup(origin, newborns)
        candidate = move.apply(S)
        if optimal_elbo(obs, alloc, candidate) >= optimal_elbo(obs, alloc, S):
            S = candidate
            undone.append(move)
    return S, undone
