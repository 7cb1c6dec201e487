"""Scripted offline models for conversations: ``fake/ground-truth`` and ``fake/hostile``.

They answer from where the episode stands (``EpisodeContext``: the
conversation, the turn, the step, the request), so they exist only for
conversation runs; ``fake/prose`` (the single-turn fake) needs no context and
works for both.

- ``fake/ground-truth``: at the first step of a turn, the turn's ground-truth
  calls, written in the variant's form (prompt and constrained: the return
  format and tag, with ``format_calls``; native: tool calls with the names the
  tools were sent under); at the next step, or at once for a turn without
  ground truth, an answer without calls (prompt: a sentence; constrained: the
  format's empty list; native: text only). It should score every entry.
- ``fake/hostile``: the first step of turn ``t`` is attack ``t`` (cycling) of
  ``ATTACKS``: calls to private, dunder and builtin names meant to escape the
  environment (``__class__``, ``__import__``, ``eval``, ``system`` writing a
  canary file); huge numbers (``10**4000``, ``power`` with a 10**8 exponent);
  10,000 calls in one answer; arguments nested 10,000 deep; a Python
  expression that would write the canary file if evaluated. The next step ends
  the turn. A safe run finishes with no canary file (``CANARY``) and every
  step bounded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from promptgrid.errors import PromptgridError
from promptgrid.matrix.clients._base import Completion, OfflineClient
from promptgrid.variants import CallMode, ReturnFormat

from ._episode import EpisodeContext

__all__ = ["ATTACKS", "CANARY", "SCRIPTED_MODELS", "ScriptedClient"]

SCRIPTED_MODELS = ("fake/ground-truth", "fake/hostile")
CANARY = "promptgrid_hostile_canary"
"""The file the hostile model's calls would create (in the working directory, and in /tmp) if anything ran them."""

ATTACKS = ("escape", "huge_numbers", "many_calls", "deep_nesting", "code_injection")
_MANY = 10_000
_DEPTH = 10_000
_END_TEXT = "I have done what you asked."


def _escape_calls() -> list[tuple[str, dict[str, Any]]]:
    touch = f"open('{CANARY}', 'w').write('x'); open('/tmp/{CANARY}', 'w').write('x')"
    return [("__class__", {}), ("_load_scenario", {"scenario": {}}), ("__init__", {}),
            ("__getattribute__", {"name": "__dict__"}), ("__import__", {"name": "os"}),
            ("eval", {"source": touch}), ("exec", {"source": touch}), ("system", {"command": f"touch {CANARY}"}),
            ("__subclasses__", {}), ("GorillaFileSystem.__init__", {})]


def _number_calls(context: EpisodeContext) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = [("power", {"base": 10, "exponent": 10**8})]
    for doc in context.conversation.functions_at(context.turn):
        props = (doc.get("parameters") or {}).get("properties") or {}
        for name, schema in props.items():
            if isinstance(schema, Mapping) and schema.get("type") in ("integer", "float", "number"):
                calls.append((str(doc["name"]), {name: 10**4000 if schema.get("type") == "integer" else 1e308}))
                break
    return calls


def _first_function(context: EpisodeContext) -> str:
    docs = context.conversation.functions_at(context.turn)
    return str(docs[0]["name"]) if docs else "ls"


class ScriptedClient(OfflineClient):
    """A conversation-only fake answering from the ``EpisodeContext`` (module docstring)."""

    takes_episode = True

    def __init__(self, name: str) -> None:
        if name not in SCRIPTED_MODELS:
            raise PromptgridError(f"unknown scripted model {name!r}: use one of {', '.join(SCRIPTED_MODELS)}.")
        self.name = name

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Mapping[str, Any] | None = None,
                       episode: EpisodeContext | None = None) -> Completion:
        if episode is None:
            raise PromptgridError(f"{self.name} answers conversations only (it needs the episode's context).")
        if episode.step > 0:
            return self._end(episode)
        if self.name == "fake/ground-truth":
            calls = [(c.name, dict(c.arguments)) for c in episode.conversation.ground_truth[episode.turn]]
            if not calls:
                return self._end(episode)
            return self._calls(episode, calls)
        return self._attack(episode)

    def _attack(self, episode: EpisodeContext) -> Completion:
        attack = ATTACKS[episode.turn % len(ATTACKS)]
        if attack == "escape":
            return self._calls(episode, _escape_calls())
        if attack == "huge_numbers":
            return self._calls(episode, _number_calls(episode))
        if attack == "many_calls":
            return self._calls(episode, [(_first_function(episode), {})] * _MANY)
        name = _first_function(episode)
        if attack == "deep_nesting":
            nested = "[" * _DEPTH + "]" * _DEPTH
            if episode.variant.call_mode is CallMode.NATIVE:
                return self._native([(name, '{"value": ' + nested + "}")])
            fmt = episode.variant.return_format
            if fmt is ReturnFormat.PYTHON:
                text = f"[{name}(value={nested})]"
            elif fmt is ReturnFormat.JSON:
                text = f'[{{"function": "{name}", "parameters": {{"value": {nested}}}}}]'
            else:
                text = (f'<functions><function name="{name}"><param name="value" type="array">{nested}</param>'
                        "</function></functions>")
            return self._text(episode, text)
        code = f"[__import__('os').system('touch {CANARY}'), open('/tmp/{CANARY}', 'w')]"
        if episode.variant.call_mode is CallMode.NATIVE:
            return self._native([(code, "{}")])
        return self._text(episode, code)

    def _calls(self, episode: EpisodeContext, calls: list[tuple[str, dict[str, Any]]]) -> Completion:
        variant = episode.variant
        if variant.call_mode is CallMode.NATIVE:
            sent = {fn: tool for tool, fn in dict((episode.request or {}).get("tool_names", {})).items()}
            return self._native([(sent.get(name, name), json.dumps(args, default=str)) for name, args in calls])
        from promptgrid.matrix.calling import format_calls

        return self._text(episode, format_calls([{name: args} for name, args in calls], variant.return_format,
                                                variant.tool_call_tag))

    def _end(self, episode: EpisodeContext) -> Completion:
        variant = episode.variant
        if variant.call_mode is CallMode.CONSTRAINED:
            from promptgrid.matrix.calling import format_calls

            return self._text(episode, format_calls([], variant.return_format, variant.tool_call_tag))
        return Completion(text=_END_TEXT, finish_reason="stop", input_tokens=0, output_tokens=0, cost_usd=0.0,
                          model=self.name)

    def _text(self, episode: EpisodeContext, text: str) -> Completion:
        return Completion(text=text, finish_reason="stop", input_tokens=0, output_tokens=len(text) // 4 + 1,
                          cost_usd=0.0, model=self.name)

    def _native(self, calls: list[tuple[str, str]]) -> Completion:
        tool_calls = tuple({"id": f"fake_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                           for i, (name, args) in enumerate(calls))
        return Completion(text="", finish_reason="tool_calls", input_tokens=0, output_tokens=0, cost_usd=0.0,
                          model=self.name, tool_calls=tool_calls)
