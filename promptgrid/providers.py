"""Calling LLM providers: the error taxonomy, the one provider-error mapping, the one retry policy.

Shared by every layer that calls a provider -- the run's model clients
(``promptgrid.matrix.clients``), the runner (``promptgrid.matrix.running``)
and the translation LLM backend (``promptgrid.translate``) -- so it lives in
the package root, below all of them. Third-party exceptions are converted
once, by :func:`convert_exception`, into this hierarchy::

    CallError                    a provider call failed; stored as data, never crashes a run
    +-- RetryableError           sending the same request again may succeed
    |     (RATE_LIMIT 429, SERVER 5xx, TIMEOUT, CONNECTION, MALFORMED body)
    +-- FatalError               sending it again would fail the same way; recorded at once
          (AUTH, BAD_REQUEST, CONTEXT_LENGTH, NOT_FOUND, CONTENT_FILTER, UNKNOWN)

``CallError`` is not a ``PromptgridError``: it is not the user's fault, and
the CLI never shows it as a failure of the command. Whether to try again, and
after how long, is :class:`RetryPolicy`'s answer for everyone; a server's
Retry-After is honoured up to ``retry_after_cap`` (default 120 s), so one
``Retry-After: 86400`` cannot freeze a run for a day.

Which environment variables a provider reads its credentials from is
:func:`credential_vars` (named in auth errors and redacted everywhere) and
:func:`missing_credentials` (checked by ``promptgrid run --dry-run``).

litellm is imported on first use only (:func:`import_litellm`; it takes
seconds): importing this module imports no provider SDK.
"""

from __future__ import annotations

import enum
import os
import random
import re
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

__all__ = [
    "DEFAULT_RETRY_AFTER_CAP_S",
    "DEFAULT_TIMEOUT_S",
    "MAX_MESSAGE_CHARS",
    "CallError",
    "ErrorKind",
    "FatalError",
    "RetryPolicy",
    "RetryableError",
    "call_error",
    "convert_exception",
    "kind_from_status",
    "malformed_message",
    "credential_hint",
    "credential_vars",
    "import_litellm",
    "missing_credentials",
    "one_line",
    "quiet_dependency_warnings",
    "TryAgain",
    "retried",
    "retried_sync",
]

DEFAULT_RETRY_AFTER_CAP_S = 120.0
"""The longest a server's Retry-After is obeyed before one retry (``--retry-after-cap``)."""

DEFAULT_TIMEOUT_S = 60.0
"""Seconds one provider request may take, where no run config says (``RetryPolicy.timeout``)."""

MAX_MESSAGE_CHARS = 500
"""The longest error message kept from a provider (``one_line``): a server may answer megabytes."""


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
    EXPIRED = "expired"
    """A batch line the provider never answered: its batch expired or was cancelled first (sending it again can
    succeed)."""
    UNKNOWN = "unknown"

    @property
    def retryable(self) -> bool:
        return self in _RETRYABLE


_RETRYABLE = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.SERVER, ErrorKind.TIMEOUT,
                        ErrorKind.CONNECTION, ErrorKind.MALFORMED, ErrorKind.EXPIRED})


class CallError(Exception):
    """A provider call failed. ``kind`` says why; ``retry_after`` is the server's hint in seconds; ``endpoint``
    the ``api_base`` that failed, without credentials, when the client knows it (a model with several)."""

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None,
                 retry_after: float | None = None, endpoint: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.endpoint = endpoint

    @property
    def retryable(self) -> bool:
        return self.kind.retryable

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"


class RetryableError(CallError):
    """The same request may succeed if sent again (after ``retry_after`` seconds if given)."""


class FatalError(CallError):
    """The same request would fail again; it is recorded (or reported) without retrying."""


def call_error(kind: ErrorKind, message: str, *, status: int | None = None,
               retry_after: float | None = None, endpoint: str | None = None) -> CallError:
    """Build the right subclass for ``kind``."""
    cls = RetryableError if kind.retryable else FatalError
    return cls(kind, message, status=status, retry_after=retry_after, endpoint=endpoint)


