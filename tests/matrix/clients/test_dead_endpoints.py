"""Endpoints broken for good: a replica answering 404 or refusing its key or every connection leaves the rotation,
the model stops when none is left, and a dead server stops its model within the grace period (kind connection)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.clients import ErrorKind, RetryableError, _router, make_client
from promptgrid.matrix.running import sending
from promptgrid.matrix.running.config import ModelSpec, model_params
from promptgrid.matrix.running.session import build_config, execute
from promptgrid.matrix.running.store import RunStore
from support.builders import bfcl_variants, numbered_cases
from support.fake_server import FakeScript, FakeServer
from support.running import answer_right, config, prepared, stand_in_score

#: Nothing listens here: every connection is refused.
DOWN = "http://127.0.0.1:9/v1"
MSGS = [{"role": "user", "content": "Please call func_1 with x=1."}]


def _run(tmp_path: Path, *urls: str, cases: int = 12) -> tuple[Any, list[dict[str, Any]]]:
    """Run 2 variants x ``cases`` jobs on ``urls``; the summary and the stored calls."""
    spec = ModelSpec("openai/fake-model", model_params({}, 1), api_bases=urls, concurrency=2, timeout=30)
    prep = prepared(config(tmp_path, models=[spec], max_retries=5), bfcl_variants(2), numbered_cases(cases))
    summary = asyncio.run(execute(prep, scorer=stand_in_score))
    with RunStore(tmp_path, readonly=True) as store:
        calls = [{"status": s, "endpoint": e, "attempts": a, "kind": k} for s, e, a, k in store.db.execute(
            "SELECT status, endpoint, attempts, error_kind FROM calls")]
    return summary, calls


@pytest.mark.parametrize("query", ["", "?key=s3cret-key"])
def test_a_replica_answering_404_is_dropped_and_the_other_answers_every_job(tmp_path: Path, query: str) -> None:
    with FakeServer.thread(FakeScript(latency_s=0.02), answer_fn=answer_right) as good, \
            FakeServer.thread(FakeScript(status=404)) as wrong:
        summary, calls = _run(tmp_path, good.url, wrong.url + query)
        asked_wrong = len(wrong.requests())  # chat requests (a path the server does not know is not logged)
    assert summary.halted == {} and summary.error_kinds == {}
    assert len(calls) == 24 and {c["status"] for c in calls} == {"done"} and {c["attempts"] for c in calls} == {1}
    assert {c["endpoint"] for c in calls} == {good.url}
    if not query:
        assert 1 <= asked_wrong <= 4  # only the calls sent to it before its first 404 came back (2 x 2 in flight)


def test_no_endpoint_left_stops_the_model_naming_each_and_why(tmp_path: Path) -> None:
    with FakeServer.thread(FakeScript(status=404)) as wrong, FakeServer.thread(FakeScript(status=401)) as locked:
        summary, calls = _run(tmp_path, wrong.url + "?key=s3cret-key", locked.url)
        asked = len(wrong.requests()) + len(locked.requests())
    why = summary.halted["openai/fake-model"]
    assert "no endpoint of this model is left" in why and "s3cret" not in why
    assert f"{wrong.url}?key=[REDACTED]: answered 404" in why and f"{locked.url}: refused the key" in why
    assert asked <= 8 and len(calls) <= 4  # stopped at once: the other jobs stay pending, nothing retried
    assert {c["kind"] for c in calls} <= {"not_found", "auth"} and {c["attempts"] for c in calls} == {1}


def test_a_replica_refusing_every_connection_leaves_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_router, "GRACE_S", 0.3)
    monkeypatch.setattr(_router, "COOLDOWN_S", 0.0)  # tried again at once: only the grace keeps it in
    with FakeServer.thread(FakeScript(), answer_fn=answer_right) as up:
        client = make_client("openai/fake-model", api_base=[DOWN, up.url])

        async def ask(n: int) -> set[str | None]:
            return {(await client.complete(MSGS, {"max_tokens": 8})).endpoint for _ in range(n)}

        seen = asyncio.run(ask(4))
        time.sleep(0.35)
        seen |= asyncio.run(ask(4))
        removed = dict(client._strategy.removed)
        asyncio.run(client.aclose())
    assert seen == {up.url}  # every call failed over to the live one
    (kind, why), = removed.values()
    assert kind is ErrorKind.CONNECTION and why.startswith("refused every connection for")


def test_a_refused_connection_is_kind_connection_naming_the_endpoint() -> None:
    client = make_client("openai/fake-model", api_base=DOWN)
    with pytest.raises(RetryableError) as info:
        asyncio.run(client.complete(MSGS, {"max_tokens": 8}))
    assert info.value.kind is ErrorKind.CONNECTION and info.value.message.startswith(f"no connection to {DOWN}")


def test_a_dead_server_stops_its_model_after_the_grace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sending, "GRACE_S", 0.5)
    started = time.monotonic()
    summary, calls = _run(tmp_path, DOWN, cases=30)
    took = time.monotonic() - started
    why = summary.halted["openai/fake-model"]
    assert why.startswith("no connection to its server for") and DOWN in why
    assert set(summary.error_kinds) == {"connection"} and {c["kind"] for c in calls} == {"connection"}
    assert len(calls) < 60 and summary.attempts < 200 and took < 20  # not every job retried 6 times


def test_replicas_all_refusing_stop_the_model_naming_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a user runs it (``pg.run``, the run on a worker thread), litellm's Router raises an exception that has
    lost its chain (no __cause__, a RuntimeError as context): a refused connection must still be seen as one,
    or every job is retried 6 times as kind server and the model never stops."""
    import promptgrid as pg

    monkeypatch.setattr(sending, "GRACE_S", 0.5)
    monkeypatch.setattr(_router, "GRACE_S", 0.5)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    other = DOWN.replace(":9/", ":11/")
    started = time.monotonic()
    run = pg.run("demo", "mini", models=["openai/fake-model"], api_base=[DOWN, other], constraints="vllm", limit=12,
                 run_dir=tmp_path / "r", progress=False)
    took = time.monotonic() - started
    assert run.summary is not None
    why = run.summary.halted["openai/fake-model"]
    assert DOWN in why and other in why
    assert set(run.summary.error_kinds) == {"connection"}
    assert run.summary.attempts < 150 and took < 25


def test_user_info_in_api_base_is_refused_before_any_call() -> None:
    with pytest.raises(RunError) as info:
        build_config("bfcl_v4", "mini", models=["openai/served"], api_base="http://user:s3cret-pw@127.0.0.1:9/v1")
    text = str(info.value)
    assert "user name or password" in text and "api_key_env" in text and "s3cret" not in text
    assert "\n" not in text


def test_a_query_in_api_base_is_sent_as_a_query_not_before_the_path() -> None:
    """The OpenAI SDK 3.x appends the path after the whole base URL (``/v1?key=x/chat/completions``, a 404):
    the query is split off and sent as ``extra_query``, for one endpoint and for replicas."""
    from promptgrid.matrix.clients._litellm import split_query

    assert split_query("http://h/v1?key=x&b=") == ("http://h/v1", {"key": "x", "b": ""})
    assert split_query("http://h/v1") == ("http://h/v1", {})
    with FakeServer.thread(FakeScript(), answer_fn=answer_right) as up:
        for bases in (up.url + "?key=s3cret", [up.url + "?key=s3cret", up.url + "?key=other"]):
            client = make_client("openai/fake-model", api_base=bases)
            done = asyncio.run(client.complete(MSGS, {"max_tokens": 8}))
            asyncio.run(client.aclose())
            assert done.text and done.endpoint is not None and "s3cret" not in done.endpoint
