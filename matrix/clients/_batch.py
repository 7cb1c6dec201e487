"""Provider batch APIs: what a batch backend does, and the OpenAI-compatible one (OpenAI, Azure, vLLM).

A batch backend turns one model's calls into lines of an input file, uploads
it, creates a batch, reports its state, downloads the results and turns each
result line back into a ``Completion`` or a ``CallError`` joined by
``custom_id`` (the job key). The runner side (``promptgrid.matrix.running.batch``)
records every step in the store before and after it happens, and uses the
``find_*`` methods to recover a step a killed process did without hearing the
answer: a file uploaded but not recorded is found by its name, a batch created
but not recorded by its input file. So a job is never uploaded or put in a
batch twice.

The OpenAI batch line format (also what ``vllm run-batch`` reads and writes,
and what ``promptgrid export-batch`` / ``import-batch`` use)::

    {"custom_id": KEY, "method": "POST", "url": "/v1/chat/completions", "body": {chat completion request}}
    {"id": ..., "custom_id": KEY, "response": {"status_code": 200, "request_id": ..., "body": {chat completion}},
     "error": null}

The request body is what the online call sends (``LiteLLMClient``): model
(without litellm's provider prefix), messages, generation parameters, and the
call mode's pieces (tools, response_format, or the grammar in the field the
model's ``constraints`` names). Result lines are untrusted: parsed with the
bounded JSON reader, any shape error is a ``malformed`` error for that line.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from promptgrid.providers import (
    CallError,
    ErrorKind,
    RetryPolicy,
    call_error,
    convert_exception,
    kind_from_status,
    malformed_message,
    one_line,
    retried,
)
from promptgrid.safeio import parse_json_line

from ._base import Completion, Messages, provider_count

__all__ = [
    "BATCH_ENDPOINT",
    "BatchBackend",
    "BatchStatus",
    "LineResult",
    "OpenAIBatchBackend",
    "batch_kind",
    "body_model",
    "completion_from_body",
    "decode_result",
    "decode_result_line",
    "encode_request_line",
]

BATCH_ENDPOINT = "/v1/chat/completions"

#: litellm provider prefixes whose servers speak the OpenAI files + batches API.
OPENAI_BATCH_PROVIDERS = ("openai", "azure", "hosted_vllm")

#: Terminal states of a batch (``BatchStatus.state``); anything else is ``running``.
ENDED_STATES = ("completed", "failed", "expired", "cancelled")


def batch_kind(model: str) -> str | None:
    """Which batch backend serves ``model``: ``openai``, ``bedrock``, or ``None`` (no batch API we drive)."""
    provider = model.split("/", 1)[0] if "/" in model else ""
    if provider in OPENAI_BATCH_PROVIDERS:
        return "openai"
    if provider == "bedrock":
        return "bedrock"
    return None


def body_model(model: str) -> str:
    """The ``model`` field of a request body: litellm's provider prefix removed (``openai/gpt-4o`` -> ``gpt-4o``)."""
    return model.split("/", 1)[1] if "/" in model else model


@dataclass(frozen=True)
class BatchStatus:
    """What the provider says about a batch."""

    state: str
    """``running``, or one of ``ENDED_STATES``."""
    provider_state: str
    """The provider's own word (validating, in_progress, finalizing, ...)."""
    output_file: str | None = None
    error_file: str | None = None
    total: int | None = None
    completed: int | None = None
    failed: int | None = None
    errors: str | None = None
    """The batch-level errors (a batch that failed validation), one line."""

    def to_detail(self) -> str:
        """JSON for ``BatchRecord.detail``."""
        return json.dumps({"state": self.state, "provider_state": self.provider_state, "total": self.total,
                           "completed": self.completed, "failed": self.failed, "errors": self.errors},
                          separators=(",", ":"))


LineResult = tuple[str, Completion | CallError]
"""One result line of a batch: the job's key (its ``custom_id``) and the line's answer, or why it has none. A
pair, not a record of its own: the runner makes the ``Step`` it stores of it once it knows the job (the native
envelope, redaction, the batch price)."""


