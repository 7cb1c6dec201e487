"""Strict parsing of the requested return format, with bfcl-eval's semantics.

``parse_response`` reproduces what bfcl-eval 2026.3.23 does to a prompting
model's answer in the format-sensitivity category
(``default_decode_ast_prompting`` -> ``ast_parse``):

1. strip backticks, newlines and spaces from both ends; add ``[`` / ``]``
   when the text does not start / end with them;
2. with the tool-call tag: keep only the first ``<TOOLCALL>...</TOOLCALL>``
   block (missing or unclosed -> decoder failure); text around it is ignored,
   later blocks are dropped;
3. python: strip spaces and single quotes, parse one expression (a call or a
   list/tuple of calls; any prose breaks it); json: the first array of
   objects anywhere in the text; xml: the first ``<functions>`` block anywhere.

It then adds what bfcl-eval does not say: the failure kind, refined by the
format-agnostic reader (WRONG_FORMAT, EXTRA_TEXT, CODE_FENCE, PROSE_ONLY,
UNEXPECTED_TAG), and the flags the checker's failure-mode classifier uses.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from promptgrid.errors import UnknownReturnFormatError, closest
from promptgrid.variants import ReturnFormat

from ._agnostic import parse_any, read_any
from ._fail import Fail
from ._json import parse_json_calls
from ._limits import MAX_INPUT_CHARS
from ._python import parse_python_calls
from ._result import (
    BFCL_DECODER_FAILED,
    Deviation,
    ParseFailure,
    ParseResult,
    format_matches,
)
from ._text import TAG_CLOSE, TAG_OPEN, BfclText, bfcl_bracketed, has_fence, is_prose, toolcall_blocks
from ._xml import DTD_RE, has_dtd, parse_xml_calls

__all__ = ["UnknownReturnFormatError", "decode_bfcl", "parse_response"]

Calls = list[dict[str, dict[str, Any]]]

# The requested format as its member (a caller may pass the value). The members
# are bound to module names: reading one off the Enum class costs about 0.1 us
# on Python 3.11, and a parse compares the format several times.
_FORMATS: dict[str, ReturnFormat] = {f.value: f for f in ReturnFormat}
_PYTHON, _JSON, _VERBOSE_XML = ReturnFormat.PYTHON, ReturnFormat.JSON, ReturnFormat.VERBOSE_XML

# Failures a look at the whole text can explain better.
_REFINABLE = frozenset(
    {ParseFailure.BAD_SYNTAX, ParseFailure.NOT_A_CALL, ParseFailure.BAD_VALUE, ParseFailure.UNCLOSED_BRACKET}
)
# Failures that, where the lenient reader finds only prose, mean prose: an
# apostrophe ("Here's how") opens a Python string that never closes.
_PROSE_REFINABLE = frozenset({ParseFailure.BAD_SYNTAX, ParseFailure.NOT_A_CALL, ParseFailure.UNCLOSED_BRACKET})
_WORD_RE = re.compile(r"[^\W\d_]{2}")
_MARKUP_RE = re.compile(r"<[^<>]*>")
# Failures that say it all (and whose texts are costly to read again).
_FINAL = frozenset(
    {ParseFailure.TOO_LARGE, ParseFailure.TOO_DEEP, ParseFailure.XML_ENTITY_REFUSED, ParseFailure.UNSAFE_EXPRESSION}
)


# Failures that depend on nothing else are shared (never raised, only read).
_EMPTY_LENIENT = Fail(ParseFailure.EMPTY, "empty response", bfcl_error_type=None)
_EMPTY_FAILED = Fail(ParseFailure.EMPTY, "empty response")
_TAG_MISSING = Fail(ParseFailure.TAG_MISSING, "no <TOOLCALL> tag")
_TAG_UNCLOSED = Fail(ParseFailure.UNCLOSED_TAG, "<TOOLCALL> is never closed")
_TOO_LARGE = Fail(ParseFailure.TOO_LARGE, f"response longer than {MAX_INPUT_CHARS} characters",
                  deviation=Deviation.LIMITS)



def parse_response(
    text: str,
    return_format: ReturnFormat | str,
    tool_call_tag: bool,
    *,
    strict_xml_types: bool = False,
    positional: bool = False,
) -> ParseResult:
    """Parse ``text`` as bfcl-eval would for this return format and tag.

    Never raises on model output: any string (or ``None``) gives a
    :class:`ParseResult`. ``strict_xml_types=True`` fails XML answers whose
    ``type`` attributes are outside bfcl's list (``WRONG_XML_TYPE``);
    bfcl-eval itself keeps such values as strings, which is the default.
    ``positional=True`` (conversations, whose environment binds them): a
    Python call's positional arguments are kept, as a tuple under the key
    ``POSITIONAL`` of its arguments, where bfcl-eval's decoder drops them.
    (:func:`decode_bfcl` is the same decode without the diagnostics.)
    Raises :class:`UnknownReturnFormatError` for an unknown ``return_format``.
    """
    fmt = _format_of(return_format)
    text = "" if text is None else text
    if len(text) > MAX_INPUT_CHARS or not text or text.isspace():
        return _failure(_too_large_or_blank(text, fmt, tool_call_tag), text, None, code_fence=False)
    if tool_call_tag:
        block = _tag_block(text, fmt)
        if isinstance(block, ParseResult):
            return block
        body, body_at, per_call = block
        tag_found, bt = True, None
    elif fmt is _PYTHON or fmt is _JSON:
        bt = BfclText(text)
        body, body_at, per_call = bt.s, 0, False
        tag_found = TAG_OPEN in text  # not asked for: bfcl ignores it for json, fails python
    else:
        # XML: the first <functions> block is the same in bfcl-eval's stripped
        # and bracketed text as in the text itself.
        bt = None
        body, body_at, per_call = text, 0, False
        tag_found = TAG_OPEN in text  # not asked for: bfcl ignores it
    try:
        deviation: Deviation | None = None
        unknown: tuple[str, ...] = ()
        detected: str = fmt
        if fmt is _PYTHON:
            calls, deviation = parse_python_calls(body.strip().strip("'"), positional=positional)
            span = (0, len(body))
        elif fmt is _JSON:
            calls, span, more, deviation = parse_json_calls(body)
            per_call |= more
        else:
            _check_dtd(text, body)
            decoded, span, more = parse_xml_calls(body, verbose=fmt is _VERBOSE_XML)
            calls, unknown, deviation = decoded.calls, tuple(decoded.unknown_types), decoded.deviation
            detected = decoded.detected or fmt
            per_call |= more
            if unknown and strict_xml_types:
                raise Fail(ParseFailure.WRONG_XML_TYPE,
                           "XML: type names outside the prompt's list: " + ", ".join(unknown),
                           bfcl_error_type=None)
    except Fail as fail:
        return _refine(fail, text, fmt, body if tool_call_tag else None,
                       tag_found=tag_found, per_call_wrapping=per_call)
    found = tuple(calls)
    if bt is None:
        rest = text[:body_at + span[0]] + text[body_at + span[1]:]
    else:
        rest = text[:bt.to_text(span[0])] + text[bt.to_text(span[1]):]
    result = ParseResult(
        calls=found,
        detected_format=detected,
        tag_found=tag_found,
        per_call_wrapping=per_call,
        prose=is_prose(_outside_blocks(rest) if per_call and tool_call_tag else rest),
        code_fence=has_fence(text),
        unknown_xml_types=unknown,
        bfcl_deviation=deviation,
        any_calls=found,
    )
    # bfcl-eval reads the first block only; the format-agnostic calls are all of them.
    return _with_every_call(result, text) if per_call else result


def _too_large_or_blank(text: str, fmt: ReturnFormat, tool_call_tag: bool) -> Fail:
    """The failure of a text too long to read, or of one that is empty or whitespace."""
    if len(text) > MAX_INPUT_CHARS:
        return _TOO_LARGE
    # bfcl-eval decodes nothing as [] in python and json without the tag (its
    # checker then reports the count); anything else fails to decode.
    return _EMPTY_LENIENT if (fmt is _PYTHON or fmt is _JSON) and not tool_call_tag else _EMPTY_FAILED


def _tag_block(text: str, fmt: ReturnFormat) -> tuple[str, int, bool] | ParseResult:
    """(stripped content, its start, more blocks follow) of the first <TOOLCALL> block, or why there is none."""
    # bfcl-eval strips and brackets the text first; that never changes what
    # lies between the first <TOOLCALL> and the first </TOOLCALL> after it
    # (the stripped characters cannot be part of a tag), so positions are
    # taken in the text itself.
    i = text.find(TAG_OPEN)
    if i < 0:
        return _refine(_TAG_MISSING, text, fmt, None)
    j = text.find(TAG_CLOSE, i + len(TAG_OPEN))
    if j < 0:
        return _refine(_TAG_UNCLOSED, text, fmt, None, tag_found=True)
    raw = text[i + len(TAG_OPEN):j]
    body = raw.strip()
    per_call = text.find(TAG_OPEN, j + len(TAG_CLOSE)) >= 0
    if not body:
        bfcl = None if fmt is _JSON else BFCL_DECODER_FAILED
        return _failure(Fail(ParseFailure.EMPTY, "empty <TOOLCALL> tag", bfcl_error_type=bfcl), text, None,
                        tag_found=True, per_call_wrapping=per_call, code_fence=has_fence(text))
    return body, i + len(TAG_OPEN) + len(raw) - len(raw.lstrip()), per_call


def _outside_blocks(rest: str) -> str:
    """The text left around the calls without its other <TOOLCALL> blocks (one tag per call)."""
    blocks = toolcall_blocks(rest)
    return rest if blocks is None else blocks.outside


def _with_every_call(result: ParseResult, text: str) -> ParseResult:
    """``result`` with the calls of every block as its format-agnostic calls (when any are found)."""
    everything = parse_any(text)
    return result.evolve(any_calls=everything.calls) if everything.calls else result


def decode_bfcl(text: str, return_format: ReturnFormat | str,
                tool_call_tag: bool) -> tuple[Calls, None] | tuple[None, Fail]:
    """bfcl-eval's decode alone: ``(calls, None)``, or ``(None, failure)``.

    The verdict-only twin of :func:`parse_response` (``scoring.bfcl_verdict``
    uses it): the same calls, and on failure the same ``bfcl_error_type``
    and deviation, without the diagnostics -- no format-agnostic reading of
    a failed answer, no look at the text around the calls, no record. The
    failure kind is the strict parser's own and may be coarser than
    ``parse_response``'s: BAD_SYNTAX for a Python UNCLOSED_BRACKET, and no
    WRONG_FORMAT, EXTRA_TEXT, CODE_FENCE, PROSE_ONLY or UNEXPECTED_TAG.
    tests/matrix/scoring/test_bfcl_agreement.py checks the verdicts agree on
    the whole agreement corpus. The failure is a record to read (common
    ones are shared), not an exception to raise. Raises
    :class:`UnknownReturnFormatError` for an unknown ``return_format``.
    """
    fmt = _format_of(return_format)
    text = "" if text is None else text
    if len(text) > MAX_INPUT_CHARS or not text or text.isspace():
        return None, _too_large_or_blank(text, fmt, tool_call_tag)
    if tool_call_tag:
        i = text.find(TAG_OPEN)
        if i < 0:
            return None, _TAG_MISSING
        i += len(TAG_OPEN)
        j = text.find(TAG_CLOSE, i)
        if j < 0:
            return None, _TAG_UNCLOSED
        body = text[i:j].strip()
        if not body:
            return None, Fail(ParseFailure.EMPTY, "empty <TOOLCALL> tag",
                              bfcl_error_type=None if fmt is _JSON else BFCL_DECODER_FAILED)
    elif fmt is _PYTHON or fmt is _JSON:
        body = bfcl_bracketed(text)
    else:
        body = text
    try:
        if fmt is _PYTHON:
            return parse_python_calls(body.strip().strip("'"), exact=False)[0], None
        if fmt is _JSON:
            return parse_json_calls(body)[0], None
        _check_dtd(text, body)
        return parse_xml_calls(body, verbose=fmt is _VERBOSE_XML, remember=False)[0].calls, None
    except Fail as fail:
        return None, fail


def _format_of(return_format: object) -> ReturnFormat:
    """The requested format's member (a caller may pass the value), or ``UnknownReturnFormatError``."""
    try:
        return _FORMATS[return_format]  # type: ignore[index]
    except (KeyError, TypeError):
        _unknown_format(return_format)


