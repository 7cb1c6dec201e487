"""Token buckets, progress rendering."""

from __future__ import annotations

import asyncio
import io
import time

from promptgrid.matrix.running.progress import Progress
from promptgrid.matrix.running.ratelimit import TokenBucket


def test_bucket_paces_requests() -> None:
    async def go() -> float:
        bucket = TokenBucket(600)  # 10/s, burst 10
        t = time.monotonic()
        for _ in range(25):
            await bucket.acquire()
        return time.monotonic() - t

    elapsed = asyncio.run(go())
    assert 1.3 <= elapsed <= 3.0  # 10 from the burst, 15 more at 10/s


def test_oversized_request_does_not_deadlock() -> None:
    async def go() -> None:
        bucket = TokenBucket(60, burst=5)  # 1/s
        await asyncio.wait_for(bucket.acquire(50), 1.0)  # bigger than the bucket: goes when full
        assert bucket.level < 0
        bucket.give_back(100)
        assert bucket.level == bucket.capacity

    asyncio.run(go())


def test_progress_lines() -> None:
    out = io.StringIO()
    p = Progress(200, stream=out, interval=0)
    p.done, p.calls, p.errors, p.spend = 50, 50, 2, 0.0123
    p.tick()
    p.close()
    line = out.getvalue().splitlines()[0]
    assert "50/200" in line and "errors 2" in line and "$0.0123" in line and "calls/s" in line and "ETA" in line
    quiet = io.StringIO()
    Progress(10, stream=quiet, enabled=False).tick(force=True)
    assert quiet.getvalue() == ""
