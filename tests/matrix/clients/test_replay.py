"""``replay/PATH``: answers from a run's export or score-file lines, by (variant, case) (issue 22, What to build 5)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import promptgrid as pg
from promptgrid.errors import InputLimitError, RunError
from promptgrid.matrix.calling import format_calls
from promptgrid.matrix.cli import main
from promptgrid.matrix.clients import CallError, ErrorKind, JobIds, make_client, provider_of
from promptgrid.matrix.clients._replay import ReplayClient
from promptgrid.matrix.running.config import ModelSpec
from promptgrid.safeio import MAX_DEPTH

VERDICT = ("status", "response", "valid", "error_code", "bfcl_error_type", "failure_mode", "format_agnostic_valid",
           "detected_format", "format_match", "function_selection_correct", "tool_tp", "tool_fp", "tool_fn",
           "arg_tp", "arg_fp", "arg_fn", "n_expected_calls", "n_predicted_calls", "message", "error_kind",
           "input_tokens", "output_tokens", "finish_reason")


def _export(run_dir: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> dict[tuple[str, str, int], dict[str, Any]]:
    assert main(["export", str(run_dir), "--jsonl", "--output", str(out)]) == 0
    capsys.readouterr()
    return {(r["variant_id"], r["case_id"], r["repeat"]): r for r in map(json.loads, out.read_text().splitlines())}


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _replay(path: Path) -> str:
    return f"replay/{path}"


# --------------------------------------------------------------------------- replay = original


@pytest.mark.parametrize(("grid", "limit"), [("bfcl_v4", None), ("call_modes", 6)])
def test_replaying_an_export_gives_the_original_verdicts(tmp_path: Path, grid: str, limit: int | None,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """bfcl_v4 x mini:en (every case) with fake/auto, exported, replayed into another run dir: every job's stored
    answer and verdict are the original's. call_modes adds native (tool-call envelopes) and constrained jobs."""
    pg.run(grid, "mini:en", models=["fake/auto"], run_dir=tmp_path / "orig", limit=limit)
    original = _export(tmp_path / "orig", tmp_path / "orig.jsonl", capsys)
    pg.run(grid, "mini:en", models=[_replay(tmp_path / "orig.jsonl")], run_dir=tmp_path / "rep", limit=limit)
    replayed = _export(tmp_path / "rep", tmp_path / "rep.jsonl", capsys)
    assert replayed.keys() == original.keys()
    if grid == "bfcl_v4":
        assert len(original) == 26 * len(pg.load_dataset("mini:en"))
    else:
        native = [r for r in original.values() if r["dimensions"].get("call_mode") == "native"]
        assert native and all(json.loads(r["response"])["tool_calls"] for r in native)
    diffs = [(k, f, original[k][f], replayed[k][f])
             for k in original for f in VERDICT if original[k][f] != replayed[k][f]]
    assert diffs == []
    assert all(r["cost_usd"] == 0.0 and r["model"].startswith("replay/") for r in replayed.values())
    assert {r["raw_model"] for r in replayed.values()} == {"fake/auto"}


def _right_answer(case: Any, variant: Any) -> str:
    """The case's first possible answer in the variant's return format."""
    calls = [{name: {p: values[0] for p, values in params.items() if values and values[0] != ""}}
             for call in case.ground_truth for name, params in call.items()]
    return format_calls(calls, variant.return_format, variant.tool_call_tag)


def test_replayed_score_file_lines_are_scored_as_score_file_scores_them(tmp_path: Path) -> None:
    """A planted matrix in the score-file format, right answers for some (variant, case), a wrong function for the
    others: each replayed job's verdict is the one ``pg.score`` gives its line, and some are correct."""
    grid = pg.load_grid("bfcl_v4")
    variants = grid.variants[:6]
    cases = [c for c in pg.load_dataset("mini:en") if c.category != "irrelevance"][:8]
    lines, expected = [], {}
    for i, variant in enumerate(variants):
        for j, case in enumerate(cases):
            text = _right_answer(case, variant) if (i + j) % 2 else format_calls(
                [{"no_such_function": {}}], variant.return_format, variant.tool_call_tag)
            lines.append({"variant_id": variant.id, "case_id": case.id, "response": text})
            expected[(variant.id, case.id)] = pg.score(text, variant, case).valid
    assert any(expected.values()) and not all(expected.values())
    path = _write(tmp_path / "planted.jsonl", lines)
    run = pg.run(grid, "mini:en", models=[_replay(path)], run_dir=tmp_path / "r",
                 variants=[v.id for v in variants], cases=[c.id for c in cases])
    got = {(r.variant_id, r.case_id): r.valid for r in run.results()}
    assert got == expected


# --------------------------------------------------------------------------- repeats, missing pairs, errors


def _complete(client: ReplayClient, variant: str, case: str, repeat: int = 0, request: Any = None) -> Any:
    return asyncio.run(client.complete([], {}, request=request, job=JobIds(variant, case, repeat)))


