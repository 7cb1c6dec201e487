"""Scoring: one model answer -> a ``Verdict``; many verdicts -> metrics.

What it owns, in the order a response goes through it:

- ``parse/``: model text -> function calls, strictly in the requested return
  format (bfcl-eval's decoding, minus its unsafe parts) and format-agnostic;
- ``check``: BFCL's AST rules over decoded calls, compiled once per case;
- ``failure_modes``: classifies what the model did wrong, in the BFCL V4 blog's terms;
- ``verdict``: the ``Verdict`` record, bfcl-eval's error codes and the failure modes;
- ``_score``: ``score`` (the full verdict) and ``bfcl_verdict`` (what
  bfcl-eval records, for re-scoring large result sets), ``score_stream``
  (the library behind ``promptgrid score-file``);
- ``metrics``: AST accuracy, FSA, tool/argument P/R/F1, format and language
  match, pass^k;
- ``state_check``: a conversation's trajectory scored turn by turn by the
  environment's state and results (bfcl-eval's multi-turn checker), each turn
  a ``Verdict``.

Nothing here talks to a model; only ``state_check`` runs calls, in the
conversation environments' worker processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from promptgrid._lazy import lazy_exports as _lazy_exports

if _TYPE_CHECKING:
    from ._score import (
        BFCL_DEFAULT_VARIANT,
        CACHE_SIZE,
        StreamCounts,
        bfcl_verdict,
        clear_caches,
        score,
        score_calls,
        score_stream,
        score_uncached,
        variant_index,
    )
    from .check import CheckResult, Mode, check_calls, compile_case
    from .failure_modes import classify
    from .verdict import ErrorCode, FailureMode, Verdict

# Imported on first use (PEP 562): a user of one module (``verdict``, ``parse``) does not load the checker, the
# templates and jinja2 (about 0.3 s).
_LAZY = {
    "BFCL_DEFAULT_VARIANT": "._score",
    "CACHE_SIZE": "._score",
    "CheckResult": ".check",
    "ErrorCode": ".verdict",
    "FailureMode": ".verdict",
    "Mode": ".check",
    "StreamCounts": "._score",
    "Verdict": ".verdict",
    "bfcl_verdict": "._score",
    "check_calls": ".check",
    "classify": ".failure_modes",
    "clear_caches": "._score",
    "compile_case": ".check",
    "score": "._score",
    "score_calls": "._score",
    "score_stream": "._score",
    "score_uncached": "._score",
    "variant_index": "._score",
}


__all__ = [
    "BFCL_DEFAULT_VARIANT",
    "CACHE_SIZE",
    "CheckResult",
    "ErrorCode",
    "FailureMode",
    "Mode",
    "StreamCounts",
    "Verdict",
    "bfcl_verdict",
    "check_calls",
    "classify",
    "clear_caches",
    "compile_case",
    "score",
    "score_calls",
    "score_stream",
    "score_uncached",
    "variant_index",
]

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__)
