"""The fake server's files and batches endpoints (driven by litellm's own functions), its capacity and outage
knobs, and the offline batch answerer."""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import litellm
import pytest

from promptgrid.matrix.clients import CallError, Completion, decode_result_line
from support.fake_server import FakeScript, FakeServer, answer_batch_file, main

#: Without this litellm's aretrieve_batch downloads a completed batch's output file itself (to price it),
#: which would show in the log as extra files.content requests.
QUIET = {"litellm_metadata": {"batch_ignore_default_logging": True}}


def body(i: int) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": f"question {i} ü"}], "temperature": 0}


def request_line(i: int, **override: Any) -> str:
    line = {"custom_id": f"k{i}", "method": "POST", "url": "/v1/chat/completions", "body": body(i), **override}
    return json.dumps(line, ensure_ascii=False)


def batch_file(n: int) -> bytes:
    return "".join(request_line(i) + "\n" for i in range(n)).encode("utf-8")


def kw(srv: FakeServer) -> dict[str, Any]:
    return {"custom_llm_provider": "openai", "api_base": srv.url, "api_key": "x"}


async def upload_and_create(srv: FakeServer, data: bytes, **extra: Any) -> tuple[Any, Any]:
    f = await litellm.acreate_file(file=("in.jsonl", data, "application/jsonl"), purpose="batch", **kw(srv))
    b = await litellm.acreate_batch(completion_window="24h", endpoint="/v1/chat/completions", input_file_id=f.id,
                                    **extra, **kw(srv))
    return f, b


async def run_batch(srv: FakeServer, data: bytes, polls: int = 10) -> tuple[Any, list[dict], list[dict]]:
    """Upload, create, poll until ended; the final batch and its output and error lines."""
    _, b = await upload_and_create(srv, data)
    for _ in range(polls):
        b = await litellm.aretrieve_batch(batch_id=b.id, **QUIET, **kw(srv))
        if b.status in ("completed", "failed", "expired", "cancelled"):
            break
    lines = []
    for file_id in (b.output_file_id, b.error_file_id):
        content = (await litellm.afile_content(file_id=file_id, **kw(srv))).content if file_id else b""
        lines.append([json.loads(x) for x in content.splitlines()])
    return b, lines[0], lines[1]


