"""Data warnings (``bnpmix.storage.DataWarning``) as ``bnpmix: warning: ...`` lines on stderr,
while a command runs."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def data_warnings(action: str) -> Iterator[None]:
    """DataWarnings shown as ``bnpmix: warning: ...`` (``action``: the filter's, "always" or
    "default": once per text)."""
    import warnings

    from bnpmix.storage import DataWarning

    with warnings.catch_warnings():
        warnings.simplefilter(action, DataWarning)
        warnings.showwarning = _show_warning
        yield


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    import warnings

    from bnpmix.storage import DataWarning

    if issubclass(category, DataWarning):
        print(f"bnpmix: warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
