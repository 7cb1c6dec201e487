"""Python-syntax call lists: ``[func(a=1, b="x"), mod.func2(c=[1, 2])]``.

Tries the fast subset parser first; on anything unusual falls back to the
bounded ``ast`` path. Both follow bfcl-eval's ``ast_parse`` value rules.
"""

from __future__ import annotations

from typing import Any

from ._fail import Fail
from ._limits import MAX_DEPTH, MAX_PYTHON_TOKENS
from ._pyast import parse_calls_ast
from ._pyfast import (
    Decline,
    Mismatch,
    TooDeep,
    certain_syntax_error,
    parse_calls_fast,
    starts_with_prose,
    tokenize,
)
from ._result import Deviation, ParseFailure

__all__ = ["parse_python_calls"]


# A failed strict parse is usually followed by the format-agnostic reader
# trying the same text again (and its regions): remember recent failures,
# keyed by the text itself so a stale entry is never wrong. Successes are not
# kept (their dicts are handed to callers, who may mutate them).
_FAILURES: dict[str, Fail] = {}
_MEMO_SIZE = 64


def parse_python_calls(text: str, *, exact: bool = True, positional: bool = False
                       ) -> tuple[list[dict[str, dict[str, Any]]], Deviation | None]:
    """Calls in ``text`` (already cleaned as bfcl-eval does); raises :class:`Fail`.

    ``exact=False``: a syntax error may be reported as BAD_SYNTAX where the
    exact kind is UNCLOSED_BRACKET (the verdict alone is wanted; cheaper on
    long malformed answers, and on answers that open with prose).
    ``positional=True``: positional arguments are kept (``parse_calls_ast``),
    where bfcl-eval drops them (conversations only).
    """
    known = None if positional else _FAILURES.get(text)
    if known is not None:
        raise known.fresh()
    try:
        return _parse(text, exact, positional)
    except Fail as fail:
        if exact and not positional:
            if len(_FAILURES) >= _MEMO_SIZE:
                _FAILURES.clear()
            _FAILURES[text] = fail  # only ever read through fresh(), never raised again
        raise


def _parse(text: str, exact: bool = True, positional: bool = False
           ) -> tuple[list[dict[str, dict[str, Any]]], Deviation | None]:
    if "(" not in text and len(text) <= MAX_PYTHON_TOKENS:
        # Prose, JSON or XML where Python was asked for: no call can be written
        # without "(". The one call-free success is an empty list (what the fast
        # path accepts: "[" and "]" tokens alone); short enough for the token
        # bound not to apply, so this is the verdict the steps below would give.
        if text[:1] == "[" and text[-1:] == "]" and "".join(text.split()) == "[]":
            return [], None
        raise Fail(ParseFailure.NOT_A_CALL, "Python: no call in the text")
    if (not exact and len(text) <= MAX_PYTHON_TOKENS and starts_with_prose(text)
            and text.count("(") + text.count("[") + text.count("{") <= MAX_DEPTH):
        # Prose before the calls: a syntax error whatever follows. The length
        # and bracket bounds mean no limit could have refused the text first.
        raise Fail(ParseFailure.BAD_SYNTAX, "Python syntax error: invalid syntax (prose at the start)")
    toks = tokenize(text)
    if toks is None:
        raise Fail(ParseFailure.TOO_LARGE, f"Python: more than {MAX_PYTHON_TOKENS} tokens",
                   deviation=Deviation.LIMITS)
    try:
        return parse_calls_fast(text, toks), None
    except Mismatch:
        raise Fail(ParseFailure.UNCLOSED_BRACKET,
                   "Python syntax error: a bracket closed by the wrong bracket") from None
    except Decline:
        pass
    except TooDeep:
        raise Fail(ParseFailure.TOO_DEEP, f"Python: brackets nested deeper than {MAX_DEPTH}",
                   deviation=Deviation.LIMITS) from None
    if "(" not in text:
        # No call can be written without "(", and "[]" (the one call-free success)
        # is the fast path's: bfcl-eval fails on this text whatever ast.parse says.
        raise Fail(ParseFailure.NOT_A_CALL, "Python: no call in the text")
    certain = certain_syntax_error(text, toks, first=not exact)
    if certain is not None:
        # ``ast.parse`` would fail too, with this kind; it costs more than the
        # whole bfcl-eval decode of such an answer to hear it say so.
        raise Fail(certain[0], f"Python syntax error: {certain[1]}")
    return parse_calls_ast(text, positional=positional)
