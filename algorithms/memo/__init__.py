"""Memoized online VB (Hughes & Sudderth 2013) as kernels over an explicit, frozen state.

state.py holds the value a run carries from lap to lap (MemoState); lap.py the lap's own
steps (its start, Eq. 11 for one batch, the global update of Eq. 10); lapend.py the moves
judged after a lap's last batch (births verified, a deletion, merges, reordering) and the
convergence test. Each is a function ``state' = f(state, ...)``; the engine
(pipeline/engines/memo.py) holds the per-batch summaries and runs the visits.
"""
