"""Request and token rate limits.

``TokenBucket`` paces calls to one model: one bucket for requests per minute,
one for tokens per minute. A call takes its estimated tokens (prompt
chars / 4, native tool schemas included, + max_tokens, which is how providers count against TPM) before it
is sent and gives back the difference once the real usage is known. A call
bigger than the whole bucket is let through when the bucket is full (the
level goes negative), so a small limit never deadlocks. (Retry delays are
``promptgrid.providers.RetryPolicy``'s, shared with the translation backend.)

``model_buckets`` makes a model's two buckets and ``estimate_tokens`` a call's
estimate: the single-turn runner (``runner``) and the conversation runner
(``promptgrid.matrix.running.conversation_runner``, every step of an episode) both pace
their calls with them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["TokenBucket", "estimate_tokens", "model_buckets"]


class TokenBucket:
    """``rate_per_minute`` units per minute, with a burst of ``burst`` units (default: one second's worth)."""

    def __init__(self, rate_per_minute: float, burst: float | None = None) -> None:
        if rate_per_minute <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate_per_minute / 60.0
        self.capacity = max(1.0, burst if burst is not None else self.rate)
        self.level = self.capacity
        self._clock = time.monotonic
        self._stamp = self._clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, amount: float = 1.0) -> None:
        """Wait until ``amount`` units (at most a full bucket) are available, then take them."""
        async with self._lock:  # FIFO: one waiter at a time, so big requests are not starved
            need = min(amount, self.capacity)
            while True:
                self._refill()
                if self.level >= need:
                    self.level -= amount
                    return
                await asyncio.sleep((need - self.level) / self.rate)

    def give_back(self, amount: float) -> None:
        """Return units taken in excess (negative: take more, for usage above the estimate)."""
        self._refill()
        self.level = min(self.capacity, self.level + amount)



def model_buckets(rpm: float | None, tpm: float | None) -> tuple[TokenBucket | None, TokenBucket | None]:
    """A model's (requests, tokens) buckets for ``rpm`` and ``tpm`` (``None``: no limit), as every runner paces one
    model's calls: the request bucket bursts one second's worth, the token bucket one second's worth too (a
    token burst of a whole minute would let a minute's tokens through at once)."""
    return (TokenBucket(rpm) if rpm else None,
            TokenBucket(tpm, burst=tpm / 60) if tpm else None)


def estimate_tokens(messages: Iterable[Mapping[str, Any]], max_tokens: Any = None,
                    request: Mapping[str, Any] | None = None) -> int:
    """The tokens a call is counted for before it is sent (against TPM, the cost cap's first price, and a dry
    run's estimate): its messages' text characters / 4 (text content, and the arguments of the tool calls an
    assistant message carries), the tool schemas a native ``request`` sends beside them (providers bill them as
    input: they are the function docs a prompt-mode message holds), plus ``max_tokens``."""
    chars = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                chars += sum(len(v) for v in (function.get("name"), function.get("arguments")) if isinstance(v, str))
    tools = request.get("tools") if isinstance(request, Mapping) else None
    if tools:
        chars += len(json.dumps(tools, ensure_ascii=False, separators=(",", ":"), default=str))
    return chars // 4 + int(max_tokens or 0)
