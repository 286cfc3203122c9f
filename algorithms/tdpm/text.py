"""The text emission of the temporal DP mixture (Ahmed & Xing 2008, Sec. 8: the simple
nonparametric dynamic topic model, SNDTM): a chain's state φ ∈ R^V is the natural parameter of a
multinomial over V words, β = softmax(φ) (Eq. 8.10), and a document x (word counts, n = |x|
words) has

    log F(x | φ) = x·φ − n C(φ),   C(φ) = logsumexp(φ)                      (Eq. 8.11).

The multinomial coefficient log(n! / Π_m x_m!) is omitted everywhere: it depends on the document
only, so it is the same for every chain and every candidate state and cancels in the sampler's
weights (``loglik`` and ``total_loglik`` are the multinomial log pmf minus it).

What the sampler asks of an emission (``emission.Emission``):

- ``loglik(i, phi)``: exact, at given states.
- ``candidates(i, means, variances, rng)``: log ∫ N(φ; m_c, diag v_c) F(x | φ) dφ and a draw from
  that normalised product, for a chain state not yet drawn. There is no closed form (the
  logistic-normal is not conjugate to the multinomial). We use the **Laplace approximation**
  with the full Hessian (below), which makes the sampler approximate: its item moves target the
  posterior with the new-state marginals replaced by their Laplace estimates (and the states of
  the chosen option drawn from the Laplace Gaussian). The paper's own sampler is approximate too
  (its chain states come from the Laplace pseudo-observations of Eqs. 8.12-8.13, below). The
  exact alternative, Neal's (2000) Algorithm 8 (score the item at auxiliary draws from the
  prior N(m_c, v_c) and keep the draw), leaves the posterior invariant but is hopeless in V
  dimensions: a prior draw of φ almost never explains a document. On the Sec. 8 benchmark's
  corpus (V = 300, σ = 10, documents of 50-60 words) log F at a draw from G_0 is ~250 nats below
  the Laplace marginal on average and the best of 20,000 draws is still ~100 nats below, so a
  new chain would practically never be opened (nor an extension drawn near where the document
  wants it). The Laplace estimate is accurate when the document has a moderate number of words
  (its relative error on the marginal is O(1/count), 0.3-2.5% for counts >= 5 in the tests,
  against numerical integration), costs O(V) per Newton iteration and candidate (~8 iterations
  from the prior mean), and its Gaussian gives the new state's draw directly. Measured on that
  corpus: for a chain's extension (prior variance ρ = 0.1 to 1 around a fitted state) the
  Laplace log-marginal is within 0.003-0.16 nats of an importance-sampling estimate with the
  Laplace Gaussian as proposal (effective sample sizes 4,000-20,000 of 20,000); for a new chain
  (G_0 = N(0, 10 I), most of the 300 words unseen, their posteriors one-sided and far from
  Gaussian) it is 3-4 nats *below* an annealed-importance-sampling estimate (2,000 temperatures,
  64 particles; AIS is a stochastic lower bound, so the gap is if anything larger), i.e. the
  sampler opens new chains roughly as if α were e^-3.5 ≈ 0.03 times what it is.
- ``pseudo_obs(items, phi)``: Eqs. 8.12-8.13 with the diagonal Hessian (the paper's choice), for
  forward filtering / backward sampling of a chain's states (``dynamics.RandomWalk``); this is
  the paper's approximation, so the chain-state update is approximate as well.
- ``total_loglik(items, phi)``: exact.
- ``group_pseudo_obs(items, starts)``: the same expansion for groups of documents with no chain
  state (centred to mean 0) and its constant, so that a chain's marginal likelihood is the Kalman
  filter's over the pseudo-observations: what the split-merge moves (``splitmerge``) score, an
  approximation as the candidates' Laplace marginals are.

Laplace (``candidates``). For one candidate with prior N(m, diag v) write the full log integrand

    g(φ) = x·φ − n C(φ) − ½ Σ_j (φ_j − m_j)²/v_j − (V/2) log 2π − ½ Σ_j log v_j,

concave (C is convex), so it has one mode φ̂ (∇g = x − n p − (φ − m)/v = 0, p = softmax(φ)) and
Newton's method with a backtracking (Armijo) line search on g converges from anywhere; we start
at m. The negative Hessian is

    H = diag(1/v) + n (diag(p) − p pᵀ) = A − n p pᵀ,   A = diag(a),  a = 1/v + n p,

so a Newton step H⁻¹∇g is O(V) by Sherman–Morrison,
H⁻¹ = A⁻¹ + (n / s) u uᵀ with u = A⁻¹ p and s = 1 − n pᵀ A⁻¹ p, and by the matrix determinant
lemma det H = det A · s. Both are rearranged to be free of cancellation:
s = Σ_j p_j (1 − n p_j / a_j) = Σ_j p_j / (1 + n p_j v_j) > 0 and
log det A + Σ log v = Σ_j log(1 + n p_j v_j). The Laplace estimate is
log ∫ e^g ≈ g(φ̂) + (V/2) log 2π − ½ log det H, in which the 2π terms cancel:

    log Z ≈ x·φ̂ − n C(φ̂) − ½ Σ_j (φ̂_j − m_j)²/v_j − ½ Σ_j log1p(n p_j v_j) − ½ log s.

(For an empty document this is exactly 0, the mode is m and H = diag(1/v).) Iteration stops
after the step that moved every coordinate by less than ``newton_tol`` (Newton converges
quadratically, so the gradient after that step is ~tol²·|H|), or after ``max_newton`` steps.

The draw φ ~ N(φ̂, H⁻¹) is exact in O(V) from the rank-one form of the covariance: with
z ~ N(0, I_V) and ζ ~ N(0, 1) independent, φ = φ̂ + z / √a + √(n / s) u ζ has covariance
A⁻¹ + (n/s) u uᵀ = H⁻¹.

Pseudo-observations (``pseudo_obs``). For one (chain, epoch) with member documents summed to
counts v (|v| words) the expansion point is the smoothed inverse logistic of the MLE,
φ̂ = log((v + a) / (|v| + aV)) with a = ``smoothing`` (default 0.5; the paper's unsmoothed
log(v / |v|) is −∞ at every word the epoch's documents do not use), shifted by a constant so
that mean(φ̂) = mean(φ) for the chain's current state φ at that epoch: the softmax ignores
constant shifts, and keeping the pseudo-observation in the current state's gauge stops the
diagonal approximation (which, unlike the likelihood, is not shift-invariant) from pulling the
chain's overall level toward an arbitrary one. With p = softmax(φ̂), the second-order expansion
of Σ log F = v·φ − |v| C(φ) at φ̂ with its Hessian replaced by its diagonal −|v| diag(p(1 − p))
is, up to a constant, the Gaussian log N(y; φ, diag r) with

    r = 1 / (|v| p (1 − p))                                                      (Eq. 8.12),
    y = φ̂ + r (v − |v| p)                                                         (Eq. 8.13),

which has the same gradient and (diagonal) curvature in φ at φ̂.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp, softmax


class TextEmission:
    """Multinomial documents with natural-parameter chain states (Sec. 8) over the CSR count
    matrix X (N documents x V words); see the module docstring for the approximations."""

    exact = False  # F(x | φ) is not Gaussian in φ: group_pseudo_obs is an expansion

    def __init__(self, X, smoothing: float = 0.5, newton_tol: float = 1e-8,
                 max_newton: int = 50):
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sum_duplicates()
        if X.nnz and (X.data.min() < 0 or not np.all(np.isfinite(X.data))):
            raise ValueError("counts must be finite and non-negative")
        if smoothing <= 0:
            raise ValueError("smoothing must be positive")
        self.X = X
        self.dim = X.shape[1]
        self.smoothing = float(smoothing)
        self.newton_tol = float(newton_tol)
        self.max_newton = int(max_newton)
        self.lengths = np.asarray(X.sum(1)).ravel()
        self.newton_iterations = 0  # total Newton steps taken (diagnostics)

    def _row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.X.indptr[i], self.X.indptr[i + 1]
        return self.X.indices[lo:hi], self.X.data[lo:hi]

    def loglik(self, i: int, phi: np.ndarray) -> np.ndarray:
        """log F(x_i | φ_c) = x_i·φ_c − n_i C(φ_c) for states phi (C, V) -> (C,)."""
        phi = np.atleast_2d(phi)
        idx, cnt = self._row(i)
        return phi[:, idx] @ cnt - self.lengths[i] * logsumexp(phi, axis=1)

    def laplace(self, i: int, means: np.ndarray, variances: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """The Laplace estimates of log ∫ N(φ; m_c, diag v_c) F(x_i | φ) dφ for means (C, V)
        and variances broadcastable to (C, V), the modes φ̂_c (C, V) and the pieces of the
        negative Hessian at the mode (``a`` (C, V), ``u`` = p/a (C, V), ``s`` (C,)) with
        H⁻¹ = diag(1/a) + (n/s) u uᵀ; also ``iterations`` and ``grad_max`` (max |∇g| at the
        returned mode)."""
        m = np.atleast_2d(np.asarray(means, float))
        C, V = m.shape
        v = np.broadcast_to(np.asarray(variances, float), (C, V))
        idx, cnt = self._row(i)
        n = float(self.lengths[i])
        x = np.zeros(V)
        x[idx] = cnt

        phi = m.copy()
        value = _log_target(phi, x, n, m, v)
        active = np.ones(C, bool)
        it = 0
        while it < self.max_newton and active.any():
            it += 1
            rows = np.flatnonzero(active)
            new_phi, new_val, moved = _newton_step(phi[active], value[active], x, n, m[active],
                                                   v[active])
            phi[rows] = new_phi
            value[rows] = new_val
            active[rows[moved < self.newton_tol]] = False
        self.newton_iterations += it
        p = softmax(phi, axis=1)
        a = 1.0 / v + n * p
        npv = n * p * v
        s = np.sum(p / (1.0 + npv), axis=1)
        logz = (value - 0.5 * np.sum(np.log1p(npv), axis=1) - 0.5 * np.log(s))
        grad = x - n * p - (phi - m) / v
        info = {"a": a, "u": p / a, "s": s, "n": np.full(C, n),
                "iterations": np.array(it), "grad_max": np.max(np.abs(grad), axis=1)}
        return logz, phi, info

    def candidates(self, i: int, means: np.ndarray, variances: np.ndarray,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Laplace estimates of log ∫ N(φ; m_c, diag v_c) F(x_i | φ) dφ for means (C, V) and
        variances (C, 1) or (C, V), and a draw of each φ_c from the Laplace Gaussian N(φ̂_c,
        H_c⁻¹) of the normalised product (exact rank-one sampling; module docstring)."""
        logz, mode, info = self.laplace(i, means, variances)
        C, V = mode.shape
        z = rng.standard_normal((C, V))
        zeta = rng.standard_normal(C)
        draw = (mode + z / np.sqrt(info["a"])
                + (np.sqrt(info["n"] / info["s"]) * zeta)[:, None] * info["u"])
        return logz, draw

    def counts_of(self, items: np.ndarray) -> np.ndarray:
        """The summed word counts v (V,) of some documents."""
        items = np.asarray(items, dtype=np.int64)
        return np.asarray(self.X[items].sum(0)).ravel()

    def pseudo_obs(self, items: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Eqs. 8.12-8.13 (diagonal Hessian) at the smoothed MLE expansion point, shifted into
        the gauge of the current state phi (V,): returns (y, r), each (V,)."""
        v = self.counts_of(items)
        if v.sum() == 0:  # empty documents: no information (y is never read at r = ∞)
            return np.array(phi, float), np.full(self.dim, np.inf)
        hat, _, g, h = self._expansion(v, np.mean(phi))
        r = 1.0 / h
        return hat + r * g, r

    def _expansion(self, v: np.ndarray, level) -> tuple[np.ndarray, ...]:
        """For counts v (a row each): the smoothed MLE φ̂ = log((v + a) / (|v| + aV)) shifted to
        mean ``level``, p = softmax(φ̂), the gradient g = v − |v| p and the diagonal curvature
        h = |v| p (1 − p) of v·φ − |v| C(φ) there (Eqs. 8.12-8.13: r = 1/h, y = φ̂ + r g)."""
        total = v.sum(-1, keepdims=True)
        hat = np.log((v + self.smoothing) / (total + self.smoothing * self.dim))
        hat += level - hat.mean(-1, keepdims=True)
        p = softmax(hat, axis=-1)
        return hat, p, v - total * p, total * p * (1.0 - p)

    def group_pseudo_obs(self, items: np.ndarray, starts: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the groups of ``items`` beginning at ``starts``, with counts v (|v| words): the
        second-order expansion of Σ log F = v·φ − |v| C(φ) with the diagonal Hessian
        (Eqs. 8.12-8.13) at the smoothed MLE φ̂ centred to mean 0 (the gauge of G_0's mean;
        no chain state is given), as c N(y; φ, r): r and y as ``pseudo_obs`` and
        log c = v·φ̂ − |v| C(φ̂) + ½ Σ_w r_w g_w² + ½ Σ_w log 2π r_w with g = v − |v| p, so that
        c N(y; φ̂, r) = F at φ̂ with the same gradient and diagonal curvature there. A group
        without words gets r = 1e12 (no information; its c then cancels its Gaussian)."""
        items = np.asarray(items, dtype=np.int64)
        starts = np.asarray(starts, dtype=np.int64)
        group = np.zeros(len(items), dtype=np.int64)
        group[starts[1:]] = 1
        group = np.cumsum(group)
        G = sp.csr_matrix((np.ones(len(items)), (group, np.arange(len(items)))),
                          shape=(len(starts), len(items)))
        v = np.asarray((G @ self.X[items]).todense())
        hat, _, g, h = self._expansion(v, 0.0)
        r = 1.0 / np.maximum(h, 1e-12)
        log_c = ((v * hat).sum(1) - v.sum(1) * logsumexp(hat, axis=1)
                 + 0.5 * (r * g ** 2).sum(1) + 0.5 * np.log(2 * np.pi * r).sum(1))
        return hat + r * g, r, log_c

    def pieces(self, items: np.ndarray, anchors: tuple[int, int], walk) -> CountPieces:
        """Predictives from the pieces' summed word counts (``CountPieces``)."""
        return CountPieces(self.X[items], anchors, self.smoothing)

    def total_loglik(self, items: np.ndarray, phi: np.ndarray) -> float:
        """Σ_i log F(x_i | φ) = v·φ − |v| C(φ) over the items at one state phi (V,)."""
        v = self.counts_of(items)
        return float(v @ phi - v.sum() * logsumexp(phi))


class CountPieces:
    """Two pieces of a split as their documents' summed counts c_k, each anchor's counted from
    the start: document u's predictive is Σ_w x_uw log((c_kw + a) / (|c_k| + aV)), a the
    smoothing. A piece's Kalman state from single documents' pseudo-observations would not do
    in V dimensions: a piece of one document predicts any other worse than a piece of many
    (its variances alone cost about ½ log 2 a word), so the first piece would take every
    document. Time is ignored: the allocation's weights carry it."""

    def __init__(self, X: sp.csr_matrix, anchors: tuple[int, int], smoothing: float):
        self.X, self.anchors, self.a = X, anchors, smoothing
        self.c = np.zeros((2, X.shape[1]))
        for k, u in enumerate(anchors):
            self.absorb_row(k, u)

    def absorb_row(self, k: int, u: int) -> None:
        lo, hi = self.X.indptr[u], self.X.indptr[u + 1]
        self.c[k, self.X.indices[lo:hi]] += self.X.data[lo:hi]

    def log_predictive(self, k: int, u: int, t: int) -> float:
        lo, hi = self.X.indptr[u], self.X.indptr[u + 1]
        words, x = self.X.indices[lo:hi], self.X.data[lo:hi]
        c = self.c[k]
        return float(x @ np.log(c[words] + self.a)
                     - x.sum() * math.log(c.sum() + self.a * len(c)))

    def absorb(self, k: int, u: int, t: int) -> None:
        if u not in self.anchors:  # counted from the start
            self.absorb_row(k, u)


def _log_target(phi: np.ndarray, x: np.ndarray, n: float, m: np.ndarray, v: np.ndarray
                ) -> np.ndarray:
    """g(φ) = x·φ − n C(φ) − ½ Σ (φ − m)² / v per row: log F(x | φ) + log N(φ; m, diag v) up to
    constants, what the Laplace approximation maximises."""
    return phi @ x - n * logsumexp(phi, axis=1) - 0.5 * np.sum((phi - m) ** 2 / v, 1)


def _newton_step(ph: np.ndarray, old: np.ndarray, x: np.ndarray, n: float, mm: np.ndarray,
                 vv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One damped Newton step of g per row from ``ph`` (values ``old``), the direction H⁻¹∇g by
    H = diag(a) − n p pᵀ (Sherman-Morrison) and the length halved until Armijo's condition
    holds: the new points, their values, and each row's largest coordinate move."""
    p = softmax(ph, axis=1)
    grad = x - n * p - (ph - mm) / vv
    a = 1.0 / vv + n * p
    s = np.sum(p / (1.0 + n * p * vv), axis=1)
    g_a = grad / a
    step = g_a + (n * np.sum(p * g_a, axis=1) / s)[:, None] * (p / a)
    slope = np.sum(grad * step, axis=1)  # > 0: H is positive definite
    t = np.ones(len(ph))
    new_phi = ph + step
    new_val = _log_target(new_phi, x, n, mm, vv)
    for _ in range(40):
        # Armijo, with room for rounding at convergence; NaN (overflow) is bad too
        bad = ~(new_val >= old + 1e-4 * t * slope - 1e-12 * np.abs(old))
        if not bad.any():
            break
        t[bad] *= 0.5
        trial = ph[bad] + t[bad, None] * step[bad]
        new_phi[bad] = trial
        new_val[bad] = _log_target(trial, x, n, mm[bad], vv[bad])
    return new_phi, new_val, np.max(np.abs(t[:, None] * step), axis=1)
