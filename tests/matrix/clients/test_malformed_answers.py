"""A 200 answer that litellm cannot turn into a response (content 12345, usage "lots", tool-call arguments
nested deep or not a string), from the fake server on 127.0.0.1: kind malformed, one line, no file paths,
retried once; the CLI prints no dependency warning."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.clients._litellm import LiteLLMClient
from promptgrid.providers import CallError, ErrorKind
from support.fake_server import FakeScript, FakeServer


def _body(message: dict[str, Any], usage: Any = None) -> str:
    return json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
                       "usage": usage if usage is not None else {"prompt_tokens": 1, "completion_tokens": 1,
                                                                  "total_tokens": 2}})


def _call(arguments: Any) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"id": "c1", "type": "function",
                                             "function": {"name": "f", "arguments": arguments}}]}


BODIES = {
    "content_int": _body({"content": 12345}),
    "usage_str": _body({"content": "ok"}, usage="lots"),
    "args_deep": _body(_call(json.loads("[" * 900 + "]" * 900))),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_an_unreadable_answer_is_malformed_in_one_line(name: str) -> None:
    with FakeServer.thread(FakeScript(body=BODIES[name])) as server:
        client = LiteLLMClient("openai/m", api_base=server.url)
        with pytest.raises(CallError) as caught:
            asyncio.run(client.complete([{"role": "user", "content": "hi"}], {"timeout": 10}))
    error = caught.value
    assert error.kind is ErrorKind.MALFORMED and error.retryable
    assert error.message.startswith("malformed answer: the server's response could not be read")
    assert "\n" not in error.message and len(error.message) <= 500
    for leak in ("Traceback", "site-packages", ".py", "received_args"):
        assert leak not in error.message


def test_a_run_against_garbage_stores_malformed_retried_once_and_prints_no_warning(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with FakeServer.thread(FakeScript(body=BODIES["content_int"])) as server:
        done = subprocess.run(
            [sys.executable, "-m", "promptgrid.matrix.cli", "run", "demo", "--dataset", "mini", "--limit", "1",
             "--model", "openai/m", "--api-base", server.url, "--no-progress", "--run-dir", str(run_dir)],
            capture_output=True, text=True, timeout=300)
        sent = len(server.requests())
    assert done.returncode == 1, done.stderr  # every call failed
    assert "Warning" not in done.stderr and "site-packages" not in done.stderr and "Traceback" not in done.stderr
    with sqlite3.connect(run_dir / "store.sqlite3") as db:
        rows = db.execute("select error_kind, attempts, error from calls where status = 'error'").fetchall()
    assert len(rows) == 2 and sent == 4  # two calls, each sent twice (malformed: one retry), not 6 times
    for kind, attempts, message in rows:
        assert kind == "malformed" and attempts == 2 and "\n" not in message and ".py" not in message
