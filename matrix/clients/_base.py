"""What every model client offers, and the errors a call can end in.

A client turns chat messages into a ``Completion``. Third-party exceptions
(litellm's, llama-cpp's) are converted once, inside the client, into the
hierarchy below, so the runner decides "retry or record" from our classes
only::

    CallError                    a model call failed; stored as data, never crashes a run
    +-- RetryableError           sending the same request again may succeed
    |     (RATE_LIMIT 429, SERVER 5xx, TIMEOUT, CONNECTION, MALFORMED body)
    +-- FatalError               sending it again would fail the same way; recorded at once
          (AUTH, BAD_REQUEST, CONTEXT_LENGTH, NOT_FOUND, CONTENT_FILTER, UNKNOWN)

``CallError`` is not a ``PromptgridError``: it is not the user's fault and
the CLI never shows it as a failure of the command. Messages are redacted
(see ``_redact``) before they are stored.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "CallError",
    "Completion",
    "ErrorKind",
    "FatalError",
    "ModelClient",
    "RetryableError",
    "call_error",
]

Messages = Sequence[Mapping[str, str]]


class ErrorKind(str, enum.Enum):
    """Machine-readable class of a failed call (stored in the run's ``error_kind``)."""

    RATE_LIMIT = "rate_limit"
    SERVER = "server"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    MALFORMED = "malformed"
    AUTH = "auth"
    BAD_REQUEST = "bad_request"
    CONTEXT_LENGTH = "context_length"
    NOT_FOUND = "not_found"
    CONTENT_FILTER = "content_filter"
    UNKNOWN = "unknown"

    @property
    def retryable(self) -> bool:
        return self in _RETRYABLE


_RETRYABLE = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.SERVER, ErrorKind.TIMEOUT,
                        ErrorKind.CONNECTION, ErrorKind.MALFORMED})


class CallError(Exception):
    """A model call failed. ``kind`` says why; ``retry_after`` is the server's hint in seconds."""

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.kind.retryable

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"


class RetryableError(CallError):
    """The same request may succeed if sent again (after ``retry_after`` seconds if given)."""


class FatalError(CallError):
    """The same request would fail again; the runner records it without retrying."""


def call_error(kind: ErrorKind, message: str, *, status: int | None = None,
               retry_after: float | None = None) -> CallError:
    """Build the right subclass for ``kind``."""
    cls = RetryableError if kind.retryable else FatalError
    return cls(kind, message, status=status, retry_after=retry_after)


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
