"""The dimension enums: members behave as their values wherever text or files are made."""

from __future__ import annotations

import json

import pytest
import yaml

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
