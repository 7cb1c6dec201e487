"""Ctrl-C and SIGTERM stop a run cleanly, whichever driver runs it.

Both drivers (``runner.Runner`` and ``conversation_runner``) install these handlers for the length of a run: a
signal calls the driver's ``stop``, which cancels what is in flight and lets the run end as it ends on any other
stop (every answer received is stored, the summary says ``stopped == "interrupted"``, ``promptgrid run`` exits
with 130, and the same command resumes). Without them SIGTERM killed a conversation run on the spot: no summary,
and its spill reservation left in the run directory.

Python delivers signals to the main thread only, and only there may handlers be installed: a run on a worker
thread (``promptgrid.run`` called inside a running event loop) installs none, and is stopped by the thread that
waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Stopper", "install", "restore"]


def install(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> dict[int, Any]:
    """Make SIGINT and SIGTERM call ``stop`` on ``loop``; returns the handlers they replaced (for ``restore``)."""
    installed: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return installed
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        try:
            loop.add_signal_handler(sig, stop)
        except (NotImplementedError, RuntimeError):  # a loop without signal support (Windows)
            continue
        installed[sig] = previous
    return installed


def restore(loop: asyncio.AbstractEventLoop, installed: Mapping[int, Any]) -> None:
    """Remove the run's handlers and put back those they replaced (``install``)."""
    for sig, previous in installed.items():
        loop.remove_signal_handler(sig)
        if previous is not None:
            signal.signal(sig, previous)  # e.g. asyncio.run's own Ctrl-C handler


class Stopper:
    """Lets the thread that waits for a run on a worker thread stop it (signals reach the main thread only):
    ``promptgrid.run`` called inside a running event loop (Jupyter) runs on a worker thread's loop, and Ctrl-C
    while it waits stops the run as a signal would (``interrupt``), so that the run returns what it kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop: Callable[[], object] | None = None
        self._requested = False

    def started(self, stop: Callable[[], None]) -> None:
        """Called from the worker's loop once the run can be stopped, with its stop (a driver's)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._stop = lambda: loop.call_soon_threadsafe(stop)
            requested = self._requested
        if requested:
            stop()

    def interrupt(self) -> None:
        """Stop the run now, or as soon as it has started."""
        with self._lock:
            self._requested = True
            stop = self._stop
        if stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already finished
                stop()
