"""``--batch`` through litellm's files + batches calls against the fake server: the request lines it uploads,
rows equal to an online run's, failed and expired lines, and a SIGKILL at each stage of a batch (a process of
its own) resumed with no job uploaded or batched twice and none lost (counts from the server's log)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.running.session import BatchMode, execute
from promptgrid.matrix.running.store import RunStore
from support.builders import bfcl_variants, numbered_cases
from support.fake_server import FakeScript, FakeServer
from support.running import (
    answer_right,
    batch_uploads,
    child_command,
    child_env,
    config,
    prepared,
    stand_in_score,
)

MODEL = "openai/fake-model"


def _prep(run_dir: Path, url: str, cases: int = 6, variants: int = 3) -> Any:
    return prepared(config(run_dir, model=MODEL, api_base=url), bfcl_variants(variants), numbered_cases(cases))


def _rows(run_dir: Path) -> list[tuple[Any, ...]]:
    with RunStore(run_dir, readonly=True) as store:
        return sorted((r.variant_id, r.case_id, r.status, r.response, r.valid, r.error_kind)
                      for r in store.rows(include_pending=True))


def test_batch_run_uploads_the_online_request_and_stores_the_online_rows(tmp_path: Path) -> None:
    with FakeServer.thread(FakeScript(batch_polls=2), answer_fn=answer_right) as server:
        summary = asyncio.run(execute(_prep(tmp_path / "b", server.url), scorer=stand_in_score,
                                      batch=BatchMode(poll_s=0.01)))
        assert summary.batches == 1 and summary.sent == 18 and summary.errors == 0
        assert server.requests() == []  # nothing went to /chat/completions
        [upload] = [e for e in server.batch_log() if e["endpoint"] == "files.create"]
        assert upload["purpose"] == "batch" and upload["lines"] == 18
        [create] = [e for e in server.batch_log() if e["endpoint"] == "batches.create"]
        assert create["metadata"] == {"promptgrid_batch": upload["filename"]}
        asyncio.run(execute(_prep(tmp_path / "o", server.url), scorer=stand_in_score))
        online = server.requests()
    assert _rows(tmp_path / "b") == _rows(tmp_path / "o")
    assert all(r[2] == "done" and r[4] is True for r in _rows(tmp_path / "b"))
    assert not list((tmp_path / "b" / "batches").glob("*.jsonl"))  # collected: its input file is removed
    assert len({e["hash"] for e in online}) == 18


def test_failed_and_expired_lines_are_typed_errors(tmp_path: Path) -> None:
    script = FakeScript(batch_polls=1, batch_expire_after=10, p_batch_line_error=0.3, seed=3)
    with FakeServer.thread(script, answer_fn=answer_right) as server:
        summary = asyncio.run(execute(_prep(tmp_path, server.url), scorer=stand_in_score,
                                      batch=BatchMode(poll_s=0.01)))
    kinds = Counter(r[5] for r in _rows(tmp_path) if r[2] == "error")
    assert kinds["expired"] == 8 and kinds["server"] >= 1 and summary.errors == sum(kinds.values())
    assert sum(1 for r in _rows(tmp_path) if r[2] == "done") == 18 - summary.errors


def test_a_key_a_batch_echoes_beside_its_answers_is_not_stored(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch output file is the provider's text: its lines' model and finish reason are stored redacted and
    bounded, as the answers are (litellm passes a batch line's fields through as they are)."""
    from promptgrid.redact import REDACTED

    key = "sk-batch-echo-4b7c9d2e1f0a"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeServer.thread(FakeScript(batch_polls=1, echo_auth_in_fields=True), answer_fn=answer_right) as server:
        summary = asyncio.run(execute(_prep(tmp_path, server.url), scorer=stand_in_score,
                                      batch=BatchMode(poll_s=0.01)))
    assert summary.batches == 1 and summary.errors == 0
    with RunStore(tmp_path, readonly=True) as store:
        fields = {(r.raw_model, r.finish_reason) for r in store.rows()}
    assert fields == {(f"Bearer {REDACTED}", f"Bearer {REDACTED}")}  # echoed, and redacted
    assert [p.name for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()] == []


@pytest.mark.slow
@pytest.mark.parametrize(("endpoint", "nth", "p_error"), [
    ("files.create", 1, 0.0), ("batches.create", 1, 0.0), ("batches.retrieve", 2, 0.0), ("files.content", 2, 0.2)])
def test_sigkill_at_each_stage_resumes_without_sending_a_job_twice(tmp_path: Path, endpoint: str, nth: int,
                                                                   p_error: float) -> None:
    script = FakeScript(batch_polls=2, block=endpoint, block_nth=nth, p_batch_line_error=p_error, seed=1)
    with FakeServer.subprocess(script) as server:
        opts = {"run_dir": str(tmp_path), "api_base": server.url, "cases": 8, "variants": 4, "batch": True}
        proc = subprocess.Popen(child_command(opts), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=child_env())
        deadline = time.monotonic() + 120
        while sum(1 for e in server.batch_log() if e["endpoint"] == endpoint) < nth:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached the blocked step"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        again = subprocess.run(child_command(opts), capture_output=True, text=True, env=child_env(), timeout=120)
        assert again.returncode == 0, again.stderr
        uploaded, batched = batch_uploads(server)
    assert len(uploaded) == 32 and set(uploaded.values()) == {1}
    assert len(batched) == 32 and set(batched.values()) == {1}
    statuses = Counter(r[2] for r in _rows(tmp_path))
    assert statuses["pending"] == 0 and sum(statuses.values()) == 32
    assert (statuses["error"] > 0) == (p_error > 0)
