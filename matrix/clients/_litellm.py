"""Any provider litellm knows: OpenAI, Anthropic, Bedrock, Vertex, Mistral, OpenAI-compatible servers.

litellm is imported on first use (it takes seconds), with its bundled price
map (``LITELLM_LOCAL_MODEL_COST_MAP=True``: no network at import). Its
exceptions are converted here, once, into ``CallError`` subclasses
(``promptgrid.providers.convert_exception``). Retries
are the runner's job, so the SDK's own retries are off (``max_retries=0``).
In prompt call mode no tool definitions are passed: the functions are in the
prompt, as BFCL's prompting mode does.

Call modes (``request``, ``Prompt.request``):

- native: ``tools=`` (the case's functions as tool schemas) and
  ``tool_choice="auto"``; the answer's ``tool_calls`` come back in
  ``Completion.tool_calls``. Unsupported (decided before sending) when no
  ``api_base`` is given and ``litellm.supports_function_calling`` says no; an
  OpenAI-compatible server given with ``api_base`` is trusted to take tools
  (vLLM needs ``--enable-auto-tool-choice --tool-call-parser ...``; a server
  that refuses them answers with an error, which is stored).
- constrained, by the model's ``constraints`` option (run config; ``CONSTRAINTS``):
  ``openai``: ``response_format`` with the OpenAI strict json_schema (json
  return format only; the answer comes in the ``{"calls": [...]}`` wrapper,
  unwrapped when scored); ``vllm``: the GBNF grammar as
  ``extra_body={"structured_outputs": {"grammar": ...}}`` (vLLM >= 0.10.2);
  ``llama.cpp``: ``extra_body={"grammar": ...}`` (llama.cpp's server);
  ``none``: constrained decoding unsupported. Not given: ``openai`` where
  ``litellm.supports_response_schema`` says the model takes a JSON schema,
  else unsupported. Python/XML on ``openai`` are unsupported (no grammars).

Several endpoints (``api_base`` a list: replicas of one model) go through
litellm's Router, least-busy with failover (``_router``), which drops an
endpoint broken for good (404, a refused key, connections refused for
``_router.GRACE_S``) and raises ``NoEndpointLeft`` when none is left; one
endpoint, or none, is today's direct ``acompletion``. A call that reached no
server (connection refused or reset; litellm reports it as a 500) is kind
``connection``, its message naming the endpoint. ``Completion.endpoint`` is the
``api_base`` that answered, without credentials.

Secrets: the values of the variables the provider reads credentials from
(``credential_vars``) and the credentials inside ``api_base`` are added to
the run's ``Redactor``; an auth error says which variable to set or check.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from promptgrid.providers import (
    CallError,
    ErrorKind,
    call_error,
    convert_exception,
    credential_hint,
    credential_vars,
    import_litellm,
    malformed_message,
    one_line,
)

from . import _router
from ._base import Completion, Messages, provider_count, usd
from ._redact import Redactor, redact_url

__all__ = ["CONSTRAINTS", "LiteLLMClient"]

#: Values of a model's ``constraints`` option: how constrained decoding is sent (see the module docstring).
CONSTRAINTS = ("openai", "vllm", "llama.cpp", "none")


class LiteLLMClient:
    """``litellm.acompletion`` for one model string (``openai/gpt-4o-mini``, ``bedrock/...``).

    ``api_base`` points the provider at another server (vLLM, llama.cpp server,
    Ollama, the fake server); a list of them (replicas of the model) is sent
    through litellm's Router (``_router``): ``api_bases`` holds them all,
    ``api_base`` the first. ``api_key_env`` names the environment variable
    holding the key (one key for every endpoint); the key itself is never
    stored or logged.
    """

    def __init__(self, name: str, *, api_base: str | Sequence[str] | None = None, api_key_env: str | None = None,
                 redactor: Redactor | None = None, constraints: str | None = None) -> None:
        self.name = name
        self.constraints = constraints
        self.api_bases: tuple[str, ...] = (api_base,) if isinstance(api_base, str) else tuple(api_base or ())
        self.api_base = self.api_bases[0] if self.api_bases else None
        self.api_key_env = api_key_env
        self._lt = import_litellm()
        self._redact = redactor or Redactor()
        self._redact.add_env(credential_vars(name, api_key_env))
        for url in self.api_bases:
            self._redact.add_url(url)
        self._api_key: str | None = None
        if api_key_env:
            self._api_key = os.environ.get(api_key_env)
        elif self.api_base and name.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            # OpenAI-compatible local servers need no key, but the SDK insists on one.
            self._api_key = "no-key-needed"
        # Recorded endpoints, without credentials, by the URL litellm reports (trailing slash ignored).
        self._endpoints = {url.rstrip("/"): redact_url(url) for url in self.api_bases}
        self._endpoints.update({split_query(url)[0].rstrip("/"): redact_url(url) for url in self.api_bases})
        self._direct = redact_url(self.api_base)  # the endpoint of every call without a Router (worked out once)
        # What every call without a Router is sent to: the endpoint without its query, which goes as extra_query.
        self._base: str | None
        self._query: dict[str, str]
        self._base, self._query = split_query(self.api_base) if self.api_base else (None, {})
        self._router: Any = None
        if len(self.api_bases) > 1:
            self._router, self._strategy = _router.make_router(self._lt, name, self.api_bases, self._api_key)

    def _says(self, check: Any) -> bool:
        """What a litellm capability check says of this model (unknown models: no)."""
        try:
            return bool(check(model=self.name))
        except Exception:  # noqa: BLE001 - litellm raises for models it does not know: not supported
            return False

    def _constraint(self) -> str | None:
        """How this model is constrained (``CONSTRAINTS`` value), or None when it cannot be."""
        if self.constraints is not None:
            return None if self.constraints == "none" else self.constraints
        return "openai" if self._says(self._lt.supports_response_schema) else None

    def unsupported(self, request: Mapping[str, Any]) -> str | None:
        mode = request.get("call_mode")
        if mode == "native":
            if self.api_base is None and not self._says(self._lt.supports_function_calling):
                return (f"litellm does not list {self.name} as supporting native function calling (tools=); "
                        "an OpenAI-compatible server given with api_base is assumed to")
            return None
        if mode != "constrained":
            return f"unknown call mode {mode!r}"
        how = self._constraint()
        unavailable = request.get("unavailable") or {}
        if how is None:
            why = "constraints: none" if self.constraints == "none" else (
                f"litellm lists no JSON-schema response_format for {self.name}")
            return (f"no constrained decoding for this model ({why}); for an OpenAI-compatible server with "
                    "grammars give --constraints vllm or llama.cpp (constraints: vllm or llama.cpp in the run "
                    "config, constraints= in Python)")
        if how == "openai":
            if request.get("response_format") is None:
                reason = unavailable.get("response_format", "no JSON schema for this answer")
                return f"{self.name} is constrained by a JSON schema only (response_format), and {reason}"
            return None
        if request.get("grammar") is None:
            return f"no grammar for this case: {unavailable.get('grammar', 'none was built')}"
        return None

    def _request_kwargs(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The litellm arguments that send ``request`` (``unsupported(request)`` was None)."""
        if request.get("call_mode") == "native":
            kwargs: dict[str, Any] = {"tools": [dict(t) for t in request["tools"]],
                                      "tool_choice": request.get("tool_choice", "auto")}
            if _has_mcp_gateway():
                # litellm versions with an MCP gateway import the optional `mcp` package for any call with
                # tools unless told to skip it; we never send MCP tools. Only those versions know the key.
                kwargs["_skip_mcp_handler"] = True
            return kwargs
        how = self._constraint()
        if how == "openai":
            return {"response_format": request["response_format"]}
        if how == "vllm":
            return {"extra_body": {"structured_outputs": {"grammar": request["grammar"]}}}
        return {"extra_body": {"grammar": request["grammar"]}}

    async def complete(self, messages: Messages, params: Mapping[str, Any], *,
                       request: Mapping[str, Any] | None = None) -> Completion:
        kwargs = self._call_kwargs(messages, params, request)
        try:
            if self._router is None:
                response = await self._lt.acompletion(**kwargs)
            else:  # endpoint and key are the deployment's
                response = await _router.send(self._lt, self._router, self._strategy, kwargs)
        except CallError:
            raise
        except Exception as exc:  # noqa: BLE001 - the one boundary where any provider error becomes ours
            raise self._call_error(exc) from None
        try:
            return self._completion(response)
        except CallError:
            raise
        except Exception as exc:  # noqa: BLE001 - an answer we cannot read is the server's fault: malformed
            raise call_error(ErrorKind.MALFORMED, one_line(malformed_message(f"{type(exc).__name__}: {exc}")),
                             endpoint=self._direct if self._router is None else None) from None

    def _call_kwargs(self, messages: Messages, params: Mapping[str, Any], request: Mapping[str, Any] | None
                     ) -> dict[str, Any]:
        """The keyword arguments of one ``acompletion`` call: the parameters given (``None`` left out), the
        request's, and without a router the endpoint and key."""
        kwargs: dict[str, Any] = {k: v for k, v in params.items() if v is not None}
        kwargs.update(model=self.name, messages=[dict(m) for m in messages], max_retries=0, drop_params=True)
        if request is not None:
            kwargs.update(self._request_kwargs(request))
        if self._router is None:
            if self._base:
                kwargs["api_base"] = self._base
                if self._query:
                    kwargs["extra_query"] = {**self._query, **kwargs.get("extra_query", {})}
            if self._api_key is not None:
                kwargs["api_key"] = self._api_key
        return kwargs

    def _call_error(self, exc: Exception) -> CallError:
        """A provider's exception as our ``CallError``: a refused connection as a connection error naming the
        endpoint, an unauthorised call with the hint that says which key to set."""
        error = convert_exception(exc, self._redact)
        message = error.message
        if error.kind in (ErrorKind.SERVER, ErrorKind.UNKNOWN) and _router.connection_failed(self._lt, exc):
            # litellm reports a refused connection as a 500 ("Connection error."): no server answered.
            error = call_error(ErrorKind.CONNECTION, message, status=None)
            message = f"no connection to {self._failed_endpoint(exc) or self.name}: {message}"
        if error.kind is ErrorKind.AUTH:
            hint = ("the server at api_base wants a key: export OPENAI_API_KEY=... (or name its variable with "
                    "api_key_env in a run config) and run again" if self._api_key == "no-key-needed"
                    else credential_hint(self.name, self.api_key_env))
            message = f"{message} -- {hint}"
        return call_error(error.kind, message, status=error.status, retry_after=error.retry_after,
                          endpoint=self._failed_endpoint(exc))

    def _completion(self, response: Any) -> Completion:
        try:
            choice = response.choices[0]
            text = choice.message.content
        except (AttributeError, IndexError, TypeError):
            raise call_error(ErrorKind.MALFORMED, malformed_message("it has no choices[0].message")) from None
        usage = getattr(response, "usage", None)
        hidden = getattr(response, "_hidden_params", None) or {}
        given = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
        input_tokens, output_tokens = provider_count(given[0]), provider_count(given[1])
        # litellm prices the usage as the server gave it: a count out of range (negative: a refund) prices nothing.
        in_range = all(raw is None or kept is not None for raw, kept in zip(given, (input_tokens, output_tokens),
                                                                          strict=True))
        return Completion(
            text=text if isinstance(text, str) else ("" if text is None else str(text)),
            tool_calls=_tool_calls(getattr(choice.message, "tool_calls", None)),
            finish_reason=getattr(choice, "finish_reason", None),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=usd(hidden.get("response_cost")) if in_range else None,
            model=getattr(response, "model", None),
            endpoint=self._endpoint(hidden.get("api_base")),
        )

    def _failed_endpoint(self, exc: BaseException) -> str | None:
        """The endpoint a failed call was last sent to: the Router stamps its deployment on the exception."""
        if self._router is None:
            return self._direct
        deployment = _router.deployment(self._router, getattr(exc, "failed_deployment_id", None) or "")
        return self._endpoint(getattr(getattr(deployment, "litellm_params", None), "api_base", None))

    def _endpoint(self, answered: Any) -> str | None:
        """The configured ``api_base`` that answered (litellm's report of it, matched to ours), without
        credentials; ``None`` for a model sent to its provider's default endpoint."""
        if self._router is None:
            return self._direct
        if not isinstance(answered, str):
            return None
        return self._endpoints.get(answered.rstrip("/")) or redact_url(answered)

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        try:
            prompt, completion = self._lt.cost_per_token(
                model=self.name, prompt_tokens=input_tokens, completion_tokens=output_tokens)
            return float(prompt) + float(completion)
        except Exception:  # noqa: BLE001 - unknown model or provider: price unknown, never a crash
            return None

    async def aclose(self) -> None:
        if self._router is not None:
            _router.retire(self._router)  # its callbacks leave litellm's process-wide lists


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its query string, and the query's parameters (``?api_key=...`` of some gateways).

    The OpenAI SDK (3.x, under litellm 1.110) appends the endpoint's path after the whole base URL,
    query included (``/v1?key=x/chat/completions``: a 404), so the query goes as ``extra_query``.
    """
    parts = urlsplit(url)
    if not parts.query:
        return url, {}
    return urlunsplit(parts._replace(query="", fragment="")), dict(parse_qsl(parts.query, keep_blank_values=True))


@functools.cache
def _has_mcp_gateway() -> bool:
    """This litellm routes calls with tools through its MCP gateway check (which imports ``mcp``)."""
    return importlib.util.find_spec("litellm.responses.mcp") is not None


def _tool_calls(raw: Any) -> tuple[dict[str, Any], ...] | None:
    """litellm's tool-call objects as plain OpenAI-shape dicts (``arguments`` as sent); None when there are none."""
    if not raw:
        return None
    out = []
    for call in raw:
        fn = getattr(call, "function", None)
        out.append({"id": getattr(call, "id", None), "type": getattr(call, "type", None) or "function",
                    "function": {"name": getattr(fn, "name", None), "arguments": getattr(fn, "arguments", None)}})
    return tuple(out)