def _unknown_format(return_format: object) -> NoReturn:
    raise UnknownReturnFormatError(
        f"Unknown return format {return_format!r}; use one of {', '.join(ReturnFormat)}."
        + closest(str(return_format), ReturnFormat)
    )


def _has_words(text: str) -> bool:
    """Words outside markup (so "<functions><function/></functions>" has none).

    Looks at the first 10,000 characters: enough to tell prose, bounded on a
    hostile megabyte.
    """
    text = text[:10_000]
    if "<" in text:
        text = _MARKUP_RE.sub(" ", text)
    return _WORD_RE.search(text) is not None


def _check_dtd(text: str, body: str) -> None:
    if not has_dtd(text):
        return
    i = body.find("<functions>")
    j = body.find("</functions>", i) if i >= 0 else -1
    inside = j >= 0 and DTD_RE.search(body, i, j) is not None
    raise Fail(ParseFailure.XML_ENTITY_REFUSED, "XML: DOCTYPE/ENTITY declarations are refused",
               deviation=None if inside or j < 0 else Deviation.XML_DTD_REFUSED)


def _failure(fail: Fail, text: str, lenient: ParseResult | None, **flags: Any) -> ParseResult:
    fields: dict[str, Any] = {"code_fence": has_fence(text), **flags}
    if lenient is not None:
        fields.setdefault("detected_format", lenient.detected_format)
        fields.setdefault("prose", lenient.prose)
        fields.setdefault("unknown_xml_types", lenient.unknown_xml_types)
        fields.setdefault("any_calls", lenient.calls or None)
        if lenient.per_call_wrapping:
            fields["per_call_wrapping"] = True
    return ParseResult(
        calls=None,
        failure=fail.kind,
        bfcl_error_type=fail.bfcl_error_type,
        bfcl_deviation=fail.deviation,
        details=fail.details,
        **fields,
    )


