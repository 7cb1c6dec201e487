"""Any provider litellm knows: OpenAI, Anthropic, Bedrock, Vertex, Mistral, OpenAI-compatible servers.

litellm is imported on first use (it takes seconds), with its bundled price
map (``LITELLM_LOCAL_MODEL_COST_MAP=True``: no network at import). Its
exceptions are converted here, once, into ``CallError`` subclasses. Retries
are the runner's job, so the SDK's own retries are off (``max_retries=0``).
Tool definitions are never passed (``tools=``): the functions are in the
prompt, as BFCL's prompting mode does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ._base import CallError, Completion, ErrorKind, Messages, call_error
from ._redact import Redactor

__all__ = ["LiteLLMClient", "convert_exception", "import_litellm"]

_litellm: Any = None


def import_litellm() -> Any:
    """Import litellm once, offline, quietly."""
    global _litellm
    if _litellm is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_LOG", "ERROR")
        import litellm

        litellm.suppress_debug_info = True
        _litellm = litellm
    return _litellm


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


def _kind_from_status(status: int | None) -> ErrorKind:
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


def convert_exception(exc: BaseException, redact: Redactor) -> CallError:
    """Map a litellm/openai/httpx exception to our ``CallError`` (message redacted)."""
    lt = import_litellm()
    ex = lt.exceptions
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    message = redact(f"{type(exc).__name__}: {exc}")
    kind: ErrorKind
    if isinstance(exc, ex.ContextWindowExceededError):
        kind = ErrorKind.CONTEXT_LENGTH
    elif isinstance(exc, ex.ContentPolicyViolationError):
        kind = ErrorKind.CONTENT_FILTER
    elif isinstance(exc, ex.RateLimitError):
        kind = ErrorKind.RATE_LIMIT
    elif isinstance(exc, (ex.Timeout, TimeoutError)):
        kind = ErrorKind.TIMEOUT
    elif isinstance(exc, (ex.AuthenticationError, ex.PermissionDeniedError)):
        kind = ErrorKind.AUTH
    elif isinstance(exc, ex.NotFoundError):
        kind = ErrorKind.NOT_FOUND
    elif isinstance(exc, (ex.BadRequestError, ex.UnprocessableEntityError, ex.UnsupportedParamsError)):
        kind = ErrorKind.BAD_REQUEST
    elif isinstance(exc, (ex.InternalServerError, ex.ServiceUnavailableError, ex.BadGatewayError)):
        low = str(exc).lower()
        kind = ErrorKind.MALFORMED if ("unterminated" in low or "expecting" in low and "json" in low) else ErrorKind.SERVER
    elif isinstance(exc, ex.APIConnectionError):
        kind = ErrorKind.CONNECTION
    elif isinstance(exc, (ConnectionError, OSError)):
        kind = ErrorKind.CONNECTION
    elif isinstance(exc, ValueError) and "json" in str(exc).lower():
        kind = ErrorKind.MALFORMED
    else:
        kind = _kind_from_status(status)
    retry_after = _retry_after(exc) if kind.retryable else None
    return call_error(kind, message, status=status, retry_after=retry_after)


class LiteLLMClient:
    """``litellm.acompletion`` for one model string (``openai/gpt-4o-mini``, ``bedrock/...``).

    ``api_base`` points the provider at another server (vLLM, llama.cpp server,
    Ollama, the fake server). ``api_key_env`` names the environment variable
    holding the key; the key itself is never stored or logged.
    """

    def __init__(self, name: str, *, api_base: str | None = None, api_key_env: str | None = None,
                 redactor: Redactor | None = None) -> None:
        self.name = name
        self.api_base = api_base
        self._redact = redactor or Redactor()
        self._api_key: str | None = None
        if api_key_env:
            self._api_key = os.environ.get(api_key_env)
            self._redact.add(self._api_key)
        elif api_base and name.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            # OpenAI-compatible local servers need no key, but the SDK insists on one.
            self._api_key = "no-key-needed"
        self._lt = import_litellm()

    async def complete(self, messages: Messages, params: Mapping[str, Any]) -> Completion:
        kwargs: dict[str, Any] = {k: v for k, v in params.items() if v is not None}
        kwargs.update(model=self.name, messages=[dict(m) for m in messages], max_retries=0, drop_params=True)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key
        try:
            response = await self._lt.acompletion(**kwargs)
        except CallError:
            raise
        except Exception as exc:  # noqa: BLE001 - the one boundary where any provider error becomes ours
            raise convert_exception(exc, self._redact) from None
        return self._completion(response)

    def _completion(self, response: Any) -> Completion:
        try:
            choice = response.choices[0]
            text = choice.message.content
        except (AttributeError, IndexError, TypeError):
            raise call_error(ErrorKind.MALFORMED, "response has no choices[0].message") from None
        usage = getattr(response, "usage", None)
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost")
        return Completion(
            text=text if isinstance(text, str) else ("" if text is None else str(text)),
            finish_reason=getattr(choice, "finish_reason", None),
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            cost_usd=float(cost) if isinstance(cost, (int, float)) else None,
            model=getattr(response, "model", None),
        )

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        try:
            prompt, completion = self._lt.cost_per_token(
                model=self.name, prompt_tokens=input_tokens, completion_tokens=output_tokens)
            return float(prompt) + float(completion)
        except Exception:  # noqa: BLE001 - unknown model or provider: price unknown, never a crash
            return None

    async def aclose(self) -> None:
        return None
