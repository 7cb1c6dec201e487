"""Score a response: parse it, check it, classify its failure; score a JSONL of responses (``score_stream``).

``score`` is the one entry point the runner and the CLI use. It parses the
response strictly, as bfcl-eval does (the variant's return format and tag),
checks the calls by BFCL's AST rules, and reads from the same parse what the
format-agnostic reader found (``ParseResult.any_calls``) to tell *why* a
response failed and whether it would have passed in the format the model
chose. Per-case work (normalized ground truth, schema types) is cached by
``check.compile_case``.

Irrelevance cases (no call expected) are valid when nothing is decoded or the
decoded list is empty, as bfcl-eval's relevance runner has it; we decode them
in the variant's format, where bfcl-eval always uses Python without a tag
(its irrelevance prompts are always that format).

Agreement with bfcl-eval 2026.3.23 (tests/matrix/scoring/test_bfcl_agreement.py,
all 26 x 200 format-sensitivity pairs with 15 kinds of corruption): validity
and ``bfcl_error_type`` are identical except where the parser reports a
documented deviation (``ParseResult.bfcl_deviation``, docs/parsing.md; on
that corpus only ``json_close_brace_bracket``: a JSON call list holding
``}]`` decodes fully, where bfcl-eval's regex truncates it and reports a wrong
count). The checker itself changes no verdict bfcl-eval can produce.

Verdicts and parses are memoized (bounded LRU, see ``CACHE_SIZE``); the
verdict memo keeps the ``Case`` objects it has seen alive while they are in it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from promptgrid.errors import DatasetError, GridError, PromptgridError, closest
from promptgrid.languages import DEFAULT_LANGUAGES, detect_language_match
from promptgrid.matrix.scoring._native import call_mode, native_verdict, unwrap_constrained
from promptgrid.matrix.scoring.check import CheckResult, MatchCounts, Mode, check_calls, compile_case, count_matches
from promptgrid.matrix.scoring.failure_modes import classify
from promptgrid.matrix.scoring.parse import decode_bfcl, format_matches, parse_any, parse_response
from promptgrid.matrix.scoring.verdict import ErrorCode, Verdict
from promptgrid.records import Case
from promptgrid.safeio import read_json_lines
from promptgrid.templates import answer_prefix
from promptgrid.variants import Variant, builtin_grids, load_grid

__all__ = ["BFCL_DEFAULT_VARIANT", "CACHE_SIZE", "StreamCounts", "bfcl_verdict", "clear_caches", "score",
           "score_calls", "score_stream", "score_uncached", "variant_index"]

_TAG = "<TOOLCALL>"
_CALL_MODES = frozenset({Mode.SIMPLE, Mode.MULTIPLE, Mode.PARALLEL})


def _has_call(calls: Any) -> bool:
    """bfcl-eval's ``not is_empty_output``: ``[]`` and ``[{}]`` hold no call."""
    return bool(calls) and not (len(calls) == 1 and len(calls[0]) == 0)


def _bfcl_check(calls: Any, bfcl_error_type: str | None, details: str, compiled: Any) -> CheckResult:
    """What bfcl-eval's format-sensitivity runner would record for this decode.

    ``calls`` is None when the decode failed; ``bfcl_error_type`` and
    ``details`` then say how.
    """
    mode = compiled.mode
    if calls is not None or mode is Mode.IRRELEVANCE:
        # Irrelevance: a decoded call is the error; nothing decoded is right.
        return check_calls(() if calls is None else calls, compiled)
    if mode is Mode.RELEVANCE:
        return CheckResult(ErrorCode.RELEVANCE_DECODER_FAILED, "no call could be decoded",
                           ErrorCode.RELEVANCE_DECODER_FAILED)
    if bfcl_error_type is None:
        # bfcl-eval decodes this text as an empty call list (e.g. JSON that does
        # not decode): its checker then reports the wrong count.
        result = check_calls((), compiled)
        return CheckResult(result.code, details, result.detail)
    code = _DECODER_CODES.get(bfcl_error_type) or ErrorCode(bfcl_error_type)
    return CheckResult(code, details, code)


_DECODER_CODES = {c.value: c for c in (ErrorCode.DECODER_FAILED, ErrorCode.DECODER_WRONG_OUTPUT_FORMAT)}


# Scoring is a pure function of (text, return format, tag, case, languages).
# Identical answers recur: across variants that differ only in doc format,
# markup or wording, across repeats, and (refusals, empty answers) across
# cases. Verdicts are memoized on that key, parse results on (text, format,
# tag). Both caches are bounded; ``clear_caches()`` empties them.
CACHE_SIZE = 8192


