"""``bnpmix.BayesianMixture``: the engines behind scikit-learn's estimator verbs.

``fit(X)`` runs the chosen engine exactly as ``bnpmix fit`` does on X held in memory (a corpus of
X's partitions, storage.memory: nothing of X is written; a Dask collection's blocks are computed
where its batches run), or on a corpus directory given as a path, and keeps the fitted model in
memory; the run's temporary directory (its checkpoints) is removed. Predictions use the
posterior predictive: p(z = k | x) ∝ E[w_k] p(x | x_k's posterior), ``score_samples`` =
log Σ_k E[w_k] p(x | …) plus the mass for new components, as ``bnpmix evaluate``.

Engine options are keyword arguments with the job-file names (``K=5, laps=20``, ``alpha0=2``);
they are parameters like any other for ``get_params``/``set_params``/``clone``.
"""

from __future__ import annotations

import inspect
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bnpmix.storage import BnpmixError, Corpus, RunDir, local_path
from bnpmix.storage.atomic import staged_directory
from bnpmix.storage.errors import naming
from bnpmix.storage.matrix import as_matrix, blocks, width
from bnpmix.storage.memory import memory_corpus, write_corpus

from .config import options
from .engines import DEFAULT_ENGINE
from .evaluate.fitted import FittedModel
from .fit import fit as fit_corpus
from .fit import job_config
from .runtime.engine import ENGINES, engine_class, engine_names
from .runtime.models import read_model, write_model

try:  # scikit-learn is optional: with it the estimator is a real sklearn estimator
    from sklearn.base import BaseEstimator, ClusterMixin, DensityMixin
    from sklearn.exceptions import ConvergenceWarning, NotFittedError

    BASES: tuple[type, ...] = (DensityMixin, ClusterMixin, BaseEstimator)
except ImportError:  # the plain install (tests/test_plain_install.py runs without it)
    BASES = (object,)

    class ConvergenceWarning(UserWarning):  # type: ignore[no-redef]
        """An engine stopped at its iteration limit before its convergence test."""

    class NotFittedError(ValueError, AttributeError):  # type: ignore[no-redef]
        """A prediction asked of an estimator that has not been fitted."""


# every job option by its job-file name (not the run directory's: the estimator's is temporary;
# sklearn's warm_start means something else): keyword parameters, default
# None (the engine's default), so that get_params, set_params and clone see them all
OPTIONS = tuple(row.name for row in options()
                if row.name not in {"algorithm", "corpus", "out", "seed", "obs", "warm_start",
                                    "checkpoint_every"})


def streaming() -> list[str]:
    """The engines with partial_fit: those that declare ``streams``."""
    return [name for name in engine_names() if ENGINES[name].streams]


