"""Variational inference for one sequence under the sequential ddCRP (issue 12): coordinate
ascent alternating the tables' q(θ_j), λ_j = λ_0 + Σ_s Z_sj t(x_s) (any observation model of
``algorithms/obs``; K = N tables, a table's mass Σ_s Z_sj may be 0), and a sweep over the links'
q(c_i) in random order (``vi.Links``). The ELBO is the links' term plus the observation
model's Σ_j [Σ_s Z_sj E log p(x_s | θ_j) + E log G_0(θ_j) − E log q(θ_j)]; each half-step is an
exact coordinate maximisation, so it never decreases.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..obs.base import Arrays, Data, ObsModel
from .links import log_link_prior
from .vi import Links


@dataclass
class SequenceFit:
    """One sequence's result: the links, the tables' posteriors, the ELBO at the start (as
    both entries of ``trace[0]``) and after each iteration's two half-steps (links, then
    tables), iterations run and whether the ELBO settled."""

    links: Links
    post: Arrays
    elbo: float
    trace: list[tuple[float, float]] = field(default_factory=list)
    iterations: int = 0
    converged: bool = False

    @property
    def n_tables(self) -> float:
        """E[#tables] = Σ_j q(c_j = j)."""
        return float(np.trace(self.links.q))


def sequential_links(X: Data, logp: np.ndarray, obs: ObsModel,
                     rng: np.random.Generator | None = None) -> Links:
    """A start in one pass over the sequence: customer i's q(c_i) ∝ p(c_i = t) times the
    posterior predictive of x_i under the table mixture of t (under the prior for a new table),
    the tables' posteriors from the earlier customers' responsibilities; given ``rng``, a link
    drawn from that row instead (a different start for each restart). The coordinate update
    itself scores a table by E_q log p(x | θ), which under a vague prior is so low for an empty
    table that ascent from an empty or random start keeps one table."""
    N = len(logp)
    q = np.zeros_like(logp)
    Z = np.zeros_like(logp)
    for i in range(N):
        own = np.zeros(N)
        post = obs.post(Z[:i, :i + 1].sum(0), obs.stats(X[:i], Z[:i, :i + 1]))
        ell = obs.predictive_logpdf(X[i:i + 1], post)[0]
        score = logp[i, :i + 1].copy()
        score[:i] += Z[:i, :i + 1] @ ell
        score[i] += ell[i]
        row = np.exp(score - score.max())
        row /= row.sum()
        if rng is not None:
            row = np.eye(i + 1)[rng.choice(i + 1, p=row)]
        q[i, :i + 1] = row
        own[:i + 1] = row[:i] @ Z[:i, :i + 1]
        own[i] += row[i]
        Z[i] = own
    return Links.from_q(logp, q)


def fit_sequence(X: Data, positions: np.ndarray, obs: ObsModel, alpha: float,
                 f: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator,
                 max_iter: int = 200, tol: float = 1e-8, start: str = "sequential"
                 ) -> SequenceFit:
    """Coordinate ascent until the ELBO's relative change is below ``tol``, from the one-pass
    start (``start="sequential"``), one with links drawn in that pass (``"sampled"``: a
    restart) or q(c) = p(c) (``"prior"``)."""
    logp = log_link_prior(positions, alpha, f)
    links = {"prior": lambda: Links.prior(logp),
             "sequential": lambda: sequential_links(X, logp, obs),
             "sampled": lambda: sequential_links(X, logp, obs, rng)}[start]()
    Z = links.responsibilities
    N, stats = Z.sum(0), obs.stats(X, Z)
    post = obs.post(N, stats)
    elbo = links.link_term() + obs.elbo(N, stats, post)
    fit = SequenceFit(links, post, elbo, [(elbo, elbo)])
    for it in range(1, max_iter + 1):
        links.sweep(obs.E_loglik(X, post), rng)
        Z = links.responsibilities
        N, stats = Z.sum(0), obs.stats(X, Z)
        after_links = links.link_term() + obs.elbo(N, stats, post)
        post = obs.post(N, stats)
        elbo = links.link_term() + obs.elbo(N, stats, post)
        fit.trace.append((after_links, elbo))
        fit.iterations, fit.post, previous, fit.elbo = it, post, fit.elbo, elbo
        if abs(elbo - previous) <= tol * abs(elbo):
            fit.converged = True
            break
    return fit
