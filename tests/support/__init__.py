"""Shared test support, importable from every test as ``support`` (pyproject: ``pythonpath = ["tests"]``).

Not a test package: pytest collects nothing here. What lives where:

- ``support.builders``: the record builders (``make_case`` and its presets, ``fn`` for
  a function schema, the variant lists the runner tests use).
- ``support.bfcl``: bfcl-eval's own modules, executed with stand-ins for the imports a
  ``--no-deps`` install lacks (``load_bfcl_modules``).
- ``support.bfcl_reference``: bfcl-eval as a reference scorer and the verdict agreement
  corpus (also read by ``benchmarks/score.py``).
- ``support.running``: a prepared run on stand-in cases, a stand-in scorer, the fake
  server that answers right, and the child-process runner (``support.runner_child``)
  the crash and secret tests kill.
- ``support.episodes``: ``run_conversations``, the conversation engine on in-memory variants and
  conversations, its keywords turned into the one ``RunConfig`` the library runs from.
- ``support.rows``: result rows and JSONL files of them for the report and compare tests.
- ``support.profiles``: the hypothesis profiles ``dev`` and ``ci`` (tests/conftest.py loads one).
- ``support.scripts``: the repository's benchmark and helper scripts loaded as modules (``load_script``).
"""
