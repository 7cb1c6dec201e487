"""JSON Schema of the json return format's answer: plain (llama.cpp, vLLM) and OpenAI strict."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptgrid.matrix.calling import (
    ConstraintError,
    format_calls,
    json_schema,
    response_format,
    unwrap_strict_answer,
)
from promptgrid.matrix.datasets import load_dataset
from promptgrid.matrix.scoring.parse import parse_response


def strict_ready(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The all-kinds functions without what strict mode cannot express (free dicts, any, untyped arrays)."""
    out = []
    for f in functions:
        props = {k: v for k, v in f["parameters"]["properties"].items() if k not in ("free", "anything",
                                                                                    "untyped_list")}
        out.append({**f, "parameters": {**f["parameters"], "properties": props}})
    return out


def walk(schema: Any) -> list[dict[str, Any]]:
    """Every object-typed subschema."""
    found = []
    stack = [schema]
    while stack:
        s = stack.pop()
        if isinstance(s, dict):
            if s.get("type") == "object":
                found.append(s)
            stack.extend(s.values())
        elif isinstance(s, list):
            stack.extend(s)
    return found


def test_plain_schema_is_the_answer_shape() -> None:
    f = {"name": "math.factorial", "description": "n!", "parameters": {"type": "dict", "properties": {
        "number": {"type": "integer", "description": "n"}}, "required": ["number"]}}
    assert json_schema([f], max_calls=3) == {
        "type": "array", "minItems": 1, "maxItems": 3,
        "items": {"type": "object", "additionalProperties": False, "required": ["function", "parameters"],
                  "properties": {"function": {"type": "string", "enum": ["math.factorial"]},
                                 "parameters": {"type": "object", "additionalProperties": False,
                                                "properties": {"number": {"type": "integer", "description": "n"}},
                                                "required": ["number"]}}}}
    two = json_schema([f, {**f, "name": "g"}])
    assert [b["properties"]["function"]["enum"] for b in two["items"]["anyOf"]] == [["math.factorial"], ["g"]]


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_formatted_json_answers_are_valid_and_others_not(all_kinds: list[dict[str, Any]], helpers: Any,
                                                         data: st.DataObject) -> None:
    schema = json_schema(all_kinds)
    jsonschema.Draft202012Validator.check_schema(schema)
    answer = data.draw(helpers.calls(all_kinds))
    jsonschema.validate(json.loads(format_calls(answer, "json", False)), schema)
    ((name, args),) = answer[0].items()
    wrong = [{"function": "nope", "parameters": args}]
    extra = [{"function": name, "parameters": {**args, "undeclared": 1}}]
    for bad in (wrong, extra, []):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_strict_schema_follows_openai_rules(all_kinds: list[dict[str, Any]]) -> None:
    schema = json_schema(strict_ready(all_kinds), strict=True)
    assert schema["type"] == "object" and schema["required"] == ["calls"]
    objects = walk(schema)
    assert len(objects) > 5
    for obj in objects:
        assert obj["additionalProperties"] is False and obj["required"] == list(obj["properties"])
    kinds = schema["properties"]["calls"]["items"]["anyOf"][1]["properties"]["parameters"]["properties"]
    assert kinds["s"] == {"type": "string"}  # required: as is
    assert kinds["i"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}  # optional: nullable


@pytest.mark.parametrize("param", ["free", "anything", "untyped_list"])
def test_strict_mode_refuses_what_it_cannot_express(all_kinds: list[dict[str, Any]], param: str) -> None:
    f = all_kinds[1]
    only = {**f, "parameters": {**f["parameters"], "properties": {param: f["parameters"]["properties"][param]}}}
    with pytest.raises(ConstraintError, match=f"kinds.{param}|{param}.*strict=False"):
        json_schema([only], strict=True)
    json_schema([only])  # the plain schema is fine


def test_strict_answer_unwraps_to_the_json_format(all_kinds: list[dict[str, Any]]) -> None:
    functions = strict_ready(all_kinds)
    answer = {"calls": [
        {"function": "kinds", "parameters": {"s": "x", "f": 1.5, "i": None, "b": None, "a": None, "t": None,
                                             "n_enum": None,
                                             "nested": {"x": 1, "tags": [{"k": "a"}], "opt": None}}},
        {"function": "math.factorial", "parameters": {"number": 5, "mode": None}},
    ]}
    jsonschema.validate(answer, json_schema(functions, strict=True))
    text = unwrap_strict_answer(answer, functions)
    assert text is not None
    assert parse_response(text, "json", False).calls == (
        {"kinds": {"s": "x", "f": 1.5, "nested": {"x": 1, "tags": [{"k": "a"}]}}},
        {"math.factorial": {"number": 5}})
    assert unwrap_strict_answer([1], functions) is None and unwrap_strict_answer({"calls": 1}, functions) is None
    assert unwrap_strict_answer({"calls": [{"function": ["x"]}, 3]}, functions) == '[{"function": ["x"]}, 3]'


def test_response_format_per_provider(all_kinds: list[dict[str, Any]]) -> None:
    functions = strict_ready(all_kinds)
    openai = response_format(functions, provider="openai")
    assert openai["type"] == "json_schema" and openai["json_schema"]["strict"] is True
    assert openai["json_schema"]["name"] == "function_calls"
    assert openai["json_schema"]["schema"] == json_schema(functions, strict=True)
    assert response_format(all_kinds, provider="llama_cpp") == {"type": "json_object",
                                                                  "schema": json_schema(all_kinds)}
    with pytest.raises(ConstraintError, match="'openai' or 'llama_cpp'"):
        response_format(all_kinds, provider="bedrock")
    with pytest.raises(ConstraintError, match="without functions"):
        json_schema([])


def test_llama_cpp_converts_every_mini_schema(llama: Any, all_kinds: list[dict[str, Any]]) -> None:
    """llama-cpp-python's response_format={"type": "json_object", "schema": ...} path: its converter, then llama.cpp."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    for functions in [all_kinds, *(list(c.functions) for c in load_dataset("mini:en").cases)]:
        assert llama.compiles(json_schema_to_gbnf(json.dumps(json_schema(functions))))
