"""Fast path for Python-syntax calls and literals: a regex tokenizer and a
recursive-descent parser for the subset models actually write.

Why: ``ast.parse`` costs tens of microseconds even for ``[f(a=1)]`` because it
builds a full AST of Python objects; most responses are a list of calls with
keyword arguments whose values are strings, numbers, names, lists and dicts.
This parser handles exactly that subset and produces the same values as the
``ast`` path (``_pyast``), which follows bfcl-eval. Whenever it meets anything
else (operators, escapes other than the common ones, comments, positional
arguments, string prefixes, non-ASCII identifiers, a syntax error, ...) it
raises :class:`Decline` and the caller falls back to ``_pyast``. It never
decides a failure on its own, except the depth limit, so a decline costs time,
never correctness.

The tokenizer also enforces the token bound (``MAX_PYTHON_TOKENS``) that keeps
the ``ast`` fallback cheap: ``tokenize`` returns ``None`` past it.
"""

from __future__ import annotations

import ast
import keyword
import re
import sys
import warnings
from itertools import islice
from typing import Any

from ._limits import MAX_DEPTH, MAX_PYTHON_TOKENS
from ._result import ParseFailure

__all__ = [
    "Decline",
    "Mismatch",
    "TooDeep",
    "TooLarge",
    "balanced_end",
    "certain_syntax_error",
    "parse_calls_fast",
    "parse_literal_fast",
    "starts_with_prose",
    "tokenize",
]


class Decline(Exception):
    """The fast path cannot decide this input; use the ``ast`` path."""


class Mismatch(Decline):
    """A bracket closed by the wrong bracket, where every token before it was read.

    Those tokens are a well-formed prefix in Python's own view, so Python's
    first error is this one: its tokenizer's "closing parenthesis ... does not
    match opening parenthesis ...". Callers that only need the fast path's
    verdict treat it as a ``Decline``.
    """


class TooDeep(Exception):
    """Brackets nested deeper than ``MAX_DEPTH``."""


class TooLarge(Exception):
    """More than ``MAX_PYTHON_TOKENS`` tokens."""


# One token per match; leading whitespace is absorbed (whitespace at the very end
# of a text becomes one last one-character token, which the fast path declines:
# callers strip first). Kinds are read from the first character (see _value).
# String bodies use possessive quantifiers where available (3.11+): an
# unterminated quote then fails in one forward scan instead of backtracking
# through the rest of a long text.
_POSSESSIVE = "+" if sys.version_info >= (3, 11) else ""


def _string_re(quote: str) -> str:
    body = "[^" + quote + r"\\\r\n]*" + _POSSESSIVE
    return quote + body + r"(?:\\[^\r\n]" + body + ")*" + _POSSESSIVE + quote


_TOKEN_RE = re.compile(
    r"[ \t\f\r\n]*("
    r"[A-Za-z_][A-Za-z0-9_]*"
    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    "|" + _string_re("'") + "|" + _string_re('"') + "|==|.)",
    re.DOTALL,
)
_WS_START = frozenset(" \t\f\r\n")
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NUM_START = frozenset("0123456789.")
_QUOTES = frozenset("'\"")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# Python keywords cannot be names (keyword.kwlist includes True/False/None).
_KEYWORDS = frozenset(keyword.kwlist)
_CONSTANTS = {"True": True, "False": False, "None": None}
_ESC_RE = re.compile(r"\\(.)", re.DOTALL)
_ESC_MAP = {
    "\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r",
    "a": "\a", "b": "\b", "f": "\f", "v": "\v",
}
_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")
_SENTINEL = ["", ""]  # appended so lookahead never runs off the end
_SHORT_ESCAPED = 256  # escaped strings up to this long are decoded by regex


def tokenize(text: str) -> list[str] | None:
    """Token strings of ``text`` (whitespace dropped), or ``None`` past the token bound."""
    if len(text) <= 2 * MAX_PYTHON_TOKENS:
        toks = _TOKEN_RE.findall(text)
    else:
        toks = [m.group(1) for m in islice(_TOKEN_RE.finditer(text), MAX_PYTHON_TOKENS + 1)]
    if len(toks) > MAX_PYTHON_TOKENS:
        return None
    return toks


