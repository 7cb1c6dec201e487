"""ResultRow: what the store yields, what export writes, what read_results reads back."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from promptgrid.errors import ReportError
from promptgrid.matrix.cli import main
from promptgrid.matrix.running.results import (
    RESULT_SCHEMA_VERSION,
    ROW_FIELDS,
    ResultRow,
    dump_results,
    read_results,
    write_results,
)
from promptgrid.matrix.running.store import CallResult, RunStore

FIELDS = [f.name for f in dataclasses.fields(ResultRow)]
ROW = [name for name in FIELDS if name not in ("turns", "steps", "sent", "details")]  # an episode's own: not exported


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real run (calls in the asked format, and free-text answers) plus one failed call."""
    path = tmp_path_factory.mktemp("run")
    args = ["run", "bfcl_v4", "--dataset", "mini:en,de", "--limit", "4", "--variant",
            "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic",
            "--model", "fake/auto", "--model", "fake/prose", "--run-dir", str(path), "--no-progress"]
    assert main(args) == 0
    with RunStore(path) as store:
        (model_id,) = store.add_models(["fake/broken"]).values()
        variant_id, case_id = next(iter(store.variants())), next(iter(store.cases()))
        store.add_jobs([(model_id, variant_id, case_id, 0, "broken-key")])
        store.record(CallResult(key="broken-key", model="fake/broken", repeat=0, prompt_sha256="0" * 64,
                                params="{}", status="error", error="Timeout: no answer in 5 s", error_kind="timeout"),
                     [((model_id, variant_id, case_id, 0), None, False, None)])
    return path


@pytest.fixture(scope="module")
def stored(run_dir: Path) -> list[ResultRow]:
    with RunStore(run_dir) as store:
        return list(store.rows())


def test_store_yields_complete_rows(stored: list[ResultRow]) -> None:
    assert {r.model for r in stored} == {"fake/auto", "fake/prose", "fake/broken"}
    for r in stored:
        assert isinstance(r, ResultRow)
        # _make fills __dict__ as given: the store must name every field, in declaration order.
        assert list(vars(r)) == FIELDS
    failed = [r for r in stored if r.status == "error"]
    assert len(failed) == 1 and failed[0].valid is False and failed[0].error_code is None
    assert failed[0].scored and not failed[0].correct and failed[0].language_match is None
    prose = [r for r in stored if r.model == "fake/prose"]
    assert prose and all(r.language_match is not None and r.response_language for r in prose)
    assert {r.case_language for r in prose} == {"en", "de"}


