"""Failure-mode classification: why a response failed, in the terms of the BFCL V4 blog (section 5).

bfcl-eval's error codes say which check tripped (``ast_decoder:decoder_failed``
covers a missing tag, prose, a Python answer to a JSON prompt and an unclosed
XML tag alike). A failure mode says what the model did, so a report can
count "answered in another format" or "wrapped each call in <functions>".
Each failed response gets exactly one mode, chosen by this precedence
(first match wins; see ``classify``):

1.  ``CALL_WHEN_NONE_EXPECTED``: no call was expected (irrelevance), one was made.
2.  Per-call wrapping (unless the parse failed on syntax):
    ``PER_CALL_TOOLCALL_WRAPPING`` (one ``<TOOLCALL>`` per call),
    ``PER_CALL_FUNCTIONS_WRAPPING`` (one ``<functions>`` per call),
    ``PER_CALL_LIST_WRAPPING`` (one JSON array / Python list per call).
    bfcl-eval reads the first block only, so this shows up as a wrong count.
3.  The strict parse failed; the parser's failure kind decides:
    ``NO_CALL`` (empty), ``PROSE_INSTEAD_OF_CALL`` (no call in any format;
    quotes, apostrophes and brackets in prose do not make it a call),
    ``TAG_MISSING``, ``TRUNCATED`` (the answer stops mid-call: inside a string,
    an open bracket, a code fence or a ``<functions>`` block, as when cut at
    the token limit; only for failures a cut can cause), ``UNEXPECTED_TAG``, ``OTHER_FORMAT`` (the verdict's
    ``detected_format`` says which), ``UNCLOSED_TAG`` (tag or bracket),
    ``BAD_ESCAPING``, ``CODE_FENCE``, ``PROSE_AROUND_CALL``,
    ``WRONG_XML_TYPE_NAMES``, else ``MALFORMED_CALL``.
4.  Decoded, but the checker failed: ``OTHER_FORMAT`` (bfcl's verbose-XML
    reader also reads concise XML, minus the values) > ``WRONG_XML_TYPE_NAMES``
    (an XML answer used type names outside the allowed set, ``int`` for
    ``integer``, and a type or value check failed) > ``HALLUCINATED_FUNCTION``
    (a name not offered) > ``NO_CALL`` (an empty call list) > ``WRONG_COUNT``
    > ``WRONG_FUNCTION`` > ``MISSING_PARAMETER`` > ``UNKNOWN_PARAMETER`` >
    ``WRONG_TYPE`` > ``WRONG_VALUE``.

Format problems come before content problems because a format problem
usually *causes* the content error bfcl-eval reports. The ``FailureMode``
enum itself is part of the verdict's vocabulary (``verdict.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from promptgrid.variants import XML_RETURN_FORMATS, ReturnFormat

from .parse import ParseFailure, format_matches
from .parse._text import ends_cut
from .verdict import ErrorCode, FailureMode

__all__ = ["classify"]


_BY_FAILURE = {
    ParseFailure.EMPTY: FailureMode.NO_CALL,
    ParseFailure.PROSE_ONLY: FailureMode.PROSE_INSTEAD_OF_CALL,
    ParseFailure.TAG_MISSING: FailureMode.TAG_MISSING,
    ParseFailure.UNEXPECTED_TAG: FailureMode.UNEXPECTED_TAG,
    ParseFailure.WRONG_FORMAT: FailureMode.OTHER_FORMAT,
    ParseFailure.UNCLOSED_TAG: FailureMode.UNCLOSED_TAG,
    ParseFailure.UNCLOSED_BRACKET: FailureMode.UNCLOSED_TAG,
    ParseFailure.BAD_ESCAPING: FailureMode.BAD_ESCAPING,
    ParseFailure.CODE_FENCE: FailureMode.CODE_FENCE,
    ParseFailure.EXTRA_TEXT: FailureMode.PROSE_AROUND_CALL,
    ParseFailure.WRONG_XML_TYPE: FailureMode.WRONG_XML_TYPE_NAMES,
}
# A broken call list is that, even where the pieces look like one list per call.
_SYNTAX_FAILURES = frozenset({ParseFailure.UNCLOSED_TAG, ParseFailure.UNCLOSED_BRACKET, ParseFailure.BAD_SYNTAX,
                              ParseFailure.BAD_ESCAPING})
# Failures that, with no call-like content anywhere, mean the answer is prose.
_NO_CALL_CONTENT = frozenset({ParseFailure.TAG_MISSING, ParseFailure.WRONG_FORMAT, ParseFailure.BAD_SYNTAX,
                              ParseFailure.NOT_A_CALL})
# Failures an answer cut at the token limit gets (with ``ends_cut``, it is TRUNCATED).
_CUT_FAILURES = frozenset({ParseFailure.UNCLOSED_TAG, ParseFailure.UNCLOSED_BRACKET, ParseFailure.BAD_SYNTAX,
                           ParseFailure.NOT_A_CALL, ParseFailure.CODE_FENCE})
_TOOLCALL_RE = re.compile(r"<TOOLCALL>", re.IGNORECASE)
_FUNCTIONS_RE = re.compile(r"<functions>")

_COUNT_CODES = frozenset({
    ErrorCode.SIMPLE_WRONG_COUNT, ErrorCode.MULTIPLE_WRONG_COUNT,
    ErrorCode.PARALLEL_WRONG_COUNT, ErrorCode.PARALLEL_ORDERED_WRONG_COUNT,
})
_MISSING_CODES = frozenset({ErrorCode.MISSING_REQUIRED, ErrorCode.MISSING_OPTIONAL})
_TYPE_CODES = frozenset({ErrorCode.TYPE_ERROR_SIMPLE, ErrorCode.TYPE_ERROR_NESTED,
                         ErrorCode.TYPE_ERROR_JAVA, ErrorCode.TYPE_ERROR_JS})
_VALUE_CODES = frozenset(c for c in ErrorCode if c.value.startswith(("value_error:", "dict_checker:",
                                                                        "list_dict_checker:")))
# The mode of the checker's underlying error, once format, XML types, names and count are ruled out (else WRONG_VALUE).
_BY_REASON = {
    ErrorCode.WRONG_FUNC_NAME: FailureMode.WRONG_FUNCTION,
    **{c: FailureMode.MISSING_PARAMETER for c in _MISSING_CODES},
    ErrorCode.UNEXPECTED_PARAM: FailureMode.UNKNOWN_PARAMETER,
    **{c: FailureMode.WRONG_TYPE for c in _TYPE_CODES},
}


def _names(calls: Any) -> list[str]:
    return [str(n) for c in calls or () for n in list(c)[:1]]


def classify(
    code: ErrorCode,
    detail: ErrorCode,
    parsed: Any,
    text: str,
    *,
    return_format: ReturnFormat | str,
    tool_call_tag: bool,
    call_expected: bool,
    offered_names: Iterable[str],
) -> FailureMode | None:
    """The one failure mode of a response (``None`` when ``code`` is VALID).

    ``parsed`` is the strict ``ParseResult`` (its ``failure``, flags and
    ``any_calls``, the calls a format-agnostic reading finds); ``detail`` is
    the checker's underlying error behind a parallel no-match. Precedence in
    the module docstring.
    """
    if code is ErrorCode.VALID:
        return None
    if not call_expected:
        return FailureMode.CALL_WHEN_NONE_EXPECTED
    if parsed.per_call_wrapping and parsed.failure not in _SYNTAX_FAILURES:
        return _wrapping_mode(text, tool_call_tag)
    if parsed.calls is None:
        return _parse_failure_mode(parsed, text)
    return _checker_failure_mode(code, detail, parsed, return_format, offered_names)


def _wrapping_mode(text: str, tool_call_tag: bool) -> FailureMode:
    """Which wrapper was repeated per call: <TOOLCALL> tags, <functions> blocks, else lists."""
    if tool_call_tag and len(_TOOLCALL_RE.findall(text)) > 1:
        return FailureMode.PER_CALL_TOOLCALL_WRAPPING
    if len(_FUNCTIONS_RE.findall(text)) > 1:
        return FailureMode.PER_CALL_FUNCTIONS_WRAPPING
    return FailureMode.PER_CALL_LIST_WRAPPING


def _parse_failure_mode(parsed: Any, text: str) -> FailureMode:
    """The mode of a response whose strict parse failed (precedence 3 in the module docstring)."""
    failure = parsed.failure
    if failure is ParseFailure.EMPTY:
        return FailureMode.NO_CALL
    if failure is ParseFailure.PROSE_ONLY or (not parsed.any_calls and parsed.detected_format is None
                                              and failure in _NO_CALL_CONTENT):
        return FailureMode.PROSE_INSTEAD_OF_CALL
    if failure in _CUT_FAILURES and ends_cut(text):
        return FailureMode.TRUNCATED
    mode = _BY_FAILURE.get(failure)
    if mode is not None:
        return mode
    if parsed.unknown_xml_types:
        return FailureMode.WRONG_XML_TYPE_NAMES
    return FailureMode.MALFORMED_CALL


def _checker_failure_mode(code: ErrorCode, detail: ErrorCode, parsed: Any, return_format: ReturnFormat | str,
                          offered_names: Iterable[str]) -> FailureMode:
    """The mode of a decoded response the checker failed (precedence 4 in the module docstring)."""
    if parsed.detected_format is not None and not format_matches(parsed.detected_format, return_format):
        # bfcl's verbose-XML reader also takes concise XML, minus the values.
        return FailureMode.OTHER_FORMAT
    reason = detail if detail is not ErrorCode.VALID else code
    if return_format in XML_RETURN_FORMATS and parsed.unknown_xml_types and (reason in _TYPE_CODES
                                                                     or reason in _VALUE_CODES):
        return FailureMode.WRONG_XML_TYPE_NAMES
    offered = offered_names if isinstance(offered_names, (set, frozenset)) else set(offered_names)
    if any(name not in offered for name in _names(parsed.calls)):
        return FailureMode.HALLUCINATED_FUNCTION
    if code in _COUNT_CODES:
        return FailureMode.NO_CALL if not parsed.calls else FailureMode.WRONG_COUNT
    return _BY_REASON.get(reason, FailureMode.WRONG_VALUE)
