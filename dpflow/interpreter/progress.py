"""Progress of a long run on a terminal: one line on standard error, redrawn in place, shown only when
the stream is a TTY and the run has taken longer than a second (silent otherwise: logs, pipes, CI).
It prints node counts and loop rounds, which are public (the plan's structure), never a value."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

DELAY = 1.0
"""Seconds before the first line: short runs print nothing."""

INTERVAL = 0.2
"""Seconds between redraws."""


class Progress:
    """``update(done, total, detail)`` redraws the line; ``close()`` clears it.  ``DPFLOW_PROGRESS=0``
    turns it off.

    >>> import io
    >>> p = Progress("plan", io.StringIO())          # not a TTY: silent
    >>> p.update(1, 2); p.close(); p.enabled
    False
    """

    def __init__(self, name: str, stream: TextIO | None = None, delay: float | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = bool(isatty and isatty()) and os.environ.get("DPFLOW_PROGRESS", "1") != "0"
        self.name = name
        self.start = time.monotonic()
        self.delay = DELAY if delay is None else delay
        self.last = 0.0
        self.shown = False

    def update(self, done: int, total: int, detail: str = "") -> None:
        """Show ``done`` of ``total`` nodes (and ``detail``: the loop round) if due."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < self.delay or now - self.last < INTERVAL:
            return
        self.last = now
        extra = f", {detail}" if detail else ""
        self.stream.write(f"\r[dpflow] {self.name}: node {done}/{total}{extra}, {now - self.start:.0f} s\x1b[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """Clear the line (if anything was shown)."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
