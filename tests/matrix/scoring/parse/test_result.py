"""The public surface: ParseResult, ParseFailure, errors, __all__."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest

import promptgrid.matrix.scoring.parse as parse_pkg
from promptgrid.errors import PromptgridError
from promptgrid.matrix.scoring.parse import (
    BFCL_DECODER_FAILED,
    MAX_INPUT_CHARS,
    Deviation,
    ParseFailure,
    ParseResult,
    UnknownReturnFormatError,
    decode_bfcl,
    parse_any,
    parse_response,
)
from promptgrid.variants import ReturnFormat


def test_all_is_complete_and_exported():
    public = {name for name in dir(parse_pkg) if not name.startswith("_")}
    modules = {name for name in public if inspect.ismodule(getattr(parse_pkg, name))}
    assert set(parse_pkg.__all__) == public - modules
    for name in parse_pkg.__all__:
        assert hasattr(parse_pkg, name)


def test_parse_result_is_frozen_and_its_init_matches_its_fields():
    r = ParseResult(calls=())
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.prose = True  # type: ignore[misc]
    fields = [(f.name, f.default) for f in dataclasses.fields(ParseResult)]
    params = [(p.name, p.default if p.default is not inspect.Parameter.empty else dataclasses.MISSING)
              for p in list(inspect.signature(ParseResult.__init__).parameters.values())[1:]]
    assert params == fields
    assert r.evolve(prose=True).prose and not r.prose
    assert ParseResult(calls=()) == ParseResult(calls=())


def test_failure_codes():
    values = [f.value for f in ParseFailure]
    assert len(set(values)) == len(values) and all(v == v.lower() for v in values)
    for name in ("EMPTY", "TAG_MISSING", "UNCLOSED_TAG", "WRONG_FORMAT", "BAD_SYNTAX", "BAD_ESCAPING",
                 "PROSE_ONLY", "UNSAFE_EXPRESSION", "TOO_LARGE", "TOO_DEEP", "XML_ENTITY_REFUSED",
                 "WRONG_XML_TYPE", "NOT_A_CALL"):
        assert ParseFailure[name].bfcl_error_type == BFCL_DECODER_FAILED
    assert {d.value for d in Deviation} >= {"eval_refused", "json_close_brace_bracket"}


def test_to_dict_is_json():
    r = parse_response("Sure! [f(a=1)]", "python", False)
    d = r.to_dict()
    json.dumps(d)
    assert d["failure"] == "extra_text" and d["ok"] is False and d["detected_format"] == "python"


def test_unknown_return_format_is_a_user_error():
    with pytest.raises(UnknownReturnFormatError) as info:
        parse_response("[f()]", "verbose-xml", False)
    assert isinstance(info.value, PromptgridError) and isinstance(info.value, ValueError)
    assert "verbose_xml" in str(info.value)


@pytest.mark.parametrize("fmt", list(ReturnFormat))
def test_none_is_an_empty_response(fmt):
    assert parse_response(None, fmt, False).failure is ParseFailure.EMPTY  # type: ignore[arg-type]
    assert parse_any(None).failure is ParseFailure.EMPTY  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fmt", "tag", "bfcl_error_type"),
    [("python", False, None), ("json", False, None), ("verbose_xml", False, BFCL_DECODER_FAILED),
     ("python", True, BFCL_DECODER_FAILED), ("json", True, BFCL_DECODER_FAILED)],
)
def test_empty_response_bfcl_outcome(check_bfcl, fmt, tag, bfcl_error_type):
    """bfcl-eval turns an empty answer into "[]" for python/json without tag: no calls, not a decode error."""
    r = check_bfcl("", fmt, tag)
    assert r.failure is ParseFailure.EMPTY and r.bfcl_error_type == bfcl_error_type


def test_any_calls_on_failure_and_success():
    ok = parse_response("[f(a=1)]", "python", False)
    assert ok.any_calls == ok.calls
    bad = parse_response('[{"function": "f", "parameters": {"a": 1}}]', "python", False)
    assert bad.calls is None and bad.any_calls == ({"f": {"a": 1}},)
    none = parse_response("no", "python", False)
    assert none.any_calls is None


@pytest.mark.parametrize(
    ("text", "fmt", "tag"),
    [("Sure! [f(a=1)]", "python", False), ('[f(a=1)]', "json", True), ("[f(a=1)]", "verbose_xml", False),
     ("<TOOLCALL>[f(a=1)]</TOOLCALL><TOOLCALL>[g()]</TOOLCALL>", "python", True), ("", "json", False),
     ("   ", "python", True), ("[f(a=1)]", "python", True), ("<TOOLCALL>[f(a=1)]", "python", True),
     ("<TOOLCALL> </TOOLCALL>", "json", True), ('[{"function": "f", "parameters": {"a": 1}}]', "json", False),
     ('<functions><function name="f"><param name="a" type="integer">1</function></functions>', "concise_xml", False),
     ("[f(a=1, b=[1, 2)]", "python", False), ("x" * (MAX_INPUT_CHARS + 1), "python", False)],
)
def test_decode_bfcl_keeps_parse_response_bfcl_outcome(text, fmt, tag):
    full = parse_response(text, fmt, tag)
    calls, fail = decode_bfcl(text, fmt, tag)
    assert (calls is None) == (full.calls is None) and (fail is None) == (full.failure is None)
    if fail is None:
        assert tuple(calls) == full.calls
    else:
        assert (fail.bfcl_error_type, fail.deviation) == (full.bfcl_error_type, full.bfcl_deviation)


def test_decode_bfcl_refuses_an_unknown_format():
    with pytest.raises(UnknownReturnFormatError):
        decode_bfcl("[f()]", "yaml", False)
