"""export-batch -> answers from the fake server -> import-batch: the rows an online run stores, idempotent, and
every bad line of an import refused before anything is stored."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.calling import RequestRenderer
from promptgrid.matrix.running.config import ModelSpec, model_params
from promptgrid.matrix.running.exchange import export_config, export_requests, import_results
from promptgrid.matrix.running.session import Prepared, execute
from promptgrid.matrix.running.store import SUBMITTED, BatchJob, BatchRecord, RunStore
from promptgrid.matrix.scoring import score
from promptgrid.templates import Renderer
from promptgrid.variants import Variant
from support.builders import numbered_cases
from support.fake_server import FakeScript, FakeServer, answer_batch_file
from support.running import config

MODEL = "hosted_vllm/served"
PLAIN = Variant()
TWIN = Variant(instruction_language="query")  # renders as PLAIN for English cases: one line for both
NATIVE = Variant(call_mode="native")
JSON_C = Variant(return_format="json", call_mode="constrained")
PYTHON_C = Variant(call_mode="constrained")
ALL = [PLAIN, TWIN, NATIVE, JSON_C, PYTHON_C]


def _prep(run_dir: Path, variants: list[Variant] = ALL, *, n: int = 3, url: str | None = None,
          constraints: str | None = "vllm") -> Prepared:
    spec = ModelSpec(name=MODEL, params=model_params(None, 1), api_base=url, concurrency=4, timeout=30,
                     constraints=constraints)
    return Prepared(config(run_dir, models=[spec]), "call_modes", variants, numbered_cases(n),
                    RequestRenderer(Renderer()))


def _export(run_dir: Path, out: Path, **kwargs: Any) -> Any:
    prep_options = {k: kwargs.pop(k) for k in ("variants", "n", "constraints") if k in kwargs}
    return export_requests(_prep(run_dir, **prep_options), out, scorer=score, **kwargs)


def _answer(requests: Path, results: Path, script: FakeScript | None = None) -> list[dict[str, Any]]:
    results.write_bytes(answer_batch_file(requests.read_bytes(), script))
    return [json.loads(line) for line in results.read_bytes().splitlines()]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def _rows(run_dir: Path) -> list[tuple[Any, ...]]:
    with RunStore(run_dir, readonly=True) as store:
        return sorted((r.variant_id, r.case_id, r.repeat, r.key, r.status, r.response, r.valid, r.error_code,
                       r.failure_mode, r.error_kind) for r in store.rows(include_pending=True))


def _tables(run_dir: Path) -> list[Any]:
    """Every row of calls, jobs and batches, as stored (a second import must change none)."""
    db = sqlite3.connect(run_dir / "store.sqlite3")
    try:
        return [list(db.execute(f"SELECT * FROM {t} ORDER BY 1, 2")) for t in ("calls", "jobs", "batches")]
    finally:
        db.close()


def test_export_answer_import_stores_what_an_online_run_stores(tmp_path: Path) -> None:
    with FakeServer.thread() as server:
        asyncio.run(execute(_prep(tmp_path / "online", url=server.url), scorer=score))
    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    summary = _export(run_dir, requests)
    assert (summary.jobs, summary.lines, summary.shared) == (15, 12, 3)
    assert summary.stored == summary.unsupported == summary.in_batch == 0
    bodies = {line["custom_id"]: line["body"] for line in _lines(requests)}
    assert len(bodies) == 12 and {b["model"] for b in bodies.values()} == {"served"}
    assert sum("tools" in b for b in bodies.values()) == 3  # native: the tools, as online
    assert sum("grammar" in b.get("structured_outputs", {}) for b in bodies.values()) == 6  # constrained: vllm
    assert all(b["temperature"] == 0 and b["max_tokens"] == 512 for b in bodies.values())
    with RunStore(run_dir, readonly=True) as store:
        (export,) = store.batches()
        assert (export.kind, export.state, export.requests) == ("export", "exported", 12)
        assert set(store.batch_jobs(export.id)) == set(bodies)

    _answer(requests, results)
    imported = import_results(run_dir, results, scorer=score)
    assert (imported.lines, imported.stored, imported.answers, imported.errors) == (12, 12, 12, 0)
    assert (imported.already, imported.pending, imported.collected) == (0, 0, (export.id,))
    rows = _rows(run_dir)
    assert len(rows) == 15 and {r[4] for r in rows} == {"done"}
    assert rows == _rows(tmp_path / "online")  # same answers, same verdicts, native envelopes included
    with RunStore(run_dir, readonly=True) as store:
        assert [b.state for b in store.batches()] == ["collected"]
        assert store.spend() == 0  # a self-hosted engine's price is unknown

    before = _tables(run_dir)
    again = import_results(run_dir, results, scorer=score)
    assert (again.stored, again.already, again.pending) == (0, 12, 0)
    assert _tables(run_dir) == before  # byte for byte: a second import changes nothing

    nothing = _export(run_dir, tmp_path / "again.jsonl")
    assert (nothing.lines, nothing.stored, nothing.shared, nothing.export_id) == (0, 15, 0, None)
    assert (tmp_path / "again.jsonl").read_bytes() == b""


def test_error_lines_are_stored_errors_and_retry_errors_exports_them_again(tmp_path: Path) -> None:
    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    _export(run_dir, requests)
    answered = _answer(requests, results, FakeScript(p_batch_line_error=0.5, seed=3))
    failed = {line["custom_id"] for line in answered if line["response"]["status_code"] != 200}
    assert 0 < len(failed) < 12
    imported = import_results(run_dir, results, scorer=score)
    assert imported.errors == len(failed) and imported.error_kinds == {"server": len(failed)}
    assert imported.collected  # every call has a result: errors are results
    before = _tables(run_dir)
    assert import_results(run_dir, results, scorer=score).already == 12 and _tables(run_dir) == before

    assert _export(run_dir, tmp_path / "none.jsonl").lines == 0  # errors are final...
    retry = _export(run_dir, tmp_path / "retry.jsonl", retry_errors=True)  # ...unless asked
    assert retry.lines == len(failed) and {line["custom_id"] for line in _lines(tmp_path / "retry.jsonl")} == failed
    _answer(tmp_path / "retry.jsonl", tmp_path / "retry-results.jsonl")
    fixed = import_results(run_dir, tmp_path / "retry-results.jsonl", scorer=score)
    assert (fixed.stored, fixed.answers, fixed.errors, fixed.pending) == (len(failed), len(failed), 0, 0)
    assert {r[4] for r in _rows(run_dir)} == {"done"}


def test_a_status_500_line_is_the_jobs_server_error(tmp_path: Path) -> None:
    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    _export(run_dir, requests, variants=[PLAIN], n=2)
    lines = _answer(requests, results, FakeScript(status=500))
    assert {line["response"]["status_code"] for line in lines} == {500}
    imported = import_results(run_dir, results, scorer=score)
    assert imported.error_kinds == {"server": 2}
    assert {(r[4], r[9], r[6]) for r in _rows(run_dir)} == {("error", "server", False)}


def test_calls_the_file_does_not_answer_stay_pending_and_are_exported_again(tmp_path: Path) -> None:
    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    _export(run_dir, requests)
    answered = _answer(requests, results)
    results.write_text("".join(json.dumps(line) + "\n" for line in answered[:5]))
    imported = import_results(run_dir, results, scorer=score)
    assert (imported.stored, imported.pending, imported.collected) == (5, 7, ())
    rest = _export(run_dir, tmp_path / "rest.jsonl")
    assert rest.lines == 7 and rest.stored + rest.shared + rest.lines == 15
    assert {line["custom_id"] for line in _lines(tmp_path / "rest.jsonl")} == {
        line["custom_id"] for line in answered[5:]}
    with RunStore(run_dir, readonly=True) as store:
        assert [(b.state, b.requests) for b in store.batches()] == [("exported", 12), ("exported", 7)]
    _answer(tmp_path / "rest.jsonl", tmp_path / "rest-results.jsonl")
    done = import_results(run_dir, tmp_path / "rest-results.jsonl", scorer=score)
    assert (done.stored, done.pending, len(done.collected)) == (7, 0, 2)  # both exports complete now


def test_an_export_twice_writes_the_same_pending_calls_under_a_new_record(tmp_path: Path) -> None:
    first = _export(tmp_path / "run", tmp_path / "a.jsonl")
    second = _export(tmp_path / "run", tmp_path / "b.jsonl")
    assert first.lines == second.lines == 12 and first.export_id != second.export_id
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    _answer(tmp_path / "b.jsonl", tmp_path / "results.jsonl")
    assert import_results(tmp_path / "run", tmp_path / "results.jsonl", scorer=score).collected == (
        first.export_id, second.export_id)


def _bad_import(run_dir: Path, results: Path, match: str) -> None:
    before = _tables(run_dir)
    with pytest.raises(RunError, match=match):
        import_results(run_dir, results, scorer=score)
    assert _tables(run_dir) == before  # nothing stored


def test_foreign_duplicate_and_malformed_lines_store_nothing(tmp_path: Path) -> None:
    run_dir, requests, results = tmp_path / "run", tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    _export(run_dir, requests)
    good = [json.dumps(line) for line in _answer(requests, results)]

    foreign = json.dumps({**json.loads(good[0]), "custom_id": "f" * 64})
    results.write_text("\n".join([*good[:3], foreign, *good[3:]]) + "\n")
    _bad_import(run_dir, results, r"results\.jsonl:4: custom_id f{64} is not a job promptgrid export-batch "
                                  "wrote for this run directory")

    results.write_text("\n".join([*good, good[1]]) + "\n")
    _bad_import(run_dir, results, r"results\.jsonl:13: custom_id \w+ is also on line 2: .*keep one")

    results.write_text("\n".join([*good[:2], '{"custom_id": "x", "response": {', *good[2:]]) + "\n")
    _bad_import(run_dir, results, r"results\.jsonl:3: not a JSON line")

    results.write_text("\n".join([*good[:2], "[" * 100_000 + "]" * 100_000, *good[2:]]) + "\n")  # deep
    _bad_import(run_dir, results, r"results\.jsonl:3: not a JSON line")

    results.write_text("\n".join([*good[:5], '{"id": "batch_req_1", "response": null}', *good[5:]]) + "\n")
    _bad_import(run_dir, results, r"results\.jsonl:6: not a batch result line")

    results.write_bytes(b"\n".join([good[0].encode(), b"\xff\xfe", foreign.encode(), good[1].encode(),
                                     good[0].encode()]))
    with pytest.raises(RunError) as info:  # every problem is named, in line order
        import_results(run_dir, results, scorer=score)
    message = str(info.value)
    assert "3 line(s) cannot be imported" in message and "nothing stored" in message
    assert message.index("results.jsonl:2: not a JSON line: not valid UTF-8") < message.index(
        "results.jsonl:3: custom_id") < message.index("results.jsonl:5: custom_id")
    assert {r[4] for r in _rows(run_dir)} == {"pending"}


def test_lines_exported_from_another_run_directory_are_foreign(tmp_path: Path) -> None:
    _export(tmp_path / "a", tmp_path / "a.jsonl", variants=[PLAIN])
    _export(tmp_path / "b", tmp_path / "b.jsonl", variants=[JSON_C])
    _answer(tmp_path / "a.jsonl", tmp_path / "a-results.jsonl")
    _bad_import(tmp_path / "b", tmp_path / "a-results.jsonl", r"(?s)a-results\.jsonl:1: .*not a job.*"
                                                                r"import the file into the run directory its")


def test_an_import_needs_an_export_and_a_readable_file(tmp_path: Path) -> None:
    with FakeServer.thread() as server:
        asyncio.run(execute(_prep(tmp_path, [PLAIN], n=1, url=server.url), scorer=score))
    (tmp_path / "r.jsonl").write_text("")
    with pytest.raises(RunError, match="has no export: .*promptgrid export-batch"):
        import_results(tmp_path, tmp_path / "r.jsonl", scorer=score)
    _export(tmp_path, tmp_path / "q.jsonl", variants=[JSON_C], n=1)
    with pytest.raises(RunError, match="cannot read .*missing.jsonl"):
        import_results(tmp_path, tmp_path / "missing.jsonl", scorer=score)
    with pytest.raises(RunError, match="not a run directory"):
        import_results(tmp_path / "nowhere", tmp_path / "r.jsonl", scorer=score)


def test_body_model_replaces_the_model_of_every_body(tmp_path: Path) -> None:
    _export(tmp_path / "run", tmp_path / "q.jsonl", body_model="/models/Llama-3.1-8B-Instruct")
    lines = _lines(tmp_path / "q.jsonl")
    assert {line["body"]["model"] for line in lines} == {"/models/Llama-3.1-8B-Instruct"}
    assert all(set(line) == {"custom_id", "method", "url", "body"} and line["url"] == "/v1/chat/completions"
               for line in lines)


def test_calls_the_model_cannot_be_sent_are_stored_unsupported_not_exported(tmp_path: Path) -> None:
    summary = _export(tmp_path / "run", tmp_path / "q.jsonl", constraints="none")
    assert (summary.lines, summary.unsupported, summary.shared) == (6, 6, 3)  # plain (+ twin) and native
    statuses = Counter(r[4] for r in _rows(tmp_path / "run"))
    assert statuses == {"unsupported": 6, "pending": 9}
    again = _export(tmp_path / "run", tmp_path / "q2.jsonl", constraints="none")
    assert (again.lines, again.unsupported) == (6, 6)
    now_vllm = _export(tmp_path / "run", tmp_path / "q3.jsonl", constraints="vllm")  # sendable now: exported
    assert (now_vllm.lines, now_vllm.unsupported) == (12, 0)


def test_calls_in_a_live_provider_batch_are_not_exported(tmp_path: Path) -> None:
    first = _export(tmp_path / "run", tmp_path / "q.jsonl")
    keys = [line["custom_id"] for line in _lines(tmp_path / "q.jsonl")][:4]
    with RunStore(tmp_path / "run") as store:
        jobs = store.batch_jobs(first.export_id)
        now = time.time()
        store.add_batch(BatchRecord("pg-live", MODEL, "openai", SUBMITTED, "batch_1", "file-1", None, None, 4, 1,
                                    now, now, None), [jobs[k] for k in keys])
    again = _export(tmp_path / "run", tmp_path / "q2.jsonl")
    assert (again.lines, again.in_batch) == (8, 5)  # the twin's job shares a batched call
    assert not set(keys) & {line["custom_id"] for line in _lines(tmp_path / "q2.jsonl")}


def test_export_writes_to_a_stream_after_recording_the_export(tmp_path: Path) -> None:
    import io

    class Watching(io.BytesIO):
        recorded: list[int] = []

        def write(self, data: Any) -> int:
            if not self.recorded:
                with RunStore(tmp_path / "run", readonly=True) as store:
                    self.recorded.append(len(store.batches()))
            return super().write(data)

    out = Watching()
    summary = export_requests(_prep(tmp_path / "run"), out, scorer=score)
    assert summary.lines == len(out.getvalue().splitlines()) == 12 and Watching.recorded == [1]


def test_export_needs_a_run_config_and_a_litellm_model(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="--grid GRID --dataset DS"):
        export_config(tmp_path, MODEL)
    with pytest.raises(RunError, match="--dataset needs --grid"):
        export_config(tmp_path, MODEL, dataset="mini")
    config_, new = export_config(tmp_path, MODEL, grid="bfcl_v4", dataset="mini:en", limit=1, constraints="vllm")
    assert new and config_.models[0].name == MODEL and config_.models[0].constraints == "vllm"
    prep = Prepared(config(tmp_path, model="fake/auto"), "x", [PLAIN], numbered_cases(1), Renderer())
    with pytest.raises(RunError, match="litellm model string .*not fake/auto"):
        export_requests(prep, tmp_path / "q.jsonl")


def test_the_exported_job_carries_what_import_needs(tmp_path: Path) -> None:
    summary = _export(tmp_path / "run", tmp_path / "q.jsonl", variants=[NATIVE, JSON_C], n=1)
    with RunStore(tmp_path / "run", readonly=True) as store:
        jobs = store.batch_jobs(summary.export_id)
    assert sorted(j.native for j in jobs.values()) == [0, 1]
    assert all(isinstance(j, BatchJob) and j.model == MODEL and json.loads(j.params)["temperature"] == 0
               for j in jobs.values())
