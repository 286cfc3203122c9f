"""A fitted sequential ddCRP over many sequences (docs/theory/ddcrp.rst): each sequence's tables
(their posteriors, the training customers' responsibilities Z and positions) and the hard table of
each training item. Held-out items are scored per sequence by the reconstructed Eq. 7
(``heldout.py``); without a sequence, an item is scored against the pooled tables of every sequence
weighted by their mass (there is no new-table mass: a test item links to a training customer)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from scipy.special import logsumexp

from ..mixture import PredictiveMixture
from ..obs import obs_from_prior
from ..obs.base import Arrays, Data, ObsModel
from .heldout import heldout_links
from .links import decay

KIND = "ddcrp"


@dataclass
class SequenceMixture(PredictiveMixture):
    """Tables ``uids`` of all sequences, sequence s owning tables table_offsets[s]..[s+1] and
    training customers item_offsets[s]..[s+1] (in sequence order, at ``positions``, corpus rows
    ``rows``); ``Z`` the concatenated N_s × K_s responsibility blocks; ``labels`` and ``probs``
    each corpus row's most probable table id and its probability; ``hyper`` alpha, decay,
    decay_a, window."""

    kind: ClassVar[str] = KIND

    obs: ObsModel
    post: Arrays
    uids: np.ndarray
    sequences: np.ndarray
    item_offsets: np.ndarray
    table_offsets: np.ndarray
    positions: np.ndarray
    rows: np.ndarray
    Z: np.ndarray
    hyper: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {int(s): k for k, s in enumerate(self.sequences)}
        sizes = np.diff(self.item_offsets) * np.diff(self.table_offsets)
        self.z_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.labels = np.full(int(self.rows.max()) + 1 if len(self.rows) else 0, -1, np.int64)
        self.probs = np.zeros(len(self.labels))
        for s in range(len(self.sequences)):
            Z = self.block(s)
            best = Z.argmax(1)
            items = self.rows[self.item_offsets[s]:self.item_offsets[s + 1]]
            self.labels[items] = self.uids[self.table_offsets[s] + best]
            self.probs[items] = Z[np.arange(len(best)), best]

    def block(self, s: int) -> np.ndarray:
        """Sequence s's responsibilities Z (N_s × K_s)."""
        n = self.item_offsets[s + 1] - self.item_offsets[s]
        k = self.table_offsets[s + 1] - self.table_offsets[s]
        return self.Z[self.z_offsets[s]:self.z_offsets[s + 1]].reshape(n, k)

    def weights(self) -> tuple[np.ndarray, float]:
        """Each table's share of all training items; no mass for new tables."""
        mass = np.concatenate([self.block(s).sum(0) for s in range(len(self.sequences))])
        return mass / max(mass.sum(), 1e-300), 0.0

    def table_shares(self, X: Data, sequence: int, positions: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """The ids of ``sequence``'s tables and, per item held out from it, each table's term
        of Eq. 7: log (p̃ Z)_k + log p(x* | table k), p̃ linking uniformly to the sequence's
        training customers (f ≡ 1, as the paper's Sec. 5.2.2) or, given the items'
        ``positions``, by the run's decay and window; logsumexp over k is the item's score."""
        if int(sequence) not in self.index:
            raise ValueError(f"sequence {sequence} is not in this model (it has "
                             f"{len(self.sequences)} sequences)")
        s = self.index[int(sequence)]
        train = self.positions[self.item_offsets[s]:self.item_offsets[s + 1]]
        tables = slice(self.table_offsets[s], self.table_offsets[s + 1])
        post = {k: v[tables] for k, v in self.post.items()}
        if positions is None:
            link = heldout_links(train, np.full(X.shape[0], train[-1]), decay("none"))
        else:
            h = self.hyper
            link = heldout_links(train, np.asarray(positions, float),
                                 decay(h["decay"], h["decay_a"]), h["window"])
        with np.errstate(divide="ignore"):
            share = np.log(link @ self.block(s))
        return self.uids[tables], share + self.obs.predictive_logpdf(X, post)

    def score_sequence(self, X: Data, sequence: int,
                       positions: np.ndarray | None = None) -> np.ndarray:
        """log p(x*) of items held out from ``sequence`` (Eq. 7; ``table_shares``)."""
        return logsumexp(self.table_shares(X, sequence, positions)[1], axis=1)

    def score_sequences(self, X: Data, sequences: np.ndarray,
                        positions: np.ndarray | None = None) -> np.ndarray:
        """``score_sequence`` for items of several sequences (``sequences[n]`` item n's)."""
        seqs = np.asarray(sequences)
        if len(seqs) != X.shape[0]:
            raise ValueError(f"{len(seqs)} sequence ids for {X.shape[0]} items")
        out = np.empty(X.shape[0])
        for s in np.unique(seqs):
            rows = np.flatnonzero(seqs == s)
            out[rows] = self.score_sequence(X[rows], int(s),
                                            None if positions is None else positions[rows])
        return out

    def heldout_scores(self, X: Data, columns: Mapping[str, Any], plan: Any, start: int = 0
                       ) -> tuple[np.ndarray, np.ndarray]:
        """Eq. 7 per held-out item within its sequence (``plan.sequence_column``'s, else the
        run's one ``plan.sequence``; by ``plan.position_column``'s positions when set) and each
        item's most probable table of that sequence, from one ``table_shares`` per sequence
        (PredictiveMixture.heldout_scores)."""
        n = X.shape[0]
        seqs = (np.full(n, plan.sequence, np.int64) if plan.sequence_column is None
                else np.asarray(columns[plan.sequence_column]))
        positions = (None if plan.position_column is None
                     else np.asarray(columns[plan.position_column], float))
        unknown = np.setdiff1d(np.unique(seqs), self.sequences)
        if len(unknown):
            row = start + int(np.flatnonzero(seqs == unknown[0])[0])
            raise ValueError(f"sequence {unknown[0]} (row {row}) is not one the model was "
                             f"fitted to: a ddcrp model scores an item by linking it to its own "
                             f"sequence's training items ({len(self.sequences)} sequences)")
        best, logp = np.empty(n, np.int64), np.empty(n)
        for s in np.unique(seqs):
            rows = np.flatnonzero(seqs == s)
            ids, joint = self.table_shares(X[rows], int(s),
                                           None if positions is None else positions[rows])
            logp[rows] = logsumexp(joint, axis=1)  # score_sequence's
            best[rows] = ids[joint.argmax(axis=1)]
        return logp, best

    def assign_batch(self, batch: Any) -> tuple[np.ndarray, np.ndarray]:
        """The training items' most probable tables and their probabilities."""
        rows = batch.start + np.arange(len(batch))
        return self.labels[rows], self.probs[rows]

    def heldout_plan(self, config: dict[str, Any], columns: tuple[str, ...], where: str
                     ) -> dict[str, Any]:
        """Eq. 7 within each held-out item's sequence (PredictiveMixture.heldout_plan): the
        corpus needs the run's sequence column; its position column, when it has it, links by
        the run's decay, else uniformly."""
        h = self.hyper
        column, position = h.get("sequence_column"), h.get("position_column")
        if column is not None and column not in columns:
            raise ValueError(
                f"{where}: a ddcrp model scores a held-out item within its sequence (Eq. 7: it "
                f"links to that sequence's training items), so the corpus needs the run's "
                f"sequence column {column!r} (it has {list(columns) or 'no columns'}; ingest "
                f"with --sequence-column {column})")
        if position not in columns:
            position = None
        links = ("uniform links to the sequence's training items" if position is None else
                 f"links by the run's {h['decay']} decay (a = {h['decay_a']:g}) from "
                 f"{position!r}")
        within = (f"each item's sequence ({column!r} column)" if column
                  else "the run's one sequence")
        return {"scoring": f"ddcrp Eq. 7 within {within}, {links}", "sequence_column": column,
                "sequence": None if column else int(self.sequences[0]),
                "position_column": position}

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {"uids": self.uids, "sequences": self.sequences,
                  "item_offsets": self.item_offsets, "table_offsets": self.table_offsets,
                  "positions": self.positions, "rows": self.rows, "Z": self.Z}
        arrays.update({f"post_{k}": v for k, v in self.post.items()})
        meta = {"kind": KIND, "obs": self.obs.name, "prior": self.obs.prior(),
                "hyper": self.hyper, "info": self.info}
        return arrays, json.loads(json.dumps(meta))

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]
                    ) -> SequenceMixture:
        obs = obs_from_prior(meta["obs"], meta["prior"])
        post = {k.removeprefix("post_"): np.asarray(v) for k, v in arrays.items()
                if k.startswith("post_")}
        ints = {k: np.asarray(arrays[k]).astype(np.int64)
                for k in ("uids", "sequences", "item_offsets", "table_offsets", "rows")}
        return cls(obs, post, ints["uids"], ints["sequences"], ints["item_offsets"],
                   ints["table_offsets"], np.asarray(arrays["positions"], float), ints["rows"],
                   np.asarray(arrays["Z"], float), dict(meta["hyper"]), dict(meta.get("info", {})))
