"""One model call sent until it has a final result: the one send path of both runners.

A single-turn job's call (``runner.Runner._send``) and a conversation's step (``running.conversation_runner``) both go
through ``send``. Each attempt waits for the model's request and token buckets (``ratelimit``; the estimate is
given back once the usage is known), stops there when the run is stopping, and is tried within the model's
adaptive limit on calls in flight, bounded by its timeout (``adaptive.limited_try``). A failed attempt is sent
again as the run's ``RetryPolicy`` allows (``providers.retried``, the one retry loop; ``wait`` shows the backoff
where a progress line is); a timeout of a call sent beside the model's other calls (a busy server, not a failing
one) lowers the limit and is sent again without using up a retry.

A model's first call goes alone: its other calls wait until one call of the model has ended without stopping it
(then they go concurrently), so a bad key or an unknown model costs one request per model, not one per call in
flight. A model is stopped (``Line.halted``, the reason; its other calls are not sent) after an error every later call
would repeat: bad or missing credentials or an unknown model (``HALTING``), a rate limit whose Retry-After is
still above the policy's ``retry_after_cap`` after one capped wait, every endpoint of a model with replicas
dropped (``NoEndpointLeft``), or ``REFUSALS`` connection failures in a row over at least ``GRACE_S`` seconds with
no answer between (its server is down). A call that is not finished because the run is stopping, or because
another call stopped its model, raises ``Stopped``: it stays pending for the next run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from promptgrid.matrix.clients import GRACE_S, NoEndpointLeft
from promptgrid.providers import CallError, ErrorKind, RetryPolicy, TryAgain, retried

from .adaptive import Adaptive, limited_try
from .ratelimit import TokenBucket

__all__ = ["GRACE_S", "HALTING", "REFUSALS", "Line", "Sent", "Stopped", "send"]

HALTING = frozenset({ErrorKind.AUTH, ErrorKind.NOT_FOUND})
"""Errors that every later call to the same model would repeat: the first stops the model."""
REFUSALS = 3
"""Connection failures in a row (over at least ``GRACE_S`` seconds, no answer between) that stop a model."""


@dataclass(eq=False)
class Line:
    """One model's sending state in a run, shared by all its calls (the single-turn runner's lane is one)."""

    rpm: TokenBucket | None = None
    tpm: TokenBucket | None = None
    limit: Adaptive | None = None
    """How many of its calls may be in flight now (``None``: a fixed number)."""
    halted: str | None = None
    """Why this model gets no more calls (an unauthorised key, an unknown model, ...); ``None`` while it does."""
    refused_since: float | None = None
    """``time.monotonic()`` of the first of the model's connection failures in a row (``None``: it answered)."""
    refusals: int = 0
    proven: bool = False
    """Whether a call of the model has ended without stopping it: until then its calls go one at a time."""
    probe: asyncio.Lock | None = None
    """The lock the model's calls take one at a time until it is ``proven``."""


@dataclass(frozen=True)
class Sent:
    """How a call ended: its answer, or the error retries could not fix (the model may be stopped by it)."""

    completion: Any
    """The client's ``Completion`` (``None`` when ``error`` is set)."""
    error: CallError | None
    latency: float
    """Seconds the last attempt took."""
    attempts: int
    congested: int
    """Of ``attempts``, timeouts beside the model's other calls, sent again without using up a retry."""


class Stopped(Exception):  # noqa: N818 - a stop, not an error: the call stays pending
    """The call was left unfinished (no result): the run is stopping, or another call stopped its model."""

    def __init__(self, attempts: int, congested: int) -> None:
        super().__init__("stopped")
        self.attempts, self.congested = attempts, congested


def beyond_cap(error: CallError, retry: RetryPolicy) -> bool:
    """A rate limit whose Retry-After is longer than the run may wait (the policy's ``retry_after_cap``)."""
    return error.kind is ErrorKind.RATE_LIMIT and (error.retry_after or 0.0) > retry.retry_after_cap


def halt_reason(error: CallError, message: str, attempts: int, retry: RetryPolicy) -> str:
    """Why a model gets no more calls (printed, kept in the summaries' ``halted``); ``message``: the error's,
    redacted."""
    if error.kind is not ErrorKind.RATE_LIMIT:
        return message
    return (f"rate limited: the server asked to wait {error.retry_after:g} s (Retry-After), more than the "
            f"retry-after cap of {retry.retry_after_cap:g} s; gave up after {attempts} attempts. Run again "
            "later, or raise --retry-after-cap (retry_after_cap) to wait longer. Last error: " + message)


def _refused(line: Line, error: CallError, redact: Callable[[str], str]) -> bool:
    """Count the model's connection failures in a row; True when this one stops it (``REFUSALS`` over
    ``GRACE_S``)."""
    if error.kind is not ErrorKind.CONNECTION:
        line.refused_since, line.refusals = None, 0
        return False
    now = time.monotonic()
    if line.refused_since is None:
        line.refused_since = now
    line.refusals += 1
    seconds = now - line.refused_since
    if line.refusals < REFUSALS or seconds < GRACE_S:
        return False
    line.halted = (f"no connection to its server for {seconds:.0f} s ({line.refusals} attempts in a row, no "
                   "answer between); start the server or fix api_base, then run again. Last error: "
                   + redact(error.message))
    return True


