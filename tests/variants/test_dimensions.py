"""The dimension enums: members behave as their values wherever text or files are made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from promptgrid.errors import GridError
from promptgrid.variants import DIMENSIONS, XML_RETURN_FORMATS, DocFormat, PromptFormat, ReturnFormat, Variant


@pytest.mark.parametrize("member", [*ReturnFormat, *DocFormat, *PromptFormat])
def test_members_read_as_their_value(member: ReturnFormat | DocFormat | PromptFormat) -> None:
    value = member.value
    assert type(value) is str
    # the %-operator itself is under test here (f"{member}" is checked beside it)
    assert str(member) == f"{member}" == format(member) == "%s" % member == value  # noqa: UP031
    assert f"{member:>14}" == f"{value:>14}"
    assert json.dumps(member) == json.dumps(value) and json.dumps({member: 1}) == json.dumps({value: 1})
    assert member == value and hash(member) == hash(value) and {value: 1}[member] == 1
    assert type(member)(value) is member


def test_variant_holds_members_whatever_it_is_given() -> None:
    given = Variant(return_format="verbose_xml", doc_format="xml", prompt_format="markdown")  # type: ignore[arg-type]
    members = Variant(return_format=ReturnFormat.VERBOSE_XML, doc_format=DocFormat.XML,
                      prompt_format=PromptFormat.MARKDOWN)
    assert given == members and hash(given) == hash(members) and given.id == members.id
    assert given.return_format is ReturnFormat.VERBOSE_XML and given.return_format in XML_RETURN_FORMATS
    assert given.id == "ret_fmt=verbose_xml&tool_call_tag=False&func_doc_fmt=xml&prompt_fmt=markdown&style=classic"
    assert given.label == "xml->verbose_xml,False md"


def test_files_get_plain_values() -> None:
    v = Variant(return_format=ReturnFormat.JSON)
    dims = v.dimensions()
    assert dims["return_format"] == "json" and type(dims["return_format"]) is str
    assert type(dims["doc_format"]) is str and type(dims["prompt_format"]) is str
    assert yaml.safe_load(yaml.safe_dump(v.to_dict()))["dimensions"] == dims  # safe_dump refuses enum members
    assert Variant(**dims) == v


def test_dimension_table_uses_the_enums() -> None:
    assert DIMENSIONS["return_format"].values == tuple(ReturnFormat)
    assert DIMENSIONS["doc_format"].default is DocFormat.JSON
    assert DIMENSIONS["prompt_format"].accepts("markdown") and not DIMENSIONS["prompt_format"].accepts("md")


def test_tool_results_default_leaves_ids_labels_and_dimensions_as_they_were(tmp_path: Path) -> None:
    """``tool_results`` (conversations: how dict results reach the model) at ``auto`` is in no id, label or stored
    dimensions, so every existing grid keeps its ids; ``ascii`` and ``utf8`` are new variants."""
    from promptgrid.variants import ToolResults, builtin_grids, load_grid

    plain = Variant(return_format=ReturnFormat.JSON)
    assert plain.tool_results is ToolResults.AUTO and DIMENSIONS["tool_results"].default is ToolResults.AUTO
    assert plain.id == "ret_fmt=json&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"
    assert "tool_results" not in plain.dimensions() and plain.label == "json->json,False"
    utf8 = Variant(return_format=ReturnFormat.JSON, tool_results="utf8")  # type: ignore[arg-type]
    assert utf8.tool_results is ToolResults.UTF8 and utf8 != plain
    assert utf8.id == plain.id + "&tool_results=utf8" and utf8.label == "json->json,False results=utf8"
    assert utf8.dimensions()["tool_results"] == "utf8" and Variant(**utf8.dimensions()) == utf8
    for name in builtin_grids():
        assert all("tool_results" not in v.id and "tool_results" not in v.dimensions()
                   for v in load_grid(name).variants), name

    grid = tmp_path / "grid.yaml"
    grid.write_text("name: results\ninclude:\n  - product:\n      tool_results: [auto, ascii, utf8]\n",
                    encoding="utf-8")
    assert [v.tool_results for v in load_grid(grid).variants] == list(ToolResults)
    grid.write_text("name: results\nbase: {tool_results: utf-8}\n", encoding="utf-8")
    with pytest.raises(GridError, match=r"grid.yaml:2: base.tool_results: unknown tool_results 'utf-8'. "
                                        r"Did you mean 'utf8'\? Valid: auto, ascii, utf8"):
        load_grid(grid)
