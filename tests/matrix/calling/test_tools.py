"""Native tool calling: BFCL functions -> provider tool schemas, provider tool_calls -> checker calls."""

from __future__ import annotations

import json
import re

import pytest

from promptgrid.matrix.calling import ToolCallFailure, read_tool_calls, tool_names, tool_schemas
from promptgrid.matrix.datasets import load_dataset
from promptgrid.matrix.scoring.parse import MAX_DEPTH
from support.builders import FACTORIAL, fn

OPENAI_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def call(name: str, arguments: str | object, **extra: object) -> dict[str, object]:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}, **extra}


def test_tool_schema_maps_bfcl_types_and_names() -> None:
    nested = fn("geo.route-plan/v2", ["points"],
                points={"type": "array", "items": {"type": "tuple", "items": {"type": "float"}}},
                options={"type": "dict", "properties": {"fast": {"type": "boolean", "default": True},
                                                        "extra": {"type": "dict"}},
                         "required": ["fast"]},
                anything={"type": "any", "description": "Whatever."},
                n={"type": "integer", "optional": True, "format": "int32"})
    schemas = tool_schemas([FACTORIAL, nested])
    assert schemas.name_map == {"math_factorial": "math.factorial", "geo_route-plan_v2": "geo.route-plan/v2"}
    factorial, route = (t["function"] for t in schemas.tools)
    assert all(t["type"] == "function" for t in schemas.tools)
    assert factorial == {
        "name": "math_factorial",
        "description": "Calculate the factorial of a given number.",
        "parameters": {"type": "object", "properties": {
            "number": {"type": "integer", "description": "The number for which factorial needs to be calculated."},
            "mode": {"type": "string", "description": 'How to compute. Default: "fast".', "enum": ["fast", "exact"]},
        }, "required": ["number"]},
    }
    props = route["parameters"]["properties"]
    assert props["points"] == {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}
    assert props["options"] == {"type": "object", "properties": {
        "fast": {"type": "boolean", "description": "Default: true."}, "extra": {"type": "object"}},
        "required": ["fast"]}
    assert props["anything"] == {"description": "Whatever."}  # any: no type keyword
    assert props["n"] == {"type": "integer"}  # BFCL-only keywords dropped
    assert route["parameters"]["required"] == ["points"]


def test_function_without_parameters_gets_an_empty_object() -> None:
    schemas = tool_schemas([{"name": "ping", "description": "Ping.", "parameters": {"type": "dict"}}])
    assert schemas.tools[0]["function"]["parameters"] == {"type": "object", "properties": {}, "required": []}


def test_sanitized_names_are_unique_and_valid() -> None:
    names = ["a.b", "a_b", "a/b", "a b", "x" * 70 + ".y", "x" * 70 + ".z", "", "ünï.code"]
    mapping = tool_names([{"name": n} for n in names])
    assert sorted(mapping.values()) == sorted(names)
    assert mapping["a_b"] == "a_b"  # a valid name keeps itself, even after a name that sanitizes to it
    assert all(OPENAI_NAME.fullmatch(k) for k in mapping)


def test_every_bfcl_and_mini_function_gets_a_valid_reversible_name() -> None:
    specs = ["mini", "bfcl:simple_python", "bfcl:multiple", "bfcl:parallel_multiple", "bfcl:live_multiple"]
    for spec in specs:
        for case in load_dataset(spec).cases:
            mapping = tool_schemas(case.functions).name_map
            assert sorted(mapping.values()) == sorted(f["name"] for f in case.functions)
            assert all(OPENAI_NAME.fullmatch(k) for k in mapping), case.id


def test_read_tool_calls_maps_names_back_in_order() -> None:
    names = tool_schemas([FACTORIAL, fn("g")]).name_map
    got = read_tool_calls([call("math_factorial", '{"number": 5}'), call("g", "{}"),
                           call("math_factorial", '{"number": 6, "mode": "exact"}')], names)
    assert got.ok and got.failure is None
    assert got.calls == ({"math.factorial": {"number": 5}}, {"g": {}},
                         {"math.factorial": {"number": 6, "mode": "exact"}})


@pytest.mark.parametrize(("tool_calls", "failure", "detail"), [
    (None, ToolCallFailure.EMPTY, "no tool call"),
    ([], ToolCallFailure.EMPTY, "no tool call"),
    ([call("math_factorial", '{"number": 5')], ToolCallFailure.BAD_ARGUMENTS, "not valid JSON"),
    ([call("math_factorial", "")], ToolCallFailure.BAD_ARGUMENTS, "not valid JSON"),
    ([call("math_factorial", "[5]")], ToolCallFailure.ARGUMENTS_NOT_OBJECT, "JSON list"),
    ([call("math_factorial", "null")], ToolCallFailure.ARGUMENTS_NOT_OBJECT, "JSON NoneType"),
    ([call("math_factorial", 5)], ToolCallFailure.BAD_ARGUMENTS, "int, not a JSON string"),
    ([call("math.factorial", "{}")], ToolCallFailure.UNKNOWN_TOOL, "unknown tool 'math.factorial'"),
    ([call("g", "{}"), call("rm_rf", "{}")], ToolCallFailure.UNKNOWN_TOOL, "tool call 1"),
    (["math_factorial"], ToolCallFailure.NOT_A_CALL, "tool call 0"),
    ([{"type": "function", "function": {"arguments": "{}"}}], ToolCallFailure.NOT_A_CALL, "with a name"),
    ([call("g", "{}", type="code_interpreter")], ToolCallFailure.NOT_A_CALL, "not a function call"),
    ([call("g", '{"n": NaN}')], ToolCallFailure.BAD_ARGUMENTS, "NaN"),
    ([call("g", '{"n": ' + "9" * 500 + "}")], ToolCallFailure.BAD_ARGUMENTS, "500 characters"),
    ([call("g", '{"n": ' + "[" * 150 + "]" * 150 + "}")], ToolCallFailure.BAD_ARGUMENTS,
     f"nested deeper than {MAX_DEPTH}"),
    ([call("g", '{"n": ' + "[" * 5000 + "]" * 5000 + "}")], ToolCallFailure.BAD_ARGUMENTS, "levels deep"),
    ([call("g", '{"s": "' + "x" * 1_000_001 + '"}')], ToolCallFailure.BAD_ARGUMENTS, "longer than"),
])
def test_read_tool_calls_failures_are_typed(tool_calls: object, failure: ToolCallFailure, detail: str) -> None:
    names = tool_schemas([FACTORIAL, fn("g")]).name_map
    got = read_tool_calls(tool_calls, names)  # type: ignore[arg-type]
    assert got.calls is None and not got.ok
    assert got.failure is failure
    assert detail in got.details and "\n" not in got.details


def test_decoded_arguments_are_accepted_and_bounded() -> None:
    names = {"g": "g"}
    assert read_tool_calls([call("g", {"a": [1]})], names).calls == ({"g": {"a": [1]}},)
    deep: object = 1
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    assert read_tool_calls([call("g", {"a": deep})], names).failure is ToolCallFailure.BAD_ARGUMENTS


def test_values_survive_json() -> None:
    args = {"s": "ü \"q\" \\n", "f": 1.5, "i": -3, "b": False, "n": None, "l": [1, {"k": "v"}]}
    got = read_tool_calls([call("g", json.dumps(args))], {"g": "g"})
    assert got.calls == ({"g": args},)
