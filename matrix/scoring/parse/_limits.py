"""Bounds that keep every parse cheap on hostile input.

Model output is untrusted and can be anything: a megabyte of prose, 100,000
nested brackets, a billion-laughs XML document. Each parser checks these
bounds *before* handing text to a C parser (``ast.parse``, expat, ``json``)
whose cost or recursion it cannot interrupt, and reports a parse failure
(``TOO_LARGE`` / ``TOO_DEEP``) instead of raising or hanging.

The numbers are far above anything a function-calling response needs (a BFCL
parallel answer is a few hundred tokens, nesting rarely passes 5) and low
enough that the worst accepted input still parses in a few milliseconds.
"""

from __future__ import annotations

__all__ = [
    "MAX_ARITH_OPERANDS",
    "MAX_DEPTH",
    "MAX_INPUT_CHARS",
    "MAX_INT_BITS",
    "MAX_LENIENT_SCAN_CHARS",
    "MAX_PYTHON_TOKENS",
    "MAX_SCAN_ATTEMPTS",
    "MAX_XML_ELEMENTS",
]

#: Longest response accepted, in characters (1 MB of ASCII). Longer -> TOO_LARGE.
MAX_INPUT_CHARS = 1_000_000

#: Deepest nesting of brackets (Python/JSON values) or XML elements. Deeper -> TOO_DEEP.
#: Python's own parser stops at 200 nested brackets; keeping ours lower leaves
#: head room for the recursive resolvers on the caller's stack.
MAX_DEPTH = 100

#: Most Python tokens handed to ``ast.parse``. A valid expression of N tokens
#: costs ``ast.parse`` roughly N microseconds and N AST objects; beyond this the
#: response is refused (TOO_LARGE) rather than parsed for hundreds of ms.
MAX_PYTHON_TOKENS = 10_000

#: Most elements in one XML document (checked by counting "<" before parsing,
#: then while parsing).
MAX_XML_ELEMENTS = 5_000

#: Arithmetic folding (the safe replacement for bfcl-eval's ``eval`` of
#: ``a + b`` values): at most this many literal operands per expression ...
MAX_ARITH_OPERANDS = 64
#: ... and integer results of at most this many bits (about 1,233 digits).
MAX_INT_BITS = 4096

#: The format-agnostic parser tries at most this many candidate regions per
#: format (JSON openings, Python call starts, XML blocks, tags, fences).
MAX_SCAN_ATTEMPTS = 64

#: Longer responses get a cheaper format-agnostic reading: one attempt per
#: format on each tag/fence segment, no line-by-line search, no XML recovery.
MAX_LENIENT_SCAN_CHARS = 100_000
