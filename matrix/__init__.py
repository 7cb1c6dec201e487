"""Matrix: everything that runs models x variants x cases and makes sense of the answers.

One subpackage per concept (each ``__init__`` says what it owns):

- ``api``: the public functions behind ``import promptgrid as pg``
  (load_dataset, render, run/arun, open_run, Run, report; score is ``scoring.score``);
- ``datasets``: the cases (``mini``, ``bfcl:<category>``, ``jsonl:PATH``);
- ``running``: run config, job plan, the asyncio runner, the run directory's
  store and its ``ResultRow``, rate limits, progress, dry-run estimates;
- ``clients``: model access (litellm, in-process llama.cpp, the ``fake/``
  model), secret redaction;
- ``scoring``: parse -> AST check -> failure mode -> ``Verdict``; metrics;
- ``report``: statistics, tables, figures, HTML, run comparison;
- ``cli``: the ``promptgrid`` command, argument parsing and printing only;
- ``testing``: the fake OpenAI-compatible server for tests and benchmarks.

It is the top layer: it may import ``promptgrid.translate``, ``templates``,
``variants`` and the package root, none of which imports it.
"""
