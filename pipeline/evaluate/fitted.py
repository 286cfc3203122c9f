"""``bnpmix.load(RUN_DIR)``: a fitted model with scikit-learn-style accessors, whatever engine
produced it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from bnpmix.algorithms.mixture import PredictiveMixture
from bnpmix.algorithms.obs.base import Data

from ..labels import label_order, labels_of
from ..runtime.models import read_model


class FittedModel:
    """A fitted mixture read from a run directory, its components labelled 0..K-1 by decreasing
    weight (pipeline/labels.py): every array below is in label order.

    Attributes
    ----------
    weights_ : (K,) expected weights E[w_k] of the active components, decreasing.
    weight_new_ : expected mass left for components not yet seen.
    means_ : (K, D) posterior-mean component parameters (mean vectors for Gaussians, expected
        word distributions for multinomials).
    component_ids_ : (K,) the engine's internal component ids (never shown to users).
    order_ : (K,) the model's rows in label order (``model.uids[order_] == component_ids_``).
    n_components_ : number of active components.
    """

    def __init__(self, model: PredictiveMixture, run_dir: str | Path | None = None) -> None:
        self.model = model
        self.run_dir = None if run_dir is None else Path(run_dir)
        weights, self.weight_new_ = model.weights()
        self.order_ = label_order(weights, model.uids)
        self.weights_ = np.asarray(weights)[self.order_]
        self.means_ = model.obs.means(model.post)[self.order_]
        self.component_ids_ = np.asarray(model.uids)[self.order_]
        self.n_components_ = model.K

    def labels_of(self, ids: Any) -> np.ndarray:
        """The labels of the components with internal ids ``ids`` (an engine's assignments)."""
        return labels_of(self.model.weights()[0], self.model.uids, ids)

    def _data(self, X: Any) -> Data:
        X = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.asarray(X, np.float64)
        if X.ndim != 2:
            raise ValueError(f"expected a 2-d array of items, got shape {X.shape}")
        try:
            self.model.obs.check_data(X)
        except ValueError as exc:
            raise ValueError(f"X does not fit this {self.model.obs.name} model: {exc}") from None
        return X

    def score_samples(self, X: Any, sequence: Any = None, positions: Any = None) -> np.ndarray:
        """Posterior-predictive log density of each item, new components' mass included. A
        ddcrp model scores items held out from their ``sequence`` (one id, or one per item)
        by the paper's Eq. 7, linking uniformly to the sequence's training items or, given
        their ``positions``, by the run's decay."""
        X = self._data(X)
        if sequence is None:
            if positions is not None:
                raise ValueError("positions apply to items of a sequence: give sequence too")
            return self.model.score_samples(X)
        if not hasattr(self.model, "score_sequences"):
            raise ValueError(f"this {type(self.model).__name__} has no sequences (fit "
                             "--algorithm ddcrp for a model of sequences)")
        seqs = np.broadcast_to(np.asarray(sequence), (X.shape[0],))
        return self.model.score_sequences(
            X, seqs, None if positions is None else np.asarray(positions, float))

    def score(self, X: Any, sequence: Any = None, positions: Any = None) -> float:
        """Mean posterior-predictive log density per item (see ``score_samples``)."""
        return float(np.mean(self.score_samples(X, sequence, positions)))

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n, K) probabilities over the active components (columns in label order, as
        ``weights_``) under the posterior predictive."""
        return self.model.predict_proba(self._data(X))[:, self.order_]

    def predict(self, X: Any) -> np.ndarray:
        """Label (0..K-1, as in ``weights_``) of each item's most probable active component."""
        return self.model.log_joint_predictive(self._data(X))[:, self.order_].argmax(axis=1)

    def __repr__(self) -> str:
        return (f"FittedModel({self.model.obs.name}, K={self.n_components_}"
                f"{'' if self.run_dir is None else f', {self.run_dir}'})")


def load(run_dir: str | Path) -> FittedModel:
    """The fitted model of a finished run directory (a local path, or a URL)."""
    return FittedModel(read_model(str(run_dir)), run_dir)
