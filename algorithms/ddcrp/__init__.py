"""The sequential distance-dependent CRP (Bartunov & Vetrov 2014, re-derived in
docs/theory/ddcrp.rst)."""
