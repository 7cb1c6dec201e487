"""A scriptable fake OpenAI-compatible server, for tests and benchmarks (a test fixture: not shipped in the package).

Run it as ``python tests/support/fake_server.py ...`` (``main``), or import it as ``support.fake_server`` with
``tests/`` on the path (pytest puts it there; the benchmarks insert it). Its answers are the in-process fake
models' (``promptgrid.matrix.clients._fake_answers``).

It serves ``POST /v1/chat/completions`` on 127.0.0.1 (a free port) and does
what a ``FakeScript`` says: answer after some latency, in the format the
system prompt asks for (or another one), or fail with 429 + Retry-After, 500,
a hang, a malformed body or a 401, and echo the caller's key in an error body
or an answer (to test that keys are redacted). Every request is logged with the sha256 of its messages
(the same hash as ``Prompt.sha256`` in prompt mode), so a test can tell which jobs were sent
and how often, and with the request pieces beyond the messages (``tools``,
``tool_choice``, ``response_format``, and the grammar fields ``grammar``,
``guided_grammar``, ``structured_outputs``), so a test can check the exact body.

Call modes: a request with ``tools`` is answered with a native tool call of the
first tool (empty arguments, like ``auto_answer``); one with an OpenAI
``response_format`` json_schema in the strict wrapper ``{"calls": [...]}``;
one with a grammar in the format the system prompt asks for (``auto_answer``).

Files and batches (OpenAI's API, what litellm's ``acreate_file``, ``afile_list``,
``afile_content``, ``acreate_batch``, ``aretrieve_batch``, ``alist_batches`` and
``acancel_batch`` call with ``custom_llm_provider="openai"``, ``api_base=url``):
``POST/GET /v1/files``, ``GET/DELETE /v1/files/{id}``, ``GET /v1/files/{id}/content``,
``POST/GET /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, all
in memory. A batch is ``validating`` when created, ``in_progress`` for
``FakeScript.batch_polls`` retrieves, and ends at the next one: ``failed`` when its file
fails OpenAI's validation (``errors.data``: code, message, line), else every line is
answered as the chat endpoint would answer its body (same fault decisions and counters,
no latency) into an output file, the lines whose answer is an error status into an
error file, and ``batch_expire_after`` / ``p_batch_line_error`` / ``batch_fail`` /
``batch_max_requests`` script the rest. A cancelled batch ends ``cancelled`` at the next
retrieve with every line in the error file (``batch_cancelled``). ``answer_batch_file``
(and ``--answer-batch IN OUT``) answers a batch input file offline, as
``vllm run-batch`` does.

The log (``FakeServer.requests()``: chat completions; ``FakeServer.batch_log()``: files
and batches, with the ``custom_id``s of every uploaded file and created batch) lets a
crash test count how often each job was uploaded and batched, and ``FakeScript.block``
holds one files/batches request forever after its state change (the provider did it,
the client never heard), so the test can kill the client inside that step.

Capacity: ``max_concurrency`` answers at most that many chat requests at once (one
replica's fixed throughput); ``down_after`` takes the server down after N answers
(connections refused, open ones closed), an endpoint failing mid-run.

Why a raw asyncio HTTP/1.1 server and not ``http.server``: the runner
benchmark pushes 200+ calls/s through litellm on a 2-core machine; the
thread-per-request stdlib server would be the bottleneck. Run it in a separate
process (``FakeServer.subprocess``) for benchmarks and crash tests, or in a
thread of the test process (``FakeServer.thread``) when a test wants to pass
a Python answer function or read the log directly.

Faults are decided per request from ``(seed, messages hash, nth time this
hash was seen)``, so a run is reproducible whatever the order of concurrent
requests, and a retried request eventually succeeds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import email.parser
import email.policy
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgrid.matrix.clients._fake_answers import (
    auto_answer,
    auto_tool_calls,
    documented_function_names,
    first_function_name,
    schema_answer,
)
from promptgrid.safeio import parse_json_line, read_json_lines

__all__ = ["BATCH_ENDPOINT", "ENDPOINTS", "SCRIPT", "FakeScript", "FakeServer", "answer_batch_file", "auto_answer",
           "auto_tool_calls", "documented_function_names", "first_function_name", "request_hash", "schema_answer"]

#: Request fields beyond the messages that the log keeps (call modes: tools, schema, grammar).
REQUEST_PIECES = ("tools", "tool_choice", "response_format", "grammar", "guided_grammar", "structured_outputs")

AnswerFn = Callable[[dict[str, Any]], str]

#: The endpoint names of the log's ``endpoint`` field; all but the first can be ``FakeScript.block``.
ENDPOINTS = ("chat.completions", "files.create", "files.list", "files.retrieve", "files.content", "files.delete",
             "batches.create", "batches.retrieve", "batches.list", "batches.cancel")

#: The one endpoint batches run (the only one the fake server answers).
BATCH_ENDPOINT = "/v1/chat/completions"

#: This file: what a child process runs (``FakeServer.subprocess``, ``python tests/support/fake_server.py``).
SCRIPT = Path(__file__).resolve()


def child_env() -> dict[str, str]:
    """The environment of a child that runs this file: ``tests/`` on its ``PYTHONPATH``, so a ``FakeScript.answer``
    such as ``support.fake_server:conversation_answer`` imports there as it does in the tests."""
    tests = str(SCRIPT.parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": tests if not path else tests + os.pathsep + path}


@dataclass(frozen=True)
class FakeScript:
    """What the fake server does. Probabilities are per request, in [0, 1]."""

    latency_s: float = 0.0
    """Seconds before every answer (and before every error)."""
    latency_jitter_s: float = 0.0
    """Extra uniform random latency in [0, jitter]."""
    p_rate_limit: float = 0.0
    """Probability of a 429."""
    retry_after_s: float | None = 0.0
    """Retry-After header value sent with a 429 (None: no header)."""
    p_server_error: float = 0.0
    """Probability of a 500."""
    p_hang: float = 0.0
    """Probability of never answering (for ``hang_s`` seconds)."""
    hang_s: float = 3600.0
    p_malformed: float = 0.0
    """Probability of a 200 whose body is truncated JSON."""
    fail_first: int = 0
    """Every distinct request fails with ``fail_first_status`` this many times, then succeeds."""
    fail_first_status: int = 429
    status: int = 200
    """Answer every request with this status (e.g. 400, 401, 404) and an OpenAI error body."""
    echo_auth_in_error: bool = False
    """Error bodies quote the Authorization header (a careless provider; tests key redaction)."""
    echo_auth_in_answer: bool = False
    """Answers end with the Authorization header the request came with (tests key redaction of responses)."""
    echo_auth_in_fields: bool = False
    """Answers carry the Authorization header as the model that answered and as the finish reason (a hostile
    provider; tests that what is stored beside an answer is redacted too)."""
    answer: str = "auto"
    """``auto``: a call, in the format the system prompt asks for; ``prose``: a sentence;
    ``text:...``: that literal text; ``module:function``: import it and call it with the request."""
    p_other_format: float = 0.0
    """Probability that ``auto`` answers in a different format than asked."""
    p_wrap: float = 0.0
    """Probability that the answer is wrapped in a Markdown code fence."""
    p_per_call_wrap: float = 0.0
    """Probability of answering two calls, each wrapped on its own (a tag or fence per call)."""
    seed: int = 0
    max_concurrency: int | None = None
    """At most this many chat requests wait out their latency at once; the rest queue (a fixed
    throughput of about ``max_concurrency / latency_s`` calls/s, like one vLLM replica)."""
    down_after: int | None = None
    """After answering this many chat requests the server goes down: it stops listening (new
    connections are refused) and closes every open connection, requests in flight unanswered."""
    batch_polls: int = 2
    """A batch is ``in_progress`` for this many retrieves; the next one finds it ended."""
    p_batch_line_error: float = 0.0
    """Probability that a batch line fails with a 500 in the error file (on top of the chat faults)."""
    batch_expire_after: int | None = None
    """A batch ends ``expired`` after answering only its first N lines; the rest go to the error
    file with code ``batch_expired``."""
    batch_fail: bool = False
    """Every batch ends ``failed`` at validation (``errors.data``), with no output."""
    batch_max_requests: int | None = None
    """Creating a batch from a file of more lines than this is refused with a 400."""
    block: str | None = None
    """A files or batches endpoint name (``ENDPOINTS`` but chat.completions, whose hangs are
    ``p_hang``): its ``block_nth`` request is logged (``"blocked": true``),
    its state change made, and then never answered (``hang_s``), so a crash test can kill the
    client inside that step."""
    block_nth: int = 1
    body: str | None = None
    """Answer every chat request that the faults above leave alone with status 200 and this literal body
    (an answer no client can read: ``content: 12345``, ``usage: "lots"``, tool-call arguments nested deep)."""
    api_status: int | None = None
    """Answer every files and batches request with this status (and ``api_body``): a batch API that is
    down (500, 503) or answers garbage (200)."""
    api_body: str = ""
    """The literal body of the ``api_status`` answers."""

    def __post_init__(self) -> None:
        if self.block is not None and self.block not in ENDPOINTS[1:]:
            raise ValueError(f"FakeScript.block: {self.block!r} is not a files or batches endpoint; "
                             f"one of {', '.join(ENDPOINTS[1:])}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))


def request_hash(messages: list[dict[str, Any]]) -> str:
    """sha256 of the messages, equal to ``promptgrid.variants.messages_sha256``."""
    canonical = json.dumps(
        [{"role": m["role"], "content": m["content"]} for m in messages],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


# --------------------------------------------------------------------------- answers

def conversation_answer(request: dict[str, Any]) -> str:
    """For conversations (``FakeScript(answer="support.fake_server:conversation_answer")``): a
    call (``auto_answer``) when the last message is the user's turn, a sentence after the results of a call (the
    last message is a user message holding bfcl-eval's results list, or a ``tool`` message), so every turn takes
    two steps."""
    messages = request.get("messages") or []
    last = messages[-1] if messages else {}
    content = str(last.get("content") or "")
    if last.get("role") == "tool" or content.startswith(("[{'role': 'tool'", '[{"role": "tool"', "<results>")):
        return "Done: the request is complete."
    return auto_answer(request)


def _load_answer_fn(spec: str) -> AnswerFn:
    module, _, func = spec.partition(":")
    import importlib

    fn: AnswerFn = getattr(importlib.import_module(module), func)
    return fn


# --------------------------------------------------------------------------- batch files


_EXPIRED = {"code": "batch_expired",
            "message": "This request could not be executed before the completion window expired."}
_CANCELLED = {"code": "batch_cancelled", "message": "This request was not executed because the batch was cancelled."}


def _read_batch_lines(data: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The JSON-object lines of a batch input file, and the validation errors OpenAI would report for it.

    An error is ``{"code", "message", "param", "line"}`` (1-based line): a line that is not a JSON
    object, lacks ``custom_id`` or ``body``, has another method than POST or another url than the
    batch endpoint, or repeats an earlier ``custom_id``.
    """
    lines: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    first_line: dict[str, int] = {}

    def fail(code: str, message: str, param: str | None, number: int) -> None:
        errors.append({"code": code, "message": message, "param": param, "line": number})

    for item in read_json_lines(data.splitlines(keepends=True)):
        value = item.value
        if item.error is not None or not isinstance(value, dict):
            fail("invalid_json_line", f"This line is not a JSON object: {item.error or type(value).__name__}.",
                 None, item.number)
            continue
        lines.append(value)
        cid = value.get("custom_id")
        if not isinstance(cid, str) or not cid:
            fail("missing_required_parameter", "Missing required parameter: 'custom_id'.", "custom_id", item.number)
        elif cid in first_line:
            fail("duplicate_custom_id", f"The custom_id {cid!r} is a duplicate of line {first_line[cid]}; the "
                 "custom_id parameter must be unique for each individual request in a batch.", "custom_id", item.number)
        else:
            first_line[cid] = item.number
        if value.get("method") != "POST":
            fail("invalid_method", "The method of a batch request must be POST.", "method", item.number)
        if value.get("url") != BATCH_ENDPOINT:
            fail("invalid_url", f"The url of this request does not match the batch endpoint {BATCH_ENDPOINT}.",
                 "url", item.number)
        if not isinstance(value.get("body"), dict):
            fail("missing_required_parameter", "Missing required parameter: 'body'.", "body", item.number)
    if not lines and not errors:
        fail("empty_file", "The batch input file is empty.", None, 1)
    return lines, errors