@dataclass(frozen=True)
class RetryPolicy:
    """How often to send a failed request again, and how long to wait before each retry.

    ``max_attempts`` counts the first try. The wait before retry ``n`` (1 =
    the first retry) is exponential backoff with jitter (AWS architecture
    blog, "Exponential Backoff And Jitter"): the window ``min(cap, base *
    2**(n-1))``, of which the share ``jitter`` is random -- ``jitter=1`` (the
    default) is full jitter, uniform in [0, window], right for many
    concurrent callers (the runner); ``jitter=0.5`` is "equal jitter",
    [window/2, window], a guaranteed wait for one caller retrying in sequence
    (the translation backend). Never shorter than the server's Retry-After,
    unless that is above ``retry_after_cap``: then the cap is waited (a server
    asking for a day gets its retries after the cap, and a run ends in
    ``max_attempts`` x the cap instead of days).
    """

    max_attempts: int = 4
    base: float = 1.0
    cap: float = 60.0
    jitter: float = 1.0
    retry_after_cap: float = DEFAULT_RETRY_AFTER_CAP_S
    timeout: float = DEFAULT_TIMEOUT_S
    """Seconds one attempt may take before it is a ``timeout`` error (the runner uses each model's own
    ``timeout``; the translation and batch backends this one)."""
    malformed_attempts: int = 2
    """At most this many attempts for a request answered with a body that cannot be read (``malformed``):
    one retry covers a truncated transfer; a server that answers garbage deterministically is not asked
    ``max_attempts`` times."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {self.max_attempts}")
        if not self.timeout > 0 or self.malformed_attempts < 1:
            raise ValueError(f"timeout must be positive and malformed_attempts at least 1 (timeout={self.timeout}, "
                             f"malformed_attempts={self.malformed_attempts})")
        if self.base < 0 or self.cap < 0 or self.retry_after_cap < 0:
            raise ValueError(f"base, cap and retry_after_cap must not be negative (base={self.base}, "
                             f"cap={self.cap}, retry_after_cap={self.retry_after_cap})")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter is a share of the window, from 0 to 1, not {self.jitter}")

    def allows(self, attempts: int, kind: ErrorKind | None = None) -> bool:
        """Whether a request that has been sent ``attempts`` times, and failed with ``kind``, may be sent again."""
        if kind is ErrorKind.MALFORMED:
            return attempts < min(self.max_attempts, self.malformed_attempts)
        return attempts < self.max_attempts

    def delay(self, attempt: int, retry_after: float | None = None, *,
              rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number ``attempt`` (1 = first retry).

        ``rand`` draws uniformly from [0, 1) (a seeded ``random.Random().random``
        makes the waits reproducible).
        """
        window = min(self.cap, self.base * (2 ** (attempt - 1)))
        delay = window * (1.0 - self.jitter) + rand() * window * self.jitter
        if retry_after is not None and retry_after > self.retry_after_cap:
            return self.retry_after_cap
        if retry_after is not None:
            # Honour the server, plus a little jitter so waiters do not return in lockstep.
            delay = max(delay, retry_after + rand() * min(1.0, 0.1 * retry_after + 0.05))
        return delay


_T = TypeVar("_T")


class TryAgain(Exception):
    """Raised by a ``retried`` attempt to be tried again at once, without counting against the policy."""


async def retried(attempt: Callable[[int], Awaitable[_T]], policy: RetryPolicy, *,
                  sleep: Callable[[float], Awaitable[Any]],
                  retryable: Callable[[CallError], bool] = lambda error: error.retryable,
                  on_retry: Callable[[CallError, int, float], None] | None = None,
                  rand: Callable[[], float] = random.random) -> _T:
    """promptgrid's retry loop for one request: ``attempt(n)`` (``n``: 1 for the first try) until it returns.

    A try that raises ``CallError`` is tried again when ``retryable(error)`` and
    the policy ``allows`` another (``RetryPolicy.allows``: its ``max_attempts``,
    fewer for malformed answers), after ``policy.delay`` (backoff with jitter, the
    server's Retry-After honoured up to the cap) slept with ``sleep``;
    ``on_retry(error, n, delay)`` hears each wait first. Otherwise the error is
    raised, as is any other exception at once. A try that raises ``TryAgain``
    is tried again at once and not counted (a timeout the caller knows was its
    own doing, such as a server busy with its other calls). Asynchronous code
    passes ``asyncio.sleep`` (or its own, which may raise to stop); synchronous
    code runs it with ``retried_sync``. Every request promptgrid retries goes
    through it: the runners' calls and steps, the batch API client, the
    translation backends.
    """
    tries = 0
    while True:
        tries += 1
        try:
            return await attempt(tries)
        except TryAgain:  # tried again at once, not counted against the policy
            tries -= 1
        except CallError as error:
            if not (retryable(error) and policy.allows(tries, error.kind)):
                raise
            delay = policy.delay(tries, error.retry_after, rand=rand)
            if on_retry is not None:
                on_retry(error, tries, delay)
            await sleep(delay)


