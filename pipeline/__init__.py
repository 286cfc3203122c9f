"""Drivers, executors and the command line (installed as bnpmix.pipeline)."""
