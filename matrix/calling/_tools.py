"""Native tool calling: a case's functions as provider tool schemas, and provider tool calls back as calls.

Function names: providers refuse some BFCL names (OpenAI wants
``^[a-zA-Z0-9_-]{1,64}$``; BFCL has ``math.factorial``). :func:`tool_names`
maps each name reversibly: every other character becomes ``_``, the result is
cut to 64 characters, and a name that collides with one already taken gets the
smallest free suffix ``_2``, ``_3``, ... (functions in the case's order, so the
mapping is deterministic). The map goes sanitized -> original; names that are
already valid map to themselves.

Reading tool calls (:func:`read_tool_calls`): the provider's ``tool_calls``
list (OpenAI/litellm shape) becomes the checker's call list
``[{original_name: {param: value}}, ...]``, or a typed failure
(:class:`ToolCallFailure`). ``arguments`` is untrusted model output: it is
decoded with the same bounds as every parser (``MAX_INPUT_CHARS``, nesting
``MAX_DEPTH``, digits per number, finite numbers). Any bad call fails the whole
answer, as a malformed call fails a text answer. An empty ``arguments``
string is invalid JSON (not ``{}``): providers send ``"{}"`` for no arguments.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promptgrid.matrix.scoring.parse import MAX_DEPTH, MAX_INPUT_CHARS
from promptgrid.safeio import parse_json_line

from ._schema import parameter_schema

__all__ = ["ToolCallFailure", "ToolCalls", "ToolSchemas", "read_tool_calls", "tool_names", "tool_schemas"]

_VALID_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_BAD_CHAR = re.compile(r"[^a-zA-Z0-9_-]")
MAX_NAME = 64


def tool_names(functions: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Provider-safe name -> original name, for every function (see the module docstring)."""
    mapping: dict[str, str] = {}
    # Valid names are kept as they are, so claim them before any sanitized name can take them.
    taken = {str(f.get("name", "")) for f in functions if _VALID_NAME.fullmatch(str(f.get("name", "")))}
    for f in functions:
        original = str(f.get("name", ""))
        if _VALID_NAME.fullmatch(original):
            mapping[original] = original
            continue
        base = (_BAD_CHAR.sub("_", original) or "_")[:MAX_NAME]
        name, n = base, 1
        while name in taken or name in mapping:
            n += 1
            suffix = f"_{n}"
            name = base[:MAX_NAME - len(suffix)] + suffix
        mapping[name] = original
        taken.add(name)
    return mapping


@dataclass(frozen=True)
class ToolSchemas:
    """The ``tools=`` entries for a case, and the name map to read the answer back with."""

    tools: tuple[dict[str, Any], ...]
    """OpenAI-style entries: ``{"type": "function", "function": {name, description, parameters}}``."""
    name_map: Mapping[str, str]
    """Sanitized tool name -> the case's function name (give it to :func:`read_tool_calls`)."""


def tool_schemas(functions: Sequence[Mapping[str, Any]]) -> ToolSchemas:
    """A case's BFCL function docs as provider tool schemas (types mapped as in ``json_schema``).

    Descriptions travel as given (localize the functions first to send
    translated docs); parameters become a JSON Schema object.
    """
    names = tool_names(functions)
    by_original = {original: safe for safe, original in names.items()}
    tools = []
    for f in functions:
        params = f.get("parameters")
        if not isinstance(params, Mapping):
            params = {}
        schema = parameter_schema({**params, "type": "dict"})
        schema.pop("description", None)
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        entry: dict[str, Any] = {"name": by_original[str(f.get("name", ""))]}
        if isinstance(f.get("description"), str):
            entry["description"] = f["description"]
        entry["parameters"] = schema
        tools.append({"type": "function", "function": entry})
    return ToolSchemas(tools=tuple(tools), name_map=names)