def chat(url: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url + "/chat/completions", json.dumps(request).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# ------------------------------------------------------------------------------------------ files + batches


def test_a_batch_goes_through_litellms_files_and_batches_calls() -> None:
    data = batch_file(3)

    async def go(srv: FakeServer) -> dict[str, Any]:
        f, b = await upload_and_create(srv, data, metadata={"promptgrid_batch": "n1"})
        listed = await litellm.afile_list(purpose="batch", **kw(srv))
        states = [b.status]
        for _ in range(3):
            states.append((await litellm.aretrieve_batch(batch_id=b.id, **QUIET, **kw(srv))).status)
        done = await litellm.aretrieve_batch(batch_id=b.id, **QUIET, **kw(srv))
        output = await litellm.afile_content(file_id=done.output_file_id, **kw(srv))
        uploaded = await litellm.afile_content(file_id=f.id, **kw(srv))
        return {"f": f, "b": b, "listed": listed, "states": states, "done": done, "output": output.content,
                "uploaded": uploaded.content}

    with FakeServer.thread() as srv:
        r = asyncio.run(go(srv))
        log = srv.batch_log()
        assert srv.requests() == []  # batch lines are not chat requests
    assert r["f"].object == "file" and r["f"].purpose == "batch" and r["f"].bytes == len(data)
    assert r["uploaded"] == data  # multipart upload and download keep the bytes exactly (UTF-8 included)
    assert [x.id for x in r["listed"].data] == [r["f"].id]
    assert r["b"].metadata == {"promptgrid_batch": "n1"} and r["b"].input_file_id == r["f"].id
    assert r["states"] == ["validating", "in_progress", "in_progress", "completed"]  # batch_polls=2
    done = r["done"]
    assert done.error_file_id is None and done.completed_at and done.in_progress_at
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (3, 3, 0)
    lines = [json.loads(x) for x in r["output"].splitlines()]
    assert [x["custom_id"] for x in lines] == ["k0", "k1", "k2"]
    with FakeServer.thread() as online:  # each line answered as the chat endpoint answers its body
        for i, line in enumerate(lines):
            assert line["id"].startswith("batch_req_") and line["error"] is None
            assert line["response"]["status_code"] == 200 and line["response"]["request_id"]
            assert line["response"]["body"]["choices"] == chat(online.url, body(i))[1]["choices"]
            assert isinstance(decode_result_line(json.dumps(line), "out")[1], Completion)
    assert [e["endpoint"] for e in log] == ["files.create", "batches.create", "files.list"] + [
        "batches.retrieve"] * 4 + ["files.content"] * 2
    assert log[0]["lines"] == 3 and log[0]["custom_ids"] == ["k0", "k1", "k2"] and log[0]["file_id"] == r["f"].id
    assert log[1]["custom_ids"] == ["k0", "k1", "k2"] and log[1]["input_file_id"] == r["f"].id
    assert log[1]["batch_id"] == r["b"].id and log[1]["metadata"] == {"promptgrid_batch": "n1"}
    assert [e["batch_status"] for e in log[3:7]] == ["in_progress", "in_progress", "completed", "completed"]
    assert log[5]["completed"] == 3 and "completed" not in log[6]


def test_batches_are_listed_newest_first_in_pages() -> None:
    async def go(srv: FakeServer) -> tuple[list[str], Any, Any]:
        ids = [(await upload_and_create(srv, batch_file(1)))[1].id for _ in range(3)]
        first = await litellm.alist_batches(limit=2, **kw(srv))
        rest = await litellm.alist_batches(limit=2, after=first.data[-1].id, **kw(srv))
        return ids, first, rest

    with FakeServer.thread() as srv:
        ids, first, rest = asyncio.run(go(srv))
    assert [b.id for b in first.data] == ids[:0:-1] and first.has_more
    assert [b.id for b in rest.data] == ids[:1] and not rest.has_more


def test_files_retrieve_list_and_delete_over_http() -> None:
    async def go(srv: FakeServer) -> Any:
        return await litellm.acreate_file(file=("a.jsonl", b"x\n", "application/jsonl"), purpose="batch", **kw(srv))

    with FakeServer.thread() as srv:
        f = asyncio.run(go(srv))
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)

        def call(method: str, path: str) -> tuple[int, Any]:
            conn.request(method, "/v1" + path)
            r = conn.getresponse()
            return r.status, json.loads(r.read())

        assert call("GET", f"/files/{f.id}") == (200, f.model_dump(exclude_none=True) | {
            "expires_at": None, "status_details": None})
        assert call("GET", "/files?purpose=fine-tune")[1]["data"] == []
        assert call("DELETE", f"/files/{f.id}") == (200, {"id": f.id, "object": "file", "deleted": True})
        assert call("GET", f"/files/{f.id}/content")[0] == 404
        assert call("GET", "/batches/batch_nope")[0] == 404
        assert call("GET", "/nothing")[0] == 404
        conn.close()


# ------------------------------------------------------------------------------------------ script fields


def test_batch_polls_zero_ends_at_the_first_retrieve() -> None:
    with FakeServer.thread(FakeScript(batch_polls=0)) as srv:
        b, out, err = asyncio.run(run_batch(srv, batch_file(2), polls=1))
    assert b.status == "completed" and len(out) == 2 and err == []


def test_line_errors_and_chat_faults_go_to_the_error_file() -> None:
    with FakeServer.thread(FakeScript(p_batch_line_error=1.0)) as srv:
        b, out, err = asyncio.run(run_batch(srv, batch_file(3)))
    assert b.status == "completed" and b.output_file_id is None and out == []
    assert (b.request_counts.completed, b.request_counts.failed) == (0, 3)
    assert {e["response"]["status_code"] for e in err} == {500} and all(e["error"] is None for e in err)
    assert "error" in err[0]["response"]["body"]
    with FakeServer.thread(FakeScript(p_server_error=0.5, seed=3)) as srv:  # the chat script's faults, per line
        b, out, err = asyncio.run(run_batch(srv, batch_file(20)))
    assert out and err and len(out) + len(err) == 20 and (b.request_counts.failed == len(err))
    assert sorted(x["custom_id"] for x in out + err) == sorted(f"k{i}" for i in range(20))
    decoded = decode_result_line(json.dumps(err[0]), "err")
    assert isinstance(decoded[1], CallError) and decoded[0] == err[0]["custom_id"]


def test_fail_first_counts_batch_lines_like_chat_requests() -> None:
    with FakeServer.thread(FakeScript(fail_first=1, fail_first_status=500, batch_polls=0)) as srv:
        _, out1, err1 = asyncio.run(run_batch(srv, batch_file(2)))
        _, out2, err2 = asyncio.run(run_batch(srv, batch_file(2)))  # the same bodies again: now answered
    assert (len(out1), len(err1), len(out2), len(err2)) == (0, 2, 2, 0)


