"""Variational inference for mixtures (Hughes & Sudderth 2013): the local step, k-means++
seeding, births and merges (bnpmix.algorithms.vb)."""
