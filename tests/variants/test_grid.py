"""Grid YAML loading, validation errors and the built-in grids."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from promptgrid.errors import GridError
from promptgrid.matrix.cli import main
from promptgrid.variants import DIMENSIONS, Variant, builtin_grids, load_grid

BFCL_ORDER = [
    f"ret_fmt={ret}&tool_call_tag={tag}&func_doc_fmt={doc}&prompt_fmt=plaintext&style=classic"
    for ret in ("python", "json", "verbose_xml", "concise_xml")
    for tag in ("True", "False")
    for doc in ("python", "xml", "json")
] + [
    "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=markdown&style=classic",
    "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=experimental",
]


def write(tmp_path: Path, text: str, name: str = "grid.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def test_bfcl_v4_is_bfcl_evals_26_configs_in_order() -> None:
    grid = load_grid("bfcl_v4")
    assert [v.id for v in grid.variants] == BFCL_ORDER


def test_bfcl_v4_full_is_the_full_product() -> None:
    grid = load_grid("bfcl_v4_full")
    assert len(grid.variants) == 4 * 3 * 2 * 2 * 2
    assert len({v.id for v in grid.variants}) == len(grid.variants)


def test_labels_use_bfcl_figure_notation() -> None:
    labels = [v.label for v in load_grid("bfcl_v4").variants]
    assert labels[0] == "python->python,True"
    assert labels[-2] == "json->python,False md"
    assert labels[-1] == "json->python,False exp"


def test_every_builtin_grid_loads_with_unique_ids() -> None:
    names = builtin_grids()
    assert {"bfcl_v4", "bfcl_v4_full", "massive_prompts", "massive_translation"} <= set(names)
    for name in names:
        grid = load_grid(name)
        ids = [v.id for v in grid.variants]
        assert len(ids) == len(set(ids)), name


def test_massive_translation_has_english_partial_and_full() -> None:
    grid = load_grid("massive_translation")
    pairs = [(v.instruction_language, v.description_language) for v in grid.variants]
    assert pairs == [("en", "en"), ("en", "query"), ("query", "query")]
    assert {v.template for v in grid.variants} == {"massive_one_shot"}


def test_massive_prompts_compares_two_templates() -> None:
    grid = load_grid("massive_prompts")
    assert [v.template for v in grid.variants] == ["bfcl_v1_zero_shot", "massive_one_shot"]


def test_vary_product_variants_exclude_and_with(tmp_path: Path) -> None:
    path = write(tmp_path, """
        name: g
        base: {return_format: json}
        include:
          - product: {doc_format: [json, xml], tool_call_tag: [false, true]}
          - vary: {prompt_format: [markdown]}
          - variants: [{prompt_style: experimental}]
            with: {doc_format: python}
        exclude:
          - {doc_format: xml, tool_call_tag: true}
    """)
    grid = load_grid(path)
    got = [(v.doc_format, v.tool_call_tag, v.prompt_format, v.prompt_style) for v in grid.variants]
    assert got == [
        ("json", False, "plaintext", "classic"),
        ("json", True, "plaintext", "classic"),
        ("xml", False, "plaintext", "classic"),
        ("json", False, "markdown", "classic"),
        ("python", False, "plaintext", "experimental"),
    ]
    assert all(v.return_format == "json" for v in grid.variants)


def test_duplicates_collapse_onto_first_occurrence(tmp_path: Path) -> None:
    path = write(tmp_path, """
        include:
          - product: {return_format: [python, json]}
          - vary: {return_format: [json, python]}
    """)
    assert [v.return_format for v in load_grid(path).variants] == ["python", "json"]


def test_no_include_is_the_base_variant(tmp_path: Path) -> None:
    path = write(tmp_path, "base: {doc_format: xml}\n")
    assert load_grid(path).variants == (Variant(doc_format="xml"),)


def test_extends_merges_base_and_blocks(tmp_path: Path) -> None:
    write(tmp_path, """
        base: {return_format: json}
        include:
          - product: {doc_format: [json, xml]}
    """, "parent.yaml")
    child = write(tmp_path, """
        extends: parent.yaml
        base: {tool_call_tag: true}
        exclude: [{doc_format: xml}]
    """, "child.yaml")
    grid = load_grid(child)
    assert grid.variants == (Variant(return_format="json", tool_call_tag=True),)


def test_extends_builtin_by_name(tmp_path: Path) -> None:
    path = write(tmp_path, """
        extends: bfcl_v4
        base: {template: bfcl_v4_clean}
    """)
    grid = load_grid(path)
    assert len(grid.variants) == 26
    assert all(v.template == "bfcl_v4_clean" for v in grid.variants)


def test_user_template_dir_adds_styles_and_templates(tmp_path: Path) -> None:
    tdir = tmp_path / "tpl"
    (tdir / "styles").mkdir(parents=True)
    (tdir / "mine.j2").write_text("x", encoding="utf-8")
    (tdir / "styles" / "terse.yaml").write_text("persona: x\n", encoding="utf-8")
    path = write(tmp_path, """
        template_dir: tpl
        include:
          - variants: [{template: mine, prompt_style: terse}]
    """)
    grid = load_grid(path)
    assert grid.template_dir == tdir.resolve()
    assert grid.variants[0].template == "mine"


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("include:\n  - product:\n      return_fromat: [python]\n", 3,
         "unknown dimension 'return_fromat'. Did you mean 'return_format'?"),
        ("include:\n  - product:\n      return_format: [pyton]\n", 3,
         "unknown return_format 'pyton'. Did you mean 'python'?"),
        ("base:\n  tool_call_tag: 'true'\n", 2, "tool_call_tag must be true or false"),
        ("base:\n  doc_format: 3\n", 2, "doc_format must be a string"),
        ("include:\n  - product:\n      doc_format: []\n", 3, "empty list"),
        ("include:\n  - product: {}\n", 2, "empty product"),
        ("inclde:\n  - vary: {doc_format: [xml]}\n", 1, "unknown key. Did you mean 'include'?"),
        ("include:\n  - prodct: {doc_format: [xml]}\n", 2, "Did you mean 'product'?"),
        ("base:\n  prompt_style: clasic\n", 2, "Did you mean 'classic'?"),
        ("base:\n  template: bfcl_v5\n", 2, "Did you mean 'bfcl_v4'?"),
        ("include:\n  - vary: {doc_format: [xml]}\nexclude:\n  - {doc_format: [json, xml]}\n", 2,
         "expands to no variants"),
        ("base: [1, 2\n", 2, "invalid YAML"),
        ("base:\n  instruction_language: 'Deutsch!'\n", 2, "not a valid instruction_language"),
    ],
)
def test_invalid_grid_names_file_line_and_key(tmp_path: Path, text: str, line: int, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(GridError) as info:
        load_grid(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}:"), message
    assert needle in message
    assert "\n" not in message


def test_cycle_in_extends_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "extends: b.yaml\n", "a.yaml")
    write(tmp_path, "extends: a.yaml\n", "b.yaml")
    with pytest.raises(GridError, match="cycle in grid extends"):
        load_grid(tmp_path / "a.yaml")


def test_unknown_builtin_suggests(tmp_path: Path) -> None:
    with pytest.raises(GridError, match="Did you mean 'bfcl_v4'"):
        load_grid("bfcl_v3")


def test_cli_invalid_grid_exits_2_with_one_line_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "include:\n  - product:\n      return_format: [pyton]\n")
    assert main(["grid", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.count("\n") == 1
    assert f"{path}:3:" in err and "python" in err


def test_cli_grid_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grid", "show", "bfcl_v4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["id"] for d in data] == BFCL_ORDER
    # call_mode is written only when it is not prompt, tool_results only when it is not auto (files stay as
    # before the dimensions)
    assert set(data[0]["dimensions"]) == set(DIMENSIONS) - {"call_mode", "tool_results"}
    assert data[0]["label"] == "python->python,True"


def test_cli_grids_lists_builtins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grids"]) == 0
    out = capsys.readouterr().out
    for name in ("bfcl_v4", "bfcl_v4_full", "massive_prompts", "massive_translation"):
        assert name in out
