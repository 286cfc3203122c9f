"""memo's checkpoint: its MemoState, written and read field by field (state_codec), beside
what the runtime holds for it (StateStores of the batch summaries, their words, the deletions'
changes and the births' collected rows) and the globals of the waves submitted; a checkpoint
from before the state was a value is read by memo_legacy."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import chain
from typing import Any

import numpy as np

from bnpmix.algorithms.memo.state import Best, Birth, Lap, MemoState
from bnpmix.algorithms.summary import Summary
from bnpmix.algorithms.vb.local import Globals
from bnpmix.storage.arrays import ArrayFile

from ..runtime.data import data_from_arrays, data_to_arrays
from ..runtime.engine import State
from ..runtime.store import Codec, StateStore
from .common import Items, summary_from, summary_items
from .memo_legacy import legacy_changes, legacy_state
from .state_codec import TAG, read_state, write_state

SUMMARIES: Codec[Summary] = Codec(Summary.to_arrays, Summary.from_arrays)
# a Mult batch's words (sorted column indices): held within the summaries' budget, since their
# number grows with the partitions
COLUMNS: Codec[np.ndarray] = Codec(lambda cols: {"cols": cols}, lambda arrays: arrays["cols"])
# the rows a lap collects for its births (birth targets x max_collect rows: of 200-word
# documents, 1.5 KB each, up to 750 MB for 50 targets), held within the summaries' budget too,
# the rest spilled until its birth is created at the lap's end
ROWS: Codec[Any] = Codec(data_to_arrays, data_from_arrays)
# the records a checkpointed MemoState holds
RECORDS = (MemoState, Lap, Birth, Best)


@dataclass
class Wave:
    """Batches submitted together, the globals they were given and their pending results
    (None after a restore, until the wave is submitted again with the same globals)."""

    batches: list[int]
    g: Globals
    pending: Any = None


class Checkpointed:
    """MemoEngine's state() and restore() (a mixin: it reads the engine's state ``s`` and
    stores, and restores them through its _setup, _new_store and _submit)."""

    s: MemoState
    store: StateStore[Summary]
    columns: StateStore[np.ndarray]
    collected: StateStore[Any]
    delete_changes: dict[int, StateStore[Summary]]
    inflight: list[Wave]
    ctx: Any
    cfg: Any

    def state(self) -> State:
        """The MemoState's fields (state_codec) beside the runtime's: the stored batch
        summaries and deletion changes, the births' collected rows and the globals of
        submitted waves."""
        meta, items = write_state(self.s)
        return ({**meta, "stored": self.store.keys(),
                 "delete_changes": {str(u): store.keys()
                                    for u, store in self.delete_changes.items()},
                 "inflight": [w.batches for w in self.inflight]},
                chain(items, self._stored_items()))

    def _stored_items(self) -> Items:
        for b in self.s.births:
            for key in b.chunks:
                for k, v in data_to_arrays(self.collected.get(key)).items():
                    yield f"collected/{key}/{k}", v
        for i, w in enumerate(self.inflight):  # what a submitted wave was given
            yield f"inflight/{i}/uids", w.g.uids
            yield f"inflight/{i}/Elogw", w.g.Elogw
            for k, v in w.g.post.items():
                yield f"inflight/{i}/post/{k}", v
        for key, S in self.store.items():  # streamed: one stored summary in memory at a time
            yield from summary_items(f"store/{key}", S)
        for uid, store in self.delete_changes.items():
            for key, S in store.items():
                yield from summary_items(f"delete_changes/{uid}/{key}", S)

    def restore(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        """A checkpoint of state(); one written before the state was a value is read by
        memo_legacy."""
        if TAG in meta:
            self._setup(read_state(meta, arrays, self.ctx, RECORDS))
        else:
            self._setup(legacy_state(meta, arrays, self.ctx, self.cfg))
        for key in meta["stored"]:
            S = summary_from(arrays, f"store/{key}")
            self.store.put(int(key), S)
            changed = S.changed_pattern()
            if changed is not None:
                self.columns.put(int(key), np.unique(changed.indices).astype(np.int64))
        for uid, keys in meta.get("delete_changes", {}).items():
            self.delete_changes[int(uid)] = self._new_store()
            for key in keys:
                self.delete_changes[int(uid)].put(
                    int(key), summary_from(arrays, f"delete_changes/{uid}/{key}"))
        for uid, key, change in legacy_changes(meta, arrays, self.store):
            self.delete_changes.setdefault(uid, self._new_store()).put(key, change)
        self._restore_rows(meta, arrays)
        for i, batches in enumerate(meta["inflight"]):  # submitted again with the same globals
            g = Globals(arrays[f"inflight/{i}/uids"], arrays.group(f"inflight/{i}/post"),
                        arrays[f"inflight/{i}/Elogw"])
            self.inflight.append(self._submit(Wave([int(b) for b in batches], g)))

    def _restore_rows(self, meta: dict[str, Any], arrays: ArrayFile) -> None:
        """The births' collected rows under their keys (a checkpoint from before the state
        was a value holds each birth's rows as one block: one key each)."""
        births = []
        for i, b in enumerate(self.s.births):
            if TAG not in meta and b.chunks:
                b = replace(b, chunks=(len(self.collected),))
                self.collected.put(b.chunks[0], data_from_arrays(arrays.group(f"births/{i}/rows")))
            else:
                for key in b.chunks:
                    self.collected.put(key, data_from_arrays(arrays.group(f"collected/{key}")))
            births.append(b)
        self.s = replace(self.s, births=tuple(births))