def _result_line(custom_id: Any, response: dict[str, Any] | None, error: dict[str, str] | None) -> bytes:
    line = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": custom_id, "response": response, "error": error}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


# --------------------------------------------------------------------------- server


@dataclass(frozen=True)
class _Reply:
    """An HTTP answer, and for a chat request what the script chose and how long to wait before it."""

    status: int
    headers: dict[str, str]
    body: bytes
    outcome: str = "ok"
    delay: float = 0.0


def _json_reply(obj: Any, status: int = 200) -> _Reply:
    return _Reply(status, {}, json.dumps(obj).encode())


def _error_reply(status: int, message: str, kind: str = "invalid_request_error") -> _Reply:
    return _Reply(status, {}, _error_body(message, kind))


def _outcome(s: FakeScript, n: int, u: Sequence[float]) -> str:
    """What the script does with the ``n``-th sending of a request (``u``: its seeded draws): ``ok``, ``hang``,
    ``malformed`` or ``status_<code>``."""
    if s.status != 200:
        return f"status_{s.status}"
    if n < s.fail_first:
        return f"status_{s.fail_first_status}"
    if u[1] < s.p_rate_limit:
        return "status_429"
    if u[2] < s.p_server_error:
        return "status_500"
    if u[3] < s.p_hang:
        return "hang"
    if u[4] < s.p_malformed:
        return "malformed"
    return "ok"


