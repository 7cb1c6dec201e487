"""How a rendered prompt is written by ``promptgrid render``: as text for a person, or as a JSON line.

Shared by both kinds (``_single``, ``_conversation``): a single-turn prompt and each step of a conversation
send their messages with the same request pieces beside them (native tools, constrained formats).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from promptgrid.display import escape_controls

__all__ = ["message_lines", "request_fields", "request_summary"]


def request_fields(request: Mapping[str, Any] | None) -> dict[str, Any]:
    """What ``render --jsonl`` writes beside ``messages`` for a native or constrained prompt.

    ``call_mode``; native: ``tools`` (OpenAI-style tool schemas, descriptions
    localized) and ``tool_choice``; constrained: ``response_format`` (OpenAI
    ``json_schema`` form, json return format without the tag only), ``grammar``
    (GBNF), and ``unavailable`` (piece -> why it could not be built) when one
    is missing. Nothing for prompt mode.
    """
    if request is None:
        return {}
    out: dict[str, Any] = {"call_mode": request["call_mode"]}
    if request["call_mode"] == "native":
        out.update(tools=request["tools"], tool_choice=request["tool_choice"])
        return out
    for key in ("response_format", "grammar"):
        if request.get(key) is not None:
            out[key] = request[key]
    if request.get("unavailable"):
        out["unavailable"] = request["unavailable"]
    return out


def request_summary(request: Mapping[str, Any] | None) -> str:
    """One readable line on what is sent beside the messages ("" in prompt mode)."""
    if request is None:
        return ""
    if request["call_mode"] == "native":
        names = ", ".join(t["function"]["name"] for t in request["tools"])
        return f"--- tools (native, tool_choice={request['tool_choice']}): {names or '(none)'}\n"
    sent = [k for k in ("response_format", "grammar") if request.get(k) is not None]
    return f"--- constrained: {', '.join(sent) or 'nothing can be built'} (see render --jsonl)\n"


def message_lines(messages: Iterable[Mapping[str, Any]]) -> str:
    """The messages as ``--- role`` blocks, their text escaped (dataset and model text are untrusted); a message's
    tool calls as JSON after its text, a tool result with its call id in brackets."""
    parts = []
    for m in messages:
        text = m.get("content") or ""
        if m.get("tool_calls"):
            text += ("\n" if text else "") + json.dumps(m["tool_calls"], ensure_ascii=False)
        if m.get("tool_call_id"):
            text = f"[{m['tool_call_id']}] {text}"
        parts.append(f"--- {m['role']}\n{escape_controls(text)}\n")
    return "".join(parts)
