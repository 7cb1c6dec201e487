"""JSON call lists: ``[{"function": "f", "parameters": {"a": 1}}, ...]``.

bfcl-eval locates the array with a regex (``\\[\\s*{.*?}\\s*(?:,\\s*{.*?}\\s*)*\\]``)
that ends at the first ``}]`` -- inside a string or at the end of a nested
list of objects -- and then fails to decode the truncated text, scoring a
correct answer as "no calls". Here the array starts where bfcl-eval's match
starts (the first ``[`` followed by ``{``) and ends where the JSON value ends
(``json.JSONDecoder.raw_decode``); when the two ends differ the result
carries ``Deviation.JSON_CLOSE_BRACE_BRACKET``. Everything else follows
bfcl-eval: prose around the array is ignored, a text without ``[{`` is
decoded whole, non-object items are skipped, an item without "function" or
"parameters" fails the decode, non-object "parameters" is a wrong output
format, and a JSON syntax error yields an empty call list (bfcl-eval catches
it and returns ``[]``).

Also here: the lenient reader ``find_json_calls`` used by ``parse_any``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._fail import Fail
from ._limits import MAX_DEPTH, MAX_SCAN_ATTEMPTS
from ._result import BFCL_WRONG_OUTPUT_FORMAT, Deviation, ParseFailure

__all__ = ["find_json_calls", "lenient_calls", "parse_json_calls"]

_DECODER = json.JSONDecoder()
_ARRAY_OF_OBJECTS_RE = re.compile(r"\[\s*\{")
_BFCL_END_RE = re.compile(r"\}\s*\]")

Calls = list[dict[str, dict[str, Any]]]


def _decode_failure(exc: json.JSONDecodeError, doc: str) -> Fail:
    pos = exc.pos
    if pos < len(doc) and doc[pos] == "\\":
        kind = ParseFailure.BAD_ESCAPING
    elif exc.msg.startswith("Unterminated string") or pos >= len(doc) - 1:
        kind = ParseFailure.UNCLOSED_BRACKET
    else:
        kind = ParseFailure.BAD_SYNTAX
    # bfcl-eval catches JSONDecodeError and returns no calls: its checker then
    # reports a wrong count, not a decoder error.
    return Fail(kind, f"JSON: {exc.msg} at char {pos}", bfcl_error_type=None)


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Iterative nesting depth check (the decoded value may be deep)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            if d > limit:
                return True
            stack.extend((x, d + 1) for x in v if isinstance(x, (list, dict)))
    return False


# The format-agnostic reader often retries where the strict parser just failed;
# for long texts remember the last failure (one slot, keyed by text and start).
_LONG = 50_000
_last_long_failure: list[Any] = [None, -1, None]


def _raw_decode(doc: str, start: int) -> tuple[Any, int]:
    if len(doc) <= _LONG:
        return _DECODER.raw_decode(doc, start)
    key, at, known = _last_long_failure
    if at == start and key is not None and (key is doc or key == doc):
        raise json.JSONDecodeError(known.msg, known.doc, known.pos)
    try:
        return _DECODER.raw_decode(doc, start)
    except json.JSONDecodeError as exc:
        _last_long_failure[:] = [doc, start, json.JSONDecodeError(exc.msg, exc.doc, exc.pos)]
        raise


def _decode_at(doc: str, start: int) -> tuple[Any, int]:
    try:
        value, end = _raw_decode(doc, start)
    except json.JSONDecodeError as exc:
        raise _decode_failure(exc, doc) from None
    except RecursionError:
        raise Fail(ParseFailure.TOO_DEEP, "JSON: nested too deeply", deviation=Deviation.LIMITS) from None
    except ValueError as exc:  # integer with more digits than Python converts
        raise Fail(ParseFailure.BAD_VALUE, f"JSON: {exc}") from None
    if (doc.count("[", start, end) + doc.count("{", start, end) > MAX_DEPTH
            and _depth_exceeds(value, MAX_DEPTH)):
        raise Fail(ParseFailure.TOO_DEEP, f"JSON: nested deeper than {MAX_DEPTH}", deviation=Deviation.LIMITS)
    return value, end


def parse_json_calls(body: str) -> tuple[Calls, tuple[int, int], bool, Deviation | None]:
    """bfcl-eval's JSON decode of ``body``; returns (calls, span, more_arrays, deviation).

    ``span`` is where the calls sit in ``body``; ``more_arrays`` says another
    array of objects follows (per-call wrapping). Raises :class:`Fail`.
    """
    deviation = None
    more = False
    m = _ARRAY_OF_OBJECTS_RE.search(body) if "{" in body else None
    bfcl_end = None if m is None else _BFCL_END_RE.search(body, m.end())
    if m is not None and bfcl_end is not None:
        start = m.start()
        items, end = _decode_at(body, start)
        if bfcl_end.end() != end:
            deviation = Deviation.JSON_CLOSE_BRACE_BRACKET
        more = _ARRAY_OF_OBJECTS_RE.search(body, end) is not None
    else:
        # bfcl-eval's regex finds no array: it decodes from the first "[" to the
        # last "]", or the whole text.
        start, end = body.find("["), body.rfind("]") + 1
        if start < 0 or end <= start:
            start, end = len(body) - len(body.lstrip(" \t\n\r")), len(body)
        value, stop = _decode_at(body, start)
        if body[stop:end].strip(" \t\n\r"):
            raise Fail(ParseFailure.BAD_SYNTAX, f"JSON: extra data at char {stop}", bfcl_error_type=None)
        if isinstance(value, list):
            items = value
        elif isinstance(value, (dict, str)):
            # bfcl-eval iterates the keys/characters, finds no object, returns no calls.
            what = "a single object" if isinstance(value, dict) else "a string"
            raise Fail(ParseFailure.NOT_A_CALL, f"JSON: {what}, not a list of calls", bfcl_error_type=None)
        else:
            raise Fail(ParseFailure.NOT_A_CALL, f"JSON: {type(value).__name__}, not a list of calls")
    try:
        calls = _calls_from_items(items)
    except Fail as fail:
        if deviation is not None:  # bfcl-eval never got this far: its truncated text did not decode
            fail = Fail(fail.kind, fail.details, bfcl_error_type=None, deviation=deviation)
        raise fail from None
    return calls, (start, end), more, deviation


def _calls_from_items(items: list[Any]) -> Calls:
    calls: Calls = []
    late: Fail | None = None  # failures bfcl-eval only notices after the loop
    n_objects = 0
    for item in items:
        if not isinstance(item, dict):
            continue  # bfcl-eval skips non-object items
        n_objects += 1
        if "function" not in item or "parameters" not in item:
            missing = "function" if "function" not in item else "parameters"
            raise Fail(ParseFailure.NOT_A_CALL, f'JSON: call object without "{missing}"')
        name, params = item["function"], item["parameters"]
        if isinstance(name, (list, dict)):
            raise Fail(ParseFailure.NOT_A_CALL, "JSON: function name is not a string")
        if late is None and not isinstance(params, dict):
            late = Fail(ParseFailure.NOT_A_CALL, f'JSON: "parameters" of {name!r} is not an object',
                        bfcl_error_type=BFCL_WRONG_OUTPUT_FORMAT)
        if late is None and not isinstance(name, str):
            late = Fail(ParseFailure.NOT_A_CALL, f"JSON: function name {name!r} is not a string",
                        bfcl_error_type=None, deviation=Deviation.NON_STRING_NAME)
        calls.append({name: params})
    if late is not None:
        raise late
    if items and not n_objects:
        raise Fail(ParseFailure.NOT_A_CALL, "JSON: a list without call objects", bfcl_error_type=None)
    return calls


# -- lenient reading for parse_any ---------------------------------------------

_NAME_KEYS = ("function", "name", "tool", "tool_name", "function_name")
_ARGS_KEYS = ("parameters", "arguments", "args", "params", "input", "kwargs")


def _lenient_call(item: Any) -> dict[str, dict[str, Any]] | None:
    """One call in any common JSON shape: bfcl's, OpenAI's, {"name", "arguments"}."""
    if not isinstance(item, dict):
        return None
    fn = item.get("function")
    if isinstance(fn, dict) and "name" in fn:  # OpenAI tool_calls shape
        item = fn
    name = next((item[k] for k in _NAME_KEYS if k in item), None)
    if not isinstance(name, str):
        return None
    args_key = next((k for k in _ARGS_KEYS if k in item), None)
    if args_key is None:
        return {name: {}} if len(item) == 1 and "function" in item else None
    args = item[args_key]
    if isinstance(args, str):  # arguments as a JSON string
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return None
    return {name: args} if isinstance(args, dict) else None


def lenient_calls(value: Any) -> Calls | None:
    """Calls in a decoded JSON value of any common shape, or ``None``."""
    if isinstance(value, dict):
        call = _lenient_call(value)
        return None if call is None else [call]
    if isinstance(value, list) and value:
        calls = [_lenient_call(v) for v in value]
        if all(c is not None for c in calls):
            return calls  # type: ignore[return-value]
    return None


def _next_open(text: str, pos: int) -> int:
    """Position of the next "[" or "{" (two C finds; a regex scan is much slower)."""
    a, b = text.find("[", pos), text.find("{", pos)
    return b if a < 0 else a if b < 0 else min(a, b)


_CALLISH_RE = re.compile(r'\\?"(?:function|name|tool|tool_name)\\?"\s*:')


def find_json_calls(text: str, cheap: bool = False) -> tuple[Calls, list[tuple[int, int]]] | Fail | None:
    """All JSON call lists/objects in ``text``: (calls, spans), a Fail, or None.

    Scans each ``[``/``{`` (at most ``MAX_SCAN_ATTEMPTS``, and at most about
    twice the text's length decoded in all), keeping values that look like
    calls in any common shape. A Fail is returned when nothing decodes but
    something call-like failed to (malformed JSON, too deep). ``cheap``: a
    few attempts and one pass over the text at most (for long texts).
    """
    calls: Calls = []
    spans: list[tuple[int, int]] = []
    pos = 0
    budget = len(text) if cheap else 2 * len(text) + 10_000
    first_fail: Fail | None = None
    for _ in range(4 if cheap else MAX_SCAN_ATTEMPTS):
        start = _next_open(text, pos)
        if start < 0 or budget <= 0:
            break
        try:
            value, end = _raw_decode(text, start)
        except json.JSONDecodeError as exc:
            budget -= exc.pos - start + 1
            if first_fail is None and _CALLISH_RE.search(text, start, start + 300):
                first_fail = _decode_failure(exc, text)
            pos = start + 1
            continue
        except RecursionError:
            return Fail(ParseFailure.TOO_DEEP, "JSON: nested too deeply", deviation=Deviation.LIMITS)
        except ValueError:  # an integer past Python's digit limit
            pos = start + 1
            continue
        budget -= end - start
        found = lenient_calls(value)
        if found is None:
            if first_fail is None and isinstance(value, (list, dict)) and not text[:start].strip() \
                    and not text[end:].strip():
                first_fail = Fail(ParseFailure.NOT_A_CALL, "JSON: a value without calls", bfcl_error_type=None)
            # Not calls: look inside containers ({"tool_calls": [...]}), skip scalars.
            pos = start + 1 if isinstance(value, (list, dict)) else end
            continue
        if ((text.count("[", start, end) + text.count("{", start, end)) > MAX_DEPTH
                and _depth_exceeds(value, MAX_DEPTH)):
            return Fail(ParseFailure.TOO_DEEP, f"JSON: nested deeper than {MAX_DEPTH}", deviation=Deviation.LIMITS)
        calls.extend(found)
        spans.append((start, end))
        pos = end
    return (calls, spans) if spans else first_fail