class BatchBackend(Protocol):
    """One model's batch API. Methods raise only ``CallError`` (and ``CancelledError``)."""

    kind: str
    max_requests: int
    """Most lines per batch the provider takes."""
    max_bytes: int
    """Largest input file the provider takes."""

    def encode(self, key: str, messages: Messages, params: Mapping[str, Any],
               request: Mapping[str, Any] | None) -> bytes:
        """One input line (newline included) whose result comes back under ``key``."""
        ...

    def decode(self, line: bytes, where: str) -> LineResult:
        """One result line; raises ``CallError`` (malformed) only when not even its key can be read."""
        ...

    async def upload(self, name: str, data: bytes) -> str: ...

    async def find_upload(self, name: str) -> str | None:
        """The id of a file this backend uploaded under ``name`` earlier, if the provider still has it."""
        ...

    async def submit(self, file_id: str, name: str) -> str: ...

    async def find_submitted(self, file_id: str, name: str) -> str | None:
        """The id of a batch already created from ``file_id``, if any."""
        ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def download(self, file_id: str, out: BinaryIO) -> int:
        """Write the file's bytes to ``out`` as they arrive (never the whole file in memory); returns how many.
        A retried download starts ``out`` again from its beginning."""
        ...

    async def cancel(self, batch_id: str) -> None: ...

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        """USD of one line at the batch price; None when unknown."""
        ...


class _Final(Exception):
    """Carries a ``CallError`` through ``retried`` without a retry (one that is ours already, not the provider's)."""

    def __init__(self, error: CallError) -> None:
        super().__init__(str(error))
        self.error = error


_OPENAI_FILES = frozenset({"openai", "hosted_vllm", "litellm_proxy"})
"""Providers whose files API is OpenAI's own (``GET /files/{id}/content``), downloaded as a stream."""

_CHUNK = 1 << 20
"""Bytes read at a time from a downloaded batch file."""


# --------------------------------------------------------------------------- the OpenAI line format


def encode_request_line(key: str, body: Mapping[str, Any]) -> bytes:
    """``{"custom_id", "method", "url", "body"}`` as one compact JSON line."""
    line = {"custom_id": key, "method": "POST", "url": BATCH_ENDPOINT, "body": dict(body)}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8") + b"\n"


def completion_from_body(body: Any, *, where: str = "answer") -> Completion:
    """A chat-completion response body (a dict, as the server sent it) as a ``Completion``.

    Raises ``CallError`` (malformed) when it has no ``choices[0].message``.
    """
    try:
        choice = body["choices"][0]
        message = choice["message"]
        if not isinstance(message, Mapping):
            raise TypeError
    except (KeyError, IndexError, TypeError):
        raise call_error(ErrorKind.MALFORMED, f"{where}: response body has no choices[0].message") from None
    text = message.get("content")
    usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
    raw_calls = message.get("tool_calls")
    tool_calls = None
    if isinstance(raw_calls, list) and raw_calls:
        tool_calls = tuple(
            {"id": c.get("id"), "type": c.get("type") or "function",
             "function": {"name": (c.get("function") or {}).get("name"),
                          "arguments": (c.get("function") or {}).get("arguments")}}
            for c in raw_calls if isinstance(c, Mapping) and isinstance(c.get("function"), Mapping))
    return Completion(
        text=text if isinstance(text, str) else ("" if text is None else json.dumps(text)),
        tool_calls=tool_calls or None,
        finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        input_tokens=provider_count(usage.get("prompt_tokens")),
        output_tokens=provider_count(usage.get("completion_tokens")),
        model=body.get("model") if isinstance(body.get("model"), str) else None,
    )



def decode_result_line(line: bytes | str, where: str) -> LineResult:
    """One OpenAI batch output (or error file) line as a ``LineResult``.

    Raises ``CallError`` (malformed) naming ``where`` when the line is not a
    JSON object with a string ``custom_id``: such a line cannot be joined to a
    job. A line with a ``custom_id`` but a bad response is that job's
    malformed error.
    """
    try:
        obj = parse_json_line(line.decode("utf-8") if isinstance(line, bytes) else line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise call_error(ErrorKind.MALFORMED, f"{where}: not a JSON line ({exc})") from None
    return decode_result(obj, where)


def decode_result(obj: Any, where: str) -> LineResult:
    """A result line already parsed (by ``safeio.read_json_lines``) as a ``LineResult``; raises like
    ``decode_result_line`` when it has no string ``custom_id``."""
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str) or not obj["custom_id"]:
        raise call_error(ErrorKind.MALFORMED, f"{where}: a result line needs a string custom_id")
    key = obj["custom_id"]
    error = obj.get("error")
    response = obj.get("response")
    if isinstance(error, Mapping) and error:
        code = str(error.get("code") or "")
        message = str(error.get("message") or code or "error")[:2000]
        kind = ErrorKind.EXPIRED if code in ("batch_expired", "batch_cancelled") else kind_from_status(
            response.get("status_code") if isinstance(response, Mapping) else None)
        return key, call_error(kind, f"{code}: {message}" if code else message)
    if not isinstance(response, Mapping):
        return key, call_error(ErrorKind.MALFORMED, f"{where}: no response and no error")
    status = response.get("status_code")
    body = response.get("body")
    if status != 200:
        detail = body.get("error") if isinstance(body, Mapping) else None
        message = (detail.get("message") if isinstance(detail, Mapping) else None) or f"status {status}"
        kind = kind_from_status(status if isinstance(status, int) else None)
        return key, call_error(kind, str(message)[:2000], status=status if isinstance(status, int) else None)
    try:
        return key, completion_from_body(body, where=where)
    except CallError as exc:
        return key, exc


