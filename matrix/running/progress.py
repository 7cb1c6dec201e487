"""Progress on stderr: done/total, errors, calls/s, spend and ETA.

On a terminal, one line redrawn in place a few times a second; otherwise
(CI logs, ``2> file``) a plain line every ``interval`` seconds (5 s), so logs stay
readable. ``--no-progress`` turns it off. The runner only bumps counters;
drawing happens on a timer, so progress costs nothing per call.

While a retry waits (a rate limit's Retry-After, backoff) the line says so:
``waiting 118 s: rate limited by openai/x (Retry-After 86400 s capped)``
(the longest wait in progress); a wait of a second or more is drawn at once,
so a run that seems idle explains itself. While adaptive concurrency holds a
model below its ``concurrency`` the line says so: ``concurrency 2/8``.
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import TextIO

__all__ = ["Progress"]


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Progress:
    """Counters of a run and their rendering."""

    def __init__(self, total: int, *, stream: TextIO | None = None, enabled: bool = True,
                 interval: float | None = None) -> None:
        self.total = total
        self.done = 0
        self.cached = 0
        self.errors = 0
        self.calls = 0
        self.spend = 0.0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.25 if self.tty else 5.0)
        self.start = time.monotonic()
        self._last = 0.0 if self.tty else self.start  # logs: first line after one interval
        self._drawn = False
        self._waits: dict[int, tuple[float, str]] = {}
        self.note: str | None = None
        """Appended to the line when set (a batch run's ``3 batches running``)."""
        self.concurrency: str | None = None
        """Calls in flight allowed now, when below the ceiling (``concurrency 2/8``; the runner sets it)."""
        self._tokens = itertools.count()

    def wait(self, seconds: float, reason: str) -> int:
        """A retry starts waiting ``seconds`` because of ``reason``; returns the token for ``end_wait``."""
        token = next(self._tokens)
        latest = max((until for until, _ in self._waits.values()), default=0.0)
        until = time.monotonic() + seconds
        self._waits[token] = (until, reason)
        if seconds >= 1.0 and until > latest + 1.0:  # a new, longer wait: say so now (once, not per worker)
            self.tick(force=True)
        return token

    def end_wait(self, token: int) -> None:
        self._waits.pop(token, None)

    def waiting(self) -> str | None:
        """``waiting N s: reason`` for the wait that ends last, or None."""
        if not self._waits:
            return None
        until, reason = max(self._waits.values())
        return f"waiting {max(0.0, until - time.monotonic()):.0f} s: {reason}"

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.calls / elapsed if elapsed > 0 else 0.0
        remaining = self.total - self.done
        per_job = elapsed / max(1, self.done - self.cached)
        eta = _duration(remaining * per_job) if self.done > self.cached and remaining else "--:--"
        pct = 100.0 * self.done / self.total if self.total else 100.0
        width = 24
        filled = int(width * pct / 100)
        bar = "#" * filled + "-" * (width - filled)
        waiting = self.waiting()
        return (f"[{bar}] {self.done}/{self.total} ({pct:.0f}%) errors {self.errors} "
                f"{rate:.1f} calls/s ${self.spend:.4f} ETA {eta}" + (f" | {waiting}" if waiting else "")
                + (f" | {self.concurrency}" if self.concurrency else "")
                + (f" | {self.note}" if self.note else ""))

    def tick(self, force: bool = False) -> None:
        """Draw if the interval has passed (or ``force``)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line())
            self._drawn = True
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        self.tick(force=True)
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
