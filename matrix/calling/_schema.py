"""BFCL function docs -> JSON Schema: provider tool schemas and the json return format's answer schema.

Type mapping (recursive through ``properties`` and ``items``): dict -> object,
float -> number, tuple -> array, string/integer/boolean/array as such, any (or
a missing/unknown type) -> no ``type`` keyword. ``description`` and ``enum``
are kept; ``default`` becomes a sentence at the end of the description
("Default: 'celsius'."), because strict providers refuse the keyword while the
prompt-mode docs show it to the model; every other keyword (``optional``,
``format``, ``maximum``, ``minItems``, ...) is dropped. A dict with declared
properties gets ``required`` and, in the answer schema, ``additionalProperties:
false`` (an undeclared parameter is an error for the checker); a dict without
properties stays a free-form object.

Two answer schemas for the json return format (``json_schema``):

- ``strict=False`` (llama.cpp ``response_format={"type": "json_object",
  "schema": ...}``, vLLM ``guided_json``/structured outputs): exactly the
  answer the json parser reads, a top-level array of ``{"function": name,
  "parameters": {...}}`` objects, 1 to ``max_calls`` items, one ``anyOf``
  branch per function tying the name to its parameters.
- ``strict=True`` (OpenAI ``response_format={"type": "json_schema",
  "json_schema": {"name", "schema", "strict": true}}``): OpenAI wants an
  object at the top, ``additionalProperties: false`` and every property listed
  in ``required``. So the array is wrapped as ``{"calls": [...]}`` and an
  optional parameter is required but nullable (``anyOf [T, null]``);
  :func:`unwrap_strict_answer` turns such an answer back into the json return
  format's text (dropping the nulls of optional parameters) before parsing.
  Free-form objects and ``any`` cannot be written in strict mode:
  :class:`ConstraintError` says so (send ``strict=False`` instead).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from promptgrid.errors import PromptgridError

from ._types import Schema, items_of, kind, properties_of, required_params

__all__ = [
    "MAX_CALLS",
    "ConstraintError",
    "json_schema",
    "parameter_schema",
    "response_format",
    "unwrap_strict_answer",
]

#: Most calls a constrained answer may hold (a bound so that generation ends;
#: BFCL's parallel answers have a handful). Not taken from any ground truth.
MAX_CALLS = 8

_JSON_TYPES = {"string": "string", "integer": "integer", "float": "number", "boolean": "boolean",
               "array": "array", "tuple": "array", "dict": "object"}


class ConstraintError(PromptgridError):
    """A constraint cannot be built for these functions (e.g. a free-form object in OpenAI strict mode)."""


def _description(p: Schema) -> str | None:
    text = p.get("description")
    text = text if isinstance(text, str) and text else None
    if "default" in p:
        note = f"Default: {json.dumps(p['default'], ensure_ascii=False)}."
        text = note if text is None else f"{text.rstrip()} {note}"
    return text


def parameter_schema(p: Schema, *, closed: bool = False, strict: bool = False, where: str = "") -> dict[str, Any]:
    """The JSON Schema of one BFCL parameter schema (see the module docstring for the mapping).

    ``closed``: declared-property objects get ``additionalProperties: false``.
    ``strict``: OpenAI strict rules (implies ``closed``; optional properties
    nullable and required; free-form objects and ``any`` raise
    :class:`ConstraintError` naming ``where``).
    """
    k = kind(p)
    out: dict[str, Any] = {}
    if k in _JSON_TYPES:
        out["type"] = _JSON_TYPES[k]
    elif strict:
        raise ConstraintError(f"{where or 'a parameter'} has type 'any', which OpenAI strict mode cannot express; "
                              "use a non-strict schema (strict=False) for this case")
    description = _description(p)
    if description is not None:
        out["description"] = description
    enum = p.get("enum")
    if isinstance(enum, list) and enum:
        out["enum"] = list(enum)
    if k == "dict":
        _add_properties(out, p, closed=closed, strict=strict, where=where)
    elif k in ("array", "tuple"):
        _add_items(out, p, closed=closed, strict=strict, where=where)
    return out


def _add_properties(out: dict[str, Any], p: Schema, *, closed: bool, strict: bool, where: str) -> None:
    """A dict parameter's declared properties (and ``required``, ``additionalProperties``) added to ``out``."""
    props = properties_of(p)
    if props:
        required = required_params(p)
        schemas = {}
        for name, sub in props.items():
            s = parameter_schema(sub, closed=closed, strict=strict, where=f"{where}.{name}" if where else name)
            if strict and name not in required:
                s = {"anyOf": [s, {"type": "null"}]}
            schemas[name] = s
        out["properties"] = schemas
        out["required"] = list(props) if strict else required
        if closed or strict:
            out["additionalProperties"] = False
    elif strict:
        raise ConstraintError(f"{where or 'a parameter'} is a dict without declared properties, which "
                              "OpenAI strict mode cannot express; use a non-strict schema (strict=False)")


