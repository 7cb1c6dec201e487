"""JSON return format: bfcl-eval's decoding rules, with and without <TOOLCALL>."""

from __future__ import annotations

import json

import pytest

from promptgrid.matrix.scoring.parse import BFCL_WRONG_OUTPUT_FORMAT, Deviation, ParseFailure, parse_response

OK = None


def call(name: str, **params: object) -> dict[str, object]:
    return {"function": name, "parameters": params}


def arr(*calls: dict[str, object]) -> str:
    return json.dumps(list(calls))


CASES = [
    (arr(call("f", a=1)), False, OK, ({"f": {"a": 1}},)),
    (arr(call("f", a=1), call("g", b="x")), False, OK, ({"f": {"a": 1}}, {"g": {"b": "x"}})),
    (json.dumps(call("f", a=1)), False, OK, ({"f": {"a": 1}},)),  # bfcl-eval adds the brackets
    ("```json\n" + arr(call("f", a=1)) + "\n```", False, OK, ({"f": {"a": 1}},)),
    ("Here you go: " + arr(call("f", a=1)) + " Hope it helps.", False, OK, ({"f": {"a": 1}},)),
    ("[]", False, OK, ()),
    ("", False, ParseFailure.EMPTY, ...),
    (arr(call("f", a=[1, 2], b={"k": None}, c=True, d=1.5)), False, OK,
     ({"f": {"a": [1, 2], "b": {"k": None}, "c": True, "d": 1.5}},)),
    ('[{"function": "f", "parameters": {"a": NaN}}]', False, OK, ...),  # Python's json accepts NaN
    ('[1, {"function": "f", "parameters": {}}]', False, OK, ({"f": {}},)),  # non-objects skipped
    ('[{"function": "f", "parameters": {}}, "x"]', False, OK, ({"f": {}},)),
    ('[[{"function": "f", "parameters": {}}]]', False, OK, ({"f": {}},)),  # first [{ wins
    # with the tag
    ("<TOOLCALL>" + arr(call("f", a=1)) + "</TOOLCALL>", True, OK, ({"f": {"a": 1}},)),
    ("<TOOLCALL>```json\n" + arr(call("f", a=1)) + "\n```</TOOLCALL>", True, OK, ({"f": {"a": 1}},)),
    ("<TOOLCALL>" + arr(call("f", a=1)) + "</TOOLCALL>", False, OK, ({"f": {"a": 1}},)),  # tag not needed: ignored
    ("<TOOLCALL>" + json.dumps(call("f", a=1)) + "</TOOLCALL>", True, ParseFailure.NOT_A_CALL, ...),
    ("<TOOLCALL></TOOLCALL>", True, ParseFailure.EMPTY, ...),
    (arr(call("f", a=1)), True, ParseFailure.TAG_MISSING, ...),
    ("<TOOLCALL>" + arr(call("f", a=1)), True, ParseFailure.UNCLOSED_TAG, ...),
    ("<TOOLCALL>5</TOOLCALL>", True, ParseFailure.NOT_A_CALL, ...),
    ('<TOOLCALL>"some text"</TOOLCALL>', True, ParseFailure.PROSE_ONLY, ...),
    # failures
    ('[{"function": "f", "parameters": {"a": 1}]', False, ParseFailure.UNCLOSED_BRACKET, ...),
    ('[{"function": "f", "parameters": {"a": 1}}', False, OK, ({"f": {"a": 1}},)),  # "]" appended
    ('[{"function": "f", "parameters": {"a": 1}, {"function": "g"}]', False, ParseFailure.BAD_SYNTAX, ...),
    ('[{"function": "f", "parameters": {"a": "x}}]', False, ParseFailure.UNCLOSED_BRACKET, ...),
    ('[{\\"function\\": \\"f\\", \\"parameters\\": {}}]', False, ParseFailure.BAD_ESCAPING, ...),
    ("[{'function': 'f', 'parameters': {'a': 1}}]", False, ParseFailure.BAD_SYNTAX, ...),
    ('[{"name": "f", "parameters": {}}]', False, ParseFailure.NOT_A_CALL, ...),
    ('[{"function": "f"}]', False, ParseFailure.NOT_A_CALL, ...),
    ('[{"function": ["f"], "parameters": {}}]', False, ParseFailure.NOT_A_CALL, ...),
    ("[f(a=1)]", False, ParseFailure.WRONG_FORMAT, ...),
    ("<functions><function name='f'><param name='a' type='integer'>1</param></function></functions>", False,
     ParseFailure.WRONG_FORMAT, ...),
    ("No call needed.", False, ParseFailure.PROSE_ONLY, ...),
    ("[1, 2]", False, ParseFailure.NOT_A_CALL, ...),
]


@pytest.mark.parametrize(("text", "tag", "kind", "calls"), CASES, ids=[repr(c[0])[:40] for c in CASES])
def test_json_cases_match_bfcl(check_bfcl, text, tag, kind, calls):
    r = check_bfcl(text, "json", tag)
    assert r.failure is kind, r.details
    if calls is not ...:
        assert r.calls == calls


def test_parameters_not_an_object_is_wrong_output_format(check_bfcl):
    r = check_bfcl('[{"function": "f", "parameters": "{\\"a\\": 1}"}]', "json", False)
    assert r.failure is ParseFailure.NOT_A_CALL
    assert r.bfcl_error_type == BFCL_WRONG_OUTPUT_FORMAT


def test_missing_key_is_decoder_failure_and_syntax_error_is_empty_list(check_bfcl):
    assert check_bfcl('[{"function": "f"}]', "json", False).bfcl_error_type == "ast_decoder:decoder_failed"
    assert check_bfcl('[{"function": "f", "parameters": {]', "json", False).bfcl_error_type is None


@pytest.mark.parametrize(
    "params",
    [
        {"q": "a}]b"},  # a string holding "}]"
        {"items": [{"id": 1}, {"id": 2}]},  # a list of objects as a value
        {"q": "}  ]", "n": 1},
    ],
)
def test_close_brace_bracket_inside_parses_fully(bfcl, params):
    """bfcl-eval's regex stops at the first "}]" and decodes no calls; we decode the array."""
    text = arr(call("f", **params), call("g", b=2))
    r = parse_response(text, "json", False)
    assert r.ok and r.calls == ({"f": params}, {"g": {"b": 2}})
    assert r.bfcl_deviation is Deviation.JSON_CLOSE_BRACE_BRACKET
    assert bfcl(text, "json", False) == ("ok", [])


def test_no_deviation_flag_when_bfcl_agrees(check_bfcl):
    r = check_bfcl(arr(call("f", q="a]b", r="{x}")), "json", False)
    assert r.ok and r.bfcl_deviation is None


def test_flags_on_success():
    r = parse_response("Sure:\n```json\n" + arr(call("f")) + "\n```", "json", False)
    assert r.ok and r.prose and r.code_fence and r.detected_format == "json"
    r = parse_response(arr(call("f")) + "\n" + arr(call("g")), "json", False)
    assert r.ok and r.per_call_wrapping and r.calls == ({"f": {}},)
    assert r.any_calls == ({"f": {}}, {"g": {}})
