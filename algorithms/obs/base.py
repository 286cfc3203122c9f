"""The one interface every observation model implements (conjugate exponential families).

Statistics and posteriors are plain dicts of arrays whose first axis runs over components, so
they add, slice and travel to Dask workers without custom serialisation. A model whose
components share a parameter (tied-gauss: one precision matrix) also has statistics and
posterior entries without a component axis: ``shared_shapes`` names the statistics, ``select``
and ``concat`` treat the posterior's and the one-item state's entries accordingly, and
``log_evidence`` and ``merge_gains`` give the evidence where no per-component one exists.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

# the default priors' data scale (prior_scale.py), importable from here by the pipeline
from .prior_scale import (  # noqa: F401
    SHRINKAGE,
    constant_columns,
    data_scale_matrix,
    prior_variances,
    shrinkage_target,
)

Data = np.ndarray | sp.csr_matrix
Arrays = dict[str, np.ndarray]


def stack_rows(blocks: list[Data]) -> Data:
    """Row-wise concatenation of dense arrays or CSR matrices."""
    return sp.vstack(blocks, format="csr") if sp.issparse(blocks[0]) else np.concatenate(blocks)


class Rows:
    """Items read one row at a time through the observation model's one-item interface
    (predictive_logpdf_state, absorb, remove): ``ObsModel.prepare``'s default (Mult prepares
    its documents once instead, read the same way, by position)."""

    def __init__(self, obs: ObsModel, X: Data) -> None:
        self.obs, self.X, self.n = obs, X, X.shape[0]

    def loglik(self, state: Arrays, i: int) -> np.ndarray:
        """Item i's predictive log density under each component of ``state``: (K,)."""
        return self.obs.predictive_logpdf_state(state, self.X[i:i + 1])[0]

    def logliks(self, state: Arrays) -> np.ndarray:
        """Every item's predictive log density under each component: (n, K)."""
        return self.obs.predictive_logpdf_state(state, self.X)

    def absorb(self, state: Arrays, i: int, ks: np.ndarray, ws: np.ndarray) -> None:
        x = self.X[i:i + 1]
        for k, w in zip(ks.tolist(), ws.tolist(), strict=True):
            self.obs.absorb(state, k, x, w)

    def remove(self, state: Arrays, i: int, ks: np.ndarray, ws: np.ndarray) -> None:
        x = self.X[i:i + 1]
        for k, w in zip(ks.tolist(), ws.tolist(), strict=True):
            self.obs.remove(state, k, x, w)


