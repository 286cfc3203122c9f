"""Split-merge moves over whole chains of the temporal DP mixture (not in the paper;
docs/theory/tdpm.rst).

One cluster held as two parallel chains is a mode that item moves leave only through many
unlikely steps (each item that changes chain costs the prior and walk of a half-empty chain),
and relinking cannot leave it (the two chains cross no boundary differently). A merge joins
the two chains in one step; its reverse, a split, cuts a chain in two.

Target. The move is Metropolis-Hastings on the labels with the chains' states integrated out,
p(z | x) ∝ P(z) Π_k p(x_k) (the label-free prior of Eq. 4.4; p(x_k) a chain's marginal
likelihood by the Kalman filter, exact for emissions with exact Gaussian pseudo-observations),
followed by a draw of the changed chains' states from p(φ_k | x_k) (forward filtering, backward
sampling). Since p(z, φ, x) = P(z) Π_k p(x_k) p(φ_k | x_k), proposing (z', φ') with φ' from that
exact conditional makes the joint acceptance ratio the collapsed one,
[P(z') Π p(x'_k) q(z | z')] / [P(z) Π p(x_k) q(z' | z)]. The prior ratio needs the factors of
the chains involved only: M_t and N_t are sums over all chains (linear in their counts), so
Γ(M_t + α)/Γ(M_t + N_t + α) is the same before and after (``rcrp.chain_log_prior``).

Proposal (the anchors of Jain & Neal 2004, with Dahl's sequential allocation). Pick an item i
among the N items of epochs >= ``start_epoch``: with probability ½ uniformly, with ½ a chain
uniformly among the K chains with such items and i uniformly among its n_{z_i} of them, so
r_z(i) = ½ / N + ½ / (K n_{z_i}) (a chain of a few items, the stub beside a large chain that
holds the same cluster, is anchored as often as a large one). Then j ≠ i: with probability
FAR uniformly among all items (a chain that holds one cluster and then another, as where one
topic dies and another is born, is split only by anchors on both sides of the change, which are
rarely within W epochs of each other), else among the items within W epochs of i with
probability ½ / n_i + ½ κ(x_i, x_j) / Σ κ (κ = exp(−|y_i − y_j|² / 2h), y an item's
pseudo-observation and h its variance at construction: x and Σ for Gaussians). j's
probability does not depend on the labels and cancels; i's does, and the ratio carries
r_{z'}(i) / r_z(i) (the reverse move is the same ordered pair from z'): each ordered pair is an
MH kernel of its own.
If i and j share a chain c, split it: i seeds piece A, j piece B, and the other members, in
order of (epoch, item), join A or B with probability ∝ weight × predictive: the weight of
Eq. 4.4 for the piece so far (m_{P,t} + n_{P,t}; α for a piece still empty; 0 for a piece dead
by t) and the emission's predictive of the item given the piece's members so far
(``Emission.pieces``: for Gaussians the Kalman predictive N(y; mean, var + r) of its
pseudo-observation; for text the smoothed word frequencies of the piece's documents, its anchor
counted from the start, see ``text.CountPieces``). Otherwise merge z_i's and z_j's chains: the
reverse split's
probability is that allocation evaluated at the two chains as they are. A proposal that leaves
a chain with occupied epochs more than W apart has target 0 and is rejected; under online
continuation (``start_epoch`` > 0) chains with items before it are left alone.
The cut moves, a share ``cut`` of the proposals, are ``cuts.py``'s.
"""

from __future__ import annotations

import math

import numpy as np

from .chainmoves import ChainMoves
from .cuts import propose_cut
from .state import ChainState


class SplitMerge(ChainMoves):
    """Split-merge and cut moves (module docstring; ``ChainMoves`` holds their settings and
    counts)."""

    def sweep(self, state: ChainState, rng: np.random.Generator, start_epoch: int = 0
              ) -> ChainState:
        """The sweep's proposals (``accepted`` counts those accepted); the state to go on
        with."""
        pool = np.concatenate(self.model.by_epoch[start_epoch:])
        if pool.size < 2:
            return state
        # rate · items proposals, rounded up or down at random (not by the state)
        n = (self.attempts if self.attempts is not None
             else int(self.rate * pool.size + rng.random()))
        for _ in range(n):
            i = self.anchor(state, pool, rng, start_epoch)
            j = self.partner(i, rng, start_epoch)
            if j >= 0:
                if rng.random() < self.cut:
                    state, done = propose_cut(self, state, i, j, rng, start_epoch)
                else:
                    state, done = self.propose(state, i, j, rng, start_epoch)
                self.accepted += done
        return state

    def propose(self, state: ChainState, i: int, j: int, rng: np.random.Generator,
                start_epoch: int = 0) -> tuple[ChainState, bool]:
        """One proposal with anchors i and j (module docstring): the state and whether it was
        accepted."""
        epochs = self.model.epochs
        a, b = int(state.z[i]), int(state.z[j])
        if a < 0 or b < 0 or min(state.first[a], state.first[b]) < start_epoch:
            return state, False
        if a == b:
            items = self.members(state, a)
            into_a, logq = self.allocate(state, items, i, j, rng)
            A, B = items[into_a], items[~into_a]
            if not (self.valid(A) and self.valid(B)):
                return state, False
            pick = self.pick_ratio(state, i, start_epoch, int(np.sum(epochs[A] >= start_epoch)),
                                   1)
            if math.log(rng.random()) < -self.log_ratio(state, items, A, B) - logq + pick:
                state, k = state.with_label()
                self.move(state, B, k, [a, k], rng)
                self.moves["split"] += 1
                return state, True
            return state, False
        A, B = self.members(state, a), self.members(state, b)
        items = np.concatenate([A, B])
        items = items[np.lexsort((items, epochs[items]))]
        if not self.valid(items):
            return state, False
        _, logq = self.allocate(state, items, i, j, None, np.isin(items, A))
        pick = self.pick_ratio(state, i, start_epoch, int(np.sum(epochs[items] >= start_epoch)),
                               -1)
        if math.log(rng.random()) < self.log_ratio(state, items, A, B) + logq + pick:
            B = (state.z == b).nonzero()[0]
            state.free(b)
            self.move(state, B, a, [a], rng)
            self.moves["merge"] += 1
            return state, True
        return state, False
