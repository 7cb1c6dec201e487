"""Format-agnostic reading: calls written in any of the four formats.

``parse_any`` separates "did not follow the requested format" from "called
the wrong thing": it looks for calls in Python, JSON (bfcl's shape and the
common ``{"name", "arguments"}`` / OpenAI shapes), verbose or concise XML,
inside or outside ``<TOOLCALL>`` tags (any letter case, one per call or one
for all), inside Markdown code fences, with prose around, and reports what it
saw: the detected format, tag, per-call wrapping, prose, fences, unknown XML
type names. Values follow the same rules as the strict parsers (no eval),
except that XML type names are read leniently (``int`` as ``integer``) and
malformed XML is recovered by a regex when expat rejects it.

Every search is bounded (``_limits``): a hostile megabyte fails fast.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import islice
from typing import Any

from promptgrid.variants import ReturnFormat

from ._fail import Fail
from ._json import find_json_calls
from ._limits import MAX_INPUT_CHARS, MAX_LENIENT_SCAN_CHARS, MAX_PYTHON_TOKENS, MAX_SCAN_ATTEMPTS
from ._pyfast import Decline, TooDeep, balanced_end, parse_calls_fast, tokenize
from ._python import parse_python_calls
from ._result import EITHER_XML, Deviation, ParseFailure, ParseResult, failed
from ._text import fenced_pieces, has_fence, is_prose, toolcall_blocks
from ._xmlany import find_xml_calls

__all__ = ["parse_any", "read_any"]

Calls = list[dict[str, dict[str, Any]]]

# Members bound to module names (an attribute read on an Enum class costs about 0.1 us on Python 3.11).
_PYTHON, _JSON = ReturnFormat.PYTHON, ReturnFormat.JSON

# Where a Python call may start: at a line start (after an optional bullet),
# optionally bracketed; or anywhere after a space or colon when bracketed
# ("Sure! [f(a=1)]"). A call in the middle of a sentence is not one.
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:[ \t]*\.[ \t]*[A-Za-z_][A-Za-z0-9_]*)*[ \t]*\("
_PY_START_RE = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+|[0-9]{1,3}[.)][ \t]+)?(\[?[ \t]*" + _DOTTED + r")"
    r"|(?<=[\s:])(\[[ \t]*" + _DOTTED + r")",
    re.MULTILINE,
)
# A closing bracket at the end of a line (a call or list may end there).
_PY_END_RE = re.compile(r"[)\]][ \t]*[,;.]?[ \t]*$", re.MULTILINE)
_MAX_ENDS = 10_000
# Failure kinds by how much they say (most telling first).
_FAIL_RANK = {
    kind: rank
    for rank, kind in enumerate(
        (
            ParseFailure.XML_ENTITY_REFUSED,
            ParseFailure.TOO_DEEP,
            ParseFailure.TOO_LARGE,
            ParseFailure.UNSAFE_EXPRESSION,
            ParseFailure.BAD_ESCAPING,
            ParseFailure.UNCLOSED_TAG,
            ParseFailure.UNCLOSED_BRACKET,
            ParseFailure.BAD_VALUE,
            ParseFailure.NOT_A_CALL,
            ParseFailure.BAD_SYNTAX,
        )
    )
}


class _Found:
    """What one piece of text holds (mutable scratch, built once per piece)."""

    __slots__ = ("calls", "fmt", "wrappers", "prose", "empty_list", "fail", "fail_fmt", "unknown_types", "notes")

    def __init__(self) -> None:
        self.calls: Calls = []
        self.fmt: str | None = None
        self.wrappers = 0
        self.prose = False
        self.empty_list = False
        self.fail: Fail | None = None
        self.fail_fmt: str | None = None
        self.unknown_types: list[str] = []
        self.notes: list[str] = []

    def note_fail(self, fail: Fail, fmt: str) -> None:
        if self.fail is None or _FAIL_RANK.get(fail.kind, 99) < _FAIL_RANK.get(self.fail.kind, 99):
            self.fail, self.fail_fmt = fail, fmt

    def note_telling(self, fail: Fail | None, fmt: str) -> None:
        """Note ``fail`` unless it is None or a plain syntax error (what prose around the calls gives)."""
        if fail is not None and fail.kind is not ParseFailure.BAD_SYNTAX:
            self.note_fail(fail, fmt)


def _max_pieces(cheap: bool) -> int:
    """How many tag blocks / code fences are read (a hostile text may hold thousands)."""
    return 4 if cheap else MAX_SCAN_ATTEMPTS


def _outside(text: str, spans: list[tuple[int, int]]) -> str:
    parts, pos = [], 0
    for a, b in spans:
        parts.append(text[pos:a])
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


def _python(piece: str, out: _Found, cheap: bool) -> bool:
    """Python calls: the whole piece, else line-anchored regions. True when found."""
    cleaned = piece.strip().strip("'")
    whole_fail: Fail | None = None
    if cleaned:
        whole = _whole_python(cleaned, out)
        if isinstance(whole, bool):
            return whole
        whole_fail = whole
    if cheap:
        out.note_telling(whole_fail, _PYTHON)
        return False
    starts = [m.start(m.lastindex or 0) for m in islice(_PY_START_RE.finditer(piece), MAX_SCAN_ATTEMPTS)]
    if not starts:
        if (whole_fail is not None and whole_fail.kind is ParseFailure.NOT_A_CALL
                and cleaned[:1] in ("[", "(", "{")):
            out.note_fail(whole_fail, _PYTHON)  # well-formed Python, just not calls
        return False
    out.note_telling(whole_fail, _PYTHON)
    ends = [m.start() + 1 for m in islice(_PY_END_RE.finditer(piece, starts[0]), _MAX_ENDS)]
    budget = [_AST_BUDGET]
    if _one_region(piece, cleaned, starts, ends, budget, out):
        return True
    return _call_regions(piece, starts, ends, budget, whole_fail, out)


def _whole_python(cleaned: str, out: _Found) -> bool | Fail:
    """The whole piece read as Python: True (calls), False (search over: an empty list, a bound), else its failure."""
    try:
        calls, _ = parse_python_calls(cleaned)
    except Fail as fail:
        if fail.kind in (ParseFailure.TOO_LARGE, ParseFailure.TOO_DEEP):
            out.note_fail(fail, _PYTHON)
            return False
        return fail
    if calls:
        out.calls, out.fmt, out.wrappers = calls, _PYTHON, 1
        return True
    out.empty_list = True
    return False


def _one_region(piece: str, cleaned: str, starts: list[int], ends: list[int], budget: list[int],
                out: _Found) -> bool:
    """One region from the first call start to the last line-final bracket: True when it holds calls."""
    region = piece[starts[0]:ends[-1]] if ends else ""
    if not region or region == cleaned:
        return False
    found = _region_calls(region, budget)
    if isinstance(found, Fail):
        out.note_telling(found, _PYTHON)
        return False
    if not found:
        return False
    out.calls, out.fmt, out.wrappers = found, _PYTHON, 1
    out.prose = is_prose(piece[:starts[0]] + piece[ends[-1]:])
    return True


def _call_regions(piece: str, starts: list[int], ends: list[int], budget: list[int], whole_fail: Fail | None,
                  out: _Found) -> bool:
    """One region per call start, each to the nearest end that parses: True when any holds calls."""
    calls_all: Calls = []
    spans: list[tuple[int, int]] = []
    bracketed = 0
    pos = 0
    e_idx = 0
    for s in starts:
        if s < pos:
            continue
        while e_idx < len(ends) and ends[e_idx] <= s:
            e_idx += 1
        balanced = balanced_end(piece, s)
        candidates = ([balanced] if balanced is not None else []) + ends[e_idx:e_idx + 2]
        found = _calls_at(piece, s, candidates, budget, out)
        if found is not None:
            calls_all.extend(found[0])
            spans.append((s, found[1]))
            bracketed += piece[s] == "["
            pos = found[1]
    if not calls_all:
        if whole_fail is not None:
            out.note_fail(whole_fail, _PYTHON)
        return False
    out.calls, out.fmt = calls_all, _PYTHON
    out.wrappers = bracketed if bracketed > 1 else 1
    out.prose = is_prose(_outside(piece, spans))
    if len(spans) > 1 and bracketed <= 1:
        out.notes.append("Python calls on separate lines, not in one list")
    return True


def _calls_at(piece: str, s: int, candidates: list[int], budget: list[int], out: _Found) -> tuple[Calls, int] | None:
    """The calls of the region from ``s`` to the first candidate end that holds any, and that end."""
    for e in dict.fromkeys(candidates):
        found = _region_calls(piece[s:e], budget)
        if isinstance(found, Fail):
            out.note_telling(found, _PYTHON)
        elif found:
            return found, e
    return None


# Candidate regions first go through the fast subset parser; only this many per
# piece fall back to ast.parse (tens of microseconds each).
_AST_BUDGET = 1


def _region_calls(text: str, budget: list[int]) -> Calls | Fail | None:
    """Calls in a candidate region, a Fail, or None (not decided within the budget)."""
    toks = tokenize(text)
    if toks is None:
        return Fail(ParseFailure.TOO_LARGE, f"Python: more than {MAX_PYTHON_TOKENS} tokens",
                    deviation=Deviation.LIMITS)
    try:
        return parse_calls_fast(text, toks)
    except Decline:
        pass
    except TooDeep:
        return Fail(ParseFailure.TOO_DEEP, "Python: nested too deeply", deviation=Deviation.LIMITS)
    if budget[0] <= 0 or "(" not in text:
        return None
    budget[0] -= 1
    try:
        return parse_python_calls(text)[0]
    except Fail as fail:
        return fail


def _json(piece: str, out: _Found, cheap: bool) -> bool:
    found = find_json_calls(piece, cheap)
    if isinstance(found, Fail):
        out.note_fail(found, _JSON)
        return False
    if found is None:
        return False
    calls, spans = found
    out.calls, out.fmt, out.wrappers = calls, _JSON, len(spans)
    out.prose = is_prose(_outside(piece, spans))
    return True


def _xml(piece: str, out: _Found, cheap: bool) -> bool:
    found = find_xml_calls(piece, cheap)
    if isinstance(found, Fail):
        out.note_fail(found, EITHER_XML)
        return False
    if found is None:
        return False
    out.calls, out.fmt, out.wrappers = found.calls, found.detected, found.blocks
    out.unknown_types = found.unknown_types
    out.prose = is_prose(_outside(piece, found.spans))
    if found.recovered:
        out.notes.append("malformed XML read by recovery")
    return True


def _scan_piece(piece: str, cheap: bool) -> _Found:
    out = _Found()
    first = piece.lstrip()[:1]
    if first == "<":
        order = (_xml, _json, _python)
    elif first in ("[", "{"):
        order = (_json, _python, _xml)
    else:
        order = (_python, _json, _xml)
    for finder in order:
        # Cheap pre-checks: no "<" no XML, no "[" or "{" no JSON, no "(" or "[" no Python.
        if finder is _xml and "<" not in piece:
            continue
        if finder is _json and "[" not in piece and "{" not in piece:
            continue
        if finder is _python and "(" not in piece and "[" not in piece:
            continue
        if finder(piece, out, cheap):
            return out
    return out


def _scan_segment(segment: str, cheap: bool) -> _Found:
    """A segment (a tag's content or the whole text), code fences opened."""
    fenced = fenced_pieces(segment)
    if fenced is None:
        return _scan_piece(segment, cheap)
    spans, outside = fenced
    total = _Found()
    for a, b in spans[:_max_pieces(cheap)]:
        found = _scan_piece(segment[a:b], cheap)
        if found.calls:
            total.calls.extend(found.calls)
            total.fmt = total.fmt or found.fmt
            total.wrappers += found.wrappers
            total.prose |= found.prose
            total.unknown_types.extend(t for t in found.unknown_types if t not in total.unknown_types)
            total.notes.extend(found.notes)
        else:
            total.empty_list |= found.empty_list
            if found.fail is not None:
                total.note_fail(found.fail, found.fail_fmt or "")
    if not total.calls:
        # Nothing in the fences: maybe the calls are outside them.
        rest = _scan_piece(outside, cheap)
        if rest.calls or rest.fail is not None:
            if total.fail is not None and rest.fail is None:
                rest.fail, rest.fail_fmt = total.fail, total.fail_fmt
            return rest
        return total
    total.prose |= is_prose(outside)
    return total


def parse_any(text: str) -> ParseResult:
    """Calls in any of the four formats, with what the response looks like.

    Never raises on any string; bounded time and memory (see ``_limits``).
    ``detected_format`` is the format of the first calls found (or of the
    call-like text that failed to parse); ``per_call_wrapping`` says the
    calls were split over several tags/blocks/lists.
    """
    return read_any(text)[0]


def read_any(text: str) -> tuple[ParseResult, Callable[[], tuple[str, ParseResult]] | None]:
    """``parse_any(text)``, plus (when the text has tags) a way to get the
    reading of the first <TOOLCALL> block alone: the strict parser's
    refinement judges that block without reading the text twice.
    """
    if text is None:
        text = ""
    if len(text) > MAX_INPUT_CHARS:
        return failed(ParseFailure.TOO_LARGE, f"response longer than {MAX_INPUT_CHARS} characters",
                      bfcl_error_type=None, deviation=Deviation.LIMITS), None
    if not text.strip():
        return failed(ParseFailure.EMPTY, "empty response", bfcl_error_type=None), None
    cheap = len(text) > MAX_LENIENT_SCAN_CHARS
    blocks = toolcall_blocks(text)
    if blocks is None:
        segments, outside_prose = [text], False
    else:
        segments = [text[a:b] for a, b in blocks.contents[:_max_pieces(cheap)]]
        outside_prose = is_prose(blocks.outside)
    founds = [_scan_segment(segment, cheap) for segment in segments]
    whole = _combine(text, segments, founds, outside_prose, blocks is not None,
                     blocks is not None and blocks.unclosed)
    if blocks is None:
        return whole, None
    return whole, lambda: (segments[0], _combine(segments[0], segments[:1], founds[:1], False, False, False))


def _combine(text: str, segments: list[str], founds: list[_Found], prose: bool, tag_found: bool,
             unclosed: bool) -> ParseResult:
    calls: Calls = []
    formats: list[str] = []
    wrappers = 0
    empty_list = False
    unknown: list[str] = []
    notes: list[str] = []
    best: _Found | None = None
    for segment, found in zip(segments, founds, strict=True):
        if found.calls:
            calls.extend(found.calls)
            formats.append(found.fmt or "")
            wrappers += found.wrappers
            prose |= found.prose
            unknown.extend(t for t in found.unknown_types if t not in unknown)
            notes.extend(found.notes)
        else:
            empty_list |= found.empty_list
            if found.fail is not None and (
                best is None or _FAIL_RANK.get(found.fail.kind, 99) < _FAIL_RANK.get(best.fail.kind, 99)  # type: ignore[union-attr]
            ):
                best = found
            elif found.fail is None and is_prose(segment):
                prose = True  # a tag holding only text
    flags: dict[str, Any] = {
        "tag_found": tag_found,
        "code_fence": has_fence(text),
        "unknown_xml_types": tuple(unknown),
    }
    if unclosed:
        notes.append("unclosed <TOOLCALL>")
    if calls:
        if len(set(formats)) > 1:
            notes.append("mixed formats: " + ", ".join(dict.fromkeys(formats)))
        return ParseResult(
            calls=tuple(calls),
            detected_format=formats[0] or None,
            per_call_wrapping=wrappers > 1,
            prose=prose,
            details="; ".join(notes),
            any_calls=tuple(calls),
            **flags,
        )
    if empty_list:
        return ParseResult(calls=(), prose=prose, details="an empty call list", any_calls=(), **flags)
    if best is not None and best.fail is not None:
        fail = best.fail
        return failed(fail.kind, fail.details, bfcl_error_type=None,
                      deviation=fail.deviation, detected_format=best.fail_fmt or None, prose=prose, **flags)
    return failed(ParseFailure.PROSE_ONLY, "no function call found", bfcl_error_type=None, prose=True, **flags)
