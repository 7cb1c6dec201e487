"""``label:`` in grid YAML: the variant's own name, validated, unique within the grid, not part of its identity."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from promptgrid.errors import GridError
from promptgrid.variants import Variant, load_grid
from promptgrid.variants._grid import MAX_LABEL_CHARS


def write(tmp_path: Path, text: str, name: str = "grid.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def load_error(path: Path) -> str:
    with pytest.raises(GridError) as exc:
        load_grid(path)
    return str(exc.value)


def test_labels_name_their_variants(tmp_path: Path) -> None:
    grid = load_grid(write(tmp_path, """
        include:
          - variants:
              - {return_format: json, label: JSON answers}
              - {return_format: python}
              - {return_format: python, prompt_format: markdown, label: "  md prompt  "}
    """))
    assert [v.label for v in grid] == ["JSON answers", "json->python,False", "md prompt"]
    assert [v.given_label for v in grid] == ["JSON answers", None, "md prompt"]
    assert grid.variants[0].dimension_label == "json->json,False"
    assert grid.variants[0].to_dict()["label"] == "JSON answers"
    assert grid.select(["md prompt"]) == (grid.variants[2],)


def test_a_label_is_not_part_of_the_identity(tmp_path: Path) -> None:
    path = write(tmp_path, "include:\n  - variants:\n      - {return_format: json, label: x}\n")
    labelled = load_grid(path).variants[0]
    plain = Variant(return_format="json")
    assert labelled == plain and hash(labelled) == hash(plain) and labelled.id == plain.id
    assert "given_label" not in labelled.dimensions() and Variant(**labelled.dimensions()).label == plain.label
    assert repr(labelled) == repr(plain)


def test_listing_a_product_point_again_labels_its_first_occurrence(tmp_path: Path) -> None:
    grid = load_grid(write(tmp_path, """
        include:
          - product:
              return_format: [python, json]
              tool_call_tag: [false, true]
          - variants:
              - {return_format: json, tool_call_tag: true, label: tagged JSON}
    """))
    assert len(grid) == 4
    assert [v.label for v in grid] == ["json->python,False", "json->python,True", "json->json,False", "tagged JSON"]


def test_duplicate_label_names_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, """
        include:
          - variants:
              - {return_format: json, label: same}
              - {return_format: python, label: same}
    """)
    message = load_error(path)
    assert message.startswith(f"{path}:4: include[0].variants[1].label: ")
    assert f"{path}:3" in message and "unique within a grid" in message


def test_one_variant_with_two_labels_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, """
        include:
          - variants:
              - {return_format: json, label: first}
          - variants:
              - {return_format: json, label: second}
    """)
    message = load_error(path)
    assert message.startswith(f"{path}:5: include[1].variants[0].label: ")
    assert "'first'" in message and f"{path}:3" in message


def test_the_same_label_twice_on_one_variant_collapses(tmp_path: Path) -> None:
    grid = load_grid(write(tmp_path, """
        include:
          - variants:
              - {return_format: json, label: j}
              - {return_format: json, label: j}
    """))
    assert [v.label for v in grid] == ["j"]


def test_a_label_may_not_be_another_variants_label(tmp_path: Path) -> None:
    # The first variant has no label of its own: its dimension label is taken all the same.
    path = write(tmp_path, """
        include:
          - variants:
              - {return_format: python}
              - {return_format: json, label: "json->python,False"}
    """)
    message = load_error(path)
    assert message.startswith(f"{path}:4: include[0].variants[1].label: ") and "of another variant" in message


def test_a_label_may_not_be_another_variants_id(tmp_path: Path) -> None:
    # A user style with a one-letter name gives an id short enough to be a label.
    (tmp_path / "t" / "styles").mkdir(parents=True)
    (tmp_path / "t" / "styles" / "a.yaml").write_text("{}\n", encoding="utf-8")
    other = "ret_fmt=json&tool_call_tag=True&func_doc_fmt=xml&prompt_fmt=plaintext&style=a"
    path = write(tmp_path, f"""
        template_dir: t
        include:
          - variants:
              - {{return_format: json, tool_call_tag: true, doc_format: xml, prompt_style: a}}
              - {{return_format: python, label: "{other}"}}
    """)
    message = load_error(path)
    assert message.startswith(f"{path}:5: include[0].variants[1].label: ") and "is the id of another" in message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3", "a label is a string, got int"),
        ("true", "a label is a string, got bool"),
        ('"   "', "the label is empty"),
        ('"' + "x" * (MAX_LABEL_CHARS + 1) + '"', f"{MAX_LABEL_CHARS + 1} characters long; at most {MAX_LABEL_CHARS}"),
        ('"a\\nb"', "control character U+000A"),
        ('"a\\x1b[31mb"', "control character U+001B"),
        ('"evil\\u202egnp"', "control character U+202E"),
    ],
)
def test_bad_labels_name_file_line_and_key(tmp_path: Path, value: str, expected: str) -> None:
    path = write(tmp_path, f"include:\n  - variants:\n      - {{return_format: json, label: {value}}}\n")
    message = load_error(path)
    assert message.startswith(f"{path}:3: include[0].variants[0].label: ") and expected in message, message


def test_a_label_of_the_longest_length_is_kept(tmp_path: Path) -> None:
    text = "y" * MAX_LABEL_CHARS
    grid = load_grid(write(tmp_path, f"include:\n  - variants:\n      - {{return_format: json, label: {text}}}\n"))
    assert grid.variants[0].label == text


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("base:\n  label: x\n", 2, "base.label"),
        ("include:\n  - product:\n      return_format: [json]\n      label: [x]\n", 4, "include[0].product.label"),
        ("include:\n  - vary: {return_format: [json]}\n    with: {label: x}\n", 3, "include[0].with.label"),
    ],
)
def test_label_only_in_a_variants_entry(tmp_path: Path, text: str, line: int, key: str) -> None:
    path = write(tmp_path, text)
    message = load_error(path)
    assert message.startswith(f"{path}:{line}: {key}: ") and "variants: block" in message, message


def test_a_child_grid_keeps_the_parents_labels(tmp_path: Path) -> None:
    write(tmp_path, "include:\n  - variants:\n      - {return_format: json, label: parent's}\n", "parent.yaml")
    grid = load_grid(write(tmp_path, "extends: parent.yaml\ninclude:\n  - vary: {return_format: [python]}\n"))
    assert [v.label for v in grid] == ["parent's", "json->python,False"]
