"""Running: what a run is, which jobs it has, how they are sent and where results are kept.

- ``config``: ``RunConfig`` / ``ModelSpec`` from flags, a run-config YAML or Python;
- ``plan``: models x cases x variants x repeats, streamed, each job with its cache key;
- ``runner``: the asyncio engine (concurrency, rate limits, retries, cost limit, stop);
- ``store``: the run directory's SQLite store, its lock, and the typed rows it yields;
- ``ratelimit``: token buckets for requests and tokens per minute;
- ``progress``: the progress line on stderr.

Model access itself is in ``promptgrid.matrix.clients``; scoring in
``promptgrid.matrix.scoring``.
"""
