"""The fake server itself: formats, faults, determinism, the request log."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from promptgrid.records import messages_sha256
from support.fake_server import FakeScript, FakeServer, auto_answer, request_hash


def post(url: str, messages: list[dict], **extra) -> tuple[int, dict, dict]:
    body = json.dumps({"model": "m", "messages": messages, **extra}).encode()
    req = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, dict(r.headers), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read())


MSG = [{"role": "system", "content": 'Use <TOOLCALL>```json\n[{"function":"func_name1"}]```</TOOLCALL>. '
        '<function name="lookup">'}, {"role": "user", "content": "hi"}]


def test_hash_matches_prompt_sha256() -> None:
    assert request_hash(MSG) == messages_sha256(MSG)


def test_auto_answer_follows_the_prompt() -> None:
    assert auto_answer({"messages": MSG}) == '<TOOLCALL>[{"function": "lookup", "parameters": {}}]</TOOLCALL>'
    assert auto_answer({"messages": [{"role": "user", "content": "x"}]}) == "[get_weather()]"
    assert auto_answer({"messages": MSG}, other_format=True).startswith('<TOOLCALL><functions>')
    assert auto_answer({"messages": MSG}, wrap=True).startswith("```\n<TOOLCALL>")


def test_fail_first_then_succeed_and_log() -> None:
    with FakeServer.thread(FakeScript(fail_first=2, retry_after_s=1.5)) as srv:
        results = [post(srv.url, MSG) for _ in range(3)]
        log = srv.requests()
    assert [r[0] for r in results] == [429, 429, 200]
    assert results[0][1]["Retry-After"] == "1.5"
    assert [e["n"] for e in log] == [0, 1, 2] and {e["hash"] for e in log} == {request_hash(MSG)}
    assert results[2][2]["usage"]["prompt_tokens"] > 0


def test_faults_are_reproducible(tmp_path) -> None:
    script = FakeScript(p_rate_limit=0.3, p_server_error=0.2, seed=5)

    def outcomes() -> list[str]:
        with FakeServer.subprocess(script, log_path=tmp_path / f"log{len(list(tmp_path.iterdir()))}.jsonl") as srv:
            for i in range(40):
                post(srv.url, [{"role": "user", "content": str(i)}])
            return [e["outcome"] for e in srv.requests()]

    first, second = outcomes(), outcomes()
    assert first == second and {"ok", "status_429", "status_500"} == set(first)


@pytest.mark.parametrize("status", [400, 401, 404])
def test_fixed_status(status: int) -> None:
    with FakeServer.thread(FakeScript(status=status)) as srv:
        code, _, body = post(srv.url, MSG)
    assert code == status and "message" in body["error"]
