"""The one labelling of clusters a user sees: 0..K-1 by decreasing expected weight E[w_k], ties
by the engine's internal component id. ``predict``, ``assignments/``, summary.json's lists,
``bnpmix info``/``show`` and the report all give a cluster this label; the engines' ids (stable
across births, merges and warm starts) stay inside model.npz and summary.json's
``component_ids``. numpy only: ``bnpmix info`` loads neither scipy nor pyarrow."""

from __future__ import annotations

from typing import Any

import numpy as np


def label_order(weights: Any, uids: Any) -> np.ndarray:
    """The components' rows in label order: the component in row ``order[l]`` is cluster ``l``.
    A function of the weights and ids alone, so a run's summary.json and its model give the
    same labels."""
    return np.lexsort((np.asarray(uids), -np.asarray(weights, float)))


def labels_of(weights: Any, uids: Any, ids: Any) -> np.ndarray:
    """The labels of the components with internal ids ``ids`` (an engine's assignments)."""
    by_label = np.asarray(uids)[label_order(weights, uids)]
    sort = np.argsort(by_label, kind="stable")
    return sort[np.searchsorted(by_label[sort], np.asarray(ids))]