class ToolCallFailure(str, enum.Enum):
    """Why a provider's tool calls could not be read as calls (the value is a stable code)."""

    EMPTY = "empty"
    """No tool call at all (the model answered in text, or with an empty list)."""
    NOT_A_CALL = "not_a_call"
    """An entry is not a function tool call (not an object, no function name)."""
    UNKNOWN_TOOL = "unknown_tool"
    """The name is none of the offered tools."""
    BAD_ARGUMENTS = "bad_arguments"
    """``arguments`` is not valid JSON, or breaks a bound (size, nesting, number size)."""
    ARGUMENTS_NOT_OBJECT = "arguments_not_object"
    """``arguments`` is valid JSON but not an object (``[1]``, ``"x"``, ``null``)."""


@dataclass(frozen=True)
class ToolCalls:
    """The calls read from ``tool_calls``, or why they could not be read."""

    calls: tuple[dict[str, dict[str, Any]], ...] | None
    """``({function_name: {param: value}}, ...)`` in the provider's order, original names; ``None`` on failure."""
    failure: ToolCallFailure | None = None
    details: str = ""
    """One line: which call (index and name) and what was wrong."""

    @property
    def ok(self) -> bool:
        return self.failure is None


def _depth_over(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _arguments(raw: Any, where: str) -> dict[str, Any] | ToolCalls:
    if isinstance(raw, Mapping):  # some SDKs hand the decoded object
        value: Any = dict(raw)
    elif not isinstance(raw, str):
        return ToolCalls(None, ToolCallFailure.BAD_ARGUMENTS, f"{where}: arguments is {type(raw).__name__}, "
                                                              "not a JSON string")
    elif len(raw) > MAX_INPUT_CHARS:
        return ToolCalls(None, ToolCallFailure.BAD_ARGUMENTS,
                         f"{where}: arguments longer than {MAX_INPUT_CHARS} characters")
    else:
        try:
            value = parse_json_line(raw)
        except ValueError as exc:
            return ToolCalls(None, ToolCallFailure.BAD_ARGUMENTS, f"{where}: arguments {exc}")
    if not isinstance(value, dict):
        return ToolCalls(None, ToolCallFailure.ARGUMENTS_NOT_OBJECT,
                         f"{where}: arguments is a JSON {type(value).__name__}, not an object")
    # Only a text with that many brackets can nest that deep (a decoded object may be anything).
    if ((not isinstance(raw, str) or raw.count("[") + raw.count("{") > MAX_DEPTH)
            and _depth_over(value, MAX_DEPTH)):
        return ToolCalls(None, ToolCallFailure.BAD_ARGUMENTS, f"{where}: arguments nested deeper than {MAX_DEPTH}")
    return value


def read_tool_calls(tool_calls: Sequence[Any] | None, name_map: Mapping[str, str]) -> ToolCalls:
    """Provider ``tool_calls`` -> the checker's calls, or a typed failure.

    ``tool_calls``: a list of ``{"id", "type": "function", "function": {"name",
    "arguments": JSON string}}`` mappings (``None`` or empty: no call).
    ``name_map``: :attr:`ToolSchemas.name_map` of the tools sent. Never raises
    on model output.
    """
    if not tool_calls:
        return ToolCalls(None, ToolCallFailure.EMPTY, "no tool call")
    calls = []
    for i, entry in enumerate(tool_calls):
        fn = entry.get("function") if isinstance(entry, Mapping) else None
        name = fn.get("name") if isinstance(fn, Mapping) else None
        # fn is a Mapping only when entry is one
        if not (isinstance(fn, Mapping) and isinstance(name, str)) or entry.get("type", "function") != "function":
            return ToolCalls(None, ToolCallFailure.NOT_A_CALL, f"tool call {i}: not a function call with a name")
        shown = name[:80]
        if name not in name_map:
            return ToolCalls(None, ToolCallFailure.UNKNOWN_TOOL, f"tool call {i}: unknown tool {shown!r}")
        args = _arguments(fn.get("arguments"), f"tool call {i} ({shown})")
        if isinstance(args, ToolCalls):
            return args
        calls.append({name_map[name]: args})
    return ToolCalls(tuple(calls))
