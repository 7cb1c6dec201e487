"""Testing: offline stand-ins for model providers, for tests, benchmarks and demos.

- ``fake_server``: a scriptable OpenAI-compatible HTTP server on 127.0.0.1
  (latency, 429/500/401 faults, hangs, malformed bodies, a request log), with
  OpenAI's files and batches endpoints, capacity and outage knobs;
- the in-process fake client is the ``fake/`` provider of
  ``promptgrid.matrix.clients`` (``fake/auto`` answers every prompt correctly
  in the format it asks for).

Nothing here is imported by the rest of the package at run time.
"""