class ObsModel(ABC):
    """p(x | phi_k) in an exponential family with conjugate prior H(phi | lambda_0)."""

    name: ClassVar[str]
    # bag-of-words data (sparse counts), its density that of the token sequence: log p(x_d)
    # without the multinomial coefficient log(n_d! / Π_w x_dw!)
    text: ClassVar[bool] = False
    # responsibilities below this are set to 0 in the local step (vb.local.truncate)
    responsibility_floor: ClassVar[float] = 0.0
    # what `bnpmix show` says about the components' means ("": nothing)
    means_note: ClassVar[str] = ""
    # the corpus kind (dense, bow) whose default model this is (None: it is named to be used)
    default_for: ClassVar[str | None] = None
    # a pair's merge gain (merge_gains) depends on the two components' statistics alone, so a
    # merge elsewhere leaves it unchanged (False: components share a parameter)
    pairwise_gains: ClassVar[bool] = True
    # the global update is iterative (mfa): post_update from the last q of the same components
    # is cheaper than post and never lowers the bound, so loops of global updates over the same
    # components (a birth's fresh VB, the prior's learning rounds) start each from the last
    warm_start: ClassVar[bool] = False
    # log_marginal is the closed-form evidence log M(S) (False: the bound of an iterative fit,
    # mfa's, which ddCRP's link moves, exact by enumeration on the evidence, cannot use)
    exact_evidence: ClassVar[bool] = True

    @classmethod
    def component_params(cls, D: int) -> int:
        """The free parameters of one component in D dimensions (``--obs auto`` weighs a
        candidate's laps by them against the sample's size)."""
        raise NotImplementedError(f"{cls.name} does not count its parameters")

    def prepare(self, X: Data) -> Any:
        """The rows of X for repeated one-item calls by position (ADF and EP sweeps): ``Rows``
        by default; a model may check and convert its partition once instead."""
        return Rows(self, X)

    @abstractmethod
    def stat_shapes(self) -> dict[str, tuple[int, ...]]:
        """Shape of each per-component statistic (without the component axis)."""

    def shared_shapes(self) -> dict[str, tuple[int, ...]]:
        """Shape of each statistic without a component axis, shared by all components (a tied
        model's pooled scatter): none by default. ``stats`` returns them beside the others;
        a Summary keeps them apart (Summary.shared) and moves leave them unchanged."""
        return {}

    def split_stats(self, stats: Arrays) -> tuple[Arrays, Arrays]:
        """``stats`` (as ``stats`` or ``local_step`` return them) as (per-component, shared)."""
        shared = self.shared_shapes()
        return ({k: v for k, v in stats.items() if k not in shared},
                {k: v for k, v in stats.items() if k in shared})

    @abstractmethod
    def stats(self, X: Data, R: np.ndarray) -> Arrays:
        """s_k = Σ_n r_nk t(x_n) for responsibilities R (n, K) (Eq. 7), and the shared
        statistics (shared_shapes), if any."""

    @abstractmethod
    def post(self, N: np.ndarray, stats: Arrays) -> Arrays:
        """Global update lambda_k = lambda_0 + s_k (Eq. 10; supplement Eq. 18)."""

    # the sparse path of large vocabularies: defaults for models whose statistics are small

    def batch_stats(self, X: Data, R: np.ndarray) -> dict[str, Any]:
        """The statistics of a batch summary: ``stats``, or an equal smaller form (Mult: a
        sparse matrix)."""
        return self.stats(X, R)

    def batch_columns(self, X: Data) -> np.ndarray | None:
        """The columns of the global parameters a local step on X reads (None: all)."""
        return None

    def restrict(self, post: Arrays, cols: np.ndarray | None) -> Arrays:
        """What a local step on data with columns ``cols`` needs of ``post`` (E_loglik's
        input); the whole post by default."""
        return post

    def post_update(self, post: Arrays, N: np.ndarray, stats: Arrays,
                    changed: Any) -> Arrays:
        """The global update (Eq. 10) from statistics that differ from those ``post`` was built
        from only where ``changed`` (a 0/1 sparse (K, columns) pattern; None: anywhere); by
        default a new ``post(N, stats)``. A model may update ``post``'s arrays in place
        instead (Mult): the caller owns them."""
        return self.post(N, stats)

    def local_step(self, X: Data, post: Arrays, Elogw: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, Arrays, np.ndarray] | None:
        """Eq. 9 fused with Eq. 7 in one pass over X: (R, N, stats, H), equal to the
        responsibilities from E_loglik followed by N = Σ_n r_n, ``stats`` and the entropies
        H_k = -Σ_n r_nk log r_nk; None (the default) when the model has no such pass, and
        ``vb.local.batch_step`` computes them one after another."""
        return None

    def repeated(self, X: Data) -> Data:
        """X as ``local_step`` reads it fastest when it runs on the same items many times (a
        birth's fresh VB): a model may keep what each step would otherwise recompute from X.
        X itself by default."""
        return X

    def elbo_at_optimum(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """``elbo`` when ``post`` is the global update of exactly these statistics (so the
        terms linear in the statistics cancel); a model may compute it more cheaply."""
        return self.elbo(N, stats, post)

    @abstractmethod
    def E_loglik(self, X: Data, post: Arrays) -> np.ndarray:
        """E_q[log p(x_n | phi_k)] for all n, k: an (n, K) array (Eq. 9; supplement Eq. 19)."""

    @abstractmethod
    def draw(self, post: Arrays, rng: np.random.Generator) -> Arrays:
        """One draw θ_k ~ q(θ_k) = H(θ | λ_k) per component k: arrays with a leading K axis."""

    @abstractmethod
    def sample_items(self, theta: Arrays, rng: np.random.Generator,
                     n_words: np.ndarray | None = None) -> Data:
        """One item x_i ~ p(x | θ_i) per row i of θ (arrays with a leading item axis, as
        ``draw`` returns them); ``n_words``: each document's length (multinomials only)."""

    @abstractmethod
    def loglik(self, X: Data, theta: Arrays) -> np.ndarray:
        """log p(x_n | θ_k) for all n, k: (n, K), with E_q[log p(x_n | θ_k)] = E_loglik(X, post)."""

    @abstractmethod
    def elbo(self, N: np.ndarray, stats: Arrays, post: Arrays) -> float:
        """Observation terms of Eq. 8 for any q(phi): Σ_k E_q[log p(x | phi_k)] summed through
        the statistics, plus E_q[log H(phi_k) - log q(phi_k)]."""

    @abstractmethod
    def log_marginal(self, N: np.ndarray, stats: Arrays) -> np.ndarray:
        """log M(S_k) = log ∫ Π_n p(x_n|phi)^{r_nk} H(phi) dphi from summaries (Eq. 12), per k.
        Equals the observation ELBO at the optimal q(phi_k). A model whose components share a
        parameter has no per-component evidence: it raises NotImplementedError, and
        log_evidence and merge_gains are what callers use."""

    def log_evidence(self, N: np.ndarray, stats: Arrays) -> float:
        """log M(S) of the whole summary, the observation ELBO at the optimal q(phi) (Eq. 12):
        Σ_k log M(S_k) by default."""
        return float(np.sum(self.log_marginal(N, stats)))

    def merge_gains(self, N: np.ndarray, stats: Arrays, a: np.ndarray,
                    b: np.ndarray) -> np.ndarray:
        """Eq. 12 for each pair i of component positions (a_i, b_i): log M(S with b_i merged
        into a_i) - log M(S). By default log M(S_a + S_b) - log M(S_a) - log M(S_b) from
        log_marginal (each single component's only for those the pairs name), in chunks of pairs
        whose merged statistics take at most MERGE_CHUNK_ENTRIES entries at a time."""
        if len(a) == 0:
            return np.zeros(0)
        rows, at = np.unique(np.concatenate([a, b]), return_inverse=True)
        single = self.log_marginal(N[rows], {k: v[rows] for k, v in stats.items()})
        per_pair = sum(int(np.prod(v.shape[1:])) for v in stats.values())
        step = max(1, MERGE_CHUNK_ENTRIES // max(per_pair, 1))
        merged = np.concatenate([
            self.log_marginal(N[i] + N[j], {k: v[i] + v[j] for k, v in stats.items()})
            for i, j in ((a[s:s + step], b[s:s + step]) for s in range(0, len(a), step))])
        return merged - single[at[: len(a)]] - single[at[len(a):]]

    @abstractmethod
    def predictive_logpdf(self, X: Data, post: Arrays) -> np.ndarray:
        """Posterior-predictive log density log ∫ p(x_n | phi) q(phi_k) dphi: (n, K)."""

    @abstractmethod
    def features(self, X: Data) -> Data:
        """Vectors (dense, or CSR) in which Euclidean distance separates components (k-means++
        seeding)."""

    @abstractmethod
    def prior(self) -> dict[str, Any]:
        """The prior's parameters (JSON-able scalars or lists), enough to rebuild the model."""

    @classmethod
    @abstractmethod
    def default(cls, X: Data, **overrides: Any) -> ObsModel:
        """A weak prior scaled to a data sample; every parameter can be overridden."""

    def prior_figures(self) -> dict[str, float]:
        """The prior's hyperparameters as a few named numbers, never matrices (summary.json,
        `bnpmix info`, the report); none by default."""
        return {}

    def learn_prior(self, post: Arrays, base: ObsModel) -> ObsModel:
        """A model whose prior hyperparameters λ0 maximise Σ_k E_q[ln H(φ_k | λ0)] over the K
        posteriors ``post`` (type-II maximum likelihood inside VB: at fixed q these are the
        ELBO's only terms in λ0), within bounds that contain the current λ0 so that the ELBO
        never falls; ``base`` (the run's initial model) anchors bounds that keep the learned
        prior from degenerating. This model itself by default (a model that learns nothing)."""
        return self

    @abstractmethod
    def check_data(self, X: Data) -> None:
        """Raise ValueError if X does not fit this model (dimension, sign, sparsity)."""

    @abstractmethod
    def predictive_state(self, post: Arrays) -> Arrays:
        """The state of the one-item path, built once from a posterior: new arrays (never views
        of post), first axis = component, so it saves with np.savez and travels to workers."""

    @abstractmethod
    def predictive_logpdf_state(self, state: Arrays, X: Data) -> np.ndarray:
        """predictive_logpdf of one item or a few (n, K) from a predictive state, in time
        independent of the data size: O(K D²) per item for full Gaussians, O(K nnz) for Mult."""

    @abstractmethod
    def absorb(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """Add one item x with weight w ≥ 0 (a responsibility) to component k, in place:
        the state becomes that of λ_k + w t(x)."""

    @abstractmethod
    def remove(self, state: Arrays, k: int, x: Data, w: float = 1.0) -> None:
        """The exact inverse of absorb: λ_k - w t(x), in place. Raises ValueError, leaving the
        state untouched, if the result would not be a valid posterior."""

    @abstractmethod
    def means(self, post: Arrays) -> np.ndarray:
        """Posterior-mean component parameters, (K, D) or (K, V)."""

    def covariances(self, post: Arrays) -> np.ndarray | None:
        """E_q[Σ_k], the components' expected covariances (None: the model has none)."""
        return None

    def saved_post(self, post: Arrays) -> Arrays:
        """The arrays of a posterior that a model file or checkpoint keeps (``restored_post``
        rebuilds the rest): all of them by default."""
        return post

    def restored_post(self, saved: Arrays) -> Arrays:
        """The posterior from ``saved_post``'s arrays."""
        return saved

    def prior_post(self, K: int) -> Arrays:
        """The posterior of K components that have seen no data (equal to the prior)."""
        shapes = self.stat_shapes()
        return self.post(np.zeros(K), {**{k: np.zeros((K, *s)) for k, s in shapes.items()},
                                       **{k: np.zeros(s) for k, s in self.shared_shapes().items()}})

    def select(self, d: Arrays, idx: np.ndarray) -> Arrays:
        """Components ``idx`` (positions or a mask, repeats allowed) of a posterior or a
        one-item state: every array indexed on its component axis by default; a model with
        shared parameters keeps their entries whole."""
        return {k: v[idx] for k, v in d.items()}

    def concat(self, d: Arrays, e: Arrays) -> Arrays:
        """The components of ``d``, then those of ``e`` (posteriors or one-item states of the
        same kind); a model with shared parameters keeps ``d``'s entries for them."""
        return {k: np.concatenate([v, e[k]]) for k, v in d.items()}

    def fresh(self, d: Arrays, new: Arrays) -> Arrays:
        """Components that have seen no data beside the components of ``d``: ``new`` (the
        prior's posterior or state) with any shared parameter taken from ``d``, so a tied
        model's new component uses the precision learnt so far. For reading: the result may
        share arrays with ``d``."""
        return self.concat(self.select(d, np.zeros(0, np.int64)), new)


def weighted_outer(X: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Σ_n r_nk x_n x_nᵀ for every k: (K, D, D), one (D x n)(n x D) matrix product per component
    (measured faster than one product with the n x D² outer products for n >= 1,000, D = 25)."""
    XT = np.ascontiguousarray(X.T)
    return np.stack([(XT * R[:, k]) @ X for k in range(R.shape[1])]) if R.shape[1] else (
        np.zeros((0, X.shape[1], X.shape[1])))


def log_gamma_draw(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """log G for G ~ Gamma(a, 1), elementwise, finite for every shape a > 0: below a = 1,
    G = G' U^{1/a} with G' ~ Gamma(a + 1), U ~ Uniform(0, 1], so log G = log G' + log U / a
    (Marsaglia & Tsang 2000); a direct draw of Gamma(0.01) is 0 about once in 1,800 (measured)."""
    a = np.asarray(a, dtype=float)
    small = a < 1.0
    out = np.log(rng.standard_gamma(np.where(small, a + 1.0, a)))
    if np.any(small):
        out[small] += np.log1p(-rng.random(int(small.sum()))) / a[small]  # 1 - U ∈ (0, 1]
    return out


# statistics' entries summed per chunk of pairs in merge_gains: each merged pair's statistics are
# a (densified) row as long as a component's, and at K = 101 (5,050 pairs) over V = 7,841 words
# all pairs at once took 0.9 GB of temporaries on the driver
MERGE_CHUNK_ENTRIES = 1 << 21
