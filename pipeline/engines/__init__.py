"""The built-in engines, one module each with its config: memo, vb, sovb, adf and ep (nrm.py,
sharing the NRM prior's options), tdpm and ddcrp. They are declared as entry points in
pyproject.toml (group ``bnpmix.engines``), as an engine from another package is, and the
registry (pipeline/runtime/engine.py) imports them from there on first use."""

DEFAULT_ENGINE = "memo"  # --algorithm when none is given (job files, the estimator)
DEFAULT_TUNED = "adf"  # `bnpmix tune --algorithm` when none is given
GROUP = "bnpmix.engines"  # the entry-point group engines are declared in