def test_repeat_k_replays_stored_repeat_k_else_the_lowest(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", [{"variant_id": "v", "case_id": "c", "response": "one", "repeat": 1},
                                         {"variant_id": "v", "case_id": "c", "response": "two", "repeat": 2},
                                         {"variant_id": "w", "case_id": "c", "response": "only"}])
    client = ReplayClient(_replay(path))
    assert [_complete(client, "v", "c", k).text for k in range(4)] == ["one", "one", "two", "one"]
    assert [_complete(client, "w", "c", k).text for k in range(3)] == ["only"] * 3


def test_run_with_repeats_replays_each_stored_repeat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    variant = pg.load_grid("bfcl_v4").variants[0]
    case = pg.load_dataset("mini:en")[0]
    wrong = format_calls([{"no_such_function": {}}], variant.return_format, variant.tool_call_tag)
    path = _write(tmp_path / "r.jsonl", [{"variant_id": variant.id, "case_id": case.id, "response": wrong},
                                         {"variant_id": variant.id, "case_id": case.id, "repeat": 1,
                                          "response": _right_answer(case, variant)}])
    run = pg.run("bfcl_v4", "mini:en", models=[_replay(path)], run_dir=tmp_path / "r", variants=[variant.id],
                 cases=[case.id], repeats=3, params={"temperature": 0.7})
    assert [(r.repeat, r.valid) for r in sorted(run.results(), key=lambda r: r.repeat)] == [
        (0, False), (1, True), (2, False)]


def test_a_job_with_no_stored_answer_is_a_final_bad_request_naming_the_pair(tmp_path: Path) -> None:
    grid = pg.load_grid("bfcl_v4")
    v0, v1 = grid.variants[:2]
    cases = pg.load_dataset("mini:en")[:2]
    path = _write(tmp_path / "r.jsonl", [{"variant_id": v0.id, "case_id": c.id, "response": "x"} for c in cases])
    run = pg.run(grid, "mini:en", models=[_replay(path)], run_dir=tmp_path / "r", variants=[v0.id, v1.id],
                 cases=[c.id for c in cases])
    rows = {(r.variant_id, r.case_id): r for r in run.results()}
    assert len(rows) == 4 and run.summary is not None and not run.summary.halted
    for case in cases:
        assert rows[(v0.id, case.id)].status == "done"
        missing = rows[(v1.id, case.id)]
        assert missing.status == "error" and missing.error_kind == "bad_request" and missing.attempts == 1
        assert repr(v1.id) in (missing.error or "") and repr(case.id) in (missing.error or "")


def test_stored_errors_replay_as_final_errors(tmp_path: Path) -> None:
    row = {"schema_version": 1, "model": "openai/x", "variant_id": "v", "status": "error", "error": "slow down"}
    path = _write(tmp_path / "r.jsonl", [{**row, "case_id": "a", "error_kind": "rate_limit"},
                                         {**row, "case_id": "b", "error_kind": "context_length"},
                                         {**row, "case_id": "c", "status": "pending", "error": None},
                                         {**row, "case_id": "d", "status": "done", "error": None, "response": "ok",
                                          "input_tokens": 7, "output_tokens": 3, "finish_reason": "length"}])
    client = ReplayClient(_replay(path))
    for case, kind in (("a", ErrorKind.UNKNOWN), ("b", ErrorKind.CONTEXT_LENGTH), ("c", ErrorKind.BAD_REQUEST)):
        with pytest.raises(CallError) as info:
            _complete(client, "v", case)
        assert info.value.kind is kind and not info.value.retryable, case
    assert "stored kind rate_limit" in str(_raises(client, "a")) and f"{path}:1" in str(_raises(client, "a"))
    done = _complete(client, "v", "d")
    assert (done.text, done.input_tokens, done.output_tokens, done.finish_reason, done.cost_usd, done.model) == (
        "ok", 7, 3, "length", 0.0, "openai/x")


def _raises(client: ReplayClient, case: str) -> CallError:
    with pytest.raises(CallError) as info:
        _complete(client, "v", case)
    return info.value


def test_called_without_job_ids_is_a_bad_request(tmp_path: Path) -> None:
    client = ReplayClient(_replay(_write(tmp_path / "r.jsonl", [{"variant_id": "v", "case_id": "c", "response": ""}])))
    with pytest.raises(CallError) as info:
        asyncio.run(client.complete([], {}))
    assert info.value.kind is ErrorKind.BAD_REQUEST