class _streaming_only:
    """A method that exists only on estimators of a streaming engine (``hasattr(est,
    "partial_fit")`` is then False for the others, as scikit-learn and dask-ml's Incremental
    expect), with an AttributeError that says why."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self.fn
        names = streaming()
        if obj.algorithm not in names:
            raise AttributeError(f"partial_fit streams with {' or '.join(names)}: use "
                                 f"algorithm={' or '.join(map(repr, names))}, not "
                                 f"{obj.algorithm!r} (the others fit whole corpora: fit a "
                                 "corpus path, read partition by partition)")
        return self.fn.__get__(obj, owner)


class BayesianMixture(*BASES):
    """A Bayesian nonparametric mixture fitted by one of bnpmix's engines.

    Parameters
    ----------
    algorithm : str
        The engine: any name ``bnpmix fit --algorithm`` takes: today memo (memoized online VB
        with births, merges and deletes), vb, sovb, adf, ep, tdpm, ddcrp, and any engine an
        installed package registers (see ``bnpmix fit --help``).
    obs : str or None, default None
        The observation model: any name ``bnpmix fit --obs`` takes (``OBS_NAMES``: gauss,
        zm-gauss, diag-gauss, tied-gauss, mult), or "auto". None: the
        corpus kind's default model (``ObsModel.default_for``: the multinomial for sparse
        counts); for dense data "auto" with the engines that mix any observation model (the
        covariance structure whose memo run on the data has the highest ELBO per item in a
        race of laps; see pipeline.auto).
    random_state : int or None, default None
        The seed (None: a fresh one for each fit).
    **options
        Engine options by their job-file names, e.g. ``K=1, laps=100, alpha0=1.0``; among
        them ``dequantise`` (default True): columns of X that hold only integers are scored
        by the probability of their unit cells (the variational dequantisation bound,
        algorithms/obs/dequant.py), found by ``fit`` itself; False treats them as continuous.

    Attributes
    ----------
    weights_ : ndarray of shape (K,)
        E[w_k] of the active components, in decreasing order (the labels 0..K-1).
    weight_new_ : float
        The mass left for new components.
    means_ : ndarray of shape (K, D)
    covariances_ : ndarray
        Gaussian models: E[Σ_k], (K, D, D); its diagonals (K, D) for the diagonal model;
        for the tied one the shared E[Σ] in every row.
    n_components_ : int
        Active components.
    labels_ : ndarray of shape (n,)
        The training items' most probable component, an index into ``weights_`` (a component
        may own no item).
    lower_bound_ : float
        The engine's objective (summary.json's ``objective``: the ELBO, a log-likelihood, ...).
    converged_ : bool
        False when the engine stopped at its iteration limit before its convergence test held.
    n_iter_ : int
        Laps.
    n_features_in_ : int
    model_ : FittedModel
    """

    def __init__(self, algorithm: str = DEFAULT_ENGINE, obs: str | None = None,
                 random_state: int | None = None, **options: Any) -> None:
        self.algorithm = algorithm
        self.obs = obs
        self.random_state = random_state
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"unknown engine option(s) {', '.join(unknown)} (options take "
                            "their job-file names: see bnpmix fit --help)")
        for name in OPTIONS:  # None: the engine's default
            setattr(self, name, options.get(name))

    def _run_seed(self) -> int:
        """The seed of one engine run: from ``random_state``, or a fresh one when it is None."""
        return (int(np.random.SeedSequence().generate_state(1)[0] >> 1)
                if self.random_state is None else _seed(self.random_state))

    def _job(self, seed: int) -> Any:
        given = {name: getattr(self, name) for name in OPTIONS if getattr(self, name) is not None}
        if self.obs is not None:
            given["obs"] = self.obs
        return job_config(algorithm=self.algorithm, seed=seed, **given)

    # -- fitting ------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None) -> BayesianMixture:
        """Fit to X: an (n, D) array, a scipy.sparse count matrix, a pandas or pyarrow table, a
        Dask array or dataframe (its blocks computed where they are visited, never gathered), or
        a corpus path."""
        job = self._job(self._run_seed())
        with tempfile.TemporaryDirectory(prefix="bnpmix-estimator-") as tmp, \
                naming(_places(tmp)):
            corpus = Corpus(Path(X)) if isinstance(X, str | Path) else memory_corpus(X)
            summary = self._run(corpus, Path(tmp) / "run", job)
        self._n_seen = int(summary["n_items"])
        if not self.converged_:
            warnings.warn(f"{self.algorithm} stopped before converging "
                          f"({summary.get('stopped', 'its iteration limit')}); raise laps or "
                          "iterations", ConvergenceWarning, stacklevel=2)
        return self

    def _run(self, corpus: Corpus, run: Path, job: Any) -> dict[str, Any]:
        """Fit ``corpus`` into ``run`` as ``bnpmix fit`` does and keep the result in memory,
        with the run directory's files (what ``save`` writes; the directory is temporary)."""
        summary = fit_corpus(corpus, run, job)
        self._set_fitted(FittedModel(read_model(str(run))), summary,
                         RunDir(run).load_assignments(), corpus)
        self._run_files = (str(run.parent.resolve()), {str(p.relative_to(run)): p.read_bytes()
                                             for p in sorted(run.rglob("*")) if p.is_file()})
        return summary

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write the fitted run as a run directory at ``path``, as ``bnpmix fit --out`` does
        (summary.json, model.npz + model.json, trace.csv, assignments/; no pickle), published
        atomically (staged beside ``path``, renamed into place). ``bnpmix.load``, ``bnpmix
        info``, ``show``, ``report`` and ``evaluate --heldout CORPUS`` read it.

        A fit to a corpus path records that corpus (``bnpmix evaluate RUN`` scores it); a fit
        to X in memory does not keep X (no corpus of it was written): the run
        then records no training corpus, so score training data with ``bnpmix evaluate RUN
        --heldout`` on a corpus ingested from X.
        After ``partial_fit``, the last call's run: the model so far, the last block's
        assignments and trace. An existing non-empty ``path`` is refused unless
        ``overwrite``, which replaces it only once the new directory is complete. Returns
        the directory's path."""
        self._fitted()
        root, files = self._run_files
        final = local_path(path)
        if final.exists() and not overwrite and (not final.is_dir() or any(final.iterdir())):
            raise BnpmixError(f"{final}: exists and is not empty; choose another path or "
                              "save(..., overwrite=True) to replace it")
        with staged_directory(final, overwrite=overwrite) as tmp:
            for name, data in _relocated(files, root, final.resolve()).items():
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp / name).write_bytes(data)
        return final

    def _set_fitted(self, model: FittedModel, summary: dict[str, Any], assignments: Any,
                    corpus: Corpus) -> None:
        self.model_ = model
        self.weights_, self.weight_new_ = model.weights_, model.weight_new_
        self.means_ = model.means_
        self.n_components_ = model.n_components_
        self.n_features_in_ = corpus.manifest.dim
        covariances = model.model.obs.covariances(model.model.post)
        if covariances is not None:
            self.covariances_ = covariances[model.order_]
        elif hasattr(self, "covariances_"):  # a refit with a model that has none
            del self.covariances_
        self.labels_ = assignments.sort_values("item")["cluster"].to_numpy()  # labels already
        self.lower_bound_ = float(summary[summary["objective"]])
        self.n_iter_ = int(summary["laps"])
        self.converged_ = bool(summary["converged"])

    @_streaming_only
    def partial_fit(self, X: Any, y: Any = None) -> BayesianMixture:
        """Absorb the items of X after everything absorbed so far, each call one run of the
        engine on X warm-started from the model so far.

        The engine says how a block joins the past (``Engine.stream_start`` before the run,
        ``Engine.stream_join`` after it). adf: streaming ADF (Tank et al. Alg. 1), one more
        pass, so that with ``merges="none"`` blocks X_1, X_2, ... give exactly one ADF run over
        their rows in that order (the default merges pool clusters after each block's pass).
        memo: the earlier blocks stay as their summary S_past (memoized VB keeps
        summaries, not data; Hughes & Sudderth Eq. 11), taken at the end of their call under a
        one-hot q(z) (``Mixture.one_hot_summary``): memo then runs on X to convergence with
        S_past in S^0, never revisited, its births and merges accepted on the exact ELBO of
        that q (a one-hot q has zero merge entropies, so no pair statistic of a gone block is
        needed).

        The observation prior is set at the first call (a data-scaled default: from the first
        block); a Gaussian one is then learned from the components by every call unless
        ``learn_prior=False``. ``labels_`` and ``lower_bound_`` are the last call's."""
        started = hasattr(self, "model_")
        if started and width(X) != self.n_features_in_:
            raise ValueError(f"X has {width(X)} features, but BayesianMixture is "
                             f"expecting {self.n_features_in_} features as input")
        engine = engine_class(self.algorithm)
        with tempfile.TemporaryDirectory(prefix="bnpmix-estimator-") as tmp, \
                naming(_places(tmp)):
            job = self._job(self._run_seed())
            if started:  # the model so far, as a run directory to warm-start from
                model = engine.stream_start(self.model_.model)
                write_model(RunDir(Path(tmp) / "so-far").create(), model)
                job = job.replace(run_warm_start=str(Path(tmp) / "so-far"))
            summary = self._run(memory_corpus(X), Path(tmp) / "run", job)
        self._n_seen = (self._n_seen if started else 0) + int(summary["n_items"])
        engine.stream_join(self.model_.model, blocks(X))
        return self

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit, then the training items' most probable components (``labels_``)."""
        return self.fit(X).labels_

    # -- predictions --------------------------------------------------------------------------

    def _fitted(self) -> FittedModel:
        if not hasattr(self, "model_"):
            raise NotFittedError("this BayesianMixture is not fitted yet: call fit first")
        return self.model_

    def _check(self, X: Any) -> Any:
        X = as_matrix(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but BayesianMixture is expecting "
                             f"{self.n_features_in_} features as input")
        return X

    def predict(self, X: Any) -> np.ndarray:
        """Index (0..K-1, as ``weights_``) of each item's most probable active component."""
        return self._fitted().predict(self._check(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n, K) posterior-predictive probabilities over the active components."""
        return self._fitted().predict_proba(self._check(X))

    def score_samples(self, X: Any) -> np.ndarray:
        """Posterior-predictive log density of each item (new components' mass included)."""
        return self._fitted().score_samples(self._check(X))

    def score(self, X: Any, y: Any = None) -> float:
        """Mean posterior-predictive log density per item."""
        return float(np.mean(self.score_samples(X)))

    def sample(self, n_samples: int = 1, n_words: Any = None) -> tuple[Any, np.ndarray]:
        """``n_samples`` new items, each from the posterior predictive (the density
        ``score_samples`` gives): a component by E[w] (a new one by the mass left), its
        parameters from q, the item from them. Returns X (CSR counts for text) and each item's
        component index into ``weights_`` (-1: a new component). ``n_words``: document lengths
        for text (default: the training documents' mean length). Draws follow
        ``random_state``."""
        model = self._fitted().model
        if not hasattr(model.obs, "sample_items"):
            raise ValueError(f"sample is not available for {self.algorithm} models (the "
                             "temporal model has no posterior over next-epoch items to draw)")
        if n_samples < 1:
            raise ValueError(f"n_samples must be at least 1, got {n_samples}")
        if n_words is None and model.obs.text:
            tokens = float((model.post["lam"] - model.obs.lam0).sum())  # λ_k = λ0 + counts
            n_words = max(1, round(tokens / self._n_seen))
        rng = np.random.default_rng(None if self.random_state is None
                                    else _seed(self.random_state))
        X, rows = model.sample(n_samples, rng, n_words)
        label = np.argsort(self.model_.order_)  # a model row's label
        return X, np.where(rows < 0, -1, label[np.maximum(rows, 0)])


BayesianMixture.__init__.__signature__ = inspect.signature(BayesianMixture.__init__).replace(
    parameters=[*list(inspect.signature(BayesianMixture.__init__).parameters.values())[:4],
                *(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None)
                  for name in OPTIONS)])


def _places(tmp: str) -> dict[str, str]:
    """What the estimator's temporary files stand for in its errors and warnings (``naming``):
    its runs are in the temporary directory (a full disk is that one's)."""
    return {str(Path(tmp) / "so-far"): "<the model so far>",
            str(Path(tmp) / "run"): f"{tempfile.gettempdir()}/<the estimator's temporary run>"}


def _relocated(files: dict[str, bytes], root: str, final: Path) -> dict[str, bytes]:
    """A run's files with job.json and summary.json no longer naming the estimator's temporary
    directory ``root``: the run is ``final``; a temporary warm start (partial_fit's model so
    far) is not kept: null in the configuration. (A run of X in memory records no training
    corpus already: ``bnpmix evaluate`` then asks for --heldout.)"""
    def moved(value: Any, key: str) -> Any:
        if not (isinstance(value, str) and Path(value).is_relative_to(root)):
            return value
        return str(final) if key == "out" else None

    out = dict(files)
    for name in ("job.json", "summary.json"):
        obj = json.loads(files[name])
        run = obj["config"]["run"]
        run.update({key: moved(value, key) for key, value in run.items()})
        out[name] = (json.dumps(obj, indent=2) + "\n").encode("utf-8")
    return out


def _seed(random_state: Any) -> int:
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31 - 1))
    return int(random_state)


__all__ = ["BayesianMixture", "BnpmixError", "ConvergenceWarning", "write_corpus"]
