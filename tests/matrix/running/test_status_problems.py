"""``promptgrid status`` when the batch API is down or answers garbage (the fake server's files and batches
endpoints on 127.0.0.1): one redacted line per batch it could not poll, exit 1, no traceback; the batch stays
as recorded and is polled again once the API answers."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.running.session import BatchMode, execute, run_status
from support.builders import bfcl_variants, numbered_cases
from support.fake_server import FakeScript, FakeServer
from support.running import answer_right, config, prepared, stand_in_score

MODEL = "openai/fake-model"
KEY = "sk-test-status-0123456789abcdef"
GARBAGE = json.dumps({"id": 12, "object": {"a": "b"}, "status": ["x"] * 20000, "request_counts": "lots"})


def _submitted(tmp_path: Path, server: FakeServer) -> Path:
    run_dir = tmp_path / "run"
    # one retry: the run's policy is what status retries the batch API with (a 503 asks for Retry-After waits)
    prep = prepared(config(run_dir, model=MODEL, api_base=server.url, max_retries=1), bfcl_variants(2),
                    numbered_cases(3))
    summary = asyncio.run(execute(prep, scorer=stand_in_score, batch=BatchMode(wait=False, poll_s=0.01)))
    assert summary.batches == 1 and summary.batches_live == 1
    return run_dir


@pytest.mark.parametrize(("status", "body", "kind"), [
    (200, GARBAGE, "malformed"),
    (503, "<html>" + "down " * 60_000 + f"{KEY}</html>", "server"),
])
def test_a_batch_api_that_is_down_or_answers_garbage_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str], status: int,
                                                                 body: str, kind: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    script = FakeScript(batch_polls=1)
    with FakeServer.thread(script, answer_fn=answer_right) as server:
        run_dir = _submitted(tmp_path, server)
        handler: Any = server._handler
        handler.script = dataclasses.replace(script, api_status=status, api_body=body)
        st = asyncio.run(run_status(run_dir, scorer=stand_in_score))
        assert len(st.problems) == 1 and len(st.live) == 1  # left as recorded
        [problem] = st.problems
        assert f"batch API {kind} error" in problem and "\n" not in problem and len(problem) <= 500
        assert "chat completion" not in problem  # a batch API answer was asked for, and is named
        capsys.readouterr()
        assert main(["status", str(run_dir)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("promptgrid: batch pg-") and "Traceback" not in err
        assert KEY not in err and "site-packages" not in err
        handler.script = script  # the API is back: the same command collects the batch
        assert main(["status", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "collected now: 6 answers" in out