@functools.lru_cache(maxsize=CACHE_SIZE)
def _parse(text: str, return_format: str, tool_call_tag: bool) -> Any:
    return parse_response(text, return_format, tool_call_tag)


def clear_caches() -> None:
    """Forget memoized parses and verdicts (e.g. to time scoring from cold)."""
    _parse.cache_clear()
    _score.cache_clear()
    _score_native.cache_clear()


def score(response: str, variant: Variant, case: Case, *,
          languages: Iterable[str] = DEFAULT_LANGUAGES) -> Verdict:
    """Score one response to ``case`` rendered with ``variant`` (BFCL AST rules + diagnostics).

    ``languages`` are the candidates for language identification of free-text
    answers (the case's own language is always added). The variant's return
    format and tool-call tag decide the verdict; its template may also name a
    label the prompt asked for before the calls (``Action:`` in the
    MASSIVE-Agents one-shot prompt), which is removed first.
    """
    if not isinstance(variant, Variant) or not isinstance(case, Case):
        _wrong_arguments(variant, case)
    langs = languages if isinstance(languages, tuple) else tuple(languages)
    mode = call_mode(variant)
    if mode == "native":
        return _score_native(response if isinstance(response, str) else "", case, langs)
    text = _answer_text(response, variant)
    if mode == "constrained":
        text = unwrap_constrained(text, variant, case)
    return _score(text, variant.return_format, variant.tool_call_tag, case, langs)


def _wrong_arguments(variant: Any, case: Any) -> None:
    """The typed error for a ``score`` call whose variant or case is not one (``GridError``, ``DatasetError``)."""
    if not isinstance(variant, Variant):
        raise GridError(f"score: variant must be a Variant (a grid's, e.g. pg.load_grid('bfcl_v4').variants[0]), "
                        f"not {variant!r:.80}.")
    raise DatasetError(f"score: case must be a Case (e.g. pg.load_dataset('mini')[0]), not {case!r:.80}.")


def bfcl_verdict(response: str, variant: Variant, case: Case) -> CheckResult:
    """Only what bfcl-eval records for this response: ``.valid`` and ``.code`` (``.code.bfcl_error_type``).

    The strict parse and AST check of ``score`` without its diagnostics
    (failure mode, format-agnostic reading, FSA and ITC counts, format and
    language match), for re-scoring large result sets where BFCL's verdict
    is all that is wanted; ``score(...).error_code`` always equals
    ``bfcl_verdict(...).code`` (tests/matrix/scoring/test_bfcl_agreement.py).
    Not memoized. Native answers (``call_mode: native``) have no bfcl-eval
    prompt decoding: their code is ``score``'s.
    """
    mode = call_mode(variant)
    if mode == "native":
        verdict = score(response, variant, case)
        return CheckResult(verdict.error_code, verdict.message, verdict.error_code)
    text = _answer_text(response, variant)
    if mode == "constrained":
        text = unwrap_constrained(text, variant, case)
    decoded = decode_bfcl(text, variant.return_format, variant.tool_call_tag)  # (calls, None) or (None, fail)
    if decoded[1] is None:
        return check_calls(decoded[0], compile_case(case))  # what _bfcl_check does with calls
    fail = decoded[1]
    return _bfcl_check(None, fail.bfcl_error_type, fail.details, compile_case(case))


def _answer_text(response: Any, variant: Variant) -> str:
    """The response without the answer label its template asked for (``Action:``); "" for a non-string."""
    text = response if isinstance(response, str) else ""
    prefix = _answer_prefix(variant.template)
    return _strip_prefix(text, prefix) if prefix else text


@functools.lru_cache(maxsize=64)
def _answer_prefix(template: str) -> str:
    """The built-in template's answer label; user templates (unknown here) have none."""
    try:
        return answer_prefix(template)
    except PromptgridError:
        return ""


def _strip_prefix(text: str, prefix: str) -> str:
    """Remove ``prefix`` at the start of the answer (after whitespace, any case)."""
    stripped = text.lstrip()
    if stripped[: len(prefix)].lower() == prefix.lower():
        return stripped[len(prefix):].lstrip()
    return text


@functools.lru_cache(maxsize=CACHE_SIZE)
def _score(text: str, return_format: str, tool_call_tag: bool, case: Case, languages: tuple[str, ...]) -> Verdict:
    return _verdict(text, return_format, tool_call_tag, case, languages, _parse)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _score_native(response: str, case: Case, languages: tuple[str, ...]) -> Verdict:
    return native_verdict(response, case, languages)


