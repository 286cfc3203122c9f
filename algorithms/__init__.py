"""The mathematics of bnpmix (installed as bnpmix.algorithms): numpy/scipy only, no I/O."""
