"""A scriptable fake OpenAI-compatible server, for tests and benchmarks.

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
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgrid.variants import ReturnFormat

__all__ = ["FakeScript", "FakeServer", "auto_answer", "auto_tool_calls", "first_function_name", "request_hash", "schema_answer"]

#: Request fields beyond the messages that the log keeps (call modes: tools, schema, grammar).
REQUEST_PIECES = ("tools", "tool_choice", "response_format", "grammar", "guided_grammar", "structured_outputs")

AnswerFn = Callable[[dict[str, Any]], str]


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

_NAME_PATTERNS = (
    re.compile(r'"name":\s*"([A-Za-z_][\w.]*)"'),
    re.compile(r"\bdef ([A-Za-z_][\w.]*)\("),
    re.compile(r'<function name="([A-Za-z_][\w.]*)"'),
)
_FORMATS = tuple(ReturnFormat)


def _requested_format(system: str) -> ReturnFormat:
    if '"function":"func_name1"' in system or "```json" in system:
        return ReturnFormat.JSON
    if '<function name="func_name1"><params>' in system:
        return ReturnFormat.VERBOSE_XML
    if '<function name="func_name1"><param ' in system:
        return ReturnFormat.CONCISE_XML
    return ReturnFormat.PYTHON


def _format_call(fmt: ReturnFormat, name: str) -> str:
    if fmt is ReturnFormat.JSON:
        return json.dumps([{"function": name, "parameters": {}}])
    if fmt is ReturnFormat.VERBOSE_XML:
        return f'<functions><function name="{name}"><params></params></function></functions>'
    if fmt is ReturnFormat.CONCISE_XML:
        return f'<functions><function name="{name}"></function></functions>'
    return f"[{name}()]"


def first_function_name(messages: Any) -> str:
    """The first function documented in the system prompt (``get_weather`` when none is found)."""
    system = "\n".join(str(m.get("content", "")) for m in messages or [] if m.get("role") == "system")
    for pattern in _NAME_PATTERNS:
        match = pattern.search(system)
        if match:
            return match.group(1)
    return "get_weather"


def auto_answer(request: dict[str, Any], other_format: bool = False, wrap: bool = False,
                per_call_wrap: bool = False) -> str:
    """A plausible answer: a call to the first documented function, in the asked format.

    ``per_call_wrap``: two calls, each in its own ``<TOOLCALL>`` (or code fence), a
    failure mode BFCL's strict parser rejects.
    """
    messages = request.get("messages") or []
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    name = first_function_name(messages)
    fmt = _requested_format(system)
    if other_format:
        fmt = _FORMATS[(_FORMATS.index(fmt) + 1) % len(_FORMATS)]
    text = _format_call(fmt, name)
    if per_call_wrap:
        one = f"<TOOLCALL>{text}</TOOLCALL>" if "<TOOLCALL>" in system else f"```\n{text}\n```"
        return f"{one}\n{one}"
    if "<TOOLCALL>" in system:
        text = f"<TOOLCALL>{text}</TOOLCALL>"
    if wrap:
        text = f"```\n{text}\n```"
    return text


def auto_tool_calls(tools: list[Any]) -> list[dict[str, Any]]:
    """A native answer: one call of the first tool, with empty arguments (OpenAI ``tool_calls`` shape)."""
    first = tools[0] if tools and isinstance(tools[0], dict) else {}
    name = (first.get("function") or {}).get("name", "get_weather")
    return [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": "{}"}}]


def schema_answer(response_format: dict[str, Any]) -> str | None:
    """An answer to an OpenAI strict json_schema ``response_format`` (``{"calls": [...]}``): a call of the
    first function the schema allows, empty parameters. ``None`` for another kind of response_format."""
    schema = (response_format.get("json_schema") or {}).get("schema") or {}
    items = (((schema.get("properties") or {}).get("calls") or {}).get("items")) or {}
    branch = (items.get("anyOf") or [items])[0]
    names = ((branch.get("properties") or {}).get("function") or {}).get("enum") or []
    if response_format.get("type") != "json_schema" or not names:
        return None
    return json.dumps({"calls": [{"function": names[0], "parameters": {}}]})


def _load_answer_fn(spec: str) -> AnswerFn:
    module, _, func = spec.partition(":")
    import importlib

    fn: AnswerFn = getattr(importlib.import_module(module), func)
    return fn


# --------------------------------------------------------------------------- server


class _Handler:
    """The server state: script, counters, log. Lives on the server's event loop."""

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

    def close(self) -> None:
        if self._log_file is not None:
            self._log_file.close()

    def _record(self, entry: dict[str, Any]) -> None:
        with self.log_lock:
            self.log.append(entry)
        if self._log_file is not None:
            self._log_file.write(json.dumps(entry) + "\n")
            self._log_file.flush()

    async def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            return 404, {}, _error_body("not found", "not_found_error")
        try:
            request = json.loads(body)
            messages = request["messages"]
            digest = request_hash(messages)
        except (ValueError, KeyError, TypeError):
            return 400, {}, _error_body("invalid JSON body", "invalid_request_error")
        s = self.script
        n = self.seen.get(digest, 0)
        self.seen[digest] = n + 1
        entry: dict[str, Any] = {
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
        outcome = "ok"
        if s.status != 200:
            outcome = f"status_{s.status}"
        elif n < s.fail_first:
            outcome = f"status_{s.fail_first_status}"
        elif u[1] < s.p_rate_limit:
            outcome = "status_429"
        elif u[2] < s.p_server_error:
            outcome = "status_500"
        elif u[3] < s.p_hang:
            outcome = "hang"
        elif u[4] < s.p_malformed:
            outcome = "malformed"
        entry["outcome"] = outcome
        self._record(entry)
        if delay > 0:
            await asyncio.sleep(delay)
        if outcome == "hang":
            await asyncio.sleep(s.hang_s)
            return 504, {}, _error_body("hung", "timeout")
        if outcome == "malformed":
            return 200, {}, b'{"id": "chatcmpl-fake", "object": "chat.completion", "choices": [{"index'
        if outcome.startswith("status_"):
            status = int(outcome[len("status_"):])
            extra: dict[str, str] = {}
            if status == 429 and s.retry_after_s is not None:
                extra["Retry-After"] = f"{s.retry_after_s:g}"
            message = {429: "Rate limit reached, slow down.", 500: "The server had an error.",
                       401: "Incorrect API key provided.", 404: "The model does not exist.",
                       400: "Bad request."}.get(status, "error")
            if s.echo_auth_in_error:
                message += f" Received: {headers.get('authorization', '')}"
            kind = {429: "rate_limit_exceeded", 401: "invalid_api_key", 404: "model_not_found"}.get(
                status, "invalid_request_error" if status < 500 else "server_error")
            return status, extra, _error_body(message, kind)
        tool_calls = None
        schema_text = (schema_answer(request["response_format"])
                       if isinstance(request.get("response_format"), dict) else None)
        if self.answer_fn is not None:
            text = self.answer_fn(request)
        elif request.get("tools") and s.answer == "auto":
            text, tool_calls = "", auto_tool_calls(request["tools"])
        elif schema_text is not None and s.answer == "auto":
            text = schema_text
        elif s.answer == "prose":
            text = "I would call a function to answer this, but I will explain in prose instead."
        elif s.answer.startswith("text:"):
            text = s.answer[len("text:"):]
        else:
            text = auto_answer(request, other_format=u[5] < s.p_other_format,
                               wrap=_unit(s.seed, digest, n, 9) < s.p_wrap,
                               per_call_wrap=_unit(s.seed, digest, n, 10) < s.p_per_call_wrap)
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
        return 200, {}, json.dumps(payload).encode()

    async def serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        quickack = getattr(socket, "TCP_QUICKACK", None)

        def ack_now() -> None:
            # Clients (httpx) send headers and body in two writes; with Nagle on their side and
            # delayed ACKs on ours every request would stall ~40 ms. Linux resets QUICKACK, so
            # it is set again before each read.
            if quickack is not None and sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, quickack, 1)

        try:
            while True:
                ack_now()
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                try:
                    method, path, _version = lines[0].split(" ", 2)
                except ValueError:
                    return
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, _, v = line.partition(":")
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length", "0") or 0)
                ack_now()
                body = await reader.readexactly(length) if length else b""
                status, extra, out = await self.handle(method, path, headers, body)
                reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                          429: "Too Many Requests", 500: "Internal Server Error", 504: "Gateway Timeout"}.get(status, "Error")
                head_out = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                            f"Content-Length: {len(out)}"]
                head_out += [f"{k}: {v}" for k, v in extra.items()]
                writer.write(("\r\n".join(head_out) + "\r\n\r\n").encode("latin-1") + out)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            # Server shutdown: end quietly (re-raising makes asyncio log a traceback).
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()


