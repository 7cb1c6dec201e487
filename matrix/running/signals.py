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
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["install", "restore"]


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
