"""What a command's modules tell the person at the console: their loggers' records on stderr as
``bnpmix: TEXT`` (``bnpmix: warning: TEXT`` from a warning up) while a command runs. The
library only logs, so a program calling ``fit`` chooses what it shows; standard library only
(the quick commands stay quick)."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

# the modules whose notes a command shows (each logs to getLogger(__name__))
NOTED = ("bnpmix.pipeline.fit", "bnpmix.pipeline.auto")


class ConsoleFormat(logging.Formatter):
    """``bnpmix: `` and, from a warning up, ``warning: `` before the message."""

    def format(self, record: logging.LogRecord) -> str:
        kind = "warning: " if record.levelno >= logging.WARNING else ""
        return f"bnpmix: {kind}{record.getMessage()}"


@contextlib.contextmanager
def console_notes() -> Iterator[None]:
    """NOTED's records from info up on ``sys.stderr`` as it is on entry (a caller may have
    redirected it), and nowhere else, until the block ends; the loggers are then as before."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ConsoleFormat())
    loggers = [logging.getLogger(name) for name in NOTED]
    before = [(log.level, log.propagate) for log in loggers]
    for log in loggers:
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    try:
        yield
    finally:
        for log, (level, propagate) in zip(loggers, before, strict=True):
            log.removeHandler(handler)
            log.setLevel(level)
            log.propagate = propagate
