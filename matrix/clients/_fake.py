"""``fake/...``: an in-process model with no HTTP and no litellm.

For trying a grid end to end without a provider, and for the runner's
100,000-job memory benchmark, where the HTTP stack would dominate. Model
strings: ``fake/auto`` (a call of the first offered function, no arguments, in
the format the prompt asks for, as the fake server answers; the name is read
from the prompt's function docs in any doc format, or from the request's tools
in native mode, so it never calls a function it was not offered),
``fake/prose`` (prose, never a call); append ``@SECONDS`` for a latency
(``fake/auto@0.1``). ``FAKE_MODELS`` lists every fake model; the scripted ones
(``fake/ground-truth``, ``fake/hostile``, ``fake/noisy[:SEED]``, which answer
from the case or the conversation step they are asked about) are
``_scripted.ScriptedClient``, made here too (``make_fake_client``).

In a conversation, ``fake/auto`` calls at the first step of a turn and ends the
turn after the results of its calls (the last message a ``tool`` message, or a
user message holding the results list): a sentence, in constrained mode the
format's empty list, natively text without tool calls.

Call modes (``request``): ``fake/auto`` answers a native request with a tool
call of the first tool (empty arguments) and a constrained one in the
constrained return format (``promptgrid.matrix.calling.format_calls``: a call
of the first function, empty parameters), as the fake server does; it can do
every call mode (``unsupported`` is always ``None``). ``fake/prose`` answers
in prose whatever the mode (a native answer without tool calls).
"""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Mapping
from typing import Any

from promptgrid.errors import RunError

from ._base import Completion, Messages, OfflineClient

__all__ = ["FAKE_MODELS", "FakeClient", "make_fake_client"]

FAKE_MODELS = ("fake/auto", "fake/prose", "fake/ground-truth", "fake/hostile", "fake/noisy")
"""Every fake model (``fake/noisy`` also as ``fake/noisy:SEED``; any of them with ``@SECONDS``)."""

_RESULTS_PREFIXES = ("[{'role': 'tool'", '[{"role": "tool"', "<results>")


def make_fake_client(name: str) -> Any:
    """The client of a ``fake/...`` model string; ``RunError`` (naming the fake models) for an unknown one."""
    from ._scripted import ScriptedClient, parse_scripted

    if parse_scripted(name) is not None:
        return ScriptedClient(name)
    return FakeClient(name)


class FakeClient(OfflineClient):
    """Answers instantly (or after a fixed latency), free of charge."""

    def __init__(self, name: str) -> None:
        self.name = name
        mode, _, latency = name.removeprefix("fake/").partition("@")
        if mode not in ("auto", "prose"):
            near = difflib.get_close_matches(mode, [m.removeprefix("fake/") for m in FAKE_MODELS], n=1, cutoff=0.6)
            raise RunError(f"unknown fake model {name!r}: use one of {', '.join(FAKE_MODELS)} (fake/noisy:SEED "
                           "for another seed; optionally @SECONDS)." + (f" Did you mean 'fake/{near[0]}'?" if near
                                                                          else ""))
        self.mode = mode
        try:
            self.latency = float(latency) if latency else 0.0
        except ValueError:
            raise RunError(f"fake model {name!r}: latency after '@' must be a number of seconds.") from None

    async def complete(self, messages: Messages, params: Mapping[str, Any], *,
                       request: Mapping[str, Any] | None = None) -> Completion:
        from ._fake_answers import auto_answer, auto_tool_calls

        if self.latency:
            await asyncio.sleep(self.latency)
        mode = (request or {}).get("call_mode")
        tool_calls = None
        if self.mode == "prose":
            text = "I cannot call a function for this."
        elif _after_results(messages):
            text = _end_of_turn(request) if mode == "constrained" else "Done: the request is complete."
        elif mode == "native":
            text, tool_calls = "", tuple(auto_tool_calls(list(request["tools"])))  # type: ignore[index]
        elif mode == "constrained":
            text = _constrained_answer(messages, request)  # type: ignore[arg-type]
        else:
            text = auto_answer({"messages": messages})
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        return Completion(text=text, finish_reason="stop" if tool_calls is None else "tool_calls",
                          input_tokens=chars // 4 + 1, output_tokens=len(text) // 4 + 1, cost_usd=0.0,
                          model=self.name, tool_calls=tool_calls)


def _constrained_answer(messages: Messages, request: Mapping[str, Any]) -> str:
    """A call of the first documented function, empty parameters, in the constrained return format."""
    from promptgrid.matrix.calling import format_calls

    from ._fake_answers import first_function_name

    name = first_function_name(messages)
    return format_calls([{name: {}}], request["return_format"], bool(request.get("tool_call_tag")))


def _after_results(messages: Messages) -> bool:
    """Whether the last message gives back the results of calls (a conversation's step after the calls)."""
    last = messages[-1] if messages else {}
    return last.get("role") == "tool" or str(last.get("content") or "").startswith(_RESULTS_PREFIXES)


def _end_of_turn(request: Mapping[str, Any] | None) -> str:
    """The constrained answer that ends a conversation turn: the return format's empty list."""
    from promptgrid.matrix.calling import format_calls

    request = request or {}
    return format_calls([], request.get("return_format", "python"), bool(request.get("tool_call_tag")))
