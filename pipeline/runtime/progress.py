"""A one-line progress display on a terminal (the engine's status line); silent otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .engine import Engine


class Progress:
    """Rewrites one status line on ``stream`` at most every ``interval`` seconds, if a TTY."""

    def __init__(self, stream: TextIO = sys.stderr, interval: float = 0.2) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.interval = interval
        self._last = 0.0

    def __call__(self, engine: Engine) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < self.interval or not engine.trace:
            return
        self._last = now
        self.stream.write(f"\r\x1b[K{engine.status()}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
