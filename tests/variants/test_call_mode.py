"""The call_mode dimension: ids, labels, native's collapse of the format dimensions, contradictions rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgrid.errors import GridError
from promptgrid.matrix.cli import main
from promptgrid.variants import DIMENSIONS, CallMode, DocFormat, ReturnFormat, Variant, load_grid

PROMPT_ID = "ret_fmt=json&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_dimension_and_default() -> None:
    assert DIMENSIONS["call_mode"].default is CallMode.PROMPT
    assert list(DIMENSIONS)[-2:] == ["call_mode", "tool_results"]
    assert Variant().call_mode is CallMode.PROMPT
    assert Variant(call_mode="constrained").call_mode is CallMode.CONSTRAINED  # type: ignore[arg-type]


def test_prompt_mode_id_and_dimensions_are_unchanged() -> None:
    v = Variant(return_format=ReturnFormat.JSON)
    assert v.id == PROMPT_ID
    assert v.label == "json->json,False"
    assert "call_mode" not in v.dimensions()  # stores of prompt-mode runs keep their old dimension JSON
    assert Variant(**v.dimensions()) == v


def test_constrained_id_and_label() -> None:
    v = Variant(return_format=ReturnFormat.JSON, call_mode=CallMode.CONSTRAINED, instruction_language="de")
    assert v.id == PROMPT_ID + "&instr_lang=de&call_mode=constrained"
    assert v.label == "json->json,False instr=de desc=en constrained"
    assert v.dimensions()["call_mode"] == "constrained"
    assert Variant(**v.dimensions()) == v


def test_native_ignores_the_format_dimensions() -> None:
    v = Variant(return_format=ReturnFormat.JSON, doc_format=DocFormat.XML, tool_call_tag=True,
                call_mode=CallMode.NATIVE, prompt_format="markdown")  # type: ignore[arg-type]
    assert (v.return_format, v.doc_format, v.tool_call_tag) == (ReturnFormat.PYTHON, DocFormat.JSON, False)
    assert v == Variant(call_mode=CallMode.NATIVE, prompt_format="markdown")  # type: ignore[arg-type]
    assert v.id.endswith("&prompt_fmt=markdown&style=classic&call_mode=native")
    assert v.label == "native md"


def test_builtin_call_modes_grid() -> None:
    grid = load_grid("call_modes")
    assert len(grid) == 9
    modes = [v.call_mode for v in grid]
    assert modes == [CallMode.PROMPT] * 4 + [CallMode.CONSTRAINED] * 4 + [CallMode.NATIVE]
    assert [v.return_format for v in grid][:4] == list(ReturnFormat)
    assert all(not v.tool_call_tag and v.doc_format is DocFormat.JSON for v in grid)
    assert len({v.id for v in grid}) == 9 and len({v.label for v in grid}) == 9
    assert grid.variants[-1].label == "native"


def test_builtin_demo_grid_is_prompt_vs_constrained_for_json_and_python() -> None:
    grid = load_grid("demo")
    assert [(v.call_mode, v.return_format) for v in grid] == [
        (CallMode.PROMPT, ReturnFormat.JSON), (CallMode.PROMPT, ReturnFormat.PYTHON),
        (CallMode.CONSTRAINED, ReturnFormat.JSON), (CallMode.CONSTRAINED, ReturnFormat.PYTHON)]
    assert all(not v.tool_call_tag and v.doc_format is DocFormat.JSON for v in grid)


def test_product_collapses_native_to_one_variant_in_first_order(tmp_path: Path) -> None:
    grid = load_grid(write(tmp_path, """
include:
  - product:
      return_format: [json, python]
      call_mode: [native, prompt]
      tool_call_tag: [true, false]
      prompt_format: [plaintext, markdown]
"""))
    natives = [v for v in grid if v.call_mode is CallMode.NATIVE]
    assert [v.label for v in natives] == ["native", "native md"]
    assert len(grid) == 2 + 2 * 2 * 2  # 2 native + (2 formats x 2 tags x 2 layouts) prompt
    assert grid.variants[0].label == "native"  # first occurrence keeps its place


def test_native_inherits_formats_from_base_and_vary_without_error(tmp_path: Path) -> None:
    grid = load_grid(write(tmp_path, """
base: {return_format: json, doc_format: xml, tool_call_tag: true}
include:
  - vary:
      call_mode: [native, constrained]
  - variants:
      - {call_mode: native}
    with: {return_format: concise_xml}
"""))
    assert [v.label for v in grid] == ["native", "xml->json,True constrained"]


@pytest.mark.parametrize("text, line, key", [
    ("base: {call_mode: native, return_format: json}\n", 1, "base.return_format"),
    ("include:\n  - variants:\n      - {prompt_style: classic}\n      - {call_mode: native, tool_call_tag: true}\n",
     4, "include[0].variants[1].tool_call_tag"),
    ("include:\n  - product: {prompt_format: [markdown]}\n    with:\n      call_mode: native\n      doc_format: xml\n",
     5, "include[0].with.doc_format"),
])
def test_contradictory_explicit_native_is_rejected(tmp_path: Path, text: str, line: int, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(GridError) as info:
        load_grid(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: {key}:")
    assert "does not apply with call_mode: native" in message and "\n" not in message


def test_native_with_default_formats_spelled_out_is_fine(tmp_path: Path) -> None:
    grid = load_grid(write(tmp_path, "base: {call_mode: native, return_format: python, tool_call_tag: false}\n"))
    assert [v.label for v in grid] == ["native"]


def test_unknown_call_mode_names_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(GridError, match=r"unknown call_mode 'nativ'.*native.*Valid: prompt, native, constrained"):
        load_grid(write(tmp_path, "base: {call_mode: nativ}\n"))


def test_cli_contradiction_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "base: {call_mode: native, return_format: json}\n")
    assert main(["grid", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1 and f"{path}:1:" in err
