"""The built-in engines, registered on import: memo, vb, sovb (one module each, with its
config). Other engines register themselves with ``bnpmix.pipeline.runtime.register``."""

from . import memo, sovb, vb

__all__ = ["memo", "sovb", "vb"]