_BRACKET_OR_STRING_RE = re.compile(_string_re("'") + "|" + _string_re('"') + r"|[()\[\]{}]")


def balanced_end(text: str, start: int) -> int | None:
    """End of the bracketed expression starting at ``start`` (strings skipped), or None.

    Visits only brackets and string literals from ``start`` until the first
    opened bracket is closed; gives up after ``MAX_PYTHON_TOKENS`` of them or
    at a mismatch.
    """
    depth = 0
    for n, m in enumerate(_BRACKET_OR_STRING_RE.finditer(text, start)):
        if n > MAX_PYTHON_TOKENS:
            return None
        ch = m.group()
        if ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth -= 1
            if depth == 0:
                return m.end()
            if depth < 0:
                return None
    return None


def _source_ok(text: str) -> bool:
    """Reject what the fast path must leave to ``ast`` (it errors on these)."""
    if not text or text[0] in _WS_START or "\x00" in text:
        return False
    return text.isascii() or _SURROGATE_RE.search(text) is None


def _escape(m: re.Match[str]) -> str:
    try:
        return _ESC_MAP[m.group(1)]
    except KeyError:
        raise Decline from None  # \x, \u, \N, octal, unknown escapes: ast decides


def _string(token: str) -> str:
    """The value of a one-line string literal token."""
    body = token[1:-1]
    if "\\" not in body:
        return body
    if len(body) <= _SHORT_ESCAPED:
        return _ESC_RE.sub(_escape, body)
    # Long and escaped: let Python's own (C) tokenizer decode it, in one go.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = ast.literal_eval(token)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise Decline from None
    if not isinstance(value, str):
        raise Decline
    return value


def _number(t: str) -> int | float:
    if "." in t or "e" in t or "E" in t:
        return float(t)
    if (len(t) > 1 and t[0] == "0") or len(t) > 4000:
        raise Decline  # leading zeros are a SyntaxError; huge ints hit Python's digit limit
    return int(t)


def _is_name(t: str) -> bool:
    return bool(t) and t[0] in _NAME_START and t not in _KEYWORDS


def _call(toks: list[str], i: int, depth: int) -> tuple[str, dict[str, Any] | None, int]:
    """``name(kw=value, ...)`` at ``i``: (name, kwargs or None for ``name()``, next index)."""
    t = toks[i]
    if not _is_name(t):
        raise Decline
    name = t
    i += 1
    while toks[i] == ".":
        t = toks[i + 1]
        if not _is_name(t):
            raise Decline
        name = name + "." + t
        i += 2
    if toks[i] != "(":
        raise Decline
    if depth >= MAX_DEPTH:
        raise TooDeep
    i += 1
    args: dict[str, Any] = {}
    while toks[i] != ")":
        k = toks[i]
        if toks[i + 1] != "=" or not _is_name(k) or k in args:
            raise Decline  # positional argument, **kwargs, repeated keyword, ...
        args[k], i = _value(toks, i + 2, False, depth + 1)
        t = toks[i]
        if t == ",":
            i += 1
        elif t != ")":
            raise Mismatch if t in _CLOSERS else Decline
    return name, args or None, i + 1  # every pass of the loop adds a keyword: no keywords is ``name()``


def _value(toks: list[str], i: int, literal: bool, depth: int) -> tuple[Any, int]:
    """The value at ``i`` and the next index; ``literal`` applies literal_eval's rules."""
    t = toks[i]
    c = t[:1]
    if c in _QUOTES:
        if len(t) < 2 or t[-1] != c or toks[i + 1][:1] in _QUOTES:
            raise Decline  # unterminated, or implicit concatenation
        return _string(t), i + 1
    if c in _NAME_START:
        if t in _CONSTANTS:
            return _CONSTANTS[t], i + 1
        if literal or t in _KEYWORDS:
            raise Decline
        nxt = toks[i + 1]
        if nxt == "(" or nxt == ".":
            name, args, i = _call(toks, i, depth)
            # bfcl-eval: a call with keywords is a nested call; without, its source text.
            return (name + "()" if args is None else {name: args}), i
        return t, i + 1
    if c in _NUM_START and t != ".":
        return _number(t), i + 1
    if t == "[" or t == "(" or t == "{":
        return _container(toks, i, literal, depth)
    if t == "-" or (t == "+" and literal):
        return _signed(toks, i)
    raise Decline


