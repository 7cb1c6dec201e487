"""The batch runner (``run --batch``) against an in-memory batch API: same results as online, limits, resume
after a crash at every step with no key uploaded or batched twice, expired and failed lines, status."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.running.batch import BATCH_DIR
from promptgrid.matrix.running.session import BatchMode, execute, run_status
from promptgrid.matrix.running.store import RunStore
from support.batches import Crash, MemoryBatchAPI
from support.builders import bfcl_variants, numbered_cases
from support.running import answering_server, config, prepared, stand_in_score

MODEL = "openai/fake-model"
FAST = BatchMode(wait=True, poll_s=0.001)


def _prep(run_dir: Path, *, cases: int = 12, variants: int = 3, api_base: str = "http://127.0.0.1:9/v1") -> Any:
    return prepared(config(run_dir, model=MODEL, api_base=api_base), bfcl_variants(variants), numbered_cases(cases))


def _batch_run(prep: Any, api: MemoryBatchAPI, *, mode: BatchMode = FAST, **kwargs: Any) -> Any:
    return asyncio.run(execute(prep, scorer=stand_in_score, batch=mode, backends={MODEL: api.backend()}, **kwargs))


def _rows(run_dir: Path) -> list[tuple[Any, ...]]:
    with RunStore(run_dir, readonly=True) as store:
        return sorted((r.variant_id, r.case_id, r.repeat, r.status, r.response, r.valid, r.error_kind)
                      for r in store.rows(include_pending=True))


def test_batch_run_stores_what_an_online_run_stores(tmp_path: Path) -> None:
    api = MemoryBatchAPI()
    summary = _batch_run(_prep(tmp_path / "batch"), api)
    assert summary.batch and summary.batches == 1 and summary.batch_jobs == 36 and summary.sent == 36
    with answering_server() as server:
        asyncio.run(execute(_prep(tmp_path / "online", api_base=server.url), scorer=stand_in_score))
    batch_rows, online_rows = _rows(tmp_path / "batch"), _rows(tmp_path / "online")
    assert len(batch_rows) == 36 and all(r[3] == "done" and r[5] is True for r in batch_rows)
    assert batch_rows == online_rows
    with RunStore(tmp_path / "batch", readonly=True) as store:
        assert [b.state for b in store.batches()] == ["collected"]
        assert store.spend() > 0  # recorded at the backend's (batch) price
    assert not list((tmp_path / "batch" / BATCH_DIR).glob("*.jsonl"))  # collected: its input file is removed
    again = _batch_run(_prep(tmp_path / "batch"), api)
    assert again.batches == 0 and again.sent == 0 and again.cached == 36


def test_batches_are_split_at_the_request_and_size_limits(tmp_path: Path) -> None:
    api = MemoryBatchAPI(max_requests=10)
    _batch_run(_prep(tmp_path / "a"), api)
    assert [len(keys) for kind, keys in api.log if kind == "upload"] == [10, 10, 10, 6]
    one_line = len(api.files["file-0"][1].splitlines()[0]) + 1
    api = MemoryBatchAPI(max_bytes=one_line * 5 + 5)
    _batch_run(_prep(tmp_path / "b"), api)
    sizes = [len(data) for name, data in api.files.values() if name.startswith("pg-")]
    assert all(size <= one_line * 5 + 5 for size in sizes) and sum(
        len(keys) for kind, keys in api.log if kind == "upload") == 36
    assert _rows(tmp_path / "a") == _rows(tmp_path / "b")


@pytest.mark.parametrize("step", ["upload", "submit", "status", "download", "collect"])
def test_a_crash_at_any_step_resumes_with_no_key_sent_twice_and_none_lost(tmp_path: Path, step: str) -> None:
    api = MemoryBatchAPI(max_requests=10, crash_at=step)
    with pytest.raises(Crash):
        _batch_run(_prep(tmp_path), api)
    summary = _batch_run(_prep(tmp_path), api)
    assert summary.stopped is None
    uploaded, batched = api.uploaded(), api.batched()
    assert len(uploaded) == 36 and set(uploaded.values()) == {1}, f"uploaded twice: {uploaded.most_common(3)}"
    assert len(batched) == 36 and set(batched.values()) == {1}
    rows = _rows(tmp_path)
    assert len(rows) == 36 and all(r[3] == "done" and r[5] is True for r in rows)


def test_expired_lines_are_typed_errors_and_retry_errors_batches_them_again(tmp_path: Path) -> None:
    api = MemoryBatchAPI(expire_after=20)
    summary = _batch_run(_prep(tmp_path), api)
    assert summary.errors == 16 and summary.error_kinds == {"expired": 16}
    assert Counter(r[3] for r in _rows(tmp_path)) == {"done": 20, "error": 16}
    api.expire_after = None
    again = _batch_run(_prep(tmp_path), api)  # errors are final without --retry-errors
    assert again.batches == 0
    again = _batch_run(_prep(tmp_path), api, retry_errors=True)
    assert again.batches == 1 and again.batch_jobs == 16 and again.errors == 0
    assert all(r[3] == "done" for r in _rows(tmp_path))


def test_failed_lines_are_stored_as_server_errors(tmp_path: Path) -> None:
    prep = _prep(tmp_path)
    bad = frozenset(_keys(prep)[:4])
    summary = _batch_run(prep, MemoryBatchAPI(fail_keys=bad))
    assert summary.error_kinds == {"server": 4}
    with RunStore(tmp_path, readonly=True) as store:
        assert {store.call(k)["status"] for k in bad} == {"error"}


def test_keys_in_a_live_batch_are_not_sent_online_and_status_collects_them(tmp_path: Path) -> None:
    api = MemoryBatchAPI(polls=1000)
    summary = _batch_run(_prep(tmp_path), api, mode=BatchMode(wait=False, poll_s=0.001))
    assert summary.batches == 1 and summary.batches_live == 1 and summary.sent == 0
    with answering_server() as server:
        online = asyncio.run(execute(_prep(tmp_path, api_base=server.url), scorer=stand_in_score))
        assert online.sent == 0 and online.in_batch == 36 and server.requests() == []
    api.polls = 0
    st = asyncio.run(run_status(tmp_path, scorer=stand_in_score, backends={MODEL: api.backend()}))
    assert st.collected is not None and st.collected.answers == 36 and not st.live
    assert st.models == [(MODEL, 36, 36, 0, 0, 0)]


def test_status_without_poll_only_reads(tmp_path: Path) -> None:
    api = MemoryBatchAPI(polls=1000)
    _batch_run(_prep(tmp_path), api, mode=BatchMode(wait=False, poll_s=0.001))
    before = len(api.log)
    st = asyncio.run(run_status(tmp_path, poll=False))
    assert st.collected is None and len(st.live) == 1 and len(api.log) == before
    assert st.models == [(MODEL, 36, 0, 0, 36, 0)]


def test_a_model_without_a_batch_api_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    prep = prepared(config(tmp_path, model="fake/auto"), bfcl_variants(2), numbered_cases(2))
    with pytest.raises(RunError, match="no batch API for fake/auto"):
        asyncio.run(execute(prep, scorer=stand_in_score, batch=FAST))


def _keys(prep: Any) -> list[str]:
    from promptgrid.matrix.running.plan import iter_jobs

    return sorted({j.key for j in iter_jobs(MODEL, prep.config.models[0].params, prep.variants, prep.cases, 1,
                                            prep.renderer)})


def test_a_remainder_below_the_providers_minimum_is_left_pending_not_padded(tmp_path: Path) -> None:
    api = MemoryBatchAPI(max_requests=10, min_requests=8)
    summary = _batch_run(_prep(tmp_path), api)
    assert [len(keys) for kind, keys in api.log if kind == "upload"] == [10, 10, 10]
    assert summary.batch_left == 6
    assert Counter(r[3] for r in _rows(tmp_path)) == {"done": 30, "pending": 6}


def test_a_request_the_batch_api_cannot_carry_is_that_jobs_error(tmp_path: Path) -> None:
    prep = _prep(tmp_path)
    refused = frozenset(_keys(prep)[:2])
    summary = _batch_run(prep, MemoryBatchAPI(refuse_keys=refused))
    assert summary.batch_jobs == 34
    with RunStore(tmp_path, readonly=True) as store:
        assert {store.call(k)["error_kind"] for k in refused} == {"bad_request"}


def test_unreadable_output_lines_are_their_jobs_malformed_errors(tmp_path: Path) -> None:
    garbage = (b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe not utf-8", b'{"custom_id": 7}', b"1e999999", b"null",
               b'{"custom_id": "' + b"x" * 64 + b'", "response": {"status_code": 200, "body": []}}')
    summary = _batch_run(_prep(tmp_path), MemoryBatchAPI(garbage=garbage))
    assert summary.error_kinds == {"malformed": 6} and summary.stopped is None
    assert Counter(r[3] for r in _rows(tmp_path)) == {"done": 30, "error": 6}


def test_bedrock_only_batch_options_on_an_openai_model_are_refused() -> None:
    from promptgrid.matrix.clients import make_client
    from promptgrid.matrix.running.config import ModelSpec
    from promptgrid.matrix.running.session import batch_backends

    spec = ModelSpec(name=MODEL, api_base="http://127.0.0.1:9/v1", batch={"role_arn": "arn:aws:iam::1:role/x"})
    client = make_client(MODEL, api_base=spec.api_base)
    with pytest.raises(RunError, match="role_arn apply to Bedrock only"):
        batch_backends([spec], {MODEL: client})
    assert batch_backends([ModelSpec(name=MODEL, api_base=spec.api_base, batch={"max_requests": 7})],
                          {MODEL: client})[MODEL].max_requests == 7
