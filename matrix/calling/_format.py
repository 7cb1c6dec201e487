"""Calls -> answer text in each return format, as the prompt's format instruction shows it.

``format_calls`` writes what a model following the instruction exactly would
write; the parser (``scoring.parse.parse_response``) reads it back as the same
calls. Used by the tests (round trips) and meant for the fake client, which
answers constrained requests in the requested format.

Values: python -> Python literals (strings double-quoted, JSON-style escapes,
True/False/None); json -> JSON; XML -> the ``type`` attribute from the
value's Python type (str string, bool boolean, int integer, float float,
list array, dict dict, None null) and the value as text: scalars as
themselves (booleans ``true``/``false``), lists and dicts as Python literals,
all XML-escaped. Tuples are written as lists (JSON has no tuple; the
parsers read lists). One loss: in concise XML a string parameter's
surrounding whitespace is dropped, because the parser strips an element's
text as bfcl-eval does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from promptgrid.variants import ReturnFormat

__all__ = ["format_calls", "python_literal", "xml_type"]

Calls = Sequence[Mapping[str, Mapping[str, Any]]]


def python_literal(value: Any) -> str:
    """``value`` as a Python literal the python parser reads back equal (finite floats only)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no literal")
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{python_literal(str(k))}: {python_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write a {type(value).__name__} as a literal")


def xml_type(value: Any) -> str:
    """The XML ``type`` attribute naming ``value``'s type (the prompt's type names)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "dict"
    return "array"


def _xml_raw(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return python_literal(value)


_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_ATTR_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;",
                               "\n": "&#10;", "\t": "&#9;"})


def _call_python(name: str, params: Mapping[str, Any]) -> str:
    return f"{name}(" + ", ".join(f"{k}={python_literal(v)}" for k, v in params.items()) + ")"


def _call_xml(name: str, params: Mapping[str, Any], verbose: bool) -> str:
    head = f'<function name="{name.translate(_ATTR_ESCAPES)}">'
    if verbose:
        body = "".join(f'<param name="{k.translate(_ATTR_ESCAPES)}" value="{_xml_raw(v).translate(_ATTR_ESCAPES)}"'
                       f' type="{xml_type(v)}"/>' for k, v in params.items())
        return f"{head}<params>{body}</params></function>"
    body = "".join(f'<param name="{k.translate(_ATTR_ESCAPES)}" type="{xml_type(v)}">'
                   f"{_xml_raw(v).translate(_TEXT_ESCAPES)}</param>" for k, v in params.items())
    return f"{head}{body}</function>"


def format_calls(calls: Calls, return_format: ReturnFormat | str, tool_call_tag: bool) -> str:
    """``calls`` (``[{name: {param: value}}, ...]``) as an answer in ``return_format``, tag included if asked."""
    fmt = ReturnFormat(return_format)
    pairs = [(name, params) for call in calls for name, params in call.items()]
    if fmt is ReturnFormat.PYTHON:
        text = "[" + ", ".join(_call_python(n, p) for n, p in pairs) + "]"
    elif fmt is ReturnFormat.JSON:
        text = json.dumps([{"function": n, "parameters": dict(p)} for n, p in pairs], ensure_ascii=False)
    else:
        verbose = fmt is ReturnFormat.VERBOSE_XML
        text = "<functions>" + "".join(_call_xml(n, p, verbose) for n, p in pairs) + "</functions>"
    return f"<TOOLCALL>{text}</TOOLCALL>" if tool_call_tag else text
