"""Running: what a run is, which jobs it has, how they are sent and where results are kept.

- ``config``: ``RunConfig`` / ``ModelSpec`` from flags, a run-config YAML or Python, and the one declaration of
  the run options (``RunOptions``), which ``options`` turns into flags, keywords and YAML keys;
- ``session``: one run end to end (options -> config -> prepared -> executed in the
  run directory, ``run.json``; re-scoring): what ``promptgrid.run`` and ``promptgrid run`` call;
- ``estimate``: what a run would send and cost (``--dry-run``);
- ``plan``: models x cases x variants x repeats, streamed, each job with its cache key;
- ``planning``: what each model sends next: the product, or an adaptive goal's rounds (``--goal``/``--budget``);
- ``findings``: what an adaptive run found (best, worst, spread, quantiles; measured or estimated);
- ``runner``: the asyncio engine (concurrency, rate limits, retries, cost limit, stop); asks the planners, sends
  through a ``Transport`` (online; ``batch.BatchTransport``; ``exchange.ExportTransport``);
- ``store``: the run directory's SQLite store, its lock, read-only opening, and the rows it yields;
- ``results``: ``Result`` (also ``ResultRow``), the one record of a job's or an episode's result (store, export,
  report);
- ``ratelimit``: token buckets for requests and tokens per minute;
- ``progress``: the progress line on stderr.

Model access itself is in ``promptgrid.matrix.clients``; scoring in
``promptgrid.matrix.scoring``.
"""
