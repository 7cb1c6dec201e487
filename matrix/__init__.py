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
- ``episodes``: the kinds of episode (a single-turn case, a conversation) and the one place that tells them
  apart; ``conversations``: the conversation datasets, environments, checker, runner and reports;
- ``cli``: the ``promptgrid`` command, argument parsing and printing only.

The fake OpenAI-compatible server the tests and benchmarks run against is a test fixture
(``tests/support/fake_server.py``), not part of the package.

It is the top layer: it may import ``promptgrid.translate``, ``templates``,
``variants`` and the package root, none of which imports it.
"""