def _scripted_reply(s: FakeScript, outcome: str, headers: dict[str, str], delay: float) -> _Reply | None:
    """The reply of an outcome that is not a generated answer (a hang, a malformed body, the script's fixed
    ``body``, an error status); None when the answer is to be generated."""
    if outcome == "hang":
        return _Reply(504, {}, _error_body("hung", "timeout"), outcome, delay)
    if outcome == "malformed":
        return _Reply(200, {}, b'{"id": "chatcmpl-fake", "object": "chat.completion", "choices": [{"index',
                      outcome, delay)
    if outcome == "ok" and s.body is not None:
        return _Reply(200, {}, s.body.encode(), "body", delay)
    if not outcome.startswith("status_"):
        return None
    status = int(outcome[len("status_"):])
    extra: dict[str, str] = {}
    if status == 429 and s.retry_after_s is not None:
        extra["Retry-After"] = f"{s.retry_after_s:g}"
    error = {429: "Rate limit reached, slow down.", 500: "The server had an error.",
             401: "Incorrect API key provided.", 404: "The model does not exist.",
             400: "Bad request."}.get(status, "error")
    if s.echo_auth_in_error:
        error += f" Received: {headers.get('authorization', '')}"
    kind = {429: "rate_limit_exceeded", 401: "invalid_api_key", 404: "model_not_found"}.get(
        status, "invalid_request_error" if status < 500 else "server_error")
    return _Reply(status, extra, _error_body(error, kind), outcome, delay)


class _Dropped(Exception):
    """The server went down while this request waited: close its connection unanswered."""


@dataclass
class _Batch:
    """A batch's live state beside its OpenAI object."""

    obj: dict[str, Any]
    lines: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    authorization: str
    """The create request's Authorization header: batch lines are answered as if sent with it."""
    polls: int = 0


_API_PATH = re.compile(r"^(?:/v1)?/(files|batches)(?:/([^/?]+))?(?:/(content|cancel))?/?$")
_API_ROUTES = {
    ("files", False, None, "POST"): "files.create", ("files", False, None, "GET"): "files.list",
    ("files", True, None, "GET"): "files.retrieve", ("files", True, None, "DELETE"): "files.delete",
    ("files", True, "content", "GET"): "files.content",
    ("batches", False, None, "POST"): "batches.create", ("batches", False, None, "GET"): "batches.list",
    ("batches", True, None, "GET"): "batches.retrieve", ("batches", True, "cancel", "POST"): "batches.cancel",
}
_BATCH_ENDED = ("completed", "failed", "expired", "cancelled")