def score_uncached(text: str, return_format: str, tool_call_tag: bool, case: Case,
                   languages: tuple[str, ...] = DEFAULT_LANGUAGES) -> Verdict:
    """``score`` without the response-text memos (only the per-case ``compile_case`` cache).

    For timing scoring honestly (benchmarks/score.py) and for callers that
    never see a response twice.
    """
    return _verdict(text, return_format, tool_call_tag, case, languages, parse_response)


def _verdict(text: str, return_format: str, tool_call_tag: bool, case: Case, languages: tuple[str, ...],
             parse: Any) -> Verdict:
    compiled = compile_case(case)
    mode = compiled.mode
    call_expected = mode is not Mode.IRRELEVANCE
    parsed = parse(text, return_format, tool_call_tag)
    check = _bfcl_check(parsed.calls, parsed.bfcl_error_type, parsed.details, compiled)
    valid = check.code is ErrorCode.VALID
    calls = parsed.calls
    strict_n = len(calls) if calls is not None and _has_call(calls) else 0
    detected_format = parsed.detected_format

    # Format-agnostic: the calls in whatever format the model used. A clean
    # strict parse read everything there is (any_calls == calls), except where
    # the lenient reader reads differently: XML type names outside the list
    # ("int") or another format that bfcl's reader half-understood (concise
    # XML read as verbose).
    loose = parsed.any_calls
    same_calls = calls is not None and parsed.failure is None and not parsed.per_call_wrapping
    if not valid and calls is not None and (
            parsed.unknown_xml_types or not format_matches(detected_format, return_format)):
        lenient = parse_any(text).calls
        if lenient:
            loose, same_calls = lenient, False
    loose_n = len(loose) if loose is not None and _has_call(loose) else 0
    if not call_expected:
        agnostic_valid = loose_n == 0
    elif same_calls and mode is not Mode.RELEVANCE:
        agnostic_valid = valid
    elif loose_n == 0:
        agnostic_valid = False
    else:
        agnostic_valid = check_calls(loose, compiled).code is ErrorCode.VALID
    any_call = strict_n > 0 or loose_n > 0
    detected = detected_format if any_call else None

    # FSA and ITC counts, on what bfcl-eval decoded. A valid answer matched
    # every expected call and every parameter it gave is acceptable.
    if valid and calls is not None and mode in _CALL_MODES:
        n_args = sum(len(p) for c in calls for p in c.values())
        counts = MatchCounts(True, strict_n, 0, 0, n_args, 0, 0)
    else:
        counts = count_matches(calls, compiled)

    # Format match (ITC FM): calls decoded strictly, in the requested format,
    # the tag present exactly when asked for, not split per call.
    if not any_call:
        format_match: bool | None = None if not call_expected else False
    else:
        format_match = (
            strict_n > 0
            and not parsed.per_call_wrapping
            and (_TAG in text) == tool_call_tag
            and format_matches(detected_format, return_format)
        )

    # Language of a free-text answer (ITC LM): only where the parser saw no
    # call-like content at all (a broken call is not prose in some language).
    response_language: str | None = None
    language_match: bool | None = None
    if not any_call and detected_format is None and text and not text.isspace():
        response_language, language_match = detect_language_match(text, case.language, languages)

    failure_mode = None
    if not valid:
        failure_mode = classify(check.code, check.detail, parsed, text, return_format=return_format,
                                tool_call_tag=tool_call_tag, call_expected=call_expected,
                                offered_names=compiled.offered_names)

    return Verdict(valid, check.code, failure_mode, agnostic_valid, detected, format_match, *counts,
                   len(compiled.expected), strict_n, response_language, language_match, message=check)


def score_calls(calls: Any, case: Case) -> CheckResult:
    """Check already-decoded calls (``[{func: {param: value}}]``), e.g. from a native tool-calling API."""
    return check_calls(calls, compile_case(case))


# --------------------------------------------------------------------------- score-file


# The prompt bfcl-eval gives prompting models outside format sensitivity
# (bfcl_eval.constants.default_prompts.DEFAULT_SYSTEM_PROMPT_FORMAT): the
# variant to name for its result lines of other categories (simple_python, ...).
BFCL_DEFAULT_VARIANT = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"


