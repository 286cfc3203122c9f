"""Variational inference for one sequence under the sequential ddCRP (docs/theory/ddcrp.rst):
coordinate ascent alternating the tables' q(θ_j), λ_j = λ_0 + Σ_s Z_sj t(x_s) (any observation
model of ``algorithms/obs``; the live tables only: an empty table's optimal q(θ) is the prior and
adds 0), and a sweep over the links' q(c_i) in random order (``vi.sweep`` of a ``vi.LinkState``).
The ELBO is the links' term plus the observation model's Σ_j [Σ_s Z_sj E log p(x_s | θ_j) + E log
G_0(θ_j) − E log q(θ_j)]; each half-step is an exact coordinate maximisation, so without pruning it
never decreases. The bound has many local optima (docs/theory/ddcrp.rst, moves over whole tables).
A start is either drawn in one pass (``sampled_links``) or the tables of a truncated DP VB fit of
the sequence (``vb_labels``), each customer linked to the earlier members of its table; after the
ascent, ``climb`` alternates moves over whole tables on the fit's hard partition (``moves.Tables``:
merges and splits, each accepted only if the exact bound rises) with a new ascent, kept only if its
bound beats the fit's. ``fit_restarts`` keeps the best of several such starts. A fit is a frozen
``SequenceFit``: each ascent or climb returns a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..alloc.stick import StickBreaking
from ..mixture import Mixture
from ..obs.base import Arrays, Data, ObsModel
from ..vb.birth import fresh_vb
from ..vb.init import nearest_seed
from ..vb.local import responsibilities
from .links import log_link_band
from .moves import Move, Tables, improve, roots_of
from .vi import LinkState, sweep

STARTS = ("vb", "drawn")  # the kinds of start (start_links), in turn unless told
VB_K = 50  # the DP VB start's truncation (at most N)
VB_ITER = 50  # its local + global steps at most (or a relative ELBO change of VB_TOL)
VB_TOL = 1e-6
VB_CUT = np.log(1e-3)  # its components cut where log p(link) < log p(self-link) + VB_CUT
ROUNDS = 10  # climb's rounds of table moves + ascent at most


@dataclass(frozen=True, eq=False)
class SequenceFit:
    """One sequence's result: the links, the live tables' posteriors, the ELBO at the start (as
    both entries of ``trace[0]``) and after each iteration's two half-steps (links, then
    tables), iterations run, whether the ELBO settled and the table moves taken."""

    links: LinkState
    post: Arrays
    elbo: float
    trace: tuple[tuple[float, float], ...] = ()
    iterations: int = 0
    converged: bool = False
    moves: tuple[Move, ...] = ()

    @property
    def n_tables(self) -> float:
        """E[#tables] = Σ_j q(c_j = j)."""
        return float(self.links.q[:, 0].sum())


def sampled_links(X: Data, logp: np.ndarray, obs: ObsModel, rng: np.random.Generator,
                  prune: float = 0.0) -> LinkState:
    """A start drawn in one pass over the sequence: customer i links to t (t = i: a new table)
    with probability ∝ p(c_i = t) times the posterior predictive of x_i under t's table (the
    prior's for a new one), the tables holding the earlier customers' drawn links. Hard links,
    so only the drawn tables are live."""
    N, width = logp.shape
    rows = obs.prepare(X)
    cap = 16
    state = obs.predictive_state(obs.prior_post(cap))
    label = np.zeros(N, int)
    q = np.zeros((N, width))
    K = 0
    for i in range(N):
        d = np.arange(min(width - 1, i) + 1)
        if cap == K:
            more = obs.predictive_state(obs.prior_post(cap))
            state = {k: np.concatenate([v, more[k]]) for k, v in state.items()}
            cap *= 2
        pred = rows.loglik({k: v[:K + 1] for k, v in state.items()}, i)
        score = logp[i, d] + pred[np.concatenate([[K], label[i - d[1:]]])]
        p = np.exp(score - score.max())
        pick = int(rng.choice(len(d), p=p / p.sum()))
        q[i, pick] = 1.0
        if pick == 0:
            label[i], K = K, K + 1
        else:
            label[i] = label[i - pick]
        rows.absorb(state, i, np.array([label[i]]), np.ones(1))
    return LinkState.of(logp, q, prune)


def table_stats(X: Data, links: LinkState, obs: ObsModel) -> tuple[np.ndarray, Arrays]:
    """The live tables' masses N_j = Σ_s Z_sj and statistics Σ_s Z_sj t(x_s)."""
    Z = links.responsibilities
    return Z.sum(0), obs.stats(X, Z)


def vb_labels(X: Data, obs: ObsModel, alpha: float, rng: np.random.Generator,
              K: int = VB_K, max_iter: int = VB_ITER, tol: float = VB_TOL) -> np.ndarray:
    """The tables of a start: truncated stick-breaking DP VB with concentration α (the vb
    engine's algorithm, from the items hard-assigned to the nearest of K k-means++ seeds) run
    to convergence, each item at its most probable component."""
    K = min(K, X.shape[0])
    alloc = StickBreaking(alpha)
    S, _ = fresh_vb(X, obs, alloc, nearest_seed(obs.features(X), K, rng), K, max_iter, tol)
    R, _ = responsibilities(X, obs, Mixture.from_summary(obs, alloc, S).globals())
    return R.argmax(1)


def start_links(X: Data, logp: np.ndarray, obs: ObsModel, alpha: float, start: str,
                rng: np.random.Generator, prune: float) -> LinkState:
    """A start: ``drawn`` in one pass (``sampled_links``) or the components of ``vb_labels``,
    cut where the link to the nearest earlier member is 1,000 times less probable than the
    self-link
    (``moves.roots_of``), improved by table moves (``moves.improve``), each customer
    linked to the earlier members of its table ∝ p(c_i) (``moves.Tables.links``)."""
    if start == "drawn":
        return sampled_links(X, logp, obs, rng, prune)
    if start == "vb":
        # DP VB ignores the order: its components are cut where a customer's link to its
        # nearest earlier one is far less likely than its self-link; the moves then mend
        labels = roots_of(vb_labels(X, obs, alpha, rng), logp, logp[:, 0] + VB_CUT)
        tables, _ = improve(Tables.of(X, labels, logp, obs), rng)
        return tables.links(prune)
    raise ValueError(f"start must be one of {STARTS}, not {start!r}")


def default_starts(decay: str, window: int | None = None) -> tuple[str, ...]:
    """The starts of a sequence's restarts, in turn: with f ≡ 1 (``decay`` "none") and no
    window the sequential CRP is the CRP, whose partitions do not depend on the order, and every
    start is a DP VB fit's tables (the best of 10 was at or above the two kinds in turn on each
    of 25 instances of Sec. 5.2.1, ``benchmarks/acceptance/ddcrp_cli.py``); with a decay or a
    window the order matters, and drawn starts, which follow it, alternate with them (Sec. 5.2.2
    at R = 2: -675.54 against -676.15 from DP VB starts alone)."""
    return ("vb",) if decay == "none" and window is None else STARTS


def hardened(links: LinkState) -> np.ndarray:
    """Each customer's most probable table (a root)."""
    return links.cols[links.responsibilities.argmax(1)]


def climb(X: Data, fit: SequenceFit, obs: ObsModel, rng: np.random.Generator,
          max_iter: int = 200, tol: float = 1e-8, rounds: int = ROUNDS) -> SequenceFit:
    """Up to ``rounds`` times: moves over whole tables from the fit's hard partition
    (``moves.improve``, each raising the partition's exact bound), then coordinate ascent from
    the moved partition; the new fit replaces the old only if its bound is higher, else the
    climb stops. The bound of the fit returned is never below the one given; its trace is the
    accepted ascents' traces in turn (each starts at its moved partition's bound, which may lie
    below the soft fit it came from)."""
    for _ in range(rounds):
        tables, made = improve(Tables.of(X, hardened(fit.links), fit.links.logp, obs), rng)
        if not made:
            break
        new = ascend(X, tables.links(fit.links.prune), obs, rng, max_iter, tol)
        if new.elbo <= fit.elbo + tol * abs(fit.elbo):
            break
        fit = replace(new, moves=fit.moves + tuple(made), trace=fit.trace + new.trace,
                      iterations=new.iterations + fit.iterations)
    return fit


def fit_sequence(X: Data, positions: np.ndarray, obs: ObsModel, alpha: float,
                 f: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator,
                 max_iter: int = 200, tol: float = 1e-8, window: int | None = None,
                 prune: float = 1e-6, start: str = "drawn", rounds: int = ROUNDS
                 ) -> SequenceFit:
    """Coordinate ascent from a ``start`` (``start_links``) until the ELBO's relative change
    is below ``tol``, then ``climb`` (``rounds`` = 0: none); links to the ``window`` most recent
    customers only, self-links below ``prune`` closed."""
    logp = log_link_band(positions, alpha, f, window)
    fit = ascend(X, start_links(X, logp, obs, alpha, start, rng, prune), obs, rng, max_iter, tol)
    return climb(X, fit, obs, rng, max_iter, tol, rounds)


def fit_restarts(X: Data, positions: np.ndarray, obs: ObsModel, alpha: float,
                 f: Callable[[np.ndarray], np.ndarray], seed: int | np.random.SeedSequence,
                 restarts: int = 10, max_iter: int = 200, tol: float = 1e-8,
                 window: int | None = None, prune: float = 1e-6,
                 starts: tuple[str, ...] = STARTS, rounds: int = ROUNDS
                 ) -> tuple[SequenceFit, list[float]]:
    """The best of ``restarts`` fits (restart r from ``starts[r % len(starts)]``, with the
    r-th stream spawned from ``seed``), and every restart's final ELBO."""
    if restarts < 1:
        raise ValueError(f"restarts must be at least 1, not {restarts}")
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    best, elbos = None, []
    for r, s in enumerate(seq.spawn(restarts)):  # only the best fit so far is kept
        fit = fit_sequence(X, positions, obs, alpha, f, np.random.default_rng(s), max_iter, tol,
                           window, prune, starts[r % len(starts)], rounds)
        elbos.append(fit.elbo)
        if best is None or fit.elbo > best.elbo:
            best = fit
    return best, elbos


def ascend(X: Data, links: LinkState, obs: ObsModel, rng: np.random.Generator,
           max_iter: int = 200, tol: float = 1e-8) -> SequenceFit:
    """Coordinate ascent from ``links`` (the tables' q(θ) first), alternating the tables' exact
    q(θ) and a sweep over the links, until the ELBO's relative change is at most ``tol``."""
    N, stats = table_stats(X, links, obs)
    post = obs.post(N, stats)
    elbo = links.link_term() + obs.elbo(N, stats, post)
    trace, iterations, converged = [(elbo, elbo)], 0, False
    ell_empty = obs.E_loglik(X, obs.prior_post(1))[:, 0]
    for it in range(1, max_iter + 1):
        before = links.cols
        links = sweep(links, obs.E_loglik(X, post), ell_empty, rng)
        N, stats = table_stats(X, links, obs)
        terms = links.link_term()
        after_links = terms + obs.elbo(N, stats, carried(obs, post, before, links.cols))
        post = obs.post(N, stats)
        previous, elbo = elbo, terms + obs.elbo(N, stats, post)
        trace.append((after_links, elbo))
        iterations = it
        if abs(elbo - previous) <= tol * abs(elbo):
            converged = True
            break
    return SequenceFit(links, post, elbo, tuple(trace), iterations, converged)


def carried(obs: ObsModel, post: Arrays, before: np.ndarray, after: np.ndarray) -> Arrays:
    """The posteriors of tables ``after`` taken from those of ``before`` (the prior for a table
    opened since): q(θ) unchanged across a links half-step."""
    where = {int(j): k for k, j in enumerate(before)}
    fresh = obs.prior_post(1)
    parts = [{n: (post[n][[where[j]]] if j in where else fresh[n]) for n in post}
             for j in after.tolist()]
    return {n: np.concatenate([p[n] for p in parts]) for n in post}