def retried_sync(attempt: Callable[[int], _T], policy: RetryPolicy, *, sleep: Callable[[float], Any],
                 retryable: Callable[[CallError], bool] = lambda error: error.retryable,
                 on_retry: Callable[[CallError, int, float], None] | None = None,
                 rand: Callable[[], float] = random.random) -> _T:
    """``retried`` for synchronous code (``attempt`` and ``sleep`` plain functions): the same loop, run to its end
    without an event loop (nothing in it suspends: the attempt and the sleep are called in place)."""
    async def one(tries: int) -> _T:
        return attempt(tries)

    async def pause(seconds: float) -> None:
        sleep(seconds)

    coroutine = retried(one, policy, sleep=pause, retryable=retryable, on_retry=on_retry, rand=rand)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return cast(_T, done.value)
    coroutine.close()  # pragma: no cover - only an awaitable that suspends gets here, and none is given
    raise RuntimeError("retried_sync: the retry loop suspended")


_litellm: Any = None


def import_litellm() -> Any:
    """Import litellm once, offline (its bundled price map), quietly."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_LOG", "ERROR")
        import litellm

        litellm.suppress_debug_info = True  # no "Give Feedback" banners on our users' terminals
        _litellm = litellm
    return _litellm


# Where each litellm provider reads its credentials (validate_environment names only the missing ones, and
# not the alternatives such as a session token). Named in auth errors; their values are redacted.
_CREDENTIAL_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    "bedrock": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK"),
    "sagemaker": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    "azure": ("AZURE_API_KEY", "AZURE_AD_TOKEN", "AZURE_CLIENT_SECRET"),
    "vertex_ai": ("VERTEXAI_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "watsonx": ("WATSONX_APIKEY", "WATSONX_API_KEY", "WATSONX_TOKEN"),
}
# Providers whose credentials may come from elsewhere than the variables validate_environment asks for.
_OTHER_SOURCES: dict[str, tuple[str, ...]] = {
    "bedrock": ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_WEB_IDENTITY_TOKEN_FILE"),
    "sagemaker": ("AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "vertex_ai": ("GOOGLE_APPLICATION_CREDENTIALS",),
}


def _provider(model: str) -> str | None:
    try:
        return str(import_litellm().get_llm_provider(model=model)[1])
    except Exception:  # noqa: BLE001 - a model string litellm does not know has no known variables
        return None


def credential_vars(model: str, api_key_env: str | None = None) -> tuple[str, ...]:
    """The environment variables ``model``'s provider reads its credentials from (``api_key_env`` alone if given).

    From a small table of litellm providers, else the keys litellm's
    ``validate_environment`` reports missing; () for a provider it does not know.
    """
    if api_key_env:
        return (api_key_env,)
    provider = _provider(model)
    if provider in _CREDENTIAL_VARS:
        return _CREDENTIAL_VARS[provider]
    missing = import_litellm().validate_environment(model).get("missing_keys") or ()
    return tuple(v for v in missing if not v.endswith(("_API_BASE", "_API_VERSION", "_PROJECT", "_LOCATION")))


def missing_credentials(model: str, *, api_base: str | None = None, api_key_env: str | None = None) -> tuple[str, ...]:
    """The credential variables ``model`` needs that are not set (checked offline; nothing is called).

    Nothing is missing for a model sent to ``api_base`` (a server of your own
    may need no key; a 401 from it still stops the model, naming the
    variable), nor when a provider's other credential source is set
    (``AWS_PROFILE`` for Bedrock, either Gemini key).
    """
    if api_key_env:
        return () if os.environ.get(api_key_env) else (api_key_env,)
    if api_base:
        return ()
    provider = _provider(model)
    if provider is None or any(os.environ.get(v) for v in _OTHER_SOURCES.get(provider, ())):
        return ()
    return tuple(import_litellm().validate_environment(model).get("missing_keys") or ())


def credential_hint(model: str, api_key_env: str | None = None) -> str:
    """One sentence for an auth error: which variables hold the credentials, set or not, and what to do."""
    names = credential_vars(model, api_key_env)
    if not names:
        return "Check the provider's credentials."
    unset = [v for v in names if not os.environ.get(v)]
    if len(unset) == len(names):
        return f"{' / '.join(names)} not set: export it (export {names[0]}=...) and run again."
    given = ", ".join(v for v in names if v not in unset)
    return f"{given} set but refused by the provider: check its value, or the model's access."


def _retry_after(exc: BaseException) -> float | None:
    """Seconds from the Retry-After (or retry-after-ms) header of a failed response."""
    for attr in ("litellm_response_headers", "headers"):
        headers = getattr(exc, attr, None)
        if not headers:
            continue
        try:
            ms = headers.get("retry-after-ms")
            if ms is not None:
                return max(0.0, float(ms) / 1000)
            value = headers.get("retry-after")
            if value is not None:
                return max(0.0, float(value))
        except (TypeError, ValueError):
            continue  # an HTTP date: rare from LLM APIs; fall back to backoff
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers:
        try:
            value = headers.get("retry-after")
            return None if value is None else max(0.0, float(value))
        except (TypeError, ValueError):
            return None
    return None


def _from_pydantic(exc: BaseException) -> bool:
    """A pydantic ``ValidationError``: an SDK could not build its response object from what the server sent."""
    return type(exc).__module__.split(".", 1)[0] in ("pydantic", "pydantic_core")


def malformed_message(detail: str | None = None, what: str = "a chat completion") -> str:
    """The message of a ``malformed`` error: a 200 answer that cannot be read as ``what``."""
    return f"malformed answer: the server's response could not be read as {what}" + (f" ({detail})" if detail else "")


def kind_from_status(status: int | None) -> ErrorKind:
    """The error kind of an HTTP status (a provider error, a batch line's status code)."""
    if status is None:
        return ErrorKind.UNKNOWN
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status in (408, 504):
        return ErrorKind.TIMEOUT
    if status >= 500:
        return ErrorKind.SERVER
    if status in (401, 403):
        return ErrorKind.AUTH
    if status == 404:
        return ErrorKind.NOT_FOUND
    if 400 <= status < 500:
        return ErrorKind.BAD_REQUEST
    return ErrorKind.UNKNOWN


# Kinds a provider may report a missing or rejected key as (a 500 from a proxy, a 400).
_CREDENTIAL_SUSPECTS = frozenset({ErrorKind.SERVER, ErrorKind.CONNECTION, ErrorKind.BAD_REQUEST, ErrorKind.UNKNOWN})


def _missing_credentials(text: str) -> bool:
    low = text.lower()
    return "api_key" in low or "missing credentials" in low or "api key" in low


_TRACEBACK = "Traceback (most recent call last):"
# The last line of a Python traceback: ``pydantic_core._pydantic_core.ValidationError: 1 validation error for Message``.
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)):?(.*)$")
# A word of a message (one character class, so matching is linear), and a word that is a file path
# (``/x/site-packages/litellm/main.py``, ``C:\\x\\y.py:12``): never in a message we keep.
_WORD = re.compile(r"""[^\s"'<>()\[\]{},]+""")
_PY_FILE = re.compile(r"\.pyc?(?::\d+)?:?$")


