"""What the fake models answer: a plausible call of the first function a prompt documents, in the format it asks for.

The in-process ``fake/auto`` client (``_fake``) and the fake OpenAI-compatible server of the tests
(``tests/support/fake_server.py``) answer alike from these: ``auto_answer`` (prompt mode: the return format and
``<TOOLCALL>`` tag the system prompt shows), ``auto_tool_calls`` (native: the first tool, empty arguments) and
``schema_answer`` (an OpenAI strict json_schema ``response_format``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from promptgrid.variants import ReturnFormat

__all__ = ["auto_answer", "auto_tool_calls", "documented_function_names", "first_function_name", "schema_answer"]

# How each doc format (templates/_docs.py, both flavours) starts a function's
# documentation: JSON ``"name": "f"``; Python ``# Function: f`` (or ``def f(``);
# XML ``<function name="f">`` outside a ``<functions>`` list. The answer formats'
# examples (``<functions><function name="func_name1"><params>``,
# ``alarm.set(...)``, ``{"function":"alarm.set"}``) match none of them.
_NAME_PATTERNS = (
    re.compile(r'"name":\s*"([A-Za-z_][\w.-]*)"'),
    re.compile(r"^[ \t]*# Function: ([A-Za-z_][\w.-]*)[ \t]*$", re.MULTILINE),
    re.compile(r"^[ \t]*def ([A-Za-z_][\w.-]*)\(", re.MULTILINE),
    re.compile(r'(?<!<functions>)<function name="([A-Za-z_][\w.-]*)">(?!<param)'),
)
_PLACEHOLDER_RE = re.compile(r"func_name\d*")
_FORMATS = tuple(ReturnFormat)


def _requested_format(system: str) -> ReturnFormat:
    """The return format the prompt's format instruction shows (its ``func_name1`` example); a ```json fence
    counts only after those, since JSON function docs come in one too (with a python or XML answer asked)."""
    if '"function":"func_name1"' in system:
        return ReturnFormat.JSON
    if '<function name="func_name1"><params>' in system:
        return ReturnFormat.VERBOSE_XML
    if '<function name="func_name1"><param ' in system:
        return ReturnFormat.CONCISE_XML
    if "func_name1(params_name1=" in system:
        return ReturnFormat.PYTHON
    if "```json" in system:
        return ReturnFormat.JSON
    return ReturnFormat.PYTHON


def _format_call(fmt: ReturnFormat, name: str) -> str:
    if fmt is ReturnFormat.JSON:
        return json.dumps([{"function": name, "parameters": {}}])
    if fmt is ReturnFormat.VERBOSE_XML:
        return f'<functions><function name="{name}"><params></params></function></functions>'
    if fmt is ReturnFormat.CONCISE_XML:
        return f'<functions><function name="{name}"></function></functions>'
    return f"[{name}()]"


def documented_function_names(messages: Any) -> list[str]:
    """The functions documented in the prompt, in the order they are documented (system messages first).

    Reads the function docs of every doc format (JSON, Python, XML; see
    ``_NAME_PATTERNS``), never the answer format's examples or placeholders.
    """
    msgs = [m for m in messages or [] if isinstance(m, dict)]
    texts = [str(m.get("content", "")) for m in msgs if m.get("role") == "system"]
    texts += [str(m.get("content", "")) for m in msgs if m.get("role") != "system"]
    names: list[str] = []
    for text in texts:
        found = sorted((m.start(), m.group(1)) for pattern in _NAME_PATTERNS for m in pattern.finditer(text))
        for _, name in found:
            if name not in names and not _PLACEHOLDER_RE.fullmatch(name):
                names.append(name)
    return names


def first_function_name(messages: Any) -> str:
    """The first function documented in the prompt (``get_weather`` when none is found)."""
    names = documented_function_names(messages)
    return names[0] if names else "get_weather"


def auto_answer(request: dict[str, Any], other_format: bool = False, wrap: bool = False,
                per_call_wrap: bool = False) -> str:
    """A plausible answer: a call to the first documented function, in the asked format.

    ``per_call_wrap``: two calls, each in its own ``<TOOLCALL>`` (or code fence), a
    failure mode BFCL's strict parser rejects.
    """
    messages = request.get("messages") or []
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    name = first_function_name(messages)
    fmt = _requested_format(system)
    if other_format:
        fmt = _FORMATS[(_FORMATS.index(fmt) + 1) % len(_FORMATS)]
    text = _format_call(fmt, name)
    if per_call_wrap:
        one = f"<TOOLCALL>{text}</TOOLCALL>" if "<TOOLCALL>" in system else f"```\n{text}\n```"
        return f"{one}\n{one}"
    if "<TOOLCALL>" in system:
        text = f"<TOOLCALL>{text}</TOOLCALL>"
    if wrap:
        text = f"```\n{text}\n```"
    return text


def auto_tool_calls(tools: list[Any]) -> list[dict[str, Any]]:
    """A native answer: one call of the first tool, with empty arguments (OpenAI ``tool_calls`` shape)."""
    first = tools[0] if tools and isinstance(tools[0], dict) else {}
    name = (first.get("function") or {}).get("name", "get_weather")
    return [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": "{}"}}]


def schema_answer(response_format: dict[str, Any]) -> str | None:
    """An answer to an OpenAI strict json_schema ``response_format`` (``{"calls": [...]}``): a call of the
    first function the schema allows, empty parameters. ``None`` for another kind of response_format."""
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    items = (((schema.get("properties") or {}).get("calls") or {}).get("items")) or {}
    branch = (items.get("anyOf") or [items])[0]
    names = ((branch.get("properties") or {}).get("function") or {}).get("enum") or []
    if response_format.get("type") != "json_schema" or not names:
        return None
    return json.dumps({"calls": [{"function": names[0], "parameters": {}}]})