ApiOp = Callable[[str | None, dict[str, str], dict[str, str], bytes], tuple[_Reply, dict[str, Any]]]


class _Handler:
    """The server state: script, counters, log, files and batches. Lives on the server's event loop."""

    def __init__(self, script: FakeScript, answer_fn: AnswerFn | None, log_path: Path | None) -> None:
        self.script = script
        self.answer_fn = answer_fn
        if answer_fn is None and script.answer not in ("auto", "prose") and not script.answer.startswith("text:"):
            self.answer_fn = _load_answer_fn(script.answer)
        self.seen: dict[str, int] = {}
        self.log: list[dict[str, Any]] = []
        self.log_lock = threading.Lock()
        self._log_file = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115
        self.tasks: set[asyncio.Task[None]] = set()
        self.capacity = asyncio.Semaphore(script.max_concurrency) if script.max_concurrency else None
        self.servers: list[asyncio.Server] = []
        """The listening servers, closed when the server goes down (``down_after``)."""
        self.writers: set[asyncio.StreamWriter] = set()
        self.chat_answered = 0
        self.down = False
        self.calls: dict[str, int] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self.file_data: dict[str, bytes] = {}
        self.file_lines: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
        self.batches: dict[str, _Batch] = {}
        self.ops: dict[str, ApiOp] = {
            "files.create": self.files_create, "files.list": self.files_list, "files.retrieve": self.files_retrieve,
            "files.content": self.files_content, "files.delete": self.files_delete,
            "batches.create": self.batches_create, "batches.list": self.batches_list,
            "batches.retrieve": self.batches_retrieve, "batches.cancel": self.batches_cancel,
        }

    def close(self) -> None:
        if self._log_file is not None:
            self._log_file.close()

    def _record(self, entry: dict[str, Any]) -> None:
        with self.log_lock:
            self.log.append(entry)
        if self._log_file is not None:
            self._log_file.write(json.dumps(entry) + "\n")
            self._log_file.flush()

    # ----------------------------------------------------------------------- chat completions

    def answer(self, request: Any, headers: dict[str, str]) -> tuple[dict[str, Any] | None, _Reply]:
        """The script's answer to one chat completion request body, decided and built without waiting.

        The one answer logic of ``POST /v1/chat/completions`` and of batch lines. Returns the log
        entry (``None`` for a body without valid messages, answered 400) and the reply, whose
        ``delay`` and ``outcome == "hang"`` the chat endpoint waits out.
        """
        try:
            messages = request["messages"]
            digest = request_hash(messages)
        except (KeyError, TypeError, AttributeError):
            return None, _error_reply(400, "invalid JSON body")
        s = self.script
        n = self.seen.get(digest, 0)
        self.seen[digest] = n + 1
        entry: dict[str, Any] = {
            "endpoint": "chat.completions",
            "t": time.time(),
            "hash": digest,
            "n": n,
            "model": request.get("model"),
            "seed": request.get("seed"),
            "temperature": request.get("temperature"),
            "max_tokens": request.get("max_tokens"),
            "authorized": bool(headers.get("authorization")),
        }
        entry.update({k: request[k] for k in REQUEST_PIECES if k in request})
        u = [_unit(s.seed, digest, n, i) for i in range(6)]
        delay = s.latency_s + s.latency_jitter_s * u[0]
        outcome = _outcome(s, n, u)
        entry["outcome"] = outcome
        scripted = _scripted_reply(s, outcome, headers, delay)
        if scripted is not None:
            return entry, scripted
        text, tool_calls = self._text(request, digest, n, u[5])
        if s.echo_auth_in_answer:
            text += f" Received: {headers.get('authorization', '')}"
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
        message: dict[str, Any] = {"role": "assistant", "content": text if tool_calls is None else None}
        if tool_calls is not None:
            message["tool_calls"] = tool_calls
        payload = {
            "id": f"chatcmpl-{digest[:12]}-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "fake"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "stop" if tool_calls is None else "tool_calls"}],
            "usage": {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": len(text) // 4 + 1,
                      "total_tokens": prompt_chars // 4 + len(text) // 4 + 2},
        }
        if s.echo_auth_in_fields:
            payload["model"] = payload["choices"][0]["finish_reason"] = headers.get("authorization", "")
        return entry, _Reply(200, {}, json.dumps(payload).encode(), outcome, delay)

    def _text(self, request: Any, digest: str, n: int, u5: float) -> tuple[str, list[dict[str, Any]] | None]:
        """The answer of an ``ok`` outcome: (text, tool calls or None), as ``FakeScript.answer`` says; ``u5`` is the
        draw for ``p_other_format``."""
        s = self.script
        schema_text = (schema_answer(request["response_format"])
                       if isinstance(request.get("response_format"), dict) else None)
        if self.answer_fn is not None:
            return self.answer_fn(request), None
        if request.get("tools") and s.answer == "auto":
            return "", auto_tool_calls(request["tools"])
        if schema_text is not None and s.answer == "auto":
            return schema_text, None
        if s.answer == "prose":
            return "I would call a function to answer this, but I will explain in prose instead.", None
        if s.answer.startswith("text:"):
            return s.answer[len("text:"):], None
        return auto_answer(request, other_format=u5 < s.p_other_format,
                           wrap=_unit(s.seed, digest, n, 9) < s.p_wrap,
                           per_call_wrap=_unit(s.seed, digest, n, 10) < s.p_per_call_wrap), None

    async def chat(self, headers: dict[str, str], body: bytes) -> _Reply:
        """``POST /v1/chat/completions``: log, wait the latency (within ``max_concurrency``), answer."""
        try:
            request = json.loads(body)
        except ValueError:
            return _error_reply(400, "invalid JSON body")
        entry, reply = self.answer(request, headers)
        if entry is None:
            return reply
        self._record(entry)
        if self.capacity is not None:
            async with self.capacity:
                await asyncio.sleep(reply.delay)
        elif reply.delay > 0:
            await asyncio.sleep(reply.delay)
        if reply.outcome == "hang":
            await asyncio.sleep(self.script.hang_s)
        if self.down:
            raise _Dropped
        return reply

    def go_down(self, answering: asyncio.StreamWriter) -> None:
        """Stop listening and close every open connection but ``answering``, which sends the last answer
        (``down_after``). Closing before that answer is sent means a client that got it finds the
        server down."""
        self.down = True
        for server in self.servers:
            server.close()
        for writer in list(self.writers - {answering}):
            writer.close()

    # ----------------------------------------------------------------------- files and batches

    async def api(self, method: str, path: str, headers: dict[str, str], body: bytes) -> _Reply:
        """The files and batches endpoints: do the operation, log it, and answer (or block, ``FakeScript.block``)."""
        route, _, query_string = path.partition("?")
        match = _API_PATH.match(route)
        name = _API_ROUTES.get((match[1], match[2] is not None, match[3], method)) if match else None
        if match is None or name is None:
            return _error_reply(404, "not found", "not_found_error")
        if self.script.api_status is not None:
            self._record({"endpoint": name, "t": time.time(), "status": self.script.api_status, "scripted": True})
            return _Reply(self.script.api_status, {}, self.script.api_body.encode(), "scripted")
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(query_string).items()}
        reply, fields = self.ops[name](match[2], query, headers, body)
        nth = self.calls[name] = self.calls.get(name, 0) + 1
        entry = {"endpoint": name, "t": time.time(), "status": reply.status, **fields}
        blocked = self.script.block == name and nth == self.script.block_nth
        if blocked:
            entry["blocked"] = True
        self._record(entry)
        if blocked:
            await asyncio.sleep(self.script.hang_s)
            return _error_reply(504, "hung", "timeout")
        return reply

    def _store_file(self, filename: str, purpose: str, data: bytes) -> dict[str, Any]:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        obj = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
               "filename": filename, "purpose": purpose, "status": "processed", "expires_at": None,
               "status_details": None}
        self.files[file_id] = obj
        self.file_data[file_id] = data
        return obj

    def files_create(self, _id: str | None, _query: dict[str, str], headers: dict[str, str],
                     body: bytes) -> tuple[_Reply, dict[str, Any]]:
        try:
            fields = _form_fields(headers.get("content-type", ""), body)
        except ValueError as exc:
            return _error_reply(400, f"the body is not multipart/form-data: {exc}"), {}
        if "file" not in fields or "purpose" not in fields:
            return _error_reply(400, "Missing required parameter: 'file' and 'purpose' are both needed."), {}
        filename, data = fields["file"]
        purpose = fields["purpose"][1].decode("utf-8", "replace")
        obj = self._store_file(filename or "upload", purpose, data)
        log: dict[str, Any] = {"file_id": obj["id"], "filename": obj["filename"], "purpose": purpose,
                               "bytes": len(data)}
        if purpose == "batch":
            lines, errors = self.file_lines[obj["id"]] = _read_batch_lines(data)
            log["lines"] = len(lines)
            log["custom_ids"] = [line.get("custom_id") for line in lines]
        return _json_reply(obj), log

    def files_list(self, _id: str | None, query: dict[str, str], _headers: dict[str, str],
                   _body: bytes) -> tuple[_Reply, dict[str, Any]]:
        items = [f for f in self.files.values() if query.get("purpose") in (None, f["purpose"])]
        if query.get("order", "desc") == "desc":
            items.reverse()
        return _json_reply(_page(items, query, default_limit=10_000)), {"purpose": query.get("purpose")}

    def _file(self, file_id: str | None) -> dict[str, Any] | None:
        return self.files.get(file_id or "")

    def files_retrieve(self, file_id: str | None, _query: dict[str, str], _headers: dict[str, str],
                       _body: bytes) -> tuple[_Reply, dict[str, Any]]:
        obj = self._file(file_id)
        if obj is None:
            return _error_reply(404, f"No such File object: {file_id}", "not_found_error"), {"file_id": file_id}
        return _json_reply(obj), {"file_id": file_id}

    def files_content(self, file_id: str | None, _query: dict[str, str], _headers: dict[str, str],
                      _body: bytes) -> tuple[_Reply, dict[str, Any]]:
        if self._file(file_id) is None:
            return _error_reply(404, f"No such File object: {file_id}", "not_found_error"), {"file_id": file_id}
        data = self.file_data[file_id or ""]
        return _Reply(200, {"Content-Type": "application/octet-stream"}, data), {"file_id": file_id, "bytes": len(data)}

    def files_delete(self, file_id: str | None, _query: dict[str, str], _headers: dict[str, str],
                     _body: bytes) -> tuple[_Reply, dict[str, Any]]:
        if self._file(file_id) is None:
            return _error_reply(404, f"No such File object: {file_id}", "not_found_error"), {"file_id": file_id}
        for table in (self.files, self.file_data, self.file_lines):
            table.pop(file_id or "", None)
        return _json_reply({"id": file_id, "object": "file", "deleted": True}), {"file_id": file_id}

    def batches_create(self, _id: str | None, _query: dict[str, str], headers: dict[str, str],
                       body: bytes) -> tuple[_Reply, dict[str, Any]]:
        try:
            request = parse_json_line(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            return _error_reply(400, f"invalid JSON body: {exc}"), {}
        if not isinstance(request, dict):
            return _error_reply(400, "invalid JSON body: not an object"), {}
        file_id = request.get("input_file_id")
        log: dict[str, Any] = {"input_file_id": file_id}
        if not isinstance(file_id, str) or file_id not in self.file_lines:
            return _error_reply(400, f"Cannot find batch input file {file_id!r}."), log
        if request.get("endpoint") != BATCH_ENDPOINT:
            return _error_reply(400, f"The fake server runs batches on {BATCH_ENDPOINT} only, "
                                     f"not {request.get('endpoint')!r}."), log
        if request.get("completion_window") != "24h":
            return _error_reply(400, "completion_window must be '24h'."), log
        metadata = request.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            return _error_reply(400, "metadata must be an object of strings."), log
        lines, errors = self.file_lines[file_id]
        limit = self.script.batch_max_requests
        if limit is not None and len(lines) > limit:
            return _error_reply(400, f"The batch input file has {len(lines)} requests; a batch takes at most "
                                     f"{limit}. Split it into several batches."), log
        if self.script.batch_fail and not errors:
            errors = [{"code": "invalid_request", "message": "The batch failed validation (FakeScript.batch_fail).",
                       "param": None, "line": 1}]
        now = int(time.time())
        batch_id = f"batch_{uuid.uuid4().hex[:24]}"
        obj: dict[str, Any] = {
            "id": batch_id, "object": "batch", "endpoint": BATCH_ENDPOINT, "errors": None,
            "input_file_id": file_id, "completion_window": "24h", "status": "validating",
            "output_file_id": None, "error_file_id": None, "created_at": now, "in_progress_at": None,
            "expires_at": now + 86_400, "finalizing_at": None, "completed_at": None, "failed_at": None,
            "expired_at": None, "cancelling_at": None, "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0}, "metadata": metadata,
        }
        self.batches[batch_id] = _Batch(obj, lines, errors, headers.get("authorization", ""))
        log.update(batch_id=batch_id, custom_ids=[line.get("custom_id") for line in lines], metadata=metadata)
        return _json_reply(obj), log

    def batches_list(self, _id: str | None, query: dict[str, str], _headers: dict[str, str],
                     _body: bytes) -> tuple[_Reply, dict[str, Any]]:
        items = [b.obj for b in reversed(self.batches.values())]
        return _json_reply(_page(items, query, default_limit=20)), {"after": query.get("after")}

    def batches_retrieve(self, batch_id: str | None, _query: dict[str, str], _headers: dict[str, str],
                         _body: bytes) -> tuple[_Reply, dict[str, Any]]:
        batch = self.batches.get(batch_id or "")
        if batch is None:
            return _error_reply(404, f"No batch found with id {batch_id!r}.", "not_found_error"), {"batch_id": batch_id}
        log: dict[str, Any] = {"batch_id": batch_id}
        if batch.obj["status"] not in _BATCH_ENDED:
            self._advance(batch)
            if batch.obj["status"] in _BATCH_ENDED:
                log.update(batch.obj["request_counts"])
        log["batch_status"] = batch.obj["status"]
        return _json_reply(batch.obj), log

    def batches_cancel(self, batch_id: str | None, _query: dict[str, str], _headers: dict[str, str],
                       _body: bytes) -> tuple[_Reply, dict[str, Any]]:
        batch = self.batches.get(batch_id or "")
        if batch is None:
            return _error_reply(404, f"No batch found with id {batch_id!r}.", "not_found_error"), {"batch_id": batch_id}
        status = batch.obj["status"]
        if status in _BATCH_ENDED or status == "cancelling":
            return _error_reply(400, f"Cannot cancel a batch with status {status}."), {"batch_id": batch_id}
        batch.obj.update(status="cancelling", cancelling_at=int(time.time()))
        return _json_reply(batch.obj), {"batch_id": batch_id}

    def _advance(self, batch: _Batch) -> None:
        """One retrieve's worth of progress: validating -> in_progress (``batch_polls`` retrieves) -> ended."""
        obj = batch.obj
        now = int(time.time())
        batch.polls += 1
        if obj["status"] == "cancelling":
            self._finish(batch, [(False, _result_line(line.get("custom_id"), None, _CANCELLED))
                                 for line in batch.lines], "cancelled")
        elif batch.errors:
            obj.update(status="failed", failed_at=now, errors={"object": "list", "data": batch.errors},
                       request_counts={"total": 0, "completed": 0, "failed": 0})
        elif batch.polls <= self.script.batch_polls:
            obj.update(status="in_progress", in_progress_at=obj["in_progress_at"] or now)
        else:
            limit = self.script.batch_expire_after
            results = self.answer_lines(batch.lines, {"authorization": batch.authorization})
            self._finish(batch, results, "expired" if limit is not None and limit < len(batch.lines) else "completed")

    def _finish(self, batch: _Batch, results: list[tuple[bool, bytes]], status: str) -> None:
        """End ``batch`` with ``status``: answered lines in the output file, the others in the error file."""
        obj = batch.obj
        now = int(time.time())
        out = b"".join(line for ok, line in results if ok)
        err = b"".join(line for ok, line in results if not ok)
        n_ok = sum(ok for ok, _ in results)
        obj.update(status=status, in_progress_at=obj["in_progress_at"] or now, finalizing_at=now,
                   output_file_id=self._store_file(f"{obj['id']}_output.jsonl", "batch_output", out)["id"] if out
                   else None,
                   error_file_id=self._store_file(f"{obj['id']}_error.jsonl", "batch_output", err)["id"] if err
                   else None,
                   request_counts={"total": len(results), "completed": n_ok, "failed": len(results) - n_ok})
        obj[f"{status}_at"] = now

    def answer_lines(self, lines: list[dict[str, Any]], headers: dict[str, str]) -> list[tuple[bool, bytes]]:
        """Each (validated) batch input line's result line, in order, and whether it belongs in the output file.

        A line is answered as ``POST /v1/chat/completions`` would answer its body (same counters,
        so ``fail_first`` and the seeded faults apply), without the latency; a hang becomes its
        504, a malformed answer a body that is a truncated string. ``p_batch_line_error`` adds
        500s; lines past ``batch_expire_after`` are expired unanswered.
        """
        s = self.script
        results = []
        for i, line in enumerate(lines):
            cid = line.get("custom_id")
            if s.batch_expire_after is not None and i >= s.batch_expire_after:
                results.append((False, _result_line(cid, None, _EXPIRED)))
                continue
            entry, reply = self.answer(line.get("body"), headers)
            if (reply.status == 200 and entry is not None
                    and _unit(s.seed, "batch-line", entry["hash"], entry["n"]) < s.p_batch_line_error):
                reply = _error_reply(500, "The server had an error while processing this request.", "server_error")
            try:
                body: Any = json.loads(reply.body)
            except ValueError:
                body = reply.body.decode("utf-8", "replace")
            response = {"status_code": reply.status, "request_id": f"req_{uuid.uuid4().hex[:24]}", "body": body}
            results.append((reply.status == 200, _result_line(cid, response, None)))
        return results

    # ----------------------------------------------------------------------- HTTP

    def _chat_answered(self, writer: asyncio.StreamWriter) -> None:
        """Count a chat answer about to be sent on ``writer``; the ``down_after``-th takes the server down."""
        self.chat_answered += 1
        if self.script.down_after is not None and self.chat_answered >= self.script.down_after:
            self.go_down(writer)

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        quickack = getattr(socket, "TCP_QUICKACK", None)
        self.writers.add(writer)
        try:
            while not self.down:
                _ack_now(sock, quickack)
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                parsed = _parse_head(head)
                if parsed is None:
                    return
                method, path, headers = parsed
                length = int(headers.get("content-length", "0") or 0)
                _ack_now(sock, quickack)
                body = await reader.readexactly(length) if length else b""
                if self.down:
                    return
                chat = method == "POST" and path.rstrip("/").endswith("/chat/completions")
                try:
                    reply = await (self.chat(headers, body) if chat else self.api(method, path, headers, body))
                except _Dropped:
                    return
                status = reply.status
                reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                          429: "Too Many Requests", 500: "Internal Server Error",
                          504: "Gateway Timeout"}.get(status, "Error")
                extra = dict(reply.headers)
                head_out = [f"HTTP/1.1 {status} {reason}",
                            f"Content-Type: {extra.pop('Content-Type', 'application/json')}",
                            f"Content-Length: {len(reply.body)}"]
                head_out += [f"{k}: {v}" for k, v in extra.items()]
                if chat:
                    self._chat_answered(writer)
                writer.write(("\r\n".join(head_out) + "\r\n\r\n").encode("latin-1") + reply.body)
                if self.down:
                    return  # the finally closes it, still sending what was written
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            # A client gone, or the server shutting down (cancelled): end quietly (re-raising a
            # cancellation makes asyncio log a traceback).
            return
        finally:
            self.writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()


