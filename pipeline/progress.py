"""A one-line progress display on a terminal (lap, batch, K, ELBO); silent otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .memo import MemoRun


class Progress:
    """Rewrites one status line on ``stream`` at most every ``interval`` seconds, if a TTY."""

    def __init__(self, stream: TextIO = sys.stderr, interval: float = 0.2) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.interval = interval
        self._last = 0.0

    def __call__(self, run: MemoRun) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < self.interval or not run.trace:
            return
        self._last = now
        st, row = run.lap_state, run.trace[-1]
        where = f"batch {st.pos}/{len(st.order)}" if st is not None else "lap end"
        self.stream.write(f"\r\x1b[Klap {int(row['lap'] - 1e-9) + 1}/{run.ctx.cfg.laps} "
                          f"{where}  K={row['K']}  ELBO={row['elbo']:.6g}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
