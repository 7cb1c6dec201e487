"""``fake/...``: an in-process model with no HTTP and no litellm.

For trying a grid end to end without a provider, and for the runner's
100,000-job memory benchmark, where the HTTP stack would dominate. Model
strings: ``fake/auto`` (a call of the first offered function, no arguments, in
the format the prompt asks for, as the fake server answers; the name is read
from the prompt's function docs in any doc format, or from the request's tools
in native mode, so it never calls a function it was not offered),
``fake/prose`` (prose, never a call); append ``@SECONDS`` for a latency
(``fake/auto@0.1``).

Call modes (``request``): ``fake/auto`` answers a native request with a tool
call of the first tool (empty arguments) and a constrained one in the
constrained return format (``promptgrid.matrix.calling.format_calls``: a call
of the first function, empty parameters), as the fake server does; it can do
every call mode (``unsupported`` is always ``None``). ``fake/prose`` answers
in prose whatever the mode (a native answer without tool calls).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from promptgrid.errors import PromptgridError

from ._base import Completion, Messages, OfflineClient

__all__ = ["FakeClient"]


class FakeClient(OfflineClient):
    """Answers instantly (or after a fixed latency), free of charge."""

    def __init__(self, name: str) -> None:
        self.name = name
        mode, _, latency = name.removeprefix("fake/").partition("@")
        if mode not in ("auto", "prose"):
            raise PromptgridError(f"unknown fake model {name!r}: use fake/auto or fake/prose (optionally @SECONDS).")
        self.mode = mode
        try:
            self.latency = float(latency) if latency else 0.0
        except ValueError:
            raise PromptgridError(f"fake model {name!r}: latency after '@' must be a number of seconds.") from None

    async def complete(self, messages: Messages, params: Mapping[str, Any], *,
                       request: Mapping[str, Any] | None = None) -> Completion:
        from promptgrid.matrix.testing.fake_server import auto_answer, auto_tool_calls

        if self.latency:
            await asyncio.sleep(self.latency)
        mode = (request or {}).get("call_mode")
        tool_calls = None
        if self.mode == "prose":
            text = "I cannot call a function for this."
        elif mode == "native":
            text, tool_calls = "", tuple(auto_tool_calls(list(request["tools"])))  # type: ignore[index]
        elif mode == "constrained":
            text = _constrained_answer(messages, request)  # type: ignore[arg-type]
        else:
            text = auto_answer({"messages": messages})
        chars = sum(len(m["content"]) for m in messages)
        return Completion(text=text, finish_reason="stop" if tool_calls is None else "tool_calls",
                          input_tokens=chars // 4 + 1, output_tokens=len(text) // 4 + 1, cost_usd=0.0,
                          model=self.name, tool_calls=tool_calls)


def _constrained_answer(messages: Messages, request: Mapping[str, Any]) -> str:
    """A call of the first documented function, empty parameters, in the constrained return format."""
    from promptgrid.matrix.calling import format_calls
    from promptgrid.matrix.testing.fake_server import first_function_name

    name = first_function_name(messages)
    return format_calls([{name: {}}], request["return_format"], bool(request.get("tool_call_tag")))