async def send(line: Line, complete: Callable[[], Awaitable[Any]], *, timeout: float, retry: RetryPolicy,
               est_tokens: int, stopping: Callable[[], bool], redact: Callable[[str], str],
               wait: Callable[[CallError, float], Awaitable[None]] | None = None,
               rand: Callable[[], float] | None = None) -> Sent:
    """Send ``complete()`` (one attempt of the call) until it has a final result (the module docstring).

    ``est_tokens``: what the call is estimated to take from the tokens-per-minute bucket; ``stopping()``: whether
    the run is stopping; ``redact``: what removes secrets from a message kept in ``line.halted``; ``wait(error,
    delay)``: sleeps the backoff before a retry (default ``asyncio.sleep``); ``rand``: the jitter's random source.
    Returns the answer or the final error; raises ``Stopped`` when the call is left unfinished."""
    if line.proven:
        return await _send(line, complete, timeout, retry, est_tokens, stopping, redact, wait, rand)
    if line.probe is None:
        line.probe = asyncio.Lock()
    async with line.probe:  # the model's first call goes alone (the module docstring)
        if not line.proven:
            sent = await _send(line, complete, timeout, retry, est_tokens, stopping, redact, wait, rand)
            line.proven = line.halted is None
            return sent
    # Proven while this call waited: it goes now, beside the others (not holding the lock).
    return await _send(line, complete, timeout, retry, est_tokens, stopping, redact, wait, rand)


async def _send(line: Line, complete: Callable[[], Awaitable[Any]], timeout: float, retry: RetryPolicy,
                est_tokens: int, stopping: Callable[[], bool], redact: Callable[[str], str],
                wait: Callable[[CallError, float], Awaitable[None]] | None,
                rand: Callable[[], float] | None) -> Sent:
    tries = _Tries(line, complete, timeout, retry, est_tokens, stopping, redact, wait)
    try:
        completion = await retried(tries.attempt, retry, sleep=tries.pause, retryable=tries.retryable,
                                   on_retry=tries.heard, **({} if rand is None else {"rand": rand}))
    except CallError as error:  # not retried (any more): every later call may fail the same way
        if line.halted is None and (error.kind in HALTING or beyond_cap(error, retry)
                                    or isinstance(error, NoEndpointLeft)):
            line.halted = halt_reason(error, redact(error.message) or error.kind.value, tries.attempts, retry)
        return Sent(None, error, tries.latency, tries.attempts, tries.free)
    return Sent(completion, None, tries.latency, tries.attempts, tries.free)


class _Tries:
    """One call's tries: what the retry loop's hooks (``providers.retried``) share while ``send`` sends it."""

    def __init__(self, line: Line, complete: Callable[[], Awaitable[Any]], timeout: float, retry: RetryPolicy,
                 est_tokens: int, stopping: Callable[[], bool], redact: Callable[[str], str],
                 wait: Callable[[CallError, float], Awaitable[None]] | None) -> None:
        self.line, self.complete, self.timeout, self.retry = line, complete, timeout, retry
        self.est_tokens, self.stopping, self.redact, self.wait = est_tokens, stopping, redact, wait
        self.attempts = 0
        self.free = 0
        """Timeouts beside the model's other calls, sent again without using up a retry."""
        self.capped = 0
        """Waits cut to the policy's ``retry_after_cap``."""
        self.latency = 0.0
        self.last: CallError | None = None

    def stopped(self) -> Stopped:
        return Stopped(self.attempts, self.free)

    async def attempt(self, _counted: int) -> Any:
        """One try: paced, then sent within the adaptive limit and the timeout; raises its error, ``TryAgain`` for
        a timeout beside the model's other calls, or ``Stopped``."""
        line = self.line
        if line.halted is not None:
            raise self.stopped()  # another call stopped the model before this attempt
        if line.rpm is not None:
            await line.rpm.acquire(1)
        if line.tpm is not None:
            await line.tpm.acquire(self.est_tokens)
        if self.stopping():
            raise self.stopped()  # the run stopped while this call waited its turn: not sent
        self.attempts += 1
        completion, error, self.latency, beside = await limited_try(line.limit, self.complete, self.timeout,
                                                                    f"no answer within {self.timeout:g} s")
        if error is None:
            if line.tpm is not None:
                used = (completion.input_tokens or 0) + (completion.output_tokens or 0)
                line.tpm.give_back(self.est_tokens - used if used else 0)
            line.refused_since, line.refusals = None, 0
            return completion
        self._after(error, beside)
        raise error

    def _after(self, error: CallError, beside: bool) -> None:
        """What a failed try means beyond its error: ``Stopped`` when another call stopped the model meanwhile (or
        the run is stopping), ``TryAgain`` for a timeout beside the model's other calls."""
        line = self.line
        halted_here = line.halted is None and _refused(line, error, self.redact)
        if line.halted is not None and not halted_here and (error.retryable or isinstance(error, NoEndpointLeft)):
            raise self.stopped()
        if error.retryable and self.stopping():
            raise self.stopped()
        limit = line.limit
        if (limit is not None and error.kind is ErrorKind.TIMEOUT and beside and self.free < limit.ceiling
                and line.halted is None):
            self.free += 1  # a server busy with the model's own calls, not a failing one: sent again, not counted
            raise TryAgain

    def retryable(self, error: CallError) -> bool:
        # A server that still asks for more than the cap after one capped wait will not be satisfied by more
        # capped waits: give up then, so the run ends within about one cap.
        patient = not (beyond_cap(error, self.retry) and self.capped)
        return error.retryable and patient and not self.stopping() and self.line.halted is None

    def heard(self, error: CallError, _counted: int, _delay: float) -> None:
        self.capped += beyond_cap(error, self.retry)
        self.last = error

    async def pause(self, delay: float) -> None:
        if self.wait is not None and self.last is not None:
            await self.wait(self.last, delay)
        else:
            await asyncio.sleep(delay)
        if self.stopping() or self.line.halted is not None:
            raise self.stopped()  # left pending for the next run
