"""What every model client offers.

A client turns chat messages into a ``Completion``. Third-party exceptions
(litellm's, llama-cpp's) are converted once, inside the client, into
``CallError`` subclasses (``promptgrid.providers``: the error taxonomy the
runner and the translation backend share), so the runner decides "retry or
record" from our classes only. Messages are redacted (see ``_redact``)
before they are stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["Completion", "Messages", "ModelClient"]

Messages = Sequence[Mapping[str, str]]


@dataclass(frozen=True)
class Completion:
    """One model answer."""

    text: str
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    """Price of this call in USD; None when the model's price is unknown."""
    model: str | None = None
    """The model id the provider says answered (may differ from the one asked)."""


@runtime_checkable
class ModelClient(Protocol):
    """A model behind one promptgrid model string.

    ``complete`` raises only ``CallError`` subclasses (and ``CancelledError``).
    ``params`` are generation parameters (temperature, max_tokens, seed,
    top_p, ...) plus, optionally, ``timeout`` in seconds.
    """

    name: str

    async def complete(self, messages: Messages, params: Mapping[str, Any]) -> Completion: ...

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        """Estimated USD for a call of this size; None when unknown (dry-run, --max-cost)."""
        ...

    async def aclose(self) -> None: ...