def variant_index(grid: str | None = None) -> dict[str, Variant]:
    """Canonical id -> Variant, from one grid or from every built-in grid."""
    names = [grid] if grid else list(builtin_grids())
    index: dict[str, Variant] = {}
    for name in names:
        for v in load_grid(name).variants:
            index.setdefault(v.id, v)
    return index


class _LineError(Exception):
    """One input line cannot be scored; the message names the problem."""


def _split_bfcl_id(case_id: str) -> tuple[str, str] | None:
    """``format_sensitivity_N:CONFIG:ENTRY`` -> (CONFIG, ENTRY); bfcl-eval's own result ids."""
    parts = case_id.split(":")
    if len(parts) == 3 and parts[0].startswith("format_sensitivity"):
        return parts[1], parts[2]
    return None


def _field(record: Mapping[str, Any], name: str, bfcl_name: str) -> tuple[str, Any]:
    """(the field's name, its value): promptgrid's name when present, else bfcl-eval's; (name, None) if neither."""
    if name in record or bfcl_name not in record:
        return name, record.get(name)
    return bfcl_name, record[bfcl_name]


def _score_line(record: Mapping[str, Any], variants: Mapping[str, Variant],
                cases: Mapping[str, Case], grid: str | None, variant: str | None) -> Verdict:
    case_field, case_id = _field(record, "case_id", "id")
    variant_id = record.get("variant_id")
    if not isinstance(case_id, str) or not case_id:
        raise _LineError("field 'case_id' (or bfcl-eval's 'id') is missing or not a string")
    split = _split_bfcl_id(case_id)
    if split is not None:
        config, entry = split
        variant_id = variant_id or config
        case_id = entry
    variant_id = variant_id or variant
    if not isinstance(variant_id, str) or not variant_id:
        raise _LineError("field 'variant_id' is missing or not a string; give --variant ID for lines that name no "
                         "variant (bfcl-eval's default prompt is " + BFCL_DEFAULT_VARIANT + ")")
    response_field, response = _field(record, "response", "result")
    if response_field not in record:
        raise _LineError("field 'response' (or bfcl-eval's 'result') is missing (null is accepted: a call that "
                         "returned nothing)")
    if response is None:
        response = ""
    if not isinstance(response, str):
        raise _LineError(f"field {response_field!r} must be a string, got {type(response).__name__}")
    found = variants.get(variant_id)
    if found is None:
        where = f"grid {grid!r}" if grid else "the built-in grids (pass --grid for a grid of your own)"
        raise _LineError(f"unknown variant id {variant_id!r} in {where}.{closest(variant_id, variants)}")
    case = cases.get(case_id)
    if case is None:
        raise _LineError(f"unknown case id {case_id!r} (field {case_field!r}) in the dataset."
                         f"{closest(case_id, cases)}")
    return score(response, found, case)


@dataclass(frozen=True)
class StreamCounts:
    """What ``score_stream`` did: lines scored (``valid`` of them correct) and lines that could not be scored."""

    scored: int
    valid: int
    failed: int


def score_stream(source: Iterable[bytes] | Iterable[str], sink: IO[str], *, name: str,
                 variants: Mapping[str, Variant], cases: Mapping[str, Case], grid: str | None,
                 errors: IO[str], variant: str | None = None) -> StreamCounts:
    """Score every line of ``source`` into ``sink``; report bad lines on ``errors``.

    A line is a JSON object: the answer in ``response`` (bfcl-eval: ``result``),
    the case in ``case_id`` (bfcl-eval: ``id``), the variant in ``variant_id``,
    else in a bfcl-eval format-sensitivity id (``format_sensitivity_N:CONFIG:ENTRY``),
    else ``variant`` (the variant of lines that name none). Each scored line is
    written with all its fields and the verdict's fields added.

    Lines are read with ``promptgrid.safeio.read_json_lines`` (give a binary
    stream so that invalid UTF-8 is one bad line): a bad line is reported as
    ``name:line`` and skipped, and every other line is still scored and written.
    """
    scored = valid = failed = 0
    for line in read_json_lines(source, objects=True):
        try:
            if line.error is not None:
                raise _LineError(line.error)
            record = line.value
            verdict = _score_line(record, variants, cases, grid, variant)
        except _LineError as exc:
            failed += 1
            print(f"promptgrid: {name}:{line.number}: {exc}; line skipped.", file=errors)
            continue
        out = dict(record)
        out.update(verdict.to_dict())
        sink.write(json.dumps(out, ensure_ascii=False) + "\n")
        scored += 1
        valid += verdict.valid
    return StreamCounts(scored, valid, failed)
