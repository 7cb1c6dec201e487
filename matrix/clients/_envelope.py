"""The stored form of a native tool-calling answer: one JSON envelope in the ``response`` column.

A native answer is text and/or tool calls; the store keeps one string per
call, so the runner stores (and ``promptgrid score RUN_DIR`` re-reads)::

    {"content": "<text>" | null, "tool_calls": [{"name": "<tool name>", "arguments": "<raw JSON string>"}]}

as canonical JSON (keys in that order, no spaces, non-ASCII kept). ``name`` is
the name the model called (the sanitized tool name it was offered, mapped back
to the case's function name at scoring time); ``arguments`` is the provider's
raw string, unparsed, so that malformed arguments are scored as such.
``content`` is ``null`` when the model wrote no text.

Bounded: at most ``MAX_STORED_CALLS`` calls are kept (later ones are dropped,
and ``"truncated": true`` is added), and a string longer than
``MAX_INPUT_CHARS`` is cut to one character more (it still fails the parser's
length bound, so it scores as "arguments too long" without storing megabytes).
Answers without tool calls in prompt and constrained mode are stored as their
plain text, as always.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from promptgrid.safeio import parse_json_line

__all__ = ["MAX_INPUT_CHARS", "MAX_STORED_ANSWER_CHARS", "MAX_STORED_CALLS", "Envelope", "envelope", "read_envelope",
           "stored_response"]

#: The parsers' input bound (``promptgrid.matrix.scoring.parse.MAX_INPUT_CHARS``, equal by test; not
#: imported, so that importing the clients stays cheap).
MAX_INPUT_CHARS = 1_000_000

#: Most tool calls stored per answer (a bound; BFCL's parallel answers have a handful).
MAX_STORED_CALLS = 64

MAX_STORED_ANSWER_CHARS = 1_000_000
"""Most characters of one answer that are stored (and, in a conversation, sent back in the transcript): the
parsers' input bound. A longer text is cut to one character more, so it still fails to decode as too long; a
native answer keeps its calls while their names and arguments fit (``envelope(max_chars=...)``). Without it, 64
native calls of 900 KB a step grew a conversation's transcript and store by 57.6 MB a step, and a server that
answered 20 MB of text had 20 MB stored per single-turn call."""

Envelope = tuple[str | None, list[dict[str, Any]]]
"""(content, tool calls in the OpenAI shape ``{"type": "function", "function": {"name", "arguments"}}``)."""


def _cut(text: str) -> str:
    return text if len(text) <= MAX_INPUT_CHARS else text[:MAX_INPUT_CHARS + 1]


def envelope(content: str | None, tool_calls: Sequence[Mapping[str, Any]] | None, *,
             max_chars: int | None = None) -> str:
    """The canonical JSON envelope of a native answer (see the module docstring).

    ``max_chars`` bounds the characters of the content and the calls' names and arguments together (a
    conversation step's answer: ``MAX_STORED_ANSWER_CHARS``): the calls are kept in order while they fit, the
    rest are dropped (``"truncated": true``); a first call that does not fit alone has its arguments cut to what
    is left plus one character, so it still fails to decode instead of storing megabytes."""
    calls: list[dict[str, Any]] = []
    budget = max_chars if max_chars is not None else -1
    kept_content = _cut(content) if content else None
    if kept_content is not None and budget >= 0:
        kept_content = kept_content[:budget + 1]
        budget = max(budget - len(kept_content), 0)
    truncated = bool(tool_calls and len(tool_calls) > MAX_STORED_CALLS)
    for entry in list(tool_calls or ())[:MAX_STORED_CALLS]:
        fn = entry.get("function") if isinstance(entry, Mapping) else None
        fn = fn if isinstance(fn, Mapping) else {}
        name, arguments = fn.get("name"), fn.get("arguments")
        if isinstance(arguments, Mapping):  # an SDK that hands the decoded object: keep it as JSON text
            arguments = json.dumps(arguments, ensure_ascii=False)
        call = {"name": _cut(name) if isinstance(name, str) else None,
                "arguments": _cut(arguments) if isinstance(arguments, str) else None}
        if budget >= 0:
            size = len(call["name"] or "") + len(call["arguments"] or "")
            if size > budget:
                truncated = True
                if not calls and isinstance(call["arguments"], str):
                    call["arguments"] = call["arguments"][:max(budget - len(call["name"] or ""), 0) + 1]
                    calls.append(call)
                break
            budget -= size
        calls.append(call)
    out: dict[str, Any] = {"content": kept_content, "tool_calls": calls}
    if truncated:
        out["truncated"] = True
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def read_envelope(stored: str) -> Envelope | None:
    """(content, tool calls) from a stored envelope; ``None`` when ``stored`` is not one.

    The tool calls come back in the provider's shape, ready for
    ``promptgrid.matrix.calling.read_tool_calls``. Never raises.
    """
    if len(stored) > MAX_STORED_CALLS * 2 * (MAX_INPUT_CHARS + 64) or not stored.startswith("{"):
        return None
    try:
        value = parse_json_line(stored)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("tool_calls"), list):
        return None
    content = value.get("content")
    calls = [{"type": "function", "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
             if isinstance(c, dict) else c for c in value["tool_calls"]]
    return (content if isinstance(content, str) else None), calls


def stored_response(completion: Any, *, native: bool, exact: Callable[[str], str] | None = None,
                    max_chars: int = MAX_STORED_ANSWER_CHARS) -> str:
    """What is stored of a model's answer (``Completion``-like: ``text``, ``tool_calls``), for both kinds of run: the
    text, or for a ``native`` call the envelope of its text and tool calls, at most ``max_chars`` characters
    (``MAX_STORED_ANSWER_CHARS``). ``exact`` (``Redactor.exact``) replaces the known secrets in the text and in
    each call's name and arguments before anything is cut, so that no key is cut in two and kept in part, and in
    a native answer's whole envelope after (its JSON escapes)."""
    text, calls = getattr(completion, "text", None), getattr(completion, "tool_calls", None)
    if exact is not None:
        text = exact(text) if isinstance(text, str) else text
        calls = [_redacted_call(call, exact) for call in calls] if calls else calls
    if not native:  # a cut of the redacted text holds no secret the text did not
        return (text or "")[:max_chars + 1]
    stored = envelope(text, calls, max_chars=max_chars)
    return exact(stored) if exact is not None else stored


def _redacted_call(call: Any, exact: Callable[[str], str]) -> Any:
    fn = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(fn, Mapping):
        return call
    return {**call, "function": {**fn, **{k: exact(v) for k in ("name", "arguments")
                                          if isinstance(v := fn.get(k), str)}}}
