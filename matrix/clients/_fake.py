"""``fake/...``: an in-process model with no HTTP and no litellm.

For trying a grid end to end without a provider, and for the runner's
100,000-job memory benchmark, where the HTTP stack would dominate. Model
strings: ``fake/auto`` (a call in the format the prompt asks for, as the fake
server answers), ``fake/prose``; append ``@SECONDS`` for a latency
(``fake/auto@0.1``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from promptgrid.errors import PromptgridError

from ._base import Completion, Messages

__all__ = ["FakeClient"]


class FakeClient:
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

    async def complete(self, messages: Messages, params: Mapping[str, Any]) -> Completion:
        from promptgrid.matrix.testing.fake_server import auto_answer

        if self.latency:
            await asyncio.sleep(self.latency)
        if self.mode == "prose":
            text = "I cannot call a function for this."
        else:
            text = auto_answer({"messages": messages})
        chars = sum(len(m["content"]) for m in messages)
        return Completion(text=text, finish_reason="stop", input_tokens=chars // 4 + 1,
                          output_tokens=len(text) // 4 + 1, cost_usd=0.0, model=self.name)

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        return 0.0

    async def aclose(self) -> None:
        return None
