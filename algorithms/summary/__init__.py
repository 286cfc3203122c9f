"""The additive summaries of memoized VB (Hughes & Sudderth 2013, Eq. 7 and 11): the Summary
type (``sums.py``), moves over its components as values (``moves.py``) and their composed
replay (``replay.py``). The names are importable from here, where the rest of bnpmix takes them.
"""

from .moves import Delete, Insert, Merge, MergeGroup, Move, Pool, Reorder
from .replay import Replay, RowMap, compose
from .sums import Summary, positions

__all__ = ["Delete", "Insert", "Merge", "MergeGroup", "Move", "Pool", "Reorder", "Replay",
           "RowMap", "Summary", "compose", "positions"]
