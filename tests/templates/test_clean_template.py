"""bfcl_v4_clean: each bfcl-eval quirk of bfcl_v4 is present there and fixed here."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
import xmltodict

from promptgrid.records import Case
from promptgrid.templates import Renderer
from promptgrid.variants import Variant, load_grid
from support.builders import make_case

HINT = " Note that the provided function is in Python 3 syntax."


@pytest.fixture(scope="module")
def renderer() -> Renderer:
    return Renderer()


@pytest.fixture
def quirky() -> Case:
    return make_case([{
        "name": "geo.find",
        "description": "Find caf\u00e9s & <bars>." + HINT + HINT,
        "parameters": {"type": "dict", "properties": {
            "where": {"type": "string", "description": "Area, e.g. \"a & b\"", "default": "Paris, France"},
            "n": {"type": "integer", "description": "How many."},
        }, "required": ["n"]},
    }, {"name": "ping", "description": "Ping." + HINT + HINT, "parameters": {"type": "dict", "properties": {}}}])


def _system(renderer: Renderer, case: Case, **dims: Any) -> tuple[str, str]:
    bfcl = renderer.render(Variant(**dims), case).messages[0]["content"]
    clean = renderer.render(Variant(template="bfcl_v4_clean", **dims), case).messages[0]["content"]
    return bfcl, clean


def test_space_between_persona_and_task(renderer: Renderer, quirky: Case) -> None:
    bfcl, clean = _system(renderer, quirky)
    assert "functions.You are given" in bfcl
    assert "functions. You are given" in clean and "functions.You" not in clean


@pytest.mark.parametrize("ret", ["python", "json"])
@pytest.mark.parametrize("tag", [True, False])
def test_no_double_space_before_you_should_not(renderer: Renderer, quirky: Case, ret: str, tag: bool) -> None:
    bfcl, clean = _system(renderer, quirky, return_format=ret, tool_call_tag=tag)
    assert ".  You SHOULD NOT" in bfcl
    assert "  " not in clean.split("Here is a list")[0]
    assert ". You SHOULD NOT" in clean


@pytest.mark.parametrize("ret", ["verbose_xml", "concise_xml"])
def test_xml_return_formats_keep_param_types(renderer: Renderer, quirky: Case, ret: str) -> None:
    bfcl, clean = _system(renderer, quirky, return_format=ret)
    sentence = "The type fields of the parameters in your function calls must be one of"
    assert sentence in bfcl and sentence in clean


def test_xml_docs_escaped_commas_kept(renderer: Renderer, quirky: Case) -> None:
    bfcl, clean = _system(renderer, quirky, doc_format="xml")
    assert "<desc>Find caf\u00e9s & <bars>." in bfcl and "default=\"'Paris France'\"" in bfcl
    assert "<desc>Find caf\u00e9s &amp; &lt;bars&gt;." in clean and 'default="Paris, France"' in clean
    docs = clean.split("that you can invoke.\n", 1)[1]
    parsed = xmltodict.parse(f"<functions>{docs}</functions>")["functions"]["function"]
    assert parsed[0]["params"]["param"][0]["desc"] == 'Area, e.g. "a & b"'


@pytest.mark.parametrize("doc", ["json", "python", "xml"])
def test_single_python_hint(renderer: Renderer, quirky: Case, doc: str) -> None:
    bfcl, clean = _system(renderer, quirky, doc_format=doc)
    assert bfcl.count(HINT) == 4  # two functions, hint twice each
    assert clean.count(HINT) == 2


def test_json_docs_keep_non_ascii(renderer: Renderer, quirky: Case) -> None:
    bfcl, clean = _system(renderer, quirky, doc_format="json")
    assert "caf\\u00e9s" in bfcl and "caf\u00e9s" in clean


@pytest.mark.parametrize("variant", load_grid("bfcl_v4_full").variants, ids=lambda v: v.label)
def test_consistent_blank_lines(renderer: Renderer, quirky: Case, variant: Variant) -> None:
    clean = renderer.render(replace(variant, template="bfcl_v4_clean"), quirky).messages[0]["content"]
    assert "\n\n\n" not in clean and clean == clean.strip()
    assert all(section.strip() for section in clean.split("\n\n"))  # no whitespace-only blocks
    assert not re.search(r"[ \t]\n", clean)  # no trailing spaces


def test_case_system_message_appended_after_blank_line(renderer: Renderer) -> None:
    case = make_case(turns=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}])
    for template in ("bfcl_v4", "bfcl_v4_clean"):
        messages = renderer.render(Variant(template=template), case).messages
        assert [m["role"] for m in messages] == ["system", "user"]
        assert messages[0]["content"].endswith("\n\nBe terse.")
        assert messages[1] == {"role": "user", "content": "hi"}


def test_clean_grid_renders_every_variant(renderer: Renderer, quirky: Case) -> None:
    # The style=experimental variants use bfcl-eval's own wording, read from an installed bfcl-eval.
    pytest.importorskip("bfcl_eval")
    grid = load_grid("bfcl_v4_clean")
    prompts = [renderer.render(v, quirky) for v in grid.variants]
    assert len({p.sha256 for p in prompts}) == 26
    assert all(re.search(r"functions\. You are", p.messages[0]["content"]) or "## Task" in p.messages[0]["content"]
               or "structured function calls. You are" in p.messages[0]["content"] for p in prompts)