def test_registered_as_its_own_provider(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", [{"variant_id": "v", "case_id": "c", "response": None}])
    assert provider_of(_replay(path)) == "replay"
    client = make_client(_replay(path))
    assert isinstance(client, ReplayClient) and client.takes_job_ids and client.price(10, 10) == 0.0
    assert _complete(client, "v", "c").text == ""
    with pytest.raises(RunError, match="litellm models only"):
        ModelSpec(name=_replay(path), constraints="openai")


# --------------------------------------------------------------------------- hostile input: one line, PATH:LINE


def _bad_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    ok = {"variant_id": "v", "case_id": "c", "response": "a"}
    deep = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    (tmp / "latin1.jsonl").write_bytes(json.dumps(ok).encode() + b"\n" + b'{"response": "caf\xe9"}\n')
    (tmp / "deep.jsonl").write_text(json.dumps(ok) + "\n" + '{"variant_id": "v", "case_id": "d", "response": '
                                    + deep + "}\n")
    (tmp / "nan.jsonl").write_text('{"variant_id": "v", "case_id": "c", "response": NaN}\n')
    (tmp / "empty.jsonl").write_text("\n\n")
    export = {"schema_version": 1, "model": "m1", "variant_id": "v", "case_id": "c", "status": "done", "response": "a"}
    return {
        "missing": (tmp / "nope.jsonl", "cannot read"),
        "directory": (tmp, "cannot read"),
        "latin1": (tmp / "latin1.jsonl", "latin1.jsonl:2: not valid UTF-8"),
        "deep": (tmp / "deep.jsonl", "deep.jsonl:2: nested more than"),
        "nan": (tmp / "nan.jsonl", "nan.jsonl:1: NaN is not a JSON number"),
        "not json": (_write_raw(tmp / "garbage.jsonl", "{oops\n"), "garbage.jsonl:1: not valid JSON"),
        "not an object": (_write(tmp / "list.jsonl", [ok, [1, 2]]), "list.jsonl:2: expected a JSON object"),
        "no variant": (_write(tmp / "nov.jsonl", [{"case_id": "c", "response": "a"}]),
                       "nov.jsonl:1: field 'variant_id'"),
        "no response": (_write(tmp / "nor.jsonl", [{"variant_id": "v", "case_id": "c"}]),
                        "nor.jsonl:1: field 'response'"),
        "bad response": (_write(tmp / "int.jsonl", [{**ok, "response": 3}]), "int.jsonl:1: field 'response' must be"),
        "bad repeat": (_write(tmp / "rep.jsonl", [{**ok, "repeat": -1}]), "rep.jsonl:1: field 'repeat'"),
        "export without case": (_write(tmp / "ex.jsonl", [{**export, "case_id": None}]), "ex.jsonl:1: field 'case_id'"),
        "export bad status": (_write(tmp / "st.jsonl", [{**export, "status": "maybe"}]), "st.jsonl:1: field 'status'"),
        "empty": (tmp / "empty.jsonl", "holds no answers"),
        "only pending": (_write(tmp / "pend.jsonl", [{**export, "status": "pending"}]),
                         "holds no answers (1 pending or unsupported rows"),
        "conflict": (_write(tmp / "dup.jsonl", [ok, {"variant_id": "x", "case_id": "c", "response": "a"},
                                                {**ok, "response": "b"}]),
                     "dup.jsonl:3: variant 'v', case 'c', repeat 0 was given at " + str(tmp / "dup.jsonl") + ":1"),
        "two models": (_write(tmp / "models.jsonl", [export, {**export, "model": "m2", "response": "b"}]),
                       "answers of two models ('m1', 'm2')"),
    }


def _write_raw(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("which", [
    "missing", "directory", "latin1", "deep", "nan", "not json", "not an object", "no variant", "no response",
    "bad response", "bad repeat", "export without case", "export bad status", "empty", "only pending", "conflict",
    "two models"])
def test_hostile_files_give_one_clear_line(tmp_path: Path, which: str) -> None:
    path, expected = _bad_files(tmp_path)[which]
    with pytest.raises(RunError) as info:
        make_client(_replay(path))
    message = str(info.value)
    assert expected in message and "\n" not in message, message


def test_an_exact_duplicate_line_is_read_once(tmp_path: Path) -> None:
    line = {"variant_id": "v", "case_id": "c", "response": "a"}
    assert _complete(ReplayClient(_replay(_write(tmp_path / "r.jsonl", [line, line]))), "v", "c").text == "a"


def test_a_line_over_the_bound_names_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMPTGRID_MAX_LINE_BYTES", "64")
    path = _write(tmp_path / "long.jsonl", [{"variant_id": "v", "case_id": "c", "response": "x" * 100}])
    with pytest.raises(InputLimitError, match=r"long\.jsonl:1: the line is longer than 64 bytes"):
        make_client(_replay(path))


def test_the_cli_prints_one_error_line_before_any_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _write(tmp_path / "dup.jsonl", [{"variant_id": "v", "case_id": "c", "response": "a"},
                                          {"variant_id": "v", "case_id": "c", "response": "b"}])
    code = main(["run", "bfcl_v4", "--dataset", "mini:en", "--limit", "1", "--model", _replay(bad), "--run-dir",
                 str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "dup.jsonl:2" in err and "dup.jsonl:1" in err, err
