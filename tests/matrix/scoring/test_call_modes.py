"""Scoring native tool calls (the stored envelope) and constrained answers (the OpenAI strict wrapper)."""

from __future__ import annotations

import json

import pytest

from promptgrid.matrix.clients import envelope, read_envelope
from promptgrid.matrix.clients._envelope import MAX_INPUT_CHARS as ENVELOPE_BOUND
from promptgrid.matrix.clients._envelope import MAX_STORED_CALLS
from promptgrid.matrix.scoring import ErrorCode, FailureMode, bfcl_verdict, score
from promptgrid.matrix.scoring.parse import MAX_INPUT_CHARS
from promptgrid.variants import Variant
from support.builders import checked_case, fn

NATIVE = Variant(call_mode="native")
FUNCS = [fn("math.factorial", ["number"], number="integer"), fn("get_time", [], zone="string")]
CASE = checked_case("simple", FUNCS, [{"math.factorial": {"number": [5]}}])
IRRELEVANT = checked_case("irrelevance", FUNCS, [])


def native(content: str | None, *calls: tuple[str, object]) -> str:
    """A stored native answer: text and (name, arguments) tool calls."""
    return envelope(content, [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}}
                              for i, (n, a) in enumerate(calls)])


def test_envelope_is_canonical_and_read_back() -> None:
    stored = native(None, ("math_factorial", '{"number": 5}'))
    assert stored == '{"content":null,"tool_calls":[{"name":"math_factorial","arguments":"{\\"number\\": 5}"}]}'
    content, calls = read_envelope(stored)
    assert content is None and calls == [{"type": "function",
                                          "function": {"name": "math_factorial", "arguments": '{"number": 5}'}}]
    assert read_envelope("[math.factorial(number=5)]") is None and read_envelope('{"x": 1}') is None
    assert ENVELOPE_BOUND == MAX_INPUT_CHARS


def test_envelope_is_bounded() -> None:
    many = envelope("", [{"function": {"name": "f", "arguments": "{}"}}] * (MAX_STORED_CALLS + 5))
    data = json.loads(many)
    assert len(data["tool_calls"]) == MAX_STORED_CALLS and data["truncated"] is True
    huge = json.loads(envelope(None, [{"function": {"name": "f", "arguments": "x" * (MAX_INPUT_CHARS + 99)}}]))
    assert len(huge["tool_calls"][0]["arguments"]) == MAX_INPUT_CHARS + 1


def test_right_native_call_is_valid_by_the_same_checker() -> None:
    # The tool was offered as math_factorial (a provider-safe name); the checker sees math.factorial.
    v = score(native(None, ("math_factorial", '{"number": 5}')), NATIVE, CASE)
    assert v.valid and v.error_code is ErrorCode.VALID and v.failure_mode is None
    assert v.n_predicted_calls == 1 and v.format_match is True and v.detected_format is None


def test_wrong_value_is_a_wrong_value() -> None:
    v = score(native(None, ("math_factorial", '{"number": 6}')), NATIVE, CASE)
    assert not v.valid and v.failure_mode is FailureMode.WRONG_VALUE


@pytest.mark.parametrize("arguments", ['{"number": 5', "", "[5]", '"x"', "null", 5])
def test_malformed_arguments(arguments: object) -> None:
    v = score(native(None, ("math_factorial", arguments)), NATIVE, CASE)
    assert not v.valid and v.error_code is ErrorCode.DECODER_FAILED
    assert v.failure_mode is FailureMode.BAD_TOOL_ARGUMENTS and v.format_match is False
    assert "tool call 0" in v.message


def test_unknown_tool_is_a_hallucinated_function() -> None:
    v = score(native(None, ("math.factorial", '{"number": 5}')), NATIVE, CASE)  # the unsanitized name: not offered
    assert not v.valid and v.failure_mode is FailureMode.HALLUCINATED_FUNCTION
    assert v.error_code is ErrorCode.WRONG_FUNC_NAME


def test_text_instead_of_a_call() -> None:
    v = score(native("The factorial of 5 is 120."), NATIVE, CASE)
    assert not v.valid and v.failure_mode is FailureMode.PROSE_INSTEAD_OF_CALL and v.n_predicted_calls == 0
    assert v.response_language == "en"
    empty = score(native(None), NATIVE, CASE)
    assert not empty.valid and empty.failure_mode is FailureMode.NO_CALL


def test_irrelevance_text_is_right_and_a_call_is_wrong() -> None:
    assert score(native("I cannot help with that."), NATIVE, IRRELEVANT).valid
    called = score(native(None, ("get_time", "{}")), NATIVE, IRRELEVANT)
    assert not called.valid and called.failure_mode is FailureMode.CALL_WHEN_NONE_EXPECTED
    # Unreadable calls decode to nothing, as bfcl-eval's irrelevance check has it.
    assert score(native(None, ("get_time", "{")), NATIVE, IRRELEVANT).valid


def test_a_non_envelope_response_is_text() -> None:
    v = score("[math.factorial(number=5)]", NATIVE, CASE)
    assert not v.valid and v.failure_mode is FailureMode.PROSE_INSTEAD_OF_CALL


def test_bfcl_verdict_agrees_for_native() -> None:
    for stored in (native(None, ("math_factorial", '{"number": 5}')), native("no"), native(None, ("x", "{}"))):
        assert bfcl_verdict(stored, NATIVE, CASE).code is score(stored, NATIVE, CASE).error_code


def test_constrained_strict_wrapper_is_unwrapped() -> None:
    constrained = Variant(return_format="json", call_mode="constrained")
    wrapped = '{"calls": [{"function": "math.factorial", "parameters": {"number": 5}}]}'
    assert score(wrapped, constrained, CASE).valid
    assert bfcl_verdict(wrapped, constrained, CASE).code is ErrorCode.VALID
    # The json format's own answer scores as in prompt mode; in prompt mode the wrapper is not unwrapped.
    assert score('[{"function": "math.factorial", "parameters": {"number": 5}}]', constrained, CASE).valid
    assert not score(wrapped, Variant(return_format="json"), CASE).valid
    # Strict mode's nulls for optional parameters mean "not given".
    with_null = '{"calls": [{"function": "get_time", "parameters": {"zone": null}}]}'
    assert score(with_null, constrained, checked_case("multiple", FUNCS, [{"get_time": {"zone": ["", "UTC"]}}])).valid


def test_constrained_python_scores_as_prompt_mode() -> None:
    constrained = Variant(call_mode="constrained")
    assert score("[math.factorial(number=5)]", constrained, CASE).valid
    assert score("[math.factorial(number=5)]", constrained, CASE) == score("[math.factorial(number=5)]",
                                                                           Variant(), CASE)
