"""The built-in engines, registered on import: memo, vb, sovb (one module each, with its
config), adf, ep (nrm.py, sharing the NRM prior's options), tdpm and ddcrp. Other engines register
themselves with ``bnpmix.pipeline.runtime.register``."""

from . import ddcrp, memo, nrm, sovb, tdpm, vb

__all__ = ["ddcrp", "memo", "nrm", "sovb", "tdpm", "vb"]