def test_export_lines_carry_schema_version_and_round_trip(run_dir: Path, stored: list[ResultRow],
                                                           tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    assert main(["export", str(run_dir), "--jsonl", "--output", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(stored)
    for line, row in zip(lines, stored, strict=True):
        assert list(line) == ["schema_version", *ROW] and line["schema_version"] == RESULT_SCHEMA_VERSION
        assert list(ROW_FIELDS) == ROW
        assert ResultRow.from_dict(line) == row
    assert read_results(out) == stored


def test_export_to_stdout(run_dir: Path, stored: list[ResultRow], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ResultRow.from_dict(json.loads(line)) for line in lines] == stored


def test_write_results_replaces_the_file_whole(stored: list[ResultRow], tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    out.write_text("old content\n", encoding="utf-8")
    assert write_results(stored[:2], out) == 2
    assert read_results(out) == stored[:2]
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]  # no temporary file left


def test_export_without_schema_version_still_reads(stored: list[ResultRow], tmp_path: Path) -> None:
    # What `promptgrid export` wrote before schema_version existed: the same fields, without it.
    old = tmp_path / "old.jsonl"
    with old.open("w", encoding="utf-8") as f:
        for row in stored:
            data = row.to_dict()
            del data["schema_version"]
            f.write(json.dumps(data) + "\n")
    assert read_results(old) == stored


def test_to_dict_copies_the_shared_mappings(stored: list[ResultRow]) -> None:
    data = stored[0].to_dict()
    data["dimensions"]["return_format"] = "changed"
    assert stored[0].dimensions["return_format"] != "changed"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema_version": 2}, "schema_version 2 is not supported"),
        ({"schema_version": True}, "schema_version True is not supported"),
        ({"valid": "yes"}, "field 'valid' must be true, false or null, got \"yes\""),
        ({"repeat": 1.5}, "field 'repeat' must be an integer, got 1.5"),
        ({"tool_tp": True}, "field 'tool_tp' must be an integer, got true"),
        ({"cost_usd": "0.1"}, "field 'cost_usd' must be a number"),
        ({"dimensions": []}, "field 'dimensions' must be an object"),
        ({"status": "lost"}, "field 'status' is 'lost'"),
        ({"model": ""}, "field 'model' is missing or empty"),
    ],
)
def test_bad_lines_name_file_and_line(stored: list[ResultRow], tmp_path: Path, change: dict[str, object],
                                      message: str) -> None:
    path = tmp_path / "bad.jsonl"
    lines = [json.dumps(r.to_dict()) for r in stored[:3]]
    lines[1] = json.dumps({**stored[1].to_dict(), **change})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ReportError) as info:
        read_results(path)
    assert str(info.value).startswith(f"{path}:2: ") and message in str(info.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="cannot read"):
        read_results(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(ReportError, match="holds no rows"):
        read_results(tmp_path / "empty.jsonl")
    (tmp_path / "broken.jsonl").write_text('{"model": "m"\n', encoding="utf-8")
    with pytest.raises(ReportError, match=r"broken.jsonl:1: not valid JSON"):
        read_results(tmp_path / "broken.jsonl")
    (tmp_path / "list.jsonl").write_text("[1]\n", encoding="utf-8")
    with pytest.raises(ReportError, match=r"list.jsonl:1: expected a JSON object, got list"):
        read_results(tmp_path / "list.jsonl")


def test_from_dict_defaults() -> None:
    row = ResultRow.from_dict({"model": "m", "variant_id": "v", "case_id": "c", "latency_s": 1})
    assert row == ResultRow(model="m", variant_id="v", case_id="c", latency_s=1.0)
    assert isinstance(row.latency_s, float) and row.status == "done" and not row.scored
    failed = ResultRow.from_dict({"model": "m", "variant_id": "v", "case_id": "c", "error": "boom"})
    assert failed.status == "error" and failed.scored and not failed.correct


def test_every_verdict_field_is_a_result_field() -> None:
    # The store keeps Verdict.to_dict() as JSON and rows() reads it back by these names.
    from promptgrid.matrix.scoring import score
    from promptgrid.records import Case
    from promptgrid.variants import Variant

    case = Case(id="c", category="simple", turns=({"role": "user", "content": "Hi"},), functions=())
    assert set(score("Hello there, how can I help?", Variant(), case).to_dict()) <= set(ROW)


def test_dump_results_counts(stored: list[ResultRow], tmp_path: Path) -> None:
    with (tmp_path / "x.jsonl").open("w", encoding="utf-8") as f:
        assert dump_results(iter(stored), f) == len(stored)


def test_export_never_writes_over_the_store(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.running.session import RUN_JSON
    from promptgrid.matrix.running.store import LOCK_FILE, STORE_FILE
    from promptgrid.safeio import RUN_DIR_FILES

    assert {STORE_FILE, RUN_JSON, LOCK_FILE} <= set(RUN_DIR_FILES)
    store = run_dir / STORE_FILE
    before = store.read_bytes()
    for target in (store, run_dir / RUN_JSON, run_dir):
        assert main(["export", str(run_dir), "--output", str(target)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert store.read_bytes() == before
    with RunStore(run_dir) as opened:
        assert list(opened.rows())


def test_export_never_writes_over_a_spill_file(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``export --output RUN/spill-123.jsonl`` would be read back (and deleted) by the next run as answers."""
    from promptgrid.matrix.running.store import SPILL_GLOB
    from promptgrid.safeio import RUN_DIR_PATTERNS

    assert SPILL_GLOB in RUN_DIR_PATTERNS
    target = run_dir / "spill-123.jsonl"
    assert main(["export", str(run_dir), "--output", str(target)]) == 2
    err = capsys.readouterr().err
    assert "is a file of the run directory" in err and len(err.strip().splitlines()) == 1
    assert not target.exists()


@pytest.mark.parametrize("payload, message", [
    (b"[" * 100_000 + b"]" * 100_000, "nested more than"),
    (b'{"model": "m", "tokens_in": ' + b"1" * 5000 + b"}", "a number has 5000 characters"),
    (b'{"model": "\xff"}', "not valid UTF-8"),
    (b'{"model": "m", "latency_s": NaN}', "NaN is not a JSON number"),
])
def test_hostile_lines_name_file_and_line(stored: list[ResultRow], tmp_path: Path, payload: bytes,
                                          message: str) -> None:
    path = tmp_path / "rows.jsonl"
    good = json.dumps(stored[0].to_dict()).encode()
    path.write_bytes(good + b"\n" + payload + b"\n")
    with pytest.raises(ReportError) as info:
        read_results(path)
    assert str(info.value).startswith(f"{path}:2: {message}") and "\n" not in str(info.value)