def test_expire_after_answers_the_first_lines_and_expires_the_rest() -> None:
    with FakeServer.thread(FakeScript(batch_expire_after=2, batch_polls=0)) as srv:
        b, out, err = asyncio.run(run_batch(srv, batch_file(5)))
    assert b.status == "expired" and b.expired_at and [x["custom_id"] for x in out] == ["k0", "k1"]
    assert [x["custom_id"] for x in err] == ["k2", "k3", "k4"]
    assert all(x["response"] is None and x["error"]["code"] == "batch_expired" for x in err)


def test_batch_fail_fails_at_validation_without_output() -> None:
    with FakeServer.thread(FakeScript(batch_fail=True)) as srv:
        b, out, err = asyncio.run(run_batch(srv, batch_file(2)))
    assert b.status == "failed" and b.failed_at and b.output_file_id is None and b.error_file_id is None
    (error,) = b.errors.data
    assert error.code and error.message and error.line == 1


@pytest.mark.parametrize(("lines", "code", "needle"), [
    ([request_line(0), request_line(1, custom_id="k0")], "duplicate_custom_id", "'k0'"),
    ([request_line(0, url="/v1/embeddings")], "invalid_url", "/v1/chat/completions"),
    ([request_line(0, method="GET")], "invalid_method", "POST"),
    (['{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions"}'], "missing_required_parameter", "body"),
    (["not json"], "invalid_json_line", "JSON"),
])
def test_an_invalid_input_file_fails_the_batch_naming_the_line(lines: list[str], code: str, needle: str) -> None:
    with FakeServer.thread() as srv:
        b, out, err = asyncio.run(run_batch(srv, "\n".join(lines).encode()))
    assert b.status == "failed" and out == err == []
    (error,) = b.errors.data
    assert error.code == code and needle in error.message and error.line == len(lines)


def test_a_file_over_batch_max_requests_is_refused_at_create() -> None:
    with FakeServer.thread(FakeScript(batch_max_requests=2)) as srv:
        with pytest.raises(Exception, match="at most 2") as caught:
            asyncio.run(upload_and_create(srv, batch_file(3)))
        assert getattr(caught.value, "status_code", None) == 400
        assert [e["status"] for e in srv.batch_log()] == [200, 400]


def test_a_cancelled_batch_puts_every_line_in_the_error_file() -> None:
    async def go(srv: FakeServer) -> tuple[Any, Any, bytes]:
        _, b = await upload_and_create(srv, batch_file(2))
        cancelling = await litellm.acancel_batch(batch_id=b.id, **kw(srv))
        done = await litellm.aretrieve_batch(batch_id=b.id, **QUIET, **kw(srv))
        return cancelling, done, (await litellm.afile_content(file_id=done.error_file_id, **kw(srv))).content

    with FakeServer.thread() as srv:
        cancelling, done, content = asyncio.run(go(srv))
    assert cancelling.status == "cancelling" and done.status == "cancelled" and done.output_file_id is None
    assert [json.loads(x)["error"]["code"] for x in content.splitlines()] == ["batch_cancelled"] * 2


# ------------------------------------------------------------------------------------------ block


@pytest.mark.parametrize("endpoint", ["files.create", "batches.create"])
def test_a_blocked_request_changes_state_first_and_never_answers(endpoint: str) -> None:
    async def go(srv: FakeServer) -> tuple[Any, Any]:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(upload_and_create(srv, batch_file(2)), 1.0)
        return (await litellm.afile_list(purpose="batch", **kw(srv)),
                await litellm.alist_batches(**kw(srv)))

    with FakeServer.thread(FakeScript(block=endpoint, hang_s=30)) as srv:
        files, batches = asyncio.run(go(srv))
        log = srv.batch_log()
    assert log[-3]["endpoint"] == endpoint and log[-3]["blocked"] is True and log[-3]["custom_ids"] == ["k0", "k1"]
    assert len(files.data) == 1  # the provider stored the file the client never heard of
    assert len(batches.data) == (1 if endpoint == "batches.create" else 0)


def test_block_nth_lets_the_first_requests_through() -> None:
    async def go(srv: FakeServer) -> list[str]:
        _, b = await upload_and_create(srv, batch_file(1))
        states = [(await litellm.aretrieve_batch(batch_id=b.id, **QUIET, **kw(srv))).status]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(litellm.aretrieve_batch(batch_id=b.id, **QUIET, **kw(srv)), 1.0)
        states.append((await litellm.aretrieve_batch(batch_id=b.id, **QUIET, **kw(srv))).status)
        return states

    with FakeServer.thread(FakeScript(block="batches.retrieve", block_nth=2, batch_polls=1, hang_s=30)) as srv:
        states = asyncio.run(go(srv))
        retrieves = [e for e in srv.batch_log() if e["endpoint"] == "batches.retrieve"]
    # The blocked (2nd) retrieve completed the batch before hanging: the 3rd finds it completed.
    assert states == ["in_progress", "completed"]
    assert [e.get("blocked", False) for e in retrieves] == [False, True, False]
    assert retrieves[1]["batch_status"] == "completed"