def _container(toks: list[str], i: int, literal: bool, depth: int) -> tuple[Any, int]:
    """The list, tuple, parenthesized value or dict opening at ``i``, and the index past its end."""
    if depth >= MAX_DEPTH:
        raise TooDeep
    t = toks[i]
    if t == "{":
        return _mapping(toks, i + 1, literal, depth + 1)
    close = "]" if t == "[" else ")"
    items = []
    i += 1
    while toks[i] != close:
        v, i = _value(toks, i, literal, depth + 1)
        items.append(v)
        sep = toks[i]
        if sep == ",":
            i += 1
        elif sep != close:
            raise Mismatch if sep in _CLOSERS else Decline
        elif close == ")" and len(items) == 1 and toks[i - 1] != ",":
            return v, i + 1  # a parenthesized value, not a tuple
    return (items if close == "]" else tuple(items)), i + 1


def _signed(toks: list[str], i: int) -> tuple[int | float, int]:
    """The number after the sign at ``i`` (``-`` negates it), and the index past it."""
    n = toks[i + 1]
    if n[:1] not in _NUM_START or n == ".":
        raise Decline  # bfcl-eval's "-x" rule is only safe to mirror on literals
    v = _number(n)
    return (-v if toks[i] == "-" else v), i + 2


def _mapping(toks: list[str], i: int, literal: bool, depth: int) -> tuple[dict[Any, Any], int]:
    out: dict[Any, Any] = {}
    while toks[i] != "}":
        key, i = _value(toks, i, literal, depth)
        if toks[i] != ":":
            raise Decline  # a set display, or a syntax error
        value, i = _value(toks, i + 1, literal, depth)
        try:
            out[key] = value
        except TypeError:
            raise Decline from None  # unhashable key: the ast path reports it
        sep = toks[i]
        if sep == ",":
            i += 1
        elif sep != "}":
            raise Mismatch if sep in _CLOSERS else Decline
    return out, i + 1


def parse_calls_fast(text: str, toks: list[str]) -> list[dict[str, dict[str, Any]]]:
    """Calls of ``text`` under bfcl-eval's rules, or :class:`Decline`.

    Accepts ``[call, ...]`` and a bare ``call, call`` sequence (what remains
    inside a ``<TOOLCALL>`` tag). ``toks`` is ``tokenize(text)``.
    """
    if not toks or not _source_ok(text):
        raise Decline
    n = len(toks)
    toks = toks + _SENTINEL
    calls: list[dict[str, dict[str, Any]]] = []
    if toks[0] == "[":
        i = 1
        while toks[i] != "]":
            name, args, i = _call(toks, i, 1)
            calls.append({name: {} if args is None else args})
            sep = toks[i]
            if sep == ",":
                i += 1
            elif sep != "]":
                raise Mismatch if sep in _CLOSERS else Decline
        i += 1
    elif toks[0][:1] in _NAME_START:
        i = _bare_calls(text, toks, n, calls)
    else:
        raise Decline
    if i != n:
        raise Decline
    return calls


def _bare_calls(text: str, toks: list[str], n: int, calls: list[dict[str, dict[str, Any]]]) -> int:
    """Read a bare ``call, call`` sequence (``n`` tokens before the sentinel) into ``calls``: the index past it."""
    if "\n" in text or "\r" in text:
        raise Decline  # a newline outside brackets ends a Python expression
    i = 0
    while True:
        name, args, i = _call(toks, i, 0)
        calls.append({name: {} if args is None else args})
        if i >= n:
            return i
        if toks[i] != ",":
            raise Decline
        i += 1
        if i >= n:
            return i


# Texts where the token list cannot tell what Python's tokenizer would do:
# backslashes (escapes, line continuations), comments, triple quotes,
# carriage returns and control characters. String prefixes (f-strings
# tokenize differently from 3.12 on) and numbers run into letters or with
# leading zeros ("2nd", "04": tokenizer errors of their own, which may come
# first) are caught on the tokens.
_UNSURE_CHARS_RE = re.compile(r"[\\#\r\x00-\x08\x0b\x0e-\x1f\x7f]")
_PREFIXES = frozenset(p for s in ("r", "b", "f", "u", "rb", "br", "fr", "rf") for p in (s, s.upper(), s.title(),
                                                                                      s[:1] + s[1:].upper()))
