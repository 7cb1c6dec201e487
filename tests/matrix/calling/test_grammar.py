"""GBNF grammars and the formatter: every sentence parses as typed calls of the case's functions.

- ``format_calls`` writes calls the way each return format asks; the parser
  reads them back equal (hypothesis, all four formats, with and without tag).
- Grammars compile in llama.cpp (every mini case here; every BFCL case in the
  slow profile), and sentences sampled by llama.cpp's own grammar engine
  parse, with our parser, into >= 1 calls of the case's functions whose
  arguments have the declared types.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptgrid.matrix.calling import ConstraintError, format_calls, gbnf_grammar
from promptgrid.matrix.datasets import load_dataset
from promptgrid.matrix.scoring.parse import parse_response
from promptgrid.variants import ReturnFormat

FORMATS = list(ReturnFormat)
BFCL = ["simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
        "live_parallel", "live_parallel_multiple", "irrelevance", "live_irrelevance"]

# -- formatter round trips ---------------------------------------------------------------------------

@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data(), fmt=st.sampled_from(FORMATS), tag=st.booleans())
def test_formatted_calls_parse_back_equal(all_kinds: list[dict[str, Any]], helpers: Any, data: st.DataObject,
                                          fmt: ReturnFormat, tag: bool) -> None:
    expected = data.draw(helpers.calls(all_kinds))
    text = format_calls(expected, fmt, tag)
    result = parse_response(text, fmt, tag)
    assert result.ok, (result.failure, result.details, text)
    if fmt is ReturnFormat.CONCISE_XML:  # bfcl-eval strips an element's text: the parser does too
        expected = [{n: {k: v.strip() if isinstance(v, str) else v for k, v in a.items()}}
                    for call in expected for n, a in call.items()]
    assert list(result.calls or ()) == expected
    assert not result.prose and result.detected_format in (fmt, "xml")


def test_formatter_writes_the_prompt_shapes() -> None:
    calls_ = [{"alarm.set": {"time": "nine am", "n": 2, "ok": True, "l": [1.5, "a"]}}]
    assert format_calls(calls_, "python", False) == '[alarm.set(time="nine am", n=2, ok=True, l=[1.5, "a"])]'
    assert format_calls(calls_, "json", True) == ('<TOOLCALL>[{"function": "alarm.set", "parameters": '
                                                  '{"time": "nine am", "n": 2, "ok": true, "l": [1.5, "a"]}}]'
                                                  "</TOOLCALL>")
    assert format_calls(calls_, "verbose_xml", False) == (
        '<functions><function name="alarm.set"><params><param name="time" value="nine am" type="string"/>'
        '<param name="n" value="2" type="integer"/><param name="ok" value="true" type="boolean"/>'
        '<param name="l" value="[1.5, &quot;a&quot;]" type="array"/></params></function></functions>')
    assert format_calls(calls_, "concise_xml", False) == (
        '<functions><function name="alarm.set"><param name="time" type="string">nine am</param>'
        '<param name="n" type="integer">2</param><param name="ok" type="boolean">true</param>'
        '<param name="l" type="array">[1.5, "a"]</param></function></functions>')


# -- grammar structure -------------------------------------------------------------------------------------

def test_grammar_bounds_and_root() -> None:
    f = {"name": "f", "parameters": {"type": "dict", "properties": {"s": {"type": "string"}}, "required": ["s"]}}
    g = gbnf_grammar([f], "python", True, max_calls=3, max_string=10)
    assert g.startswith('root ::= "<TOOLCALL>" "[" ws call ("," ws call){0,2} ws "]" "</TOOLCALL>"\n')
    assert "{0,10}" in g and "{0,128}" not in g
    assert gbnf_grammar([f], "concise_xml", False).startswith('root ::= "<functions>" ws call (ws call){0,7}')
    assert gbnf_grammar([f], "json", False) == gbnf_grammar([f], ReturnFormat.JSON, False)  # deterministic


def test_python_leaves_out_what_python_cannot_write() -> None:
    ok = {"name": "a.b", "parameters": {"type": "dict", "properties": {
        "x": {"type": "integer"}, "from": {"type": "string"}, "Content-Type": {"type": "string"}}, "required": ["x"]}}
    bad_name = {"name": "get-weather", "parameters": {"type": "dict", "properties": {}}}
    bad_param = {"name": "g", "parameters": {"type": "dict", "properties": {"class": {"type": "string"}},
                                             "required": ["class"]}}
    g = gbnf_grammar([ok, bad_name, bad_param], "python", False)
    assert '"a.b("' in g and '"x="' in g
    assert "from=" not in g and "Content-Type" not in g and "get-weather" not in g and "class=" not in g
    assert "get-weather" in gbnf_grammar([ok, bad_name], "json", False)
    with pytest.raises(ConstraintError, match="python return format"):
        gbnf_grammar([bad_name, bad_param], "python", False)


@pytest.mark.parametrize("functions", [[], [{"name": "f", "parameters": {"type": "dict"}}]])
def test_constraint_errors(functions: list[dict[str, Any]]) -> None:
    if not functions:
        with pytest.raises(ConstraintError, match="without functions"):
            gbnf_grammar(functions, "json", False)
    else:
        with pytest.raises(ConstraintError, match="at least 1"):
            gbnf_grammar(functions, "json", False, max_calls=0)


# -- llama.cpp: compile, and sample sentences -------------------------------------------------------------

def test_grammars_compile_for_every_mini_case(llama: Any) -> None:
    for case in load_dataset("mini").cases:
        for fmt in FORMATS:
            for tag in (False, True):
                assert llama.compiles(gbnf_grammar(case.functions, fmt, tag)), (case.id, fmt, tag)


def test_llama_refuses_a_broken_grammar(llama: Any) -> None:
    assert not llama.compiles('root ::= "a" (') and not llama.compiles("root ::= undefined-rule")


@pytest.mark.parametrize("fmt", FORMATS)
def test_sampled_sentences_parse_as_typed_calls(llama: Any, helpers: Any, all_kinds: list[dict[str, Any]],
                                                fmt: ReturnFormat) -> None:
    rng = random.Random(f"all-kinds-{fmt}")
    for tag in (False, True):
        grammar = gbnf_grammar(all_kinds, fmt, tag, max_string=12, max_items=3)
        for _ in range(3):
            helpers.assert_conforms(llama.sample(grammar, rng), all_kinds, fmt, tag)


@pytest.mark.slow
def test_grammars_compile_for_every_bfcl_case(llama: Any) -> None:
    n = 0
    for category in BFCL:
        for case in load_dataset(f"bfcl:{category}").cases:
            for fmt in FORMATS:
                for tag in (False, True):
                    try:
                        grammar = gbnf_grammar(case.functions, fmt, tag)
                    except ConstraintError:
                        assert not case.functions, case.id  # only a case without functions has no grammar
                        continue
                    assert llama.compiles(grammar), (case.id, fmt, tag)
                    n += 1
    assert n > 25_000


@pytest.mark.slow
def test_sampled_sentences_parse_for_mini_and_bfcl_cases(llama: Any, helpers: Any) -> None:
    rng = random.Random("mini-bfcl")
    cases = list(load_dataset("mini:en").cases)
    for category in BFCL[:8]:
        cases += rng.sample(list(load_dataset(f"bfcl:{category}").cases), 3)
    for case in cases:
        fmt, tag = rng.choice(FORMATS), rng.random() < 0.5
        grammar = gbnf_grammar(case.functions, fmt, tag, max_string=24, max_items=4)
        helpers.assert_conforms(llama.sample(grammar, rng), list(case.functions), fmt, tag)
