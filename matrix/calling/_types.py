"""BFCL parameter types, read once for every constraint builder.

BFCL function docs use their own type names (``dict``, ``float``, ``tuple``,
``any``, ...) inside a JSON-Schema-like layout. :func:`kind` names the type
of one parameter schema as one of :data:`KINDS`, reading the JSON Schema
spellings the checker also reads (``object``, ``number``) and treating a
missing or unknown type as ``any`` (no constraint: the checker does not
type-check unknown types either).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["KINDS", "Schema", "items_of", "kind", "optional_params", "properties_of", "required_params"]

Schema = Mapping[str, Any]

#: The kinds every builder handles.
KINDS = ("string", "integer", "float", "boolean", "array", "tuple", "dict", "any")

_ALIASES = {
    "string": "string", "str": "string",
    "integer": "integer", "int": "integer",
    "float": "float", "number": "float",
    "boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array",
    "tuple": "tuple",
    "dict": "dict", "object": "dict",
    "any": "any",
}


def kind(schema: Schema) -> str:
    """The BFCL kind of one parameter schema (unknown or missing type -> ``"any"``)."""
    t = schema.get("type") if isinstance(schema, Mapping) else None
    return _ALIASES.get(t, "any") if isinstance(t, str) else "any"


def properties_of(schema: Schema) -> dict[str, Schema]:
    """A dict schema's declared properties (empty for a free-form dict)."""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return {}
    return {str(k): (v if isinstance(v, Mapping) else {}) for k, v in props.items()}


def required_params(schema: Schema) -> list[str]:
    """The required property names that are declared, in declaration order."""
    req = schema.get("required")
    wanted = set(req) if isinstance(req, list) else set()
    return [name for name in properties_of(schema) if name in wanted]


def optional_params(schema: Schema) -> list[str]:
    """The declared property names that are not required, in declaration order."""
    req = set(required_params(schema))
    return [name for name in properties_of(schema) if name not in req]


def items_of(schema: Schema) -> Schema | None:
    """An array's item schema, or ``None`` when it declares none."""
    items = schema.get("items")
    return items if isinstance(items, Mapping) else None