_PAIRS = {")": "(", "]": "[", "}": "{"}
# Characters that are never valid outside a string: a parser error wherever they stand.
_STRAY = frozenset("?$`")
# Names that may stand next to another name (keywords, soft keywords).
_MAY_PAIR = _KEYWORDS | frozenset({"match", "case", "type", "_"})
_DIGITS = frozenset("0123456789")


# "[Sure! Here ...": at the very start, two names side by side or a name and
# a character never valid outside strings (each name whole: (?!\w) stops a
# split inside "Suré").
_PROSE_START_RE = re.compile(
    r"\[?[ \t]*([A-Za-z_][A-Za-z0-9_]*)(?!\w)(?:[ \t]+([A-Za-z_][A-Za-z0-9_]*)(?!\w)|[ \t]*(?:!(?!=)|[?$`]))"
)


def starts_with_prose(text: str) -> bool:
    """The text's first tokens prove a syntax error, whatever follows ("[Sure! Here are the calls: ...").

    Lets the verdict-only parse skip tokenizing a long answer that opens
    with prose; which error Python would report first is not decided.
    """
    m = _PROSE_START_RE.match(text)
    if m is None:
        return False
    second = m.group(2)
    return second is None or (m.group(1) not in _MAY_PAIR and second not in _MAY_PAIR)


def certain_syntax_error(text: str, toks: list[str], *, first: bool = False) -> tuple[ParseFailure, str] | None:
    """(kind, why) when ``ast.parse(text, mode="eval")`` is sure to fail and the kind is sure; else None.

    Spares the ``ast`` fallback on the common malformed answers (prose before
    the calls, a bracket closed by the wrong bracket, an apostrophe opening a
    string). The kind is the one ``_pyast.syntax_failure`` gives for Python's
    own error. CPython reports the first *tokenizer* error anywhere in the
    text ahead of any parser error (a bracket closed by the wrong bracket:
    UNCLOSED_BRACKET; an unmatched closing bracket: BAD_SYNTAX; an
    unterminated string: UNCLOSED_BRACKET), then the parser error
    (BAD_SYNTAX) -- but a bracket left open at the end is reported instead
    when the parser got that far or past the bracket's line. A line break
    outside brackets is left to ``ast``. Parser errors are used only where
    the tokens prove one: a character never valid outside strings, or two
    names side by side (neither a keyword). Anything less certain returns
    None and ``ast`` decides. tests/matrix/scoring/parse/test_python.py checks the
    kinds against ``ast`` on generated texts.

    ``first=True`` stops at the first proof of an error (the verdict is all
    that is wanted): the kind is then BAD_SYNTAX for a parser error that a
    bracket error later in the text would have overruled.
    """
    if (not text or text[0] in _WS_START or not text.isascii() or "'''" in text or '"""' in text
            or _UNSURE_CHARS_RE.search(text) is not None):
        return None
    lines = [toks] if "\n" not in text else [_TOKEN_RE.findall(line) for line in text.split("\n")]
    stack: list[tuple[str, int]] = []  # open brackets and their line numbers
    parser_error_line = -1  # line of the first character that proves a parser error
    names_side_by_side = False
    bang_ok = "!=" in text
    last = len(lines) - 1
    try:
        for line_no, line_toks in enumerate(lines):
            parser_error_line, side_by_side = _scan_line(line_toks, line_no, stack, parser_error_line, first,
                                                         bang_ok)
            names_side_by_side |= side_by_side
            if not stack and line_no < last:
                return None  # a line break outside brackets: indentation and statement rules apply
    except _Settled as settled:
        return settled.result
    if not stack:
        return _INVALID_SYNTAX if parser_error_line >= 0 or names_side_by_side else None
    # A bracket left open at the end is reported instead of a parser error
    # the parser met at the end of the text (its look-ahead after two names
    # side by side may run there) or on a later line than that bracket. A
    # stray character stops it where it stands.
    if 0 <= parser_error_line <= stack[-1][1]:
        return _INVALID_SYNTAX
    return None


