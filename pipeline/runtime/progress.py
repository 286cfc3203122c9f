"""Progress of a fit: on a terminal one status line rewritten in place; elsewhere (a log file, a
pipe) a plain line per lap, so a long fit is not silent until it ends."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .engine import Engine, Step


class Progress:
    """On a TTY, rewrites one status line on ``stream`` at most every ``interval`` seconds (as
    fit's ``progress`` hook); elsewhere writes the status as a line at each lap end at most every
    ``plain_interval`` seconds (``step``, as fit's ``on_step`` hook). ``stream``: None is
    ``sys.stderr`` as it is now (not at import: a caller may have redirected it since)."""

    def __init__(self, stream: TextIO | None = None, interval: float = 0.2,
                 plain_interval: float = 1.0) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = self.stream.isatty()
        self.interval = interval
        self.plain_interval = plain_interval
        self._last = self._last_plain = 0.0
        self._unsaid: Engine | None = None  # a lap end whose line the interval held back

    def __call__(self, engine: Engine) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < self.interval or not engine.trace:
            return
        self._last = now
        self.stream.write(f"\r\x1b[K{engine.status()}")
        self.stream.flush()

    def step(self, engine: Engine, step: Step) -> None:
        """Not on a TTY: the engine's status as one plain line when ``step`` ended a lap."""
        if self.enabled or not step.lap_end:
            return
        now = time.monotonic()
        if now - self._last_plain < self.plain_interval:
            self._unsaid = engine
            return
        self._last_plain, self._unsaid = now, None
        self.stream.write(f"{engine.status()}\n")
        self.stream.flush()

    def close(self) -> None:
        """Clear the terminal's status line; elsewhere say the last lap if it went unsaid."""
        if self.enabled:
            self.stream.write("\r\x1b[K")
        elif self._unsaid is not None:
            self.stream.write(f"{self._unsaid.status()}\n")
            self._unsaid = None
        self.stream.flush()


def format_seconds(seconds: float) -> str:
    """A duration for a status line: 42 s, 7 min 5 s, 3 h 20 min."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
