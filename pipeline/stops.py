"""Stops a signal asks for, kept until they are carried out. SIGINT raises KeyboardInterrupt and
SIGTERM ``Terminated`` in the main thread, wherever it is; code that catches every exception can
swallow it (pyarrow's lazy import of pandas does, in a partition's first read), so the request is
also recorded, and a fit raises it again after its next step (``raise_pending``), the step's
checkpoint written: the run stops within one step of the signal whatever it was doing."""

from __future__ import annotations

import signal
import threading
from typing import Any


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every staged write is cleaned up."""


_pending: type[BaseException] | None = None


def _stop(exc: type[BaseException]) -> None:
    global _pending
    _pending = exc
    raise exc


def _interrupt(signum: int, frame: Any) -> None:
    _stop(KeyboardInterrupt)


def _terminate(signum: int, frame: Any) -> None:
    _stop(Terminated)


def install() -> None:
    """Handle SIGINT (unless the process was started ignoring it, as a shell's background job
    is) and SIGTERM as above, from the main thread (elsewhere a no-op), forgetting any earlier
    request."""
    global _pending
    _pending = None
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _terminate)


def pending() -> type[BaseException] | None:
    """The stop asked for since ``install``, if any."""
    return _pending


def raise_pending() -> None:
    """Raise the stop a signal asked for, if one did (and was swallowed)."""
    if _pending is not None:
        raise _pending
