"""Scoring of the call modes beyond the prompt: native tool calls and constrained answers.

Native (``call_mode: native``): the stored response is the JSON envelope of
``promptgrid.matrix.clients.envelope`` (text and raw tool calls). The calls are
read with ``promptgrid.matrix.calling.read_tool_calls`` and the name map of
``tool_schemas(case.functions)`` (recomputed here, never stored per row), then
checked by the same checker as a prompt-mode answer. Outcomes:

- calls read: checked as decoded calls; a tool the case does not offer is kept
  under the name called, so the checker reports the wrong function and the
  failure mode is ``hallucinated_function`` (a function's own name that was
  offered sanitized, ``math.factorial`` for ``math_factorial``, is such a tool,
  marked `` (not offered)``);
- no tool call: "no call" (right for irrelevance cases); ``prose_instead_of_call``
  when there is text (its language is identified as for prompt-mode prose),
  ``no_call`` when there is none;
- arguments that are not valid JSON, not an object, or break a bound:
  ``bad_tool_arguments``; an entry that is no function call: ``malformed_call``.
  Both are decoder failures (``ast_decoder:decoder_failed``), so an
  irrelevance case counts them as "nothing decoded", as bfcl-eval does.

``detected_format`` is ``None`` for native answers (no return format applies);
``format_match`` says whether the answer holds readable tool calls.

Constrained (``call_mode: constrained``): scored as a prompt-mode answer in the
variant's return format, after one step: an answer in OpenAI's strict wrapper
(``{"calls": [...]}``, a JSON object where the json format wants an array) is
unwrapped first (``unwrap_strict_answer``). Decided by the answer's shape: the
json return format's own answer is never an object.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from promptgrid.languages import detect_language_match
from promptgrid.matrix.clients import read_envelope
from promptgrid.records import Case
from promptgrid.safeio import parse_json_line
from promptgrid.variants import ReturnFormat, Variant

from .check import CheckResult, CompiledCase, MatchCounts, Mode, check_calls, compile_case, count_matches
from .failure_modes import classify
from .parse import ParseResult
from .verdict import ErrorCode, FailureMode, Verdict

if TYPE_CHECKING:
    from promptgrid.matrix.calling import ToolCalls

__all__ = ["call_mode", "native_verdict", "unwrap_constrained"]

_CALL_MODES = frozenset({Mode.SIMPLE, Mode.MULTIPLE, Mode.PARALLEL})


def call_mode(variant: Variant) -> str:
    """The variant's call mode value (``prompt``, ``native`` or ``constrained``)."""
    mode = getattr(variant, "call_mode", None)
    return str(getattr(mode, "value", mode) or "prompt")


@functools.lru_cache(maxsize=1024)
def _name_map(case: Case) -> dict[str, str]:
    from promptgrid.matrix.calling import tool_schemas  # calling imports scoring.parse: import on use

    return dict(tool_schemas(case.functions).name_map)


def _called_names(tool_calls: Sequence[Any]) -> list[str]:
    names = []
    for entry in tool_calls:
        fn = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


def native_verdict(response: str, case: Case, languages: tuple[str, ...]) -> Verdict:
    """The verdict of a native answer (``response``: the stored envelope; see the module docstring)."""
    from promptgrid.matrix.calling import ToolCallFailure

    compiled = compile_case(case)
    opened = read_envelope(response)
    content, tool_calls = opened if opened is not None else (response or None, [])
    read = _read_calls(tool_calls, _name_map(case))
    if read.ok:
        return _calls_verdict(read.calls or (), compiled)
    if read.failure is ToolCallFailure.EMPTY:
        return _no_calls_verdict(content, case, compiled, languages)
    return _unreadable_verdict(read, compiled)


def _read_calls(tool_calls: Sequence[Any], names: dict[str, str]) -> ToolCalls:
    """The tool calls read by the name map; a tool the case does not offer is kept under the name called."""
    from promptgrid.matrix.calling import ToolCallFailure, read_tool_calls

    read = read_tool_calls(tool_calls, names)
    if read.failure is ToolCallFailure.UNKNOWN_TOOL:
        # Keep an unoffered tool under the name called, so the checker says "wrong function"; a name
        # that is a function's own but was not offered as such (math.factorial, offered as math_factorial)
        # is marked, so it is not taken for that function.
        originals = set(names.values())
        unknown = {n: f"{n} (not offered)" if n in originals else n for n in _called_names(tool_calls)}
        read = read_tool_calls(tool_calls, {**unknown, **names})
    return read