def _error_body(message: str, kind: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": kind}}).encode()


class FakeServer:
    """A running fake server. Use ``FakeServer.thread(...)`` or ``FakeServer.subprocess(...)``.

    ``url`` is the ``api_base`` to give litellm (``http://127.0.0.1:PORT/v1``);
    ``requests()`` returns the request log (list of dicts: hash, n, model, seed,
    temperature, outcome, t).
    """

    def __init__(self, port: int, handler: _Handler | None = None, log_path: Path | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self._handler = handler
        self._log_path = log_path

    def requests(self) -> list[dict[str, Any]]:
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
        cmd = [python or sys.executable, "-m", "promptgrid.matrix.testing.fake_server",
               "--script", script.to_json(), "--log", str(log_path)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
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


def main(argv: list[str] | None = None) -> int:
    """``python -m promptgrid.matrix.testing.fake_server --script JSON [--port N] [--log FILE]``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--script", default="{}", help="FakeScript fields as JSON")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", default=None, help="append one JSON line per request here")
    args = p.parse_args(argv)
    script = FakeScript(**json.loads(args.script))
    handler = _Handler(script, None, Path(args.log) if args.log else None)

    async def serve() -> None:
        server = await asyncio.start_server(handler.serve_connection, "127.0.0.1", args.port, backlog=1024)
        print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
        async with server:
            await server.serve_forever()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    handler.close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
