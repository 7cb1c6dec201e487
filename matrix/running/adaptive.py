"""Adaptive concurrency: how many of a model's calls may be in flight, from how its answers come back.

Within the model's ``concurrency`` (its ceiling: ``ModelSpec.in_flight``),
``Adaptive`` keeps a limit by additive increase, multiplicative decrease
(AIMD, as TCP does with its window):

- slow (the limit is halved, at most once per round of calls: the calls
  sent before a decrease do not halve it again): a call timed out, or took
  more than half the timeout, or more than a quarter of it and twice the
  quickest answers lately (``baseline``): a server that queues calls (one
  llama.cpp slot) answers each later than the one before;
- quick (the limit grows): an answer within an eighth of the timeout, or
  within 1.5 x the baseline while under a quarter of it: one call more per
  round of calls;
- otherwise the limit stays.

Start: one call; its answer sets the limit to as many calls as a server that
answers one at a time could queue within half the timeout (``timeout / (2 x
latency)``, at most the ceiling): an API answering in a second starts at its
ceiling after one answer (measured: a ramp of one call more per answer cost
14% of calls/s on 1,040 fast calls), a one-slot server answering in 20 s of a
120 s timeout at 3. An API that answers well within its timeout never sees
the limit below its ceiling once started; a one-slot server settles at the few calls that keep
its queue short of the timeout instead of timing out the last of eight.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from promptgrid.providers import CallError, ErrorKind, call_error

__all__ = ["Adaptive", "limited_try"]

SLOW_SHARE = 0.5
"""An answer later than this share of the timeout halves the limit."""
CLIMB_SHARE = 0.25
"""... as does one later than this share and ``CLIMB`` x the baseline."""
CLIMB = 2.0
QUICK_SHARE = 0.125
"""An answer within this share of the timeout is quick (the limit grows) ..."""
QUICK = 1.5
"""... as is one within this multiple of the baseline (and under ``CLIMB_SHARE`` of the timeout)."""


class Adaptive:
    """The limit on one model's calls in flight (``acquire`` before a call is sent, ``release`` after)."""

    def __init__(self, ceiling: int, timeout: float, *, start: int = 1) -> None:
        self.ceiling = max(1, int(ceiling))
        self.timeout = float(timeout)
        self.limit = float(min(self.ceiling, max(1, start)))
        self.lowest = self.ceiling
        """The lowest the limit was set to after the first answer (the ceiling before it)."""
        self.in_flight = 0
        self.slow_start = True
        self.decreases = 0
        self.baseline: float | None = None
        """The quickest answer lately, in seconds (drifts up slowly, so one lucky answer does not stay it)."""
        self._round = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def allowed(self) -> int:
        """Calls that may be in flight now."""
        return max(1, int(self.limit))

    async def acquire(self) -> int:
        """Wait for room; returns the round the call is sent in (for ``answered`` and ``timed_out``)."""
        if self.in_flight < self.allowed and not self._waiters:
            self.in_flight += 1
            return self._round
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future  # ``_wake`` counts the call in flight as it hands over the room
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # given room, then cancelled: give it back
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(future)
            raise
        return self._round

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.allowed:
            future = self._waiters.popleft()
            if not future.done():
                self.in_flight += 1
                future.set_result(None)

    def answered(self, latency: float, sent_round: int) -> None:
        """An answer came back ``latency`` seconds after it was sent."""
        if self.slow_start:  # the first answer: as many as a one-at-a-time server answers in half the timeout
            self.slow_start = False
            fits = int(self.timeout / (2 * max(latency, 1e-3)))
            self.limit = max(self.limit, float(min(self.ceiling, max(1, fits))))
            self.lowest = self.allowed
            self._wake()
        if self.baseline is None or latency < self.baseline:
            self.baseline = latency
        else:
            self.baseline += (latency - self.baseline) / 64
        t = self.timeout
        if latency > SLOW_SHARE * t or (latency > CLIMB_SHARE * t and latency > CLIMB * self.baseline):
            self._decrease(sent_round)
        elif latency <= QUICK_SHARE * t or (latency <= QUICK * self.baseline and latency <= CLIMB_SHARE * t):
            self._increase()

    def timed_out(self, sent_round: int) -> None:
        """A call sent in ``sent_round`` got no answer within the timeout."""
        self._decrease(sent_round)

    def _increase(self) -> None:
        if self.limit >= self.ceiling:
            return
        self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
        self._wake()

    def _decrease(self, sent_round: int) -> None:
        if sent_round < self._round:
            return  # sent before the last decrease: that one already answered for it
        self._round += 1
        self.slow_start = False
        self.decreases += 1
        self.limit = max(1.0, self.limit / 2)
        self.lowest = min(self.lowest, self.allowed)

    def describe(self) -> str | None:
        """``concurrency 2/8`` while the limit is below the ceiling; None at it."""
        return None if self.allowed >= self.ceiling else f"concurrency {self.allowed}/{self.ceiling}"


async def limited_try(limit: Adaptive | None, send: Callable[[], Awaitable[Any]], timeout: float,
                      timed_out: str) -> tuple[Any, CallError | None, float, bool]:
    """One try of a model's request within its adaptive ``limit`` (``None``: no limit): a place taken, ``send()``
    awaited with ``timeout`` seconds (a ``TIMEOUT`` error saying ``timed_out`` when they pass), the place given
    back and the latency fed to the limit. Returns (answer or None, error or None, latency in seconds, whether
    other requests of the model were in flight beside it). The single-turn runner's calls and the conversation
    runner's steps both try through it."""
    sent_round = 0 if limit is None else await limit.acquire()
    beside = limit is not None and limit.in_flight > 1
    started = time.monotonic()
    answer: Any = None
    error: CallError | None = None
    try:
        answer = await _with_timeout(send(), timeout)
    except CallError as exc:
        error = exc
    except TimeoutError:
        error = call_error(ErrorKind.TIMEOUT, timed_out)
    finally:
        if limit is not None:
            limit.release()
    latency = time.monotonic() - started
    if limit is not None:
        if error is None:
            limit.answered(latency, sent_round)
        elif error.kind is ErrorKind.TIMEOUT:
            limit.timed_out(sent_round)
    return answer, error, latency, beside


async def _with_timeout(awaitable: Awaitable[Any], seconds: float) -> Any:
    """``await`` with a deadline; ``asyncio.timeout`` where available (no extra task per call)."""
    if hasattr(asyncio, "timeout"):
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)  # pragma: no cover - Python 3.10