def _calls_verdict(calls: tuple[dict[str, dict[str, Any]], ...], compiled: CompiledCase) -> Verdict:
    """The verdict of tool calls that were read: checked as decoded calls."""
    mode = compiled.mode
    check = check_calls(calls, compiled)
    valid = check.code is ErrorCode.VALID
    if valid and mode in _CALL_MODES:
        counts = MatchCounts(True, len(calls), 0, 0, sum(len(p) for c in calls for p in c.values()), 0, 0)
    else:
        counts = count_matches(calls, compiled)
    failure = None
    if not valid:
        if mode is Mode.IRRELEVANCE:
            failure = FailureMode.CALL_WHEN_NONE_EXPECTED
        elif any(name not in compiled.offered_names for c in calls for name in c):
            failure = FailureMode.HALLUCINATED_FUNCTION
        else:
            failure = classify(check.code, check.detail, ParseResult(calls, any_calls=calls), "",
                               return_format=ReturnFormat.JSON, tool_call_tag=False,
                               call_expected=True, offered_names=compiled.offered_names)
    return Verdict(valid, check.code, failure, valid, None, True, *counts, len(compiled.expected), len(calls),
                   None, None, message=check)


def _no_calls_verdict(content: str | None, case: Case, compiled: CompiledCase, languages: tuple[str, ...]) -> Verdict:
    """The verdict of an answer without tool calls ("no call"; its text, if any, is prose)."""
    check = check_calls((), compiled)
    valid = check.code is ErrorCode.VALID
    text = content or ""
    has_text = text != "" and not text.isspace()
    failure = None
    if not valid:
        failure = FailureMode.PROSE_INSTEAD_OF_CALL if has_text else FailureMode.NO_CALL
    language: str | None = None
    language_match: bool | None = None
    if has_text:
        language, language_match = detect_language_match(text, case.language, languages)
    call_expected = compiled.mode is not Mode.IRRELEVANCE
    return Verdict(valid, check.code, failure, valid, None, None if not call_expected else False,
                   *count_matches((), compiled), len(compiled.expected), 0, language, language_match, message=check)


def _unreadable_verdict(read: ToolCalls, compiled: CompiledCase) -> Verdict:
    """The verdict of unreadable tool calls: a decoder failure (nothing decoded)."""
    from promptgrid.matrix.calling import ToolCallFailure

    mode = compiled.mode
    if mode is Mode.IRRELEVANCE:
        check = check_calls((), compiled)
    elif mode is Mode.RELEVANCE:
        check = CheckResult(ErrorCode.RELEVANCE_DECODER_FAILED, read.details, ErrorCode.RELEVANCE_DECODER_FAILED)
    else:
        check = CheckResult(ErrorCode.DECODER_FAILED, read.details, ErrorCode.DECODER_FAILED)
    valid = check.code is ErrorCode.VALID
    failure = None
    if not valid:
        failure = (FailureMode.MALFORMED_CALL if read.failure is ToolCallFailure.NOT_A_CALL
                   else FailureMode.BAD_TOOL_ARGUMENTS)
    return Verdict(valid, check.code, failure, valid, None, False if mode is not Mode.IRRELEVANCE else None,
                   *count_matches(None, compiled), len(compiled.expected), 0, None, None, message=check)


def unwrap_constrained(text: str, variant: Variant, case: Case) -> str:
    """``text`` as the return format's own answer: an OpenAI strict-wrapper answer unwrapped, else as is."""
    if variant.return_format is not ReturnFormat.JSON or not text.lstrip().startswith("{"):
        return text
    from promptgrid.matrix.calling import unwrap_strict_answer

    try:
        value = parse_json_line(text.strip())
    except ValueError:
        return text
    unwrapped = unwrap_strict_answer(value, case.functions)
    return text if unwrapped is None else unwrapped
