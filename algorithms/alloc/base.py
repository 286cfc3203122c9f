"""The allocation-model interface: how a mixture weighs its existing components against a new one.

An allocation model is a prior over the partition of the items (the DP's stick-breaking weights,
and later normalized random measures). Engines need of it: the prior predictive weights of the
existing components and of a new one given (soft) counts, the probability of a new component,
and, where a variational treatment exists, q(weights) from counts, E[log w], E[w] and the
allocation terms of the ELBO. Posterior parameters are plain dicts of arrays, like the
observation models', so they save and travel without custom serialisation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

Arrays = dict[str, np.ndarray]


class Allocation(ABC):
    """A prior over mixture weights / partitions, named for saved models and job files."""

    name: ClassVar[str]

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """The prior's parameters (JSON-able), enough to rebuild it: ``cls(**params())``."""

    @abstractmethod
    def predictive_weights(self, counts: np.ndarray) -> tuple[np.ndarray, float]:
        """Unnormalised prior weights of the next item joining component k (given the counts
        N_k of the items so far) and of it starting a new component."""

    def new_component_probability(self, counts: np.ndarray) -> float:
        """P(next item starts a new component | counts): w_new / (Σ_k w_k + w_new)."""
        w, new = self.predictive_weights(counts)
        return float(new / (np.sum(w) + new))



class VariationalAllocation(Allocation):
    """An allocation model with a variational treatment, for the engines that optimise an ELBO
    (memo, vb, sovb): q(weights) from counts, its expectations and its ELBO terms."""

    @abstractmethod
    def post(self, N: np.ndarray) -> Arrays:
        """The optimal q(weights) given expected counts N_k of the active components."""

    @abstractmethod
    def E_log_w(self, post: Arrays) -> np.ndarray:
        """E_q[log w_k] for the active components."""

    @abstractmethod
    def E_w(self, post: Arrays) -> tuple[np.ndarray, float]:
        """E_q[w_k] of the active components and the expected mass left for new ones."""

    @abstractmethod
    def elbo(self, N: np.ndarray, post: Arrays) -> float:
        """Allocation terms of the ELBO for any q: Σ_k N_k E[log w_k] + E[log p(w) - log q(w)]."""

    def optimal_terms(self, N: np.ndarray) -> np.ndarray:
        """The allocation terms at their global update, ``elbo(n, post(n))``, for each row n of
        N (M, K): (M,). A model may compute the rows together (the same numbers)."""
        return np.array([self.elbo(n, self.post(n)) for n in np.asarray(N, dtype=float)])