# --------------------------------------------------------------------------- OpenAI-compatible backend


class OpenAIBatchBackend:
    """The files + batches API of OpenAI, Azure OpenAI and vLLM's OpenAI-compatible server, through litellm.

    ``client`` is the model's ``LiteLLMClient`` (its api_base, key and
    constraint settings are reused, so a batch line carries exactly what the
    online call would send). Limits default to OpenAI's: 50,000 requests and
    200 MB per input file (a little less is used, to stay clear of rounding).
    Price: the model's batch price from litellm's price map where it lists
    one, else half the online price (OpenAI's and Azure's batch discount);
    unknown for a self-hosted server.

    Every call's error message goes through the client's ``Redactor``. ``retry`` is the shared
    ``RetryPolicy``: each control call (list, retrieve, create a batch, cancel) gets its ``timeout``, and the
    calls that only read (list, retrieve, download) are sent again on a retryable error as it says (a
    malformed answer once); an upload or a create is never sent twice (a retry could make two).
    """

    kind = "openai"

    def __init__(self, client: Any, *, max_requests: int = 50_000, max_bytes: int = 190 * 1024 * 1024,
                 retry: RetryPolicy | None = None, sleep: Any = None) -> None:
        self.client = client
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.provider = client.name.split("/", 1)[0]
        self._lt = client._lt
        self.retry = retry or RetryPolicy()
        self._sleep = sleep or asyncio.sleep

    def _kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"custom_llm_provider": self.provider}
        if self.client.api_base:
            kwargs["api_base"] = self.client.api_base
        if self.client._api_key is not None:
            kwargs["api_key"] = self.client._api_key
        return kwargs

    def encode(self, key: str, messages: Messages, params: Mapping[str, Any],
               request: Mapping[str, Any] | None) -> bytes:
        body: dict[str, Any] = {"model": body_model(self.client.name), "messages": [dict(m) for m in messages]}
        body.update({k: v for k, v in params.items() if v is not None and k != "timeout"})
        if request is not None:
            pieces = dict(self.client._request_kwargs(request))
            pieces.pop("_skip_mcp_handler", None)
            body.update(pieces.pop("extra_body", {}))
            body.update(pieces)
        return encode_request_line(key, body)

    def decode(self, line: bytes, where: str) -> LineResult:
        return decode_result_line(line, where)

    async def _call(self, fn: str, *, reads: bool = True, bounded: bool = True, **kwargs: Any) -> Any:
        """``litellm.<fn>``; ``reads``: sending it again is harmless (retried by the policy); ``bounded``: it
        gets the policy's ``timeout`` (file transfers, which may be large, do not)."""
        async def attempt(_tries: int) -> Any:
            try:
                call = getattr(self._lt, fn)(**kwargs, **self._kwargs())
                return await (asyncio.wait_for(call, self.retry.timeout) if bounded else call)
            except CallError as exc:  # already ours (said by the client's own checks): final, not retried
                raise _Final(exc) from None
            except Exception as exc:  # noqa: BLE001 - the boundary where provider errors become ours
                error = (call_error(ErrorKind.TIMEOUT, f"batch API ({fn}): no answer within {self.retry.timeout:g} s")
                         if isinstance(exc, TimeoutError) else convert_exception(exc, self.client._redact))
                if error.kind is ErrorKind.MALFORMED:  # not a chat completion that was asked for: say what was
                    error = call_error(ErrorKind.MALFORMED, error.message.replace(
                        malformed_message(), malformed_message(what=f"a {fn} answer"), 1), status=error.status)
                raise error from None

        try:
            return await retried(attempt, self.retry, sleep=self._sleep, retryable=lambda e: reads and e.retryable)
        except _Final as final:
            raise final.error from None

    async def upload(self, name: str, data: bytes) -> str:
        created = await self._call("acreate_file", reads=False, bounded=False, file=(name, data, "application/jsonl"),
                                   purpose="batch")
        return str(created.id)

    async def find_upload(self, name: str) -> str | None:
        listing = await self._call("afile_list", purpose="batch")
        for f in _items(listing):
            if _get(f, "filename") == name:
                return str(_get(f, "id"))
        return None

    async def submit(self, file_id: str, name: str) -> str:
        batch = await self._call("acreate_batch", reads=False, completion_window="24h", endpoint=BATCH_ENDPOINT,
                                 input_file_id=file_id, metadata={"promptgrid_batch": name})
        return str(batch.id)

    async def find_submitted(self, file_id: str, name: str) -> str | None:
        after = None
        for _ in range(50):  # newest first: a batch created by a killed run is among the recent ones
            listing = await self._call("alist_batches", after=after, limit=100)
            items = _items(listing)
            for b in items:
                if _get(b, "input_file_id") == file_id:
                    return str(_get(b, "id"))
            if not items or not _get(listing, "has_more"):
                return None
            after = _get(items[-1], "id")
        return None

    async def status(self, batch_id: str) -> BatchStatus:
        # litellm downloads a finished batch's output on retrieve to log its cost unless told not to: we
        # download it once ourselves, when collecting.
        b = await self._call("aretrieve_batch", batch_id=batch_id,
                             litellm_metadata={"batch_ignore_default_logging": True})
        provider_state = _get(b, "status") or "unknown"
        files = (_get(b, "output_file_id"), _get(b, "error_file_id"))
        if (not isinstance(provider_state, str) or len(provider_state) > 64
                or not all(f is None or (isinstance(f, str) and len(f) <= 256) for f in files)):
            raise call_error(ErrorKind.MALFORMED, f"batch API: the answer about batch {batch_id[:80]} has no "
                             "readable status and file ids")
        state = provider_state if provider_state in ENDED_STATES else "running"
        counts = _get(b, "request_counts")
        errors = _get(b, "errors")
        error_items = _items(errors) if errors is not None else []
        message = "; ".join(
            f"{_get(e, 'code') or 'error'}: {_get(e, 'message') or ''}"
            + (f" (line {_get(e, 'line')})" if _get(e, "line") is not None else "") for e in error_items[:5]) or None
        return BatchStatus(state=state, provider_state=provider_state, output_file=files[0], error_file=files[1],
                           total=provider_count(_get(counts, "total")),
                           completed=provider_count(_get(counts, "completed")),
                           failed=provider_count(_get(counts, "failed")),
                           errors=one_line(self.client._redact(message), 2000) if message else None)

    async def download(self, file_id: str, out: BinaryIO) -> int:
        if self.provider in _OPENAI_FILES:
            return await self._stream(file_id, out)
        # Other providers' files (Azure, ...) through litellm, which reads the whole body before returning it.
        content = await self._call("afile_content", bounded=False, file_id=file_id)
        data = getattr(content, "content", content)
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise call_error(ErrorKind.MALFORMED, f"file {file_id}: content is not bytes")
        out.seek(0)
        out.truncate()
        out.write(data)
        return len(data)

    async def _stream(self, file_id: str, out: BinaryIO) -> int:
        """``GET {api_base}/files/{id}/content`` with the OpenAI SDK's streaming response, written to ``out`` in
        chunks as they arrive: litellm's ``afile_content`` holds the whole body (a 1 GB output cost 3.4 GB).
        Each try is bounded by the policy's ``timeout`` between chunks, not over the whole transfer."""
        import openai  # litellm's own dependency

        client = openai.AsyncOpenAI(base_url=self.client.api_base or None, api_key=self.client._api_key or "EMPTY",
                                    max_retries=0, timeout=self.retry.timeout)
        async def attempt(_tries: int) -> int:
            out.seek(0)
            out.truncate()
            written = 0
            try:
                async with client.files.with_streaming_response.content(file_id) as response:
                    async for chunk in response.iter_bytes(_CHUNK):
                        out.write(chunk)
                        written += len(chunk)
                return written
            except Exception as exc:  # noqa: BLE001 - the boundary where provider errors become ours
                raise convert_exception(exc, self.client._redact) from None

        try:
            return await retried(attempt, self.retry, sleep=self._sleep)
        finally:
            await client.close()

    async def cancel(self, batch_id: str) -> None:
        await self._call("acancel_batch", reads=False, batch_id=batch_id)

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        entry = self._lt.model_cost.get(body_model(self.client.name)) or self._lt.model_cost.get(self.client.name)
        if isinstance(entry, Mapping) and entry.get("input_cost_per_token_batches") is not None:
            return (float(entry["input_cost_per_token_batches"]) * input_tokens
                    + float(entry.get("output_cost_per_token_batches") or 0.0) * output_tokens)
        online = self.client.price(input_tokens, output_tokens)
        if online is None:
            return None
        return online if self.provider == "hosted_vllm" else online * 0.5


def _get(obj: Any, name: str) -> Any:
    """A field of a litellm/OpenAI object or of a plain dict."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _items(listing: Any) -> Sequence[Any]:
    """The ``data`` list of a list response (object or dict), or ``[]``."""
    data = _get(listing, "data")
    return data if isinstance(data, list) else []
