"""``promptgrid score-file``: every field kept, verdict fields added, bad lines reported with their numbers."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.report.stats import wilson_interval
from promptgrid.matrix.scoring import BFCL_DEFAULT_VARIANT

PY = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"
EXP = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=experimental"
JSON_TAG = "ret_fmt=json&tool_call_tag=True&func_doc_fmt=xml&prompt_fmt=plaintext&style=classic"
CALL = "[weather.get_current(city='Chicago', unit='fahrenheit')]"
VERDICT_FIELDS = ("valid", "error_code", "bfcl_error_type", "failure_mode", "format_agnostic_valid",
                  "detected_format", "format_match", "function_selection_correct", "tool_tp", "arg_tp",
                  "n_expected_calls", "n_predicted_calls", "message")


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def _run(capsys: Any, *argv: str) -> tuple[int, list[dict[str, Any]], str]:
    code = main(["score-file", *argv])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def test_scores_lines_and_keeps_every_field(tmp_path: Path, capsys: Any) -> None:
    line = {"variant_id": PY, "case_id": "simple_weather_01-en", "label": "json->python,False",
            "messages": [{"role": "user", "content": "q"}], "model": "m", "repeat": 0, "response": CALL,
            "valid": "stale"}
    wrong = dict(line, variant_id=JSON_TAG, response=CALL)
    src = _write(tmp_path / "in.jsonl", [line, wrong, dict(line, variant_id=EXP)])
    code, rows, err = _run(capsys, str(src), "--dataset", "mini")
    assert code == 0, err
    assert len(rows) == 3
    for key, value in line.items():
        if key != "valid":
            assert rows[0][key] == value
    for key in VERDICT_FIELDS:
        assert key in rows[0] and key in rows[1]
    assert rows[0]["valid"] is True and rows[0]["bfcl_error_type"] is None and rows[0]["failure_mode"] is None
    assert rows[1]["valid"] is False and rows[1]["bfcl_error_type"] == "ast_decoder:decoder_failed"
    assert rows[1]["failure_mode"] == "tag_missing" and rows[1]["format_agnostic_valid"] is True
    assert rows[2]["valid"] is True  # bfcl-eval's "style=experimental" id resolves


def test_bad_lines_are_reported_with_line_numbers_and_the_rest_scored(tmp_path: Path, capsys: Any) -> None:
    ok = {"variant_id": PY, "case_id": "simple_weather_01-en", "response": CALL}
    src = _write(tmp_path / "in.jsonl", [
        ok,                                                     # 1
        dict(ok, variant_id="ret_fmt=python&tool_call_tag=Maybe"),  # 2 unknown variant
        dict(ok, case_id="simple_weather_99-en"),               # 3 unknown case
        '{"variant_id": "x", ',                                 # 4 not JSON
        "",                                                     # 5 blank: skipped silently
        "[1, 2]",                                               # 6 not an object
        {"variant_id": PY, "case_id": "simple_weather_01-en"},  # 7 no response
        dict(ok, response=None),                                # 8 null response: scored as empty
        {"case_id": f"format_sensitivity_7:{PY}:simple_weather_01-en", "response": CALL},  # 9 bfcl-eval id
        dict(ok, response=12),                                  # 10 response not a string
    ])
    out = tmp_path / "out.jsonl"
    code = main(["score-file", str(src), "--dataset", "mini", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    for number in (2, 3, 4, 6, 7, 10):
        assert f"in.jsonl:{number}:" in err
    for number in (1, 5, 8, 9):
        assert f"in.jsonl:{number}:" not in err
    assert "unknown variant id" in err and "unknown case id" in err and "not valid JSON" in err
    assert "simple_weather_01-en" in err  # the close match is suggested for the unknown case
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3
    assert rows[0]["valid"] is True
    assert rows[1]["valid"] is False and rows[1]["failure_mode"] == "no_call"
    assert rows[2]["valid"] is True and rows[2]["case_id"].startswith("format_sensitivity_7:")


def test_grid_option_restricts_variant_ids(tmp_path: Path, capsys: Any) -> None:
    line = {"variant_id": PY + "&template=massive_one_shot", "case_id": "simple_weather_01-en", "response": CALL}
    src = _write(tmp_path / "in.jsonl", [line])
    code, rows, err = _run(capsys, str(src), "--dataset", "mini", "--grid", "bfcl_v4")
    assert code == 1 and "grid 'bfcl_v4'" in err and rows == []


def test_missing_input_file_is_a_user_error(tmp_path: Path, capsys: Any) -> None:
    code = main(["score-file", str(tmp_path / "nope.jsonl"), "--dataset", "mini"])
    assert code == 2
    err = capsys.readouterr().err
    assert "not found" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("dataset", ["bfcl:format_sensitivity"])
def test_bfcl_ids_score_against_bfcl_data(tmp_path: Path, capsys: Any, dataset: str) -> None:
    pytest.importorskip("bfcl_eval")
    line = {"case_id": f"format_sensitivity_0:{PY}:simple_python_19", "response": "[math.gcd(num1=40, num2=50)]"}
    src = _write(tmp_path / "in.jsonl", [line])
    code, rows, err = _run(capsys, str(src), "--dataset", dataset)
    assert code == 0, err
    assert rows[0]["valid"] is True


def test_output_equal_to_the_input_is_refused_and_the_input_kept(tmp_path: Path, capsys: Any) -> None:
    src = _write(tmp_path / "in.jsonl", [{"variant_id": PY, "case_id": "simple_weather_01-en", "response": CALL}])
    before = src.read_bytes()
    assert main(["score-file", str(src), "--dataset", "mini", "--output", str(src)]) == 2
    err = capsys.readouterr().err
    assert "is the input file" in err and len(err.strip().splitlines()) == 1
    assert src.read_bytes() == before


def test_hostile_lines_are_reported_and_every_other_line_written(tmp_path: Path, capsys: Any) -> None:
    ok = json.dumps({"variant_id": PY, "case_id": "simple_weather_01-en", "response": CALL}).encode()
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join([ok, b"[" * 100_000 + b"]" * 100_000, b'{"response": ' + b"9" * 5000 + b"}",
                                b'{"response": "\xff"}', b'{"response": NaN}', ok]) + b"\n")
    out = tmp_path / "out.jsonl"
    assert main(["score-file", str(src), "--dataset", "mini", "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for number, message in ((2, "nested more than"), (3, "a number has 5000 characters"),
                            (4, "not valid UTF-8"), (5, "NaN is not a JSON number")):
        assert f"in.jsonl:{number}: {message}" in err
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["valid"] for r in rows] == [True, True]


def test_output_equal_to_the_jsonl_dataset_is_refused(tmp_path: Path, capsys: Any) -> None:
    from promptgrid.matrix.datasets import load_dataset, write_jsonl

    cases = write_jsonl(load_dataset("mini:en").cases, tmp_path / "cases.jsonl")
    before = cases.read_bytes()
    src = _write(tmp_path / "in.jsonl", [{"variant_id": PY, "case_id": "simple_weather_01-en", "response": CALL}])
    assert main(["score-file", str(src), "--dataset", f"jsonl:{cases}", "--output", str(cases)]) == 2
    assert "is the input file" in capsys.readouterr().err
    assert cases.read_bytes() == before


def test_bfcl_eval_result_lines_are_read_as_bfcl_eval_writes_them(tmp_path: Path, capsys: Any) -> None:
    # bfcl-eval's multi_threaded_inference writes {"id": ..., "result": ..., **metadata} per line.
    line = {"id": f"format_sensitivity_3:{PY}:simple_weather_01-en", "result": CALL,
            "input_token_count": 412, "output_token_count": 17, "latency": 0.42}
    wrong = dict(line, id=f"format_sensitivity_4:{JSON_TAG}:simple_weather_01-en")
    src = _write(tmp_path / "BFCL_v4_format_sensitivity_result.json", [line, wrong])
    code, rows, err = _run(capsys, str(src), "--dataset", "mini")
    assert code == 0, err
    assert [r["valid"] for r in rows] == [True, False]
    assert rows[1]["bfcl_error_type"] == "ast_decoder:decoder_failed"
    for key, value in line.items():
        assert rows[0][key] == value


def test_promptgrid_fields_win_over_bfcl_eval_fields(tmp_path: Path, capsys: Any) -> None:
    line = {"variant_id": PY, "case_id": "simple_weather_01-en", "id": "other", "response": CALL, "result": "no"}
    code, rows, err = _run(capsys, str(_write(tmp_path / "in.jsonl", [line])), "--dataset", "mini")
    assert code == 0, err
    assert rows[0]["valid"] is True


def test_variant_option_names_the_variant_of_lines_without_one(tmp_path: Path, capsys: Any) -> None:
    src = _write(tmp_path / "in.jsonl", [{"id": "simple_weather_01-en", "result": CALL},
                                         {"variant_id": JSON_TAG, "case_id": "simple_weather_01-en", "response": CALL}])
    code, rows, err = _run(capsys, str(src), "--dataset", "mini", "--variant", PY)
    assert code == 0, err
    assert [r["valid"] for r in rows] == [True, False]  # a line's own variant_id wins over --variant
    code, rows, err = _run(capsys, str(src), "--dataset", "mini")
    assert code == 1 and len(rows) == 1
    assert "in.jsonl:1: field 'variant_id' is missing" in err and "--variant" in err and BFCL_DEFAULT_VARIANT in err


def test_unknown_variant_option_is_a_bad_argument(tmp_path: Path, capsys: Any) -> None:
    src = _write(tmp_path / "in.jsonl", [{"id": "simple_weather_01-en", "result": CALL}])
    out = tmp_path / "out.jsonl"
    code = main(["score-file", str(src), "--dataset", "mini", "--variant", PY + "x", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--variant" in err and f"Did you mean {PY!r}" in err
    assert not out.exists()


def test_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    ok = json.dumps({"variant_id": PY, "case_id": "simple_weather_01-en", "response": CALL})
    data = "\n".join([ok, "{oops", ok]).encode() + b"\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    code, rows, err = _run(capsys, "-", "--dataset", "mini")
    assert code == 1
    assert [r["valid"] for r in rows] == [True, True]
    assert "<stdin>:2: not valid JSON" in err


def test_accuracy_summary_goes_to_stderr_and_stdout_keeps_only_the_lines(tmp_path: Path, capsys: Any) -> None:
    ok = {"variant_id": PY, "case_id": "simple_weather_01-en", "response": CALL}
    src = _write(tmp_path / "in.jsonl", [ok, ok, dict(ok, response="[weather.get_current(city='Paris')]"),
                                         dict(ok, case_id=3)])
    code = main(["score-file", str(src), "--dataset", "mini"])
    out, err = capsys.readouterr()
    assert code == 1
    assert all(json.loads(x)["case_id"] == "simple_weather_01-en" for x in out.splitlines())
    lo, hi = wilson_interval(2, 3)
    assert err.strip().splitlines()[-1] == (
        f"promptgrid: scored 3 line(s): 2 correct, accuracy 66.7% (95% Wilson CI {100 * lo:.1f}-{100 * hi:.1f}%); "
        "1 line(s) could not be scored (see above).")
    code = main(["score-file", str(_write(tmp_path / "one.jsonl", [ok])), "--dataset", "mini"])
    assert code == 0
    assert capsys.readouterr().err.strip() == (
        "promptgrid: scored 1 line(s): 1 correct, accuracy 100.0% (95% Wilson CI 20.7-100.0%).")


def test_help_documents_the_input_format(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        main(["score-file", "--help"])
    text = capsys.readouterr().out
    for word in ('"result"', '"id"', "response", "case_id", "variant_id", "format_sensitivity_N:CONFIG:ENTRY",
                 "--variant", "standard input", "Wilson", BFCL_DEFAULT_VARIANT):
        assert word in text, word


def test_bfcl_default_variant_is_bfcl_evals_default_prompt() -> None:
    default_prompts = pytest.importorskip("bfcl_eval.constants.default_prompts")
    assert BFCL_DEFAULT_VARIANT == default_prompts.DEFAULT_SYSTEM_PROMPT_FORMAT