def _refine(fail: Fail, text: str, return_format: ReturnFormat, tag_body: str | None, **flags: Any) -> ParseResult:
    """Explain a strict failure with the format-agnostic reader.

    ``tag_body`` is the content of the first <TOOLCALL> block when the tag was
    required and found: that is what bfcl-eval parsed, so that is what is
    judged; the flags still describe the whole text.
    """
    if fail.kind in _FINAL:
        return _failure(fail, text, None, **flags)
    whole, first_block = read_any(text)
    judged = whole
    if tag_body is not None:
        first = first_block() if first_block is not None else None
        # The lenient reader's first block is usually the one bfcl-eval parsed.
        judged = first[1] if first is not None and first[0].strip() == tag_body else parse_any(tag_body)
    kind, note = _explained(fail.kind, judged, text, return_format, tag_body)
    if kind is not fail.kind:
        fail = Fail(kind, f"{note} ({fail.details})", bfcl_error_type=fail.bfcl_error_type,
                    deviation=fail.deviation)
    if judged is not whole:
        flags.setdefault("detected_format", judged.detected_format)
    return _failure(fail, text, whole, **flags)


def _explained(kind: ParseFailure, judged: ParseResult, text: str, return_format: ReturnFormat,
               tag_body: str | None) -> tuple[ParseFailure, str]:
    """The kind the lenient reading ``judged`` explains the strict failure ``kind`` as, and a note ("" if unchanged)."""
    if kind in _REFINABLE and judged.calls:
        if not format_matches(judged.detected_format, return_format):
            return ParseFailure.WRONG_FORMAT, f"calls are in {judged.detected_format}"
        if return_format is _PYTHON:
            if tag_body is None and judged.tag_found:
                return ParseFailure.UNEXPECTED_TAG, "<TOOLCALL> tag was not asked for"
            if judged.prose:
                return ParseFailure.EXTRA_TEXT, "text around the calls"
            if judged.code_fence:
                return ParseFailure.CODE_FENCE, "calls inside a code fence"
    elif (kind in _PROSE_REFINABLE and judged.failure is ParseFailure.PROSE_ONLY
          and _has_words(text if tag_body is None else tag_body)):
        return ParseFailure.PROSE_ONLY, "no function call found"
    return kind, ""
