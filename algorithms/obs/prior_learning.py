"""Type-II (empirical Bayes) updates of the Gaussian models' conjugate priors from the K
components' posteriors, with no data pass (ObsModel.learn_prior).

The ELBO's terms that depend on the hyperparameters h at fixed q are Σ_k E_q[log p(φ_k | h)]:
their argmax over h, here within bounds that always contain the current h, raises the ELBO, and
the global update (Eq. 10) under the new h raises it again (coordinate ascent).

Scale and shape of a Wishart: for Λ ~ Wishart(ν0, (s T)⁻¹) with T fixed (tr T = D), the terms in
(s, ν0) are F = Σ_k [(ν0 - D - 1)/2 E ln|Λ_k| - s/2 tr(T E[Λ_k])] - K ln Z_W(ν0, s T), where
ln Z_W(ν, B) = ν D/2 ln 2 + ln Γ_D(ν/2) - ν/2 ln|B|. With ℓ̄ = mean_k E ln|T^½ Λ_k T^½| and
t̄ = mean_k tr(T E[Λ_k]): ∂F/∂s = 0 gives s = ν0 D / t̄, and then ∂F/∂ν0 = K/2 [c - g(ν0/2)]
with g(x) = ψ_D(x) - D ln x and c = ℓ̄ - D ln(t̄ / D). F is jointly concave in (s, ν0) (Hessian
determinant K² D (ν0 ψ'_D(ν0/2) - 2D) / (8 s²) > 0, as ψ'(x) > 1/x); g rises from -∞ (ν0 → D - 1)
to 0 (ν0 → ∞) and c < 0 (Jensen, then AM-GM), so the root is unique and the root clipped to an
interval is the constrained argmax. A floor s ≥ f ν0 (E[Λ] ≤ T⁻¹ / f: the prior never expects
a larger precision than that) is a half-plane: s/ν0 = D / t̄ at the free optimum for every ν0, so
either it holds there or the argmax lies on the ray s = f ν0, where ∂F/∂ν0 = K/2 [c_f - g(ν0/2)]
with c_f = ℓ̄ + D ln f + D - f t̄ (< c: D ln f - f t̄ peaks at f = D / t̄).

A Gamma(a0, b0) prior (rate b0) on one precision λ is the case D = 1, T = 1: ν0 = 2 a0, s = 2 b0.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, polygamma

from . import wishart as W
from .base import Arrays

# hyperparameters are learned only when this many components have more items than the dimension
# of their covariance. One posterior alone makes the type-II maximum the prior that equals it
# (κ0 = κ_1, m0 = m_1, and κ0, ν0 growing at every update), after which no new component could
# pay for itself; an empty component beside it does the same more slowly. Two are one contrast:
# as in Stein's result (an estimated common prior improves on the groups' own estimates only from
# three groups; Efron & Morris 1973), the prior learned from two fits them and not the next
# component: iris and breast cancer, ending at K = 2, held out worse by 0.03 and 1.5 nats per
# item with it (benchmarks/acceptance/learned_prior.py), and the runs ending at K >= 4 learn
# alike from 3
MIN_COMPONENTS = 3
# the most κ0 may be (a unit-information prior: the mean's prior is worth at most one item). The
# type-II κ0 = K D / Σ_k E[(μ_k - m0)ᵀ Λ_k (μ_k - m0)] from a few components in many dimensions
# is large whenever they differ along a few directions only (breast cancer in 4 partitions,
# K = 2, D = 30: κ0 = 6 to 23; digits: up to 22), and a prior that sure every mean lies near m0
# makes any further component too dear: those runs stayed at K = 2 with a lower ELBO than the
# K = 8 they reached under the cap (measured with benchmarks/acceptance/learned_prior.py)
KAPPA_MAX = 1.0
# the floor of the prior's E[Λ]⁻¹ relative to the run's initial prior's (1: never a larger
# expected precision than the default): without one, data constant along a direction within
# every component (digits' blank pixels) make the type-II likelihood unbounded as s → 0
FLOOR = 1.0


def identifiable(N: np.ndarray, dim: int) -> bool:
    """Whether at least MIN_COMPONENTS components have more than ``dim`` items (N_k > dim)."""
    return int(np.sum(np.asarray(N) > dim)) >= MIN_COMPONENTS


def widened(lo: float, hi: float, current: float) -> tuple[float, float]:
    """[lo, hi] stretched to contain ``current``, so the current value is feasible and the
    constrained argmax never lowers the objective."""
    return min(lo, current), max(hi, current)


def shape_gap(x: np.ndarray | float, D: int) -> np.ndarray:
    """g(x) = ψ_D(x) - D ln x = Σ_{i<D} ψ(x - i/2) - D ln x for x > (D - 1)/2: increasing, < 0
    (elementwise)."""
    x = np.asarray(x, dtype=float)
    return digamma(x[..., None] - 0.5 * np.arange(D)).sum(-1) - D * np.log(x)


def _shape_slope(x: np.ndarray, D: int) -> np.ndarray:
    """g'(x) = Σ_{i<D} ψ'(x - i/2) - D / x (> 0)."""
    return polygamma(1, x[..., None] - 0.5 * np.arange(D)).sum(-1) - D / x


def solve_shape(c: np.ndarray | float, D: int, lo: np.ndarray | float,
                hi: np.ndarray | float) -> np.ndarray:
    """Elementwise, the x in [lo, hi] maximising a concave profile whose derivative is ∝ c - g(x)
    (g = ``shape_gap``, increasing): the root of g(x) = c when g(lo) < c < g(hi), else lo
    (c ≤ g(lo)) or hi (c ≥ g(hi)). Newton steps kept inside a shrinking bracket (bisection
    when a step leaves it), to a relative step of 1e-14."""
    c, lo, hi = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (c, lo, hi)))
    if np.any(~(lo <= hi)):
        raise ValueError(f"empty interval [{lo}, {hi}]")
    below, above = shape_gap(lo, D) >= c, shape_gap(hi, D) <= c
    a, b = lo.copy(), hi.copy()
    # g(x) ≈ -D(D + 1)/(4x) for large x: the start
    x = np.clip(np.where(c < 0, -D * (D + 1) / (4 * np.minimum(c, -1e-300)), hi), lo, hi)
    for _ in range(200):
        f = shape_gap(x, D) - c
        a, b = np.where(f < 0, x, a), np.where(f > 0, x, b)
        new = x - f / _shape_slope(x, D)
        new = np.where((new <= a) | (new >= b), 0.5 * (a + b), new)
        done = np.abs(new - x) <= 1e-14 * x
        x = new
        if done.all():
            break
    return np.where(below, lo, np.where(above, hi, x))


def wishart_scale_dof(E_logdet_T: np.ndarray, trace_T: np.ndarray, D: int,
                      nu_bounds: tuple, floor: np.ndarray | float) -> tuple:
    """(s, ν0) maximising Σ_k E_q[ln Wishart(Λ_k | ν0, (s T)⁻¹)] over ν0 in ``nu_bounds`` and
    s ≥ floor · ν0, from E_logdet_T[k] = E ln|T^½ Λ_k T^½| and trace_T[k] = tr(T E[Λ_k]) (see
    the module): ν0/2 solves ψ_D(ν0/2) - D ln(ν0/2) = ℓ̄ - D ln(t̄ / D), s = ν0 D / t̄; or, when
    D / t̄ < floor, ν0/2 solves it with right side ℓ̄ + D ln f + D - f t̄ and s = f ν0. Arrays
    of shape (K, M) are M independent problems (bounds and floor of shape (M,)): (s, ν0) then
    have shape (M,); of shape (K,), floats."""
    ell, t = np.mean(E_logdet_T, axis=0), np.mean(trace_T, axis=0)
    free = D / t
    ratio = np.maximum(free, floor)
    c = np.where(free >= floor, ell + D * np.log(free),
                 ell + D * np.log(ratio) + D - ratio * t)
    nu0 = 2.0 * solve_shape(c, D, 0.5 * np.asarray(nu_bounds[0]), 0.5 * np.asarray(nu_bounds[1]))
    if np.ndim(nu0) == 0:
        return float(ratio * nu0), float(nu0)
    return ratio * nu0, nu0


def learn_wishart(post: Arrays, nu0: float, B0: np.ndarray, base_nu0: float,
                  base_B0: np.ndarray, n: float) -> tuple[float, np.ndarray]:
    """(ν0, B0 = s T) maximising Σ_k E_q[ln Wishart(Λ_k | ν0, B0⁻¹)] over the K posteriors
    (ν_k, B_k) of ``post``, T = B0 D / tr B0 fixed (``wishart_scale_dof`` with E[Λ_k] = ν_k B_k⁻¹,
    E ln|Λ_k| = ψ_D(ν_k/2) + D ln 2 - ln|B_k|), within D + 2 ≤ ν0 ≤ D + 1 + n (E[Σ] = B0/(ν0 -
    D - 1) finite; never worth more than the n items) and B0/ν0 ≥ FLOOR base_B0/base_ν0 in mean
    eigenvalue, each bound widened to contain the current (ν0, B0)."""
    D = B0.shape[0]
    T = B0 * (D / np.trace(B0))
    U = post["U"]
    E_logdet_T = W.E_logdet(post["nu"], post["logdet_B"], D) + W.prior_factors(T, D)["logdet_B"]
    trace_T = post["nu"] * W.trace_inv(U, np.broadcast_to(T, U.shape))
    floor = min(FLOOR * np.trace(base_B0) / (D * base_nu0), np.trace(B0) / (D * nu0))
    s, nu0_new = wishart_scale_dof(E_logdet_T, trace_T, D, widened(D + 2.0, D + 1.0 + n, nu0),
                                   floor)
    return nu0_new, s * T
