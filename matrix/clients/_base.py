"""What every model client offers.

A client turns chat messages into a ``Completion``. Third-party exceptions
(litellm's, llama-cpp's) are converted once, inside the client, into
``CallError`` subclasses (``promptgrid.providers``: the error taxonomy the
runner and the translation backend share), so the runner decides "retry or
record" from our classes only. Messages are redacted (see ``_redact``)
before they are stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["MAX_COUNT", "MAX_FIELD_CHARS", "Completion", "JobIds", "Messages", "ModelClient", "OfflineClient",
           "provider_count", "provider_field", "usd"]

Messages = Sequence[Mapping[str, str]]

MAX_COUNT = 10**9
"""The largest count taken from a provider (a call's tokens, a batch's lines): beyond any context window or batch
limit, so a larger one is the provider's error (and past 2**63 it would not fit the store's integer columns)."""


def provider_count(value: Any) -> int | None:
    """A count a provider sent (a call's tokens, a batch's lines) as it is kept: a whole number from 0 to
    ``MAX_COUNT``; anything else (negative, beyond it, a float, a string, a bool) is unknown (``None``)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None


MAX_FIELD_CHARS = 200
"""The longest short text a provider sends beside an answer that is stored (the model that says it answered, the
finish reason)."""


def provider_field(value: object, exact: Callable[[str], str]) -> str | None:
    """A short text a provider sent beside its answer (``Completion.model``, ``finish_reason``) as it is stored:
    redacted like the answer (``exact``: ``Redactor.exact``; a server may echo the key it was sent anywhere in its
    reply), at most ``MAX_FIELD_CHARS`` characters; ``None`` where it is not a string."""
    if not isinstance(value, str):
        return None
    return exact(value)[:MAX_FIELD_CHARS]


def usd(value: Any) -> float | None:
    """A price in USD as it is kept: a finite number of 0 or more; anything else is unknown (``None``). A
    negative price would lower a run's recorded spend and let it pass ``--max-cost``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


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
    endpoint: str | None = None
    """The ``api_base`` that answered, credentials removed (one of a model's several endpoints); ``None``
    when the model is sent to its provider's default endpoint."""
    tool_calls: tuple[dict[str, Any], ...] | None = None
    """Native tool calls, OpenAI shape ``{"id", "type": "function", "function": {"name", "arguments"}}``
    (``arguments`` the raw JSON string); ``None`` when the answer has none. Stored with ``text`` as one
    JSON envelope (``promptgrid.matrix.clients.envelope``)."""


@dataclass(frozen=True, slots=True)
class JobIds:
    """Which job a call answers: passed as ``complete(..., job=JobIds(...))`` only to a client whose class sets
    ``takes_job_ids = True`` (``replay/PATH`` answers by these ids, not by the prompt; the scripted fakes from the
    variant and case); every other client is called as before. Rows of identical prompts share one call: the ids
    are those of the job it was sent for."""

    variant_id: str
    case_id: str
    repeat: int
    variant: Any = field(default=None, compare=False)
    """The job's ``Variant`` (``None`` when the caller has only ids): scripted fakes answer in its form."""
    case: Any = field(default=None, compare=False)
    """The job's ``Case`` (``None`` when the caller has only ids): scripted fakes answer from its ground truth."""


@runtime_checkable
class ModelClient(Protocol):
    """A model behind one promptgrid model string.

    ``complete`` raises only ``CallError`` subclasses (and ``CancelledError``).
    ``params`` are generation parameters (temperature, max_tokens, seed,
    top_p, ...) plus, optionally, ``timeout`` in seconds. ``request`` is the
    prompt's request pieces beyond the messages (``Prompt.request``: tools for
    native calls, schema and grammar for constrained ones; ``None`` in prompt
    mode); the runner passes it only when it is not ``None``, and only after
    ``unsupported(request)`` said ``None``. A client whose class sets
    ``takes_job_ids = True`` is also passed ``job`` (``JobIds``: the job's
    variant and case ids and repeat, and the ``Variant`` and ``Case``
    themselves), and ``request`` even when it is ``None``.
    """

    name: str

    async def complete(self, messages: Messages, params: Mapping[str, Any], *,
                       request: Mapping[str, Any] | None = None) -> Completion: ...

    def unsupported(self, request: Mapping[str, Any]) -> str | None:
        """Why this model cannot be sent ``request`` (one line), or ``None`` when it can.

        Decided before sending, from the client's configuration and the
        provider's advertised capabilities: such jobs are stored as
        ``unsupported`` and never sent.
        """
        ...

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        """Estimated USD for a call of this size; None when unknown (dry-run, --max-cost)."""
        ...

    async def aclose(self) -> None: ...


class OfflineClient:
    """What a client that answers in-process without a provider (``fake/...``, ``replay/...``) shares: every
    job can be sent, nothing costs anything, nothing to close."""

    def unsupported(self, request: Mapping[str, Any]) -> str | None:
        return None

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        return 0.0

    async def aclose(self) -> None:
        return None