def _exception_summary(text: str) -> str | None:
    """``Class: message`` of the exception a traceback in ``text`` ends with (plus the field a pydantic
    ``ValidationError`` names), without module path; None when there is no traceback."""
    if _TRACEBACK not in text:
        return None
    lines = text.split(_TRACEBACK, 1)[1].splitlines()
    for i, line in enumerate(lines):
        if line[:1].isspace() or not line.strip():
            continue
        match = _EXCEPTION_LINE.match(line.strip()[:2000])
        if match is None:
            continue
        summary = f"{match.group(1)}: {match.group(2).strip()}".rstrip(": ")
        field = next((x.strip() for x in lines[i + 1:i + 2] if x.strip() and not x[:1].isspace()), None)
        if match.group(1) == "ValidationError" and field:
            summary += f" (field {field})"
        return summary
    return None


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A provider's error text as one line for a terminal, a file or a store: a Python traceback inside it
    is cut down to the exception it ends with, file paths are dropped, whitespace is folded, and at most
    ``limit`` characters are kept. Redact *before* calling this (a cut key is no longer recognised)."""
    head, _, _ = text.partition(_TRACEBACK)
    summary = _exception_summary(text)
    if summary is not None:
        text = f"{head.strip()} ({summary})" if head.strip() else summary
    text = _WORD.sub(_no_path, text[:limit * 4])
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def _no_path(word: re.Match[str]) -> str:
    text = word.group()
    return "<file>" if ("/" in text or "\\" in text) and _PY_FILE.search(text) else text


def quiet_dependency_warnings() -> None:
    """Keep the warnings of provider SDKs and the libraries under them (pydantic serializer warnings about a
    server's malformed answer, deprecation notices) off the user's terminal: filtered by the module that
    warns, never by wording. The CLI installs this at start; promptgrid's own warnings are untouched."""
    for module in _DEPENDENCY_MODULES:
        warnings.filterwarnings("ignore", module=rf"{module}(\.|$)")


_DEPENDENCY_MODULES = ("litellm", "pydantic", "pydantic_core", "openai", "httpx", "httpcore", "aiohttp", "boto3",
                       "botocore", "s3transfer", "urllib3")


def convert_exception(exc: BaseException, redact: Callable[[str], str] | None = None) -> CallError:
    """Map a litellm/openai/httpx exception to our ``CallError``, its message passed through ``redact``.

    A missing key that a provider reports as a server, connection or request
    failure is ``AUTH``: sending it again cannot help.
    """
    ex = import_litellm().exceptions
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    text = f"{type(exc).__name__}: {exc}"
    message = one_line(redact(text) if redact is not None else text)
    kind = _exception_kind(exc, ex, status)
    if kind in _CREDENTIAL_SUSPECTS and _missing_credentials(str(exc)):
        kind = ErrorKind.AUTH
    if kind is ErrorKind.MALFORMED:
        message = _malformed_summary(exc, redact)
    retry_after = _retry_after(exc) if kind.retryable else None
    return call_error(kind, message, status=status, retry_after=retry_after)


def _exception_kind(exc: BaseException, ex: Any, status: int | None) -> ErrorKind:
    """The kind of ``exc``: by its class (``ex``: litellm's exceptions module; the first match wins, the most
    specific classes first), else a ``ValueError`` about JSON or from pydantic is ``MALFORMED``, else by
    ``status``."""
    by_class: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], ErrorKind], ...] = (
        (ex.ContextWindowExceededError, ErrorKind.CONTEXT_LENGTH),
        (ex.ContentPolicyViolationError, ErrorKind.CONTENT_FILTER),
        (ex.RateLimitError, ErrorKind.RATE_LIMIT),
        ((ex.Timeout, TimeoutError), ErrorKind.TIMEOUT),
        ((ex.AuthenticationError, ex.PermissionDeniedError), ErrorKind.AUTH),
        (ex.NotFoundError, ErrorKind.NOT_FOUND),
        ((ex.BadRequestError, ex.UnprocessableEntityError, ex.UnsupportedParamsError), ErrorKind.BAD_REQUEST),
        ((ex.InternalServerError, ex.ServiceUnavailableError, ex.BadGatewayError), ErrorKind.SERVER),
        ((ex.APIConnectionError, ConnectionError, OSError), ErrorKind.CONNECTION),
    )
    for classes, kind in by_class:
        if isinstance(exc, classes):
            return _server_kind(exc) if kind is ErrorKind.SERVER else kind
    if isinstance(exc, ValueError) and ("json" in str(exc).lower() or _from_pydantic(exc)):
        return ErrorKind.MALFORMED  # an answer that is not JSON, or not the shape the SDK's models take
    return kind_from_status(status)


def _server_kind(exc: BaseException) -> ErrorKind:
    """A server error that says its answer could not be parsed is ``MALFORMED``; any other is ``SERVER``."""
    low = str(exc).lower()
    return ErrorKind.MALFORMED if ("unterminated" in low or "expecting" in low and "json" in low
                                   or "invalid response object" in low) else ErrorKind.SERVER


def _malformed_summary(exc: BaseException, redact: Callable[[str], str] | None) -> str:
    """The one-line message of a ``MALFORMED`` error: what was wrong, not litellm's traceback and the body."""
    # litellm quotes its own traceback and the whole body; say what was wrong, in one line.
    detail = _exception_summary(str(exc))
    if detail is None and _from_pydantic(exc):  # "3 validation errors for LiteLLMBatch": its first line
        detail = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    return one_line(malformed_message(redact(detail) if redact is not None and detail else detail))
