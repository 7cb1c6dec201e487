"""A 200 answer that litellm cannot turn into a response (content 12345, usage "lots", tool-call arguments
nested deep or not a string), from the fake server on 127.0.0.1: kind malformed, one line, no file paths,
retried once; the CLI prints no dependency warning."""

from __future__ import annotations

import asyncio
import json
import os
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


# A usage out of range: a negative count (which litellm prices as a refund) or one past any context window (past
# 2**63 it does not fit the store's integer columns) is unknown, and the call is priced at nothing known.
USAGES = {
    "valid": ({"prompt_tokens": 1000, "completion_tokens": 5, "total_tokens": 1005}, 1000),
    "negative": ({"prompt_tokens": -1_000_000, "completion_tokens": 5, "total_tokens": 5}, None),
    "huge": ({"prompt_tokens": 10**30, "completion_tokens": 5, "total_tokens": 5}, None),
}


@pytest.mark.parametrize("name", sorted(USAGES))
def test_a_usage_out_of_range_is_unknown_and_priced_at_nothing_known(name: str) -> None:
    usage, kept = USAGES[name]
    with FakeServer.thread(FakeScript(body=_body({"content": "ok"}, usage=usage))) as server:
        client = LiteLLMClient("openai/gpt-4o-mini", api_base=server.url)  # a model with a list price
        completion = asyncio.run(client.complete([{"role": "user", "content": "hi"}], {"timeout": 10}))
    assert completion.input_tokens == kept and completion.output_tokens == 5
    assert (completion.cost_usd is not None and completion.cost_usd > 0) if kept else completion.cost_usd is None


def test_a_run_against_a_server_with_absurd_usage_stores_its_answers_and_spends_nothing_negative(
        tmp_path: Path) -> None:
    """End to end: the answers are stored (no ``OverflowError`` traceback), the counts unknown, and the run
    directory's spend, which ``--max-cost`` caps, never goes down."""
    for name in ("negative", "huge"):
        run_dir = tmp_path / name
        with FakeServer.thread(FakeScript(body=_body({"content": "[f(a=1)]"}, usage=USAGES[name][0]))) as server:
            done = subprocess.run(
                [sys.executable, "-m", "promptgrid.matrix.cli", "run", "demo", "--dataset", "mini", "--limit", "1",
                 "--model", "openai/gpt-4o-mini", "--api-base", server.url, "--no-progress", "--max-cost", "1",
                 "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=300,
                env={**os.environ, "OPENAI_API_KEY": "sk-test-usage", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Traceback" not in done.stderr
        with sqlite3.connect(run_dir / "store.sqlite3") as db:  # (the demo's constrained variants: unsupported)
            rows = db.execute("SELECT input_tokens, output_tokens, cost_usd FROM calls WHERE status = 'done'")
            assert set(rows) == {(None, 5, None)}, name
            assert db.execute("SELECT COUNT(*) FROM calls WHERE status = 'error'").fetchone() == (0,)


@pytest.mark.parametrize(("value", "count", "price"), [
    (0, 0, 0.0), (7, 7, 7.0), (10**9, 10**9, 1e9), (10**9 + 1, None, 1e9 + 1), (-1, None, None), (True, None, None),
    (1.5, None, 1.5), ("3", None, None), (None, None, None), (float("nan"), None, None), (float("inf"), None, None),
])
def test_what_a_provider_counts_and_charges_is_kept_only_in_range(value: Any, count: int | None,
                                                                   price: float | None) -> None:
    from promptgrid.matrix.clients._base import provider_count, usd

    assert provider_count(value) == count and usd(value) == price


def test_a_single_turn_answer_is_stored_within_the_parsers_bound_as_a_conversation_step_is(tmp_path: Path) -> None:
    """A 3 MB answer is stored cut to one character past the parsers' input bound (it still fails to decode as
    too long, as it did whole), not whole: a server answering megabytes cannot fill the disk."""
    from promptgrid.matrix.clients import MAX_STORED_ANSWER_CHARS

    run_dir = tmp_path / "run"
    text = "[f(a=1)]" + "x" * 3_000_000
    with FakeServer.thread(FakeScript(body=_body({"content": text}))) as server:
        done = subprocess.run(
            [sys.executable, "-m", "promptgrid.matrix.cli", "run", "bfcl_v4", "--dataset", "mini", "--limit", "1",
             "--variant", "python->python,False", "--model", "openai/m", "--api-base", server.url, "--no-progress",
             "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=300,
            env={**os.environ, "OPENAI_API_KEY": "sk-test-long", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr[-2000:]
    with sqlite3.connect(run_dir / "store.sqlite3") as db:
        (stored,) = db.execute("SELECT response FROM calls").fetchone()
        (verdict,) = db.execute("SELECT verdict FROM jobs").fetchone()
    assert stored == text[:MAX_STORED_ANSWER_CHARS + 1]
    assert json.loads(verdict)["failure_mode"] == "malformed_call"  # too long to decode, whole or cut
    assert (run_dir / "store.sqlite3").stat().st_size < 2 * MAX_STORED_ANSWER_CHARS
