"""`promptgrid render` end to end: the line format other tools rely on."""

from __future__ import annotations

import hashlib
import json

import pytest

from promptgrid.matrix.cli import main
from promptgrid.variants import load_grid


def render_lines(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, object]]:
    assert main(["render", *argv, "--jsonl"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_render_bfcl_v4_on_mini_has_the_documented_fields(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("bfcl_eval")  # the 26th variant's wording is read from bfcl-eval
    lines = render_lines(capsys, "bfcl_v4", "--dataset", "mini:de", "--limit", "2")
    grid_ids = [v.id for v in load_grid("bfcl_v4").variants]
    assert len(lines) == 2 * 26
    assert [line["variant_id"] for line in lines[:26]] == grid_ids
    for line in lines:
        messages = line["messages"]
        assert isinstance(messages, list) and [m["role"] for m in messages] == ["system", "user"]
        canonical = json.dumps(messages, ensure_ascii=False, separators=(",", ":"))
        assert line["sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
        assert str(line["case_id"]).endswith("-de")


def test_render_filters_by_variant_and_case(capsys: pytest.CaptureFixture[str]) -> None:
    vid = "ret_fmt=json&tool_call_tag=True&func_doc_fmt=xml&prompt_fmt=plaintext&style=classic"
    lines = render_lines(capsys, "bfcl_v4", "--dataset", "mini", "--variant", vid,
                         "--case", "simple_weather_01-ja")
    assert len(lines) == 1 and lines[0]["variant_id"] == vid
    system = lines[0]["messages"][0]["content"]  # type: ignore[index]
    assert "<TOOLCALL>```json" in system and '<function name="weather.get_current">' in system


def test_render_unknown_variant_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["render", "bfcl_v4", "--dataset", "mini", "--variant", "ret_fmt=pyton", "--jsonl"])
    err = capsys.readouterr().err
    assert code == 2 and "has no variant" in err and "Traceback" not in err


def test_render_translated_grid_offline(capsys: pytest.CaptureFixture[str]) -> None:
    lines = render_lines(capsys, "massive_translation", "--dataset", "mini:ja", "--limit", "1")
    assert len(lines) == 3
    english, partial, full = (line["messages"][-1]["content"] for line in lines)  # type: ignore[index]
    assert english != partial != full
    assert "Model Instructions:" in partial and "Model Instructions:" not in full


def test_render_jsonl_writes_the_request_pieces(capsys: pytest.CaptureFixture[str]) -> None:
    lines = render_lines(capsys, "call_modes", "--dataset", "mini:de", "--limit", "1")
    assert len(lines) == 9
    by_label = {line["label"]: line for line in lines}
    for line in lines[:4]:  # prompt mode: the fields it always had, nothing more
        assert set(line) == {"variant_id", "case_id", "label", "messages", "sha256"}
    native = by_label["native"]
    assert native["call_mode"] == "native" and native["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in native["tools"]] == ["weather_get_current"]  # type: ignore[index]
    assert "weather.get_current" not in json.dumps(native["messages"])
    constrained_json = by_label["json->json,False constrained"]
    assert constrained_json["response_format"]["type"] == "json_schema"  # type: ignore[index]
    assert constrained_json["response_format"]["json_schema"]["strict"] is True  # type: ignore[index]
    assert "root ::=" in str(constrained_json["grammar"])
    constrained_xml = by_label["json->concise_xml,False constrained"]
    assert "response_format" not in constrained_xml and "root ::=" in str(constrained_xml["grammar"])
    assert "json_schema" in constrained_xml["unavailable"]  # type: ignore[operator]
    prompt_json = by_label["json->json,False"]
    assert constrained_json["messages"] == prompt_json["messages"]
    assert constrained_json["sha256"] != prompt_json["sha256"]


def test_render_text_names_the_tools_of_a_native_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    vid = load_grid("call_modes").variants[-1].id
    assert main(["render", "call_modes", "--dataset", "mini:en", "--limit", "1", "--variant", vid]) == 0
    out = capsys.readouterr().out
    assert "--- tools (native, tool_choice=auto): weather_get_current" in out
