"""Request and token rate limits.

``TokenBucket`` paces calls to one model: one bucket for requests per minute,
one for tokens per minute. A call takes its estimated tokens (prompt
chars / 4 + max_tokens, which is how providers count against TPM) before it
is sent and gives back the difference once the real usage is known. A call
bigger than the whole bucket is let through when the bucket is full (the
level goes negative), so a small limit never deadlocks. (Retry delays are
``promptgrid.providers.RetryPolicy``'s, shared with the translation backend.)
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["TokenBucket"]


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

