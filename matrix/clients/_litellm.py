"""Any provider litellm knows: OpenAI, Anthropic, Bedrock, Vertex, Mistral, OpenAI-compatible servers.

litellm is imported on first use (it takes seconds), with its bundled price
map (``LITELLM_LOCAL_MODEL_COST_MAP=True``: no network at import). Its
exceptions are converted here, once, into ``CallError`` subclasses
(``promptgrid.providers.convert_exception``). Retries
are the runner's job, so the SDK's own retries are off (``max_retries=0``).
Tool definitions are never passed (``tools=``): the functions are in the
prompt, as BFCL's prompting mode does.

Secrets: the values of the variables the provider reads credentials from
(``credential_vars``) and the credentials inside ``api_base`` are added to
the run's ``Redactor``; an auth error says which variable to set or check.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from promptgrid.providers import (
    CallError,
    ErrorKind,
    call_error,
    convert_exception,
    credential_hint,
    credential_vars,
    import_litellm,
)

from ._base import Completion, Messages
from ._redact import Redactor

__all__ = ["LiteLLMClient"]


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
        self.api_key_env = api_key_env
        self._lt = import_litellm()
        self._redact = redactor or Redactor()
        self._redact.add_env(credential_vars(name, api_key_env))
        self._redact.add_url(api_base)
        self._api_key: str | None = None
        if api_key_env:
            self._api_key = os.environ.get(api_key_env)
        elif api_base and name.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            # OpenAI-compatible local servers need no key, but the SDK insists on one.
            self._api_key = "no-key-needed"

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
            error = convert_exception(exc, self._redact)
            if error.kind is ErrorKind.AUTH:
                hint = ("the server at api_base wants a key: export OPENAI_API_KEY=... (or name its variable with "
                        "api_key_env in a run config) and run again" if self._api_key == "no-key-needed"
                        else credential_hint(self.name, self.api_key_env))
                error = call_error(error.kind, f"{error.message} -- {hint}", status=error.status)
            raise error from None
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
