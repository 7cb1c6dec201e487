"""``status``, ``report``, ``Run.counts`` and ``run.json`` count the same jobs and the same pending ones, and stay
right after answers are stored outside the invocation that planned them (``import-batch``, a provider batch
collected by ``status``) and after a model was stopped before the runner reached most of its jobs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import promptgrid as pg
from promptgrid.matrix.report import PendingJobs
from promptgrid.matrix.running.session import BatchMode, execute, run_status
from support.batches import MemoryBatchAPI
from support.builders import bfcl_variants, numbered_cases
from support.fake_server import FakeScript, FakeServer, answer_batch_file
from support.running import config, prepared, stand_in_score

MODEL = "openai/fake-model"


def _recorded(run_dir: Path) -> tuple[int, int]:
    last = json.loads((run_dir / "run.json").read_text())["invocations"][-1]
    return last["jobs"], last["pending"]


def _agree(run_dir: Path, *, report: bool = True) -> tuple[Any, ...]:
    """(jobs, pending) as run.json, status, Run.counts and the report give them (the report's pending: None when
    nothing is; left out with ``report=False``, for a run with no result to report on yet)."""
    status = pg.status(run_dir, poll=False)
    counts = pg.open_run(run_dir).counts()
    found = (_recorded(run_dir), (sum(m[1] for m in status.models), sum(m[4] for m in status.models)),
             (counts["jobs"], counts["pending"]))
    if not report:
        return found
    pending = pg.report(run_dir).data.pending
    return (*found, None if pending is None else (pending.planned, pending.pending))


def test_import_batch_lowers_the_pending_count_everywhere(tmp_path: Path) -> None:
    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    summary = pg.export_batch(run_dir, "hosted_vllm/m", requests, grid="demo", dataset="mini:en", limit=3)
    assert (summary.jobs, summary.lines, summary.unsupported) == (12, 6, 6)  # constrained: unsupported, no line
    assert _agree(run_dir) == ((12, 6), (12, 6), (12, 6), (12, 6))
    lines = answer_batch_file(requests.read_bytes()).splitlines()
    results.write_bytes(b"\n".join(lines[:-1]) + b"\n")  # one answer missing
    assert pg.import_batch(run_dir, results).stored == 5
    assert _agree(run_dir) == ((12, 1), (12, 1), (12, 1), (12, 1))
    assert "1 of 12 jobs pending" in pg.report(run_dir).console
    assert "promptgrid import-batch" in pg.report(run_dir).data.pending.note()
    results.write_bytes(b"\n".join(lines) + b"\n")
    pg.import_batch(run_dir, results)
    assert _agree(run_dir) == ((12, 0), (12, 0), (12, 0), None)


def test_a_provider_batch_collected_by_status_is_no_longer_pending(tmp_path: Path) -> None:
    api = MemoryBatchAPI(polls=1000)
    prep = prepared(config(tmp_path, model=MODEL, api_base="http://127.0.0.1:9/v1"), bfcl_variants(3),
                    numbered_cases(12))
    summary = asyncio.run(execute(prep, scorer=stand_in_score, batch=BatchMode(wait=False, poll_s=0.001),
                                  backends={MODEL: api.backend()}))
    assert summary.batches_live == 1
    assert _agree(tmp_path, report=False) == ((36, 36), (36, 36), (36, 36))
    assert "promptgrid status" in PendingJobs.from_run_record(pg.open_run(tmp_path).config, 36).note()
    api.polls = 0
    st = asyncio.run(run_status(tmp_path, scorer=stand_in_score, backends={MODEL: api.backend()}))
    assert st.collected.answers == 36 and st.models == [(MODEL, 36, 36, 0, 0, 0)]
    assert _agree(tmp_path) == ((36, 0), (36, 0), (36, 0), None)


def test_a_stopped_models_unreached_jobs_are_jobs_and_pending(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "wrong-key-0000")
    with FakeServer.thread(FakeScript(status=401)) as srv:  # the first answer stops the model
        prep = prepared(config(tmp_path, api_base=srv.url, concurrency=1), bfcl_variants(3), numbered_cases(200))
        summary = asyncio.run(execute(prep, scorer=stand_in_score))
    assert summary.halted and summary.errors == 1
    status = pg.status(tmp_path, poll=False)
    assert status.models == [(MODEL, 600, 0, 1, 599, 0)]  # not the 256 job rows the runner had reached
    assert _agree(tmp_path) == ((600, 599), (600, 599), (600, 599), (600, 599))
