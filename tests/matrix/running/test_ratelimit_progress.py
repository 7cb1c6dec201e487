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


def test_progress_says_what_a_retry_waits_for() -> None:
    out = io.StringIO()
    bar = Progress(10, stream=out, interval=3600)
    short = bar.wait(0.5, "server error from m, retrying")
    assert out.getvalue() == ""  # under a second: drawn on the next timer tick only
    long = bar.wait(120, "rate limited by m (Retry-After 86400 s capped)")
    assert out.getvalue().count("\n") == 1  # a new, longer wait is drawn at once
    assert "| waiting 120 s: rate limited by m (Retry-After 86400 s capped)" in out.getvalue()
    bar.wait(119.5, "rate limited by m (Retry-After 86400 s capped)")
    assert out.getvalue().count("\n") == 1  # another worker's wait ending with it: not drawn again
    bar.end_wait(long)
    assert bar.waiting() == "waiting 119 s: rate limited by m (Retry-After 86400 s capped)"
    bar.end_wait(short)
    bar.end_wait(short)  # twice is harmless
    assert "waiting" in bar.line()
