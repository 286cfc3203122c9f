"""The type-II update of the multinomial's Dirichlet prior: λ0's scale by the root of the
Dirichlet-multinomial evidence's slope (Minka 2000; docs/theory/priors.rst), the ELBO over λ0
and q(θ) together at the posteriors' counts (Eq. 12)."""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import digamma, gammaln

from .mult_counts import nonzero_entries
from .prior_learning import MIN_COMPONENTS, widened

# the learned λ0 stays within these multiples of the run's initial one (learn_prior)
LAM_RANGE = (1e-3, 1e2)


def dirichlet_scale(lam: np.ndarray, m: np.ndarray, initial: np.ndarray) -> float | None:
    """The scale s of λ0 = s m (m: the current λ0, its shape kept: a symmetric prior stays
    symmetric; ``initial``: the run's initial λ0) maximising the ELBO over λ0 and q(θ)
    together at the counts wc_k = λ_k − λ0 the posteriors ``lam`` hold: with each q(θ_k) at
    its optimum Dir(s m + wc_k) the observation terms are Eq. 12's log evidences,
    G(s) = Σ_k [logB(s m + wc_k) − logB(s m)], the Dirichlet-multinomial likelihood whose
    precision Minka (2000) fits by a fixed point (its limit is what alternating the prior's
    update and Eq. 10 would reach). With n_k = Σ_v wc_kv and M = Σ_v m_v, G'(s) is
    Σ_{k,v: wc_kv > 0} m_v [ψ(s m_v + wc_kv) − ψ(s m_v)] − M Σ_k [ψ(s M + n_k) − ψ(s M)],
    +∞ as s → 0 and below 0 for large s when the components' words are more concentrated
    than m; its root in [LAM_RANGE of the run's initial λ0, widened to hold the current] is
    kept only where G is higher than at the current λ0 (G may have several stationary
    points), so the ELBO after the global update never falls. Every component holding
    words counts, however few (only an empty one adds 0 for every s); nothing is learned
    unless MIN_COMPONENTS components hold a word or more (None: λ0 stays)."""
    wc = lam - m  # >= 0: λ = λ0 + wc rounds to at least λ0
    wc = wc[wc.sum(-1) > 0]  # an empty component's evidence is 0 at every s
    if int(np.sum(wc.sum(-1) >= 1.0)) < MIN_COMPONENTS:  # three holding a word or more
        return None
    rows, cols = nonzero_entries(wc)
    c, mv, n, M = wc[rows, cols], m[cols], wc.sum(-1), float(m.sum())

    def gain(s: float) -> float:
        return float(np.sum(gammaln(s * mv + c) - gammaln(s * mv))
                     - np.sum(gammaln(s * M + n) - gammaln(s * M)))

    def slope(log_s: float) -> float:
        s = np.exp(log_s)
        return float(mv @ (digamma(s * mv + c) - digamma(s * mv))
                     - M * np.sum(digamma(s * M + n) - digamma(s * M)))

    lo, hi = widened(*(initial.mean() * r for r in LAM_RANGE), float(m.mean()))
    lo, hi = np.log(lo / m.mean()), np.log(hi / m.mean())
    if slope(hi) >= 0:
        log_s = hi
    elif slope(lo) <= 0:
        log_s = lo
    else:
        log_s = brentq(slope, lo, hi, xtol=1e-10)
    if gain(np.exp(log_s)) <= gain(1.0):
        return None
    return np.exp(log_s)