_INVALID_SYNTAX = (ParseFailure.BAD_SYNTAX, "invalid syntax")


class _Settled(Exception):
    """Ends ``certain_syntax_error``'s scan: ``result`` is its answer (a sure failure, or None: not sure)."""

    def __init__(self, result: tuple[ParseFailure, str] | None) -> None:
        super().__init__()
        self.result = result


def _scan_line(line_toks: list[str], line_no: int, stack: list[tuple[str, int]], parser_error_line: int,
               first: bool, bang_ok: bool) -> tuple[int, bool]:
    """``certain_syntax_error`` over one line: (first stray character's line so far or -1, names side by side)."""
    prev = ""  # kind of the previous token on this line: name, prefix, number, other
    side_by_side = False
    for t in line_toks:
        c = t[0]
        if c in _NAME_START:
            if prev == "number" or (prev == "name" and t not in _MAY_PAIR):
                side_by_side = _name_after(prev, first)
            prev = "other" if t in _MAY_PAIR else "prefix" if t in _PREFIXES else "name"
            continue
        if c in _QUOTES and prev != "prefix" and len(t) > 1 and t[-1] == c:
            prev = "other"  # a closed string (the common case, decided here)
            continue
        if c in _QUOTES or c in _DIGITS or (c == "." and len(t) > 1):
            prev = _literal_kind(t, prev)
            continue
        if c == "(" or c == "[" or c == "{":
            stack.append((c, line_no))
            if len(stack) > MAX_DEPTH:
                raise _Settled(None)
        elif c == ")" or c == "]" or c == "}":
            _check_close(stack, t)
        elif (c in _STRAY or (c == "!" and not bang_ok)) and parser_error_line < 0:
            parser_error_line = _stray(line_no, first)
        prev = "other"
    return parser_error_line, side_by_side


def _name_after(prev: str, first: bool) -> bool:
    """A name after a number settles (not sure); after a name, a parser error: settled if ``first``, else True."""
    if prev == "number":
        raise _Settled(None)  # "2nd", "0x1g", "1_0": maybe a tokenizer error
    if first:
        raise _Settled(_INVALID_SYNTAX)
    return True


def _stray(line_no: int, first: bool) -> int:
    """The line of the first character never valid outside strings (a parser error there); settled when ``first``."""
    if first:
        raise _Settled(_INVALID_SYNTAX)
    return line_no


def _literal_kind(t: str, prev: str) -> str:
    """``prev`` after a string or number token; settles where the tokens cannot judge it or a string never closes."""
    c = t[0]
    if c in _QUOTES:
        if prev == "prefix":
            raise _Settled(None)  # a string prefix: f-strings are tokenized differently from 3.12 on
        if len(t) < 2 or t[-1] != c:
            raise _Settled((ParseFailure.UNCLOSED_BRACKET, "unterminated string literal"))
        return "other"
    if prev == "number" or (c == "0" and len(t) > 1 and t[1] in _DIGITS):
        raise _Settled(None)  # "04": leading zeros are a tokenizer error
    return "number"


def _check_close(stack: list[tuple[str, int]], t: str) -> None:
    """Pop the bracket the closing bracket ``t`` closes; settle on an unmatched or mismatched one."""
    if not stack:
        raise _Settled((ParseFailure.BAD_SYNTAX, f"unmatched {t!r}"))
    if stack.pop()[0] != _PAIRS[t]:
        raise _Settled((ParseFailure.UNCLOSED_BRACKET, f"closing {t!r} does not match the opening bracket"))


def parse_literal_fast(text: str) -> Any:
    """``ast.literal_eval(text)`` for the common subset, or :class:`Decline`.

    Raises :class:`TooLarge` past the token bound (then ``ast`` must not run either).
    """
    text = text.lstrip(" \t")
    toks = tokenize(text)
    if toks is None:
        raise TooLarge
    if not toks or not _source_ok(text):
        raise Decline
    n = len(toks)
    value, i = _value(toks + _SENTINEL, 0, True, 0)
    if i != n:
        raise Decline
    return value
