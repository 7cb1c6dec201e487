"""An in-memory provider batch API (``BatchBackend``) for the batch runner's tests.

It keeps files and batches like a provider would, answers each line with
``answer_right`` after ``polls`` status checks, and logs every upload and
every batch created, so a test counts how often each job key was uploaded and
put in a batch. ``crash_at`` makes one step raise ``Crash`` after the provider
did it (the worst case: the provider has the file or batch, the client never
heard), the in-process stand-in for a process killed at that step.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from promptgrid.matrix.clients import BatchStatus, LineResult, decode_result_line, encode_request_line
from promptgrid.providers import ErrorKind, call_error

from .running import answer_right


class Crash(BaseException):
    """Stands for the process dying at a step (not an ``Exception``: nothing in the runner may catch it)."""


@dataclass
class MemoryBatchAPI:
    """What the provider holds and did. ``expire_after``: a batch expires after answering that many lines;
    ``fail_keys``: lines answered with a 500; ``max_requests`` / ``max_bytes``: the limits the runner must split at."""

    polls: int = 2
    expire_after: int | None = None
    fail_keys: frozenset[str] = frozenset()
    max_requests: int = 50_000
    max_bytes: int = 10**9
    min_requests: int = 1
    refuse_keys: frozenset[str] = frozenset()
    """Keys ``encode`` refuses (a request this API cannot carry)."""
    garbage: tuple[bytes, ...] = ()
    """Lines put in every output file in place of its first lines' results (hostile provider output)."""
    crash_at: str | None = None
    """``upload``, ``submit``, ``status``, ``download``: that step raises ``Crash`` once, after taking effect;
    ``collect``: the second download (the output file is stored, the error file not yet)."""
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[tuple[str, Any]] = field(default_factory=list)

    def backend(self) -> MemoryBackend:
        return MemoryBackend(self)

    def _crash(self, step: str) -> None:
        if self.crash_at == step:
            self.crash_at = None
            raise Crash(step)

    def uploaded(self) -> Counter[str]:
        """How many times each key was in an uploaded file."""
        return Counter(k for kind, keys in self.log if kind == "upload" for k in keys)

    def batched(self) -> Counter[str]:
        """How many times each key was in a created batch."""
        return Counter(k for b in self.batches.values() for k in _keys(self.files[b["file"]][1]))


def _keys(data: bytes) -> list[str]:
    return [json.loads(line)["custom_id"] for line in data.splitlines() if line.strip()]


def _ok_line(key: str, body: Mapping[str, Any]) -> str:
    text = answer_right(dict(body))
    return json.dumps({"custom_id": key, "error": None, "response": {"status_code": 200, "body": {
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3}, "model": "memory"}}})


class MemoryBackend:
    kind = "openai"

    def __init__(self, api: MemoryBatchAPI) -> None:
        self.api = api
        self.max_requests = api.max_requests
        self.max_bytes = api.max_bytes
        self.min_requests = api.min_requests

    def encode(self, key: str, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any],
               request: Mapping[str, Any] | None) -> bytes:
        if key in self.api.refuse_keys:
            raise call_error(ErrorKind.BAD_REQUEST, "this batch API cannot carry that request")
        body = {"model": "memory", "messages": [dict(m) for m in messages], **params}
        if request is not None:
            body["request"] = dict(request)
        return encode_request_line(key, body)

    def decode(self, line: bytes, where: str) -> LineResult:
        return decode_result_line(line, where)

    async def upload(self, name: str, data: bytes) -> str:
        file_id = f"file-{len(self.api.files)}"
        self.api.files[file_id] = (name, data)
        self.api.log.append(("upload", _keys(data)))
        self.api._crash("upload")
        return file_id

    async def find_upload(self, name: str) -> str | None:
        return next((f for f, (n, _) in self.api.files.items() if n == name), None)

    async def submit(self, file_id: str, name: str) -> str:
        batch_id = f"batch-{len(self.api.batches)}"
        self.api.batches[batch_id] = {"file": file_id, "polls": 0}
        self.api.log.append(("submit", file_id))
        self.api._crash("submit")
        return batch_id

    async def find_submitted(self, file_id: str, name: str) -> str | None:
        return next((b for b, v in self.api.batches.items() if v["file"] == file_id), None)

    async def status(self, batch_id: str) -> BatchStatus:
        batch = self.api.batches[batch_id]
        batch["polls"] += 1
        self.api.log.append(("status", batch_id))
        if batch["polls"] <= self.api.polls:
            return BatchStatus("running", "in_progress")
        out_id, err_id = f"out-{batch_id}", f"err-{batch_id}"
        lines = [json.loads(line) for line in self.api.files[batch["file"]][1].splitlines()]
        limit = self.api.expire_after
        answered = lines if limit is None else lines[:limit]
        out = [_ok_line(r["custom_id"], r["body"]) for r in answered if r["custom_id"] not in self.api.fail_keys]
        err = [json.dumps({"custom_id": r["custom_id"], "error": None, "response": {
            "status_code": 500, "body": {"error": {"message": "server error", "type": "server_error"}}}})
               for r in answered if r["custom_id"] in self.api.fail_keys]
        err += [json.dumps({"custom_id": r["custom_id"], "response": None,
                            "error": {"code": "batch_expired", "message": "not answered in time"}})
                for r in lines[len(answered):]]
        kept = [line.encode() for line in out[len(self.api.garbage):]]
        self.api.files[out_id] = ("output", b"\n".join([*self.api.garbage, *kept]))
        self.api.files[err_id] = ("errors", "\n".join(err).encode())
        state = "completed" if limit is None else "expired"
        self.api._crash("status")
        return BatchStatus(state, state, output_file=out_id, error_file=err_id, total=len(lines),
                           completed=len(out), failed=len(err))

    async def download(self, file_id: str, out: BinaryIO) -> int:
        self.api.log.append(("download", file_id))
        data = self.api.files[file_id][1]
        self.api._crash("download")
        if sum(1 for kind, _ in self.api.log if kind == "download") == 2:
            self.api._crash("collect")
        out.seek(0)
        out.truncate()
        out.write(data)
        return len(data)

    async def cancel(self, batch_id: str) -> None:
        return None

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        return 0.5 * (input_tokens + output_tokens) * 1e-6