def _ack_now(sock: Any, quickack: int | None) -> None:
    """Acknowledge the client's next packet at once (``TCP_QUICKACK`` where the platform has it).

    Clients (httpx) send headers and body in two writes; with Nagle on their side and delayed
    ACKs on ours every request would stall ~40 ms. Linux resets QUICKACK, so it is set again
    before each read.
    """
    if quickack is not None and sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]] | None:
    """(method, path, headers with lower-case names) of an HTTP request head; None when its request line is bad."""
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, path, _version = lines[0].split(" ", 2)
    except ValueError:
        return None
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    return method, path, headers


def _error_body(message: str, kind: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": kind}}).encode()


def _form_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (filename, bytes), parsed by the stdlib email parser."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise ValueError(f"Content-Type is {content_type or 'missing'}")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise ValueError("no parts")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


def _page(items: list[dict[str, Any]], query: dict[str, str], *, default_limit: int) -> dict[str, Any]:
    """An OpenAI cursor page of ``items`` (already in list order) after ``query['after']``, at most ``limit``."""
    try:
        limit = max(1, int(query.get("limit", default_limit)))
    except ValueError:
        limit = default_limit
    after = query.get("after")
    ids = [item["id"] for item in items]
    start = ids.index(after) + 1 if after in ids else 0
    page = items[start:start + limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": start + limit < len(items)}


class FakeServer:
    """A running fake server. Use ``FakeServer.thread(...)`` or ``FakeServer.subprocess(...)``.

    ``url`` is the ``api_base`` to give litellm (``http://127.0.0.1:PORT/v1``);
    ``requests()`` returns the chat completion log (list of dicts: hash, n, model, seed,
    temperature, outcome, t), ``batch_log()`` the files and batches requests.
    """

    def __init__(self, port: int, handler: _Handler | None = None, log_path: Path | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self._handler = handler
        self._log_path = log_path

    def _log(self) -> list[dict[str, Any]]:
        if self._handler is not None:
            with self._handler.log_lock:
                return list(self._handler.log)
        assert self._log_path is not None
        if not self._log_path.exists():
            return []
        out = []
        for line in self._log_path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):  # a line being written at this moment
                out.append(json.loads(line))
        return out

    def requests(self) -> list[dict[str, Any]]:
        """The chat completion requests, in arrival order (batch lines are not among them)."""
        return [e for e in self._log() if e["endpoint"] == "chat.completions"]

    def batch_log(self) -> list[dict[str, Any]]:
        """The files and batches requests, in arrival order: ``endpoint`` (``files.create``,
        ``batches.create``, ``batches.retrieve``, ``files.content``, ...), ``status`` (HTTP), ``t``, and
        per endpoint: ``file_id``, ``filename``, ``purpose``, ``bytes``, ``lines`` and ``custom_ids`` (an
        uploaded batch file); ``batch_id``, ``input_file_id``, ``custom_ids``, ``metadata`` (a created
        batch); ``batch_id``, ``batch_status`` and, on the retrieve that ended it, ``total``,
        ``completed``, ``failed`` (a retrieved batch); ``blocked`` on the request ``FakeScript.block`` held."""
        return [e for e in self._log() if e["endpoint"] != "chat.completions"]

    def sent_hashes(self) -> list[str]:
        """Message hashes of the requests answered so far, in arrival order."""
        return [r["hash"] for r in self.requests()]

    @classmethod
    @contextlib.contextmanager
    def thread(cls, script: FakeScript | None = None, answer_fn: AnswerFn | None = None,
               log_path: Path | None = None) -> Iterator[FakeServer]:
        """Serve from an event loop in a daemon thread of this process."""
        handler = _Handler(script or FakeScript(), answer_fn, log_path)
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        box: dict[str, Any] = {}

        async def start() -> None:
            server = await asyncio.start_server(handler.serve_connection, "127.0.0.1", 0, backlog=1024)
            box["server"] = server
            handler.servers.append(server)
            box["port"] = server.sockets[0].getsockname()[1]
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(start())
            loop.run_forever()

        t = threading.Thread(target=run, name="fake-openai-server", daemon=True)
        t.start()
        ready.wait(10)
        try:
            yield cls(box["port"], handler=handler)
        finally:
            async def stop() -> None:
                box["server"].close()
                for task in asyncio.all_tasks():
                    if task is not asyncio.current_task():
                        task.cancel()

            asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            t.join(10)
            loop.close()
            handler.close()

    @classmethod
    @contextlib.contextmanager
    def subprocess(cls, script: FakeScript | None = None, log_path: Path | None = None,
                   python: str | None = None) -> Iterator[FakeServer]:
        """Serve from a child process (its own core and GIL). The log is a JSONL file."""
        script = script or FakeScript()
        if log_path is None:
            import tempfile

            log_path = Path(tempfile.mkdtemp(prefix="fake-openai-")) / "requests.jsonl"
        cmd = [python or sys.executable, str(SCRIPT), "--script", script.to_json(), "--log", str(log_path)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=child_env())
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("PORT "):
                raise RuntimeError(f"fake server did not start: {line!r}")
            yield cls(int(line.split()[1]), log_path=log_path)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def answer_batch_file(requests: bytes, script: FakeScript | None = None) -> bytes:
    """Answer an OpenAI batch input file offline, as ``vllm run-batch -i IN -o OUT`` would.

    Every line is answered as ``POST /v1/chat/completions`` would answer its body under
    ``script`` (faults, ``p_batch_line_error`` and ``batch_expire_after`` included), and the result
    lines come back in input order in one file, errors among them (as vLLM writes them).
    Raises ``ValueError`` naming the first bad lines when the file fails the batch validation
    (not JSON, no custom_id or body, another method or url, a repeated custom_id).
    """
    lines, errors = _read_batch_lines(requests)
    if errors:
        raise ValueError("invalid batch input file: " + "; ".join(
            f"line {e['line']}: {e['message']}" for e in errors[:5]) + (" ..." if len(errors) > 5 else ""))
    handler = _Handler(script or FakeScript(), None, None)
    return b"".join(line for _ok, line in handler.answer_lines(lines, {}))


def main(argv: list[str] | None = None) -> int:
    """``python tests/support/fake_server.py --script JSON [--port N] [--log FILE]``,
    or ``... --answer-batch IN OUT`` to answer a batch input file offline (``answer_batch_file``)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--script", default="{}", help="FakeScript fields as JSON")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", default=None, help="append one JSON line per request here")
    p.add_argument("--answer-batch", nargs=2, metavar=("IN", "OUT"),
                   help="answer the OpenAI batch input file IN into the output file OUT, and exit")
    args = p.parse_args(argv)
    script = FakeScript(**json.loads(args.script))
    if args.answer_batch:
        source, target = args.answer_batch
        try:
            Path(target).write_bytes(answer_batch_file(Path(source).read_bytes(), script))
        except (OSError, ValueError) as exc:
            print(f"fake_server: {exc}", file=sys.stderr)
            return 2
        return 0
    handler = _Handler(script, None, Path(args.log) if args.log else None)

    async def serve() -> None:
        server = await asyncio.start_server(handler.serve_connection, "127.0.0.1", args.port, backlog=1024)
        handler.servers.append(server)
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        # Serve until terminated, also after going down (down_after closes the server, which
        # would end serve_forever with a CancelledError).
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    handler.close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
