"""The priors over the chain labels the sampler runs with: the recurrent CRP (Ahmed & Xing
2008, Eq. 4.4) and the fixed-K baseline (Eq. 4.5), each with the factors a relinking move
changes (``link_factors``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from ..alloc.rcrp import chain_log_factors


@dataclass(frozen=True)
class RCRPPrior:
    """The recurrent CRP: concentration α, window W, decay λ (Eq. 4.4, Sec. 6)."""

    alpha: float
    window: int
    decay: float

    def link_factors(self, cols: np.ndarray, rel: int) -> np.ndarray:
        """Each column's own factors of log P(c_s | past) over the epochs s = rel..rel+W−1 whose
        window straddles the boundary before row ``rel`` (the rows of ``cols`` end before
        rel + W): Γ(m + n)/Γ(m) or α Γ(n) (``rcrp.chain_log_factors``); M_s does not depend on
        how the chains on either side are linked."""
        return chain_log_factors(cols, rel, self.window, self.decay, self.alpha)


@dataclass(frozen=True)
class FixedKPrior:
    """The baseline: K chains alive at every epoch, born at the first. The paper's finite
    dynamic mixture (Sec. 4.3, ``carry``): π_t ~ Dir(n_{·,t−1} + α/K), so an item joins k with
    weight n_{k,t−1} + n_{k,t} + α/K (Eq. 4.5) times the look-ahead (n_{k,t} + n_{k,t+1} +
    α/K)/(n_{k,t} + α/K) of the next epoch's Dirichlet-multinomial; without ``carry``, each
    epoch's weights are Dir(α/K) on their own (weight n_{k,t} + α/K)."""

    K: int
    alpha: float
    carry: bool = True

    def weights(self, counts: np.ndarray, t: int) -> np.ndarray:
        """log prior weight of each chain for one more item at epoch t (the item removed)."""
        a = self.alpha / self.K
        n = counts[t, :self.K].astype(float)
        if not self.carry:
            return np.log(n + a)
        before = counts[t - 1, :self.K] if t > 0 else 0.0
        after = counts[t + 1, :self.K] if t + 1 < len(counts) else 0.0
        return np.log(before + n + a) + np.log(n + after + a) - np.log(n + a)

    def link_factors(self, cols: np.ndarray, rel: int) -> np.ndarray:
        """Each column's own factor of the epoch-``rel`` Dirichlet-multinomial given row rel − 1:
        log Γ(n_{k,t−1} + α/K + n_{k,t}) − log Γ(n_{k,t−1} + α/K) with ``carry`` (the sums over
        k do not depend on the labels), 0 without (Dir(α/K) is exchangeable)."""
        if not self.carry:
            return np.zeros(cols.shape[1])
        before = cols[rel - 1].astype(float) + self.alpha / self.K
        return gammaln(before + cols[rel]) - gammaln(before)

    def log_prior(self, counts: np.ndarray) -> float:
        """log P(c_1, ..., c_T): per epoch, the Dirichlet-multinomial of its counts."""
        a = self.alpha / self.K
        beta = np.full(counts.shape, a)
        if self.carry:
            beta[1:] += counts[:-1]
        return float(np.sum(gammaln(beta + counts) - gammaln(beta))
                     + np.sum(gammaln(beta.sum(1)) - gammaln(beta.sum(1) + counts.sum(1))))