def _add_items(out: dict[str, Any], p: Schema, *, closed: bool, strict: bool, where: str) -> None:
    """An array or tuple parameter's item schema added to ``out``."""
    items = items_of(p)
    if items is not None:
        out["items"] = parameter_schema(items, closed=closed, strict=strict, where=f"{where}[]")
    elif strict:
        raise ConstraintError(f"{where or 'a parameter'} is an array without item type, which OpenAI strict "
                              "mode cannot express; use a non-strict schema (strict=False)")


def _params_schema(function: Mapping[str, Any], *, strict: bool) -> dict[str, Any]:
    params = function.get("parameters")
    params = params if isinstance(params, Mapping) else {}
    if not properties_of(params):  # no parameters: only {} is a valid argument object
        return {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    schema = parameter_schema({**params, "type": "dict"}, closed=True, strict=strict,
                              where=str(function.get("name", "")))
    schema.pop("description", None)
    return schema


def json_schema(functions: Sequence[Mapping[str, Any]], *, strict: bool = False,
                max_calls: int = MAX_CALLS, min_calls: int = 1) -> dict[str, Any]:
    """The JSON Schema of a json-return-format answer calling ``functions`` (``min_calls`` to ``max_calls`` calls;
    ``min_calls=0`` admits ``[]``, the end of a conversation's turn).

    Built from the function names and parameter types only. ``strict=True``
    gives the OpenAI strict form (wrapped in ``{"calls": [...]}``; see the
    module docstring). Raises :class:`ConstraintError` when ``functions`` is
    empty, or for what strict mode cannot express.
    """
    if not functions:
        raise ConstraintError("a case without functions cannot be constrained to calls")
    branches = []
    for f in functions:
        name = str(f.get("name", ""))
        branches.append({
            "type": "object",
            "properties": {"function": {"type": "string", "enum": [name]},
                           "parameters": _params_schema(f, strict=strict)},
            "required": ["function", "parameters"],
            "additionalProperties": False,
        })
    items: dict[str, Any] = branches[0] if len(branches) == 1 else {"anyOf": branches}
    array = {"type": "array", "items": items, "minItems": min_calls, "maxItems": max_calls}
    if not strict:
        return array
    return {"type": "object", "properties": {"calls": array}, "required": ["calls"], "additionalProperties": False}


def response_format(functions: Sequence[Mapping[str, Any]], *, provider: str,
                    max_calls: int = MAX_CALLS, min_calls: int = 1) -> dict[str, Any]:
    """The ``response_format`` request field constraining a json-format answer.

    ``provider="openai"``: ``{"type": "json_schema", "json_schema": {"name":
    "function_calls", "schema": <strict schema>, "strict": true}}``.
    ``provider="llama_cpp"``: ``{"type": "json_object", "schema": <answer
    schema>}`` (llama-cpp-python's form; the answer is the return format's
    own array). Other providers raise :class:`ConstraintError`.
    """
    if provider == "openai":
        return {"type": "json_schema", "json_schema": {
            "name": "function_calls",
            "schema": json_schema(functions, strict=True, max_calls=max_calls, min_calls=min_calls),
            "strict": True}}
    if provider == "llama_cpp":
        return {"type": "json_object", "schema": json_schema(functions, max_calls=max_calls, min_calls=min_calls)}
    raise ConstraintError(f"no response_format for provider {provider!r}; use 'openai' or 'llama_cpp'")


def _drop_nulls(value: Any, schema: Schema) -> Any:
    """``value`` without the ``null`` of optional properties, following ``schema`` down."""
    k = kind(schema)
    if k == "dict" and isinstance(value, Mapping):
        props = properties_of(schema)
        required = set(required_params(schema))
        return {key: _drop_nulls(v, props[key]) if key in props else v for key, v in value.items()
                if not (v is None and key in props and key not in required)}
    items = items_of(schema) if k in ("array", "tuple") else None
    if items is not None and isinstance(value, list):
        return [_drop_nulls(v, items) for v in value]
    return value


def unwrap_strict_answer(answer: Any, functions: Sequence[Mapping[str, Any]]) -> str | None:
    """An OpenAI strict answer (``{"calls": [...]}``, already JSON-decoded) as json-return-format text.

    Drops the ``null`` values of optional parameters and optional nested
    properties (strict mode makes the model write them; ``null`` means "not
    given"). Returns ``None`` when the answer is not in the wrapped shape (the
    caller then scores the raw text, which fails to parse).
    """
    if not isinstance(answer, Mapping) or not isinstance(answer.get("calls"), list):
        return None
    params_of = {f.get("name"): {**f["parameters"], "type": "dict"} if isinstance(f.get("parameters"), Mapping)
                 else {"type": "dict"} for f in functions}
    calls = []
    for item in answer["calls"]:
        if isinstance(item, Mapping) and isinstance(item.get("function"), str) and item["function"] in params_of:
            item = {**item, "parameters": _drop_nulls(item.get("parameters"), params_of[item["function"]])}
        calls.append(item)
    return json.dumps(calls, ensure_ascii=False)