def test_a_client_killed_inside_a_blocked_upload_left_the_file_on_the_server(tmp_path: Path) -> None:
    """The crash-test pattern: a subprocess server, a client process seen blocked in the log, SIGKILL."""
    upload = ("import httpx, sys; httpx.post(sys.argv[1] + '/files', data={'purpose': 'batch'}, "
              "files={'file': ('in.jsonl', sys.stdin.buffer.read())}, timeout=60)")
    with FakeServer.subprocess(FakeScript(block="files.create"), log_path=tmp_path / "log.jsonl") as srv:
        client = subprocess.Popen([sys.executable, "-c", upload, srv.url], stdin=subprocess.PIPE)
        assert client.stdin is not None
        client.stdin.write(batch_file(2))
        client.stdin.close()
        deadline = time.monotonic() + 30
        while not any(e.get("blocked") for e in srv.batch_log()) and time.monotonic() < deadline:
            time.sleep(0.05)
        client.kill()
        assert client.wait() == -signal.SIGKILL
        (entry,) = srv.batch_log()
        files = asyncio.run(litellm.afile_list(purpose="batch", **kw(srv)))
    assert entry["blocked"] and entry["custom_ids"] == ["k0", "k1"]
    assert [f.id for f in files.data] == [entry["file_id"]]


def test_block_names_a_known_endpoint() -> None:
    with pytest.raises(ValueError, match="batches.create"):
        FakeScript(block="batch.create")
    with pytest.raises(ValueError, match="not a files or batches endpoint"):
        FakeScript(block="chat.completions")  # p_hang hangs chat requests


# ------------------------------------------------------------------------------------------ capacity, outage


def _burst(url: str, n: int) -> float:
    """Seconds to answer ``n`` concurrent chat requests."""
    threads = [threading.Thread(target=chat, args=(url, body(i))) for i in range(n)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def test_max_concurrency_caps_throughput() -> None:
    with FakeServer.thread(FakeScript(latency_s=0.1, max_concurrency=2)) as srv:
        capped = _burst(srv.url, 12)  # 6 rounds of 0.1 s
    with FakeServer.thread(FakeScript(latency_s=0.1, max_concurrency=6)) as srv:
        wider = _burst(srv.url, 12)  # 2 rounds
    assert 0.6 <= capped < 2.0 and 0.2 <= wider < capped
    assert capped / wider > 1.8


def test_down_after_refuses_connections_and_closes_open_ones() -> None:
    with FakeServer.thread(FakeScript(down_after=3)) as srv:
        kept = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        kept.request("POST", "/v1/chat/completions", json.dumps(body(0)), {"Content-Type": "application/json"})
        assert kept.getresponse().read()
        assert chat(srv.url, body(1))[0] == 200 and chat(srv.url, body(2))[0] == 200
        with pytest.raises(urllib.error.URLError):  # refused: nothing listens any more
            chat(srv.url, body(3))
        with pytest.raises((http.client.HTTPException, ConnectionError)):  # the open connection was closed
            kept.request("POST", "/v1/chat/completions", json.dumps(body(4)), {"Content-Type": "application/json"})
            kept.getresponse()
        kept.close()
        assert len(srv.requests()) == 3


# ------------------------------------------------------------------------------------------ offline answers


def test_answer_batch_file_answers_every_line_in_order(tmp_path: Path) -> None:
    out = answer_batch_file(batch_file(4), FakeScript(batch_expire_after=3))
    lines = [decode_result_line(x, "out") for x in out.splitlines()]
    assert [x[0] for x in lines] == ["k0", "k1", "k2", "k3"]
    assert all(isinstance(x[1], Completion) for x in lines[:3]) and isinstance(lines[3][1], CallError)
    source, target = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    source.write_bytes(batch_file(2))
    assert main(["--answer-batch", str(source), str(target)]) == 0
    assert [json.loads(x)["custom_id"] for x in target.read_bytes().splitlines()] == ["k0", "k1"]


def test_answer_batch_file_refuses_an_invalid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = (request_line(0) + "\n" + request_line(1, custom_id="k0") + "\n").encode()
    with pytest.raises(ValueError, match="line 2: The custom_id 'k0' is a duplicate"):
        answer_batch_file(bad)
    (tmp_path / "bad.jsonl").write_bytes(bad)
    assert main(["--answer-batch", str(tmp_path / "bad.jsonl"), str(tmp_path / "out.jsonl")]) == 2
    assert "duplicate" in capsys.readouterr().err and not (tmp_path / "out.jsonl").exists()
