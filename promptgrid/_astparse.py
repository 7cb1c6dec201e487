"""``ast.parse`` that survives CPython 3.11's spurious ``SystemError: AST constructor recursion depth mismatch``.

CPython 3.11 keeps the AST constructor's recursion depth per interpreter, not per thread, so a parse (or any
compile: an import without a cached ``.pyc``, a Jinja template) running in another thread at the same moment
can make a parse of perfectly good text fail with that ``SystemError`` (python/cpython#106905). promptgrid
parses from several threads at once (score-file's scoring threads, the environments' threads, the event loop),
so every parse of the library goes through ``parse``: promptgrid's own parses hold one lock (they never overlap
one another), and a parse that still meets the error (a compile elsewhere, such as an import, overlapped it) is
tried again, a few times. Nothing else changes: ``SyntaxError`` and every other error come as from
``ast.parse``.
"""

from __future__ import annotations

import ast
import threading
import time
from typing import Literal, overload

__all__ = ["parse"]

_LOCK = threading.Lock()
_TRIES = 5
_MISMATCH = "AST constructor recursion depth mismatch"


@overload
def parse(source: str, filename: str = ..., mode: Literal["exec"] = ...) -> ast.Module: ...


@overload
def parse(source: str, filename: str = ..., *, mode: Literal["eval"]) -> ast.Expression: ...


@overload
def parse(source: str, filename: str = ..., *, mode: str) -> ast.AST: ...


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse(source, filename, mode)``, one at a time, tried again on the 3.11 depth-mismatch error."""
    for attempt in range(1, _TRIES + 1):
        try:
            with _LOCK:
                return ast.parse(source, filename=filename, mode=mode)
        except SystemError as exc:
            if _MISMATCH not in str(exc) or attempt == _TRIES:
                raise
            time.sleep(0.001 * attempt)  # let the other thread's compile finish
    raise AssertionError("unreachable")  # pragma: no cover
