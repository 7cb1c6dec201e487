"""Generated responses: our strict parse says what bfcl-eval's decoder does.

Calls are generated, rendered in one of the four formats (sometimes not the
one asked for), wrapped (tag, fence, prose, quotes, one wrapper per call) and
sometimes mutated (a character dropped, inserted, or the text cut). For each,
``parse_response`` and bfcl-eval's ``default_decode_ast_prompting`` must agree
-- same calls, or the failure bfcl-eval's pipeline reports (decoder raises /
wrong output format / no calls) -- unless our result names a documented
deviation. Also: the fast Python path gives exactly the ``ast`` path's values.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from promptgrid.matrix.scoring.parse._fail import Fail
from promptgrid.matrix.scoring.parse._pyast import parse_calls_ast
from promptgrid.matrix.scoring.parse._pyfast import Decline, parse_calls_fast, tokenize
from promptgrid.variants import ReturnFormat

AGREEMENT = settings(max_examples=1_000, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow])

STRINGS = ["San Francisco", "a}]b", "it's", 'say "hi"', "x\ny", "[1, 2]", "<b>", "a&b", "", " pad ", "ümlaut",
           "{'k': 1}", "}]", "\\d", "tab\there"]
SCALARS = st.sampled_from(STRINGS) | st.sampled_from([0, 1, -5, 42, 10**20, 3.5, -0.25, 1e10, True, False, None])
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["k", "name", "v w"]), inner,
                                                                max_size=2),
    max_leaves=6,
)
CALL = st.tuples(st.sampled_from(["f", "get_weather", "math.gcd", "a.b.c"]),
                 st.dictionaries(st.sampled_from(["a", "b", "city", "unit", "data"]), VALUES, max_size=3))
XML_TYPES = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "dict",
             type(None): "null"}


def _py(value: object, double: bool) -> str:
    if isinstance(value, str):
        return json.dumps(value) if double and "\\" not in value else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_py(v, double) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k, double)}: {_py(v, double)}" for k, v in value.items()) + "}"
    return repr(value)


def _render(calls: list[tuple[str, dict[str, object]]], fmt: str, double: bool, odd_type: str | None) -> str:
    if fmt == "python":
        return "[" + ", ".join(
            f"{n}(" + ", ".join(f"{k}={_py(v, double)}" for k, v in a.items()) + ")" for n, a in calls) + "]"
    if fmt == "json":
        return json.dumps([{"function": n, "parameters": a} for n, a in calls], ensure_ascii=double)
    out = "<functions>"
    for name, args in calls:
        out += f'<function name="{name}">' + ("<params>" if fmt == "verbose_xml" else "")
        for k, v in args.items():
            t = odd_type or XML_TYPES[type(v)]
            raw = v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else repr(v)
            esc = raw.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
            out += (f'<param name="{k}" value="{esc}" type="{t}"/>' if fmt == "verbose_xml"
                    else f'<param name="{k}" type="{t}">{esc}</param>')
        out += ("</params>" if fmt == "verbose_xml" else "") + "</function>"
    return out + "</functions>"


WRAPS = ["{}", "<TOOLCALL>{}</TOOLCALL>", "```\n{}\n```", "```json\n{}\n```", "<TOOLCALL>```python\n{}\n```</TOOLCALL>",
         "Sure! {}", "{}\nHope this helps.", "'{}'", "  \n{}\n ", "<TOOLCALL>\n{}\n</TOOLCALL>\nDone."]
MUTATIONS = ["[](){}<>\"',=:\\ \n`", "</TOOLCALL>", "<TOOLCALL>", "```"]


@st.composite
def responses(draw: st.DrawFn) -> tuple[str, str, bool]:
    calls = draw(st.lists(CALL, max_size=3))
    source = draw(st.sampled_from(ReturnFormat))
    asked = source if draw(st.integers(0, 3)) else draw(st.sampled_from(ReturnFormat))
    tag = draw(st.booleans())
    double = draw(st.booleans())
    odd_type = draw(st.sampled_from([None] * 8 + ["int", "str", "Integer", "list"]))
    wrap = draw(st.sampled_from(WRAPS))
    if len(calls) > 1 and draw(st.integers(0, 9)) == 0:
        text = "\n".join(wrap.format(_render([c], source, double, odd_type)) for c in calls)
    else:
        text = wrap.format(_render(calls, source, double, odd_type))
    mutation = draw(st.integers(0, 5))
    if text and mutation:
        at = draw(st.integers(0, len(text) - 1))
        if mutation == 1:
            text = text[:at] + text[at + 1:]
        elif mutation == 2:
            text = text[:at]
        elif mutation == 3:
            piece = draw(st.sampled_from(MUTATIONS))
            text = text[:at] + (draw(st.sampled_from(piece)) if len(piece) > 3 else piece) + text[at:]
    return text, asked, tag


@pytest.mark.slow
@AGREEMENT
@given(responses())
def test_strict_parse_agrees_with_bfcl_decoder(check_bfcl, bfcl_is_safe, case):
    text, asked, tag = case
    # A mutation can turn "'x', -5" into "'x' -5": arithmetic bfcl-eval would
    # eval(); the guard refuses such texts, so they are not compared.
    assume(bfcl_is_safe(text, asked, tag))
    check_bfcl(text, asked, tag)


PY_ATOMS = ["1", "-1", "- 2", "0", "00", "007", "1.5", ".5", "5.", "1e3", "1E-3", "1_000", "0x1F", "5j", "'a'", '"b"',
            "'a\\nb'", "'a\\\\b'", "'\\x41'", "'\\d'", "\"it's\"", "'é'", "True", "False", "None", "null", "x",
            "a.b", "g()", "g(1)", "g(a=1)", "h.i(b='x')", "[]", "()", "{}", "(1)", "(1,)", "[1,]", "{'a': 1}",
            "{1: 2, 1.0: 3}", "{[1]: 2}", "{1, 2}", "+1", "--1", "-'a'", "1+2", "r'x'", "'a' 'b'", "x[0]", "if",
            "...", "f'x'", "not 1", "b'x'"]
PY_VALUES = st.recursive(
    st.sampled_from(PY_ATOMS),
    lambda inner: (st.lists(inner, max_size=3).map(lambda v: "[" + ", ".join(v) + "]")
                   | st.lists(inner, max_size=3).map(lambda v: "(" + ", ".join(v) + ",)")
                   | st.lists(st.tuples(inner, inner), max_size=2).map(
                       lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}")
                   | st.lists(inner, max_size=2).map(
                       lambda v: "g(" + ", ".join(f"p{i}={x}" for i, x in enumerate(v)) + ")")),
    max_leaves=5,
)
PY_CALLS = st.lists(
    st.tuples(st.sampled_from(["f", "g.h", "x.y.z", "_p"]),
              st.lists(st.tuples(st.sampled_from(["a", "b", "c", "if", "True"]), st.sampled_from(["=", " = ", "=="]),
                                 PY_VALUES), max_size=3)),
    min_size=1, max_size=3,
).map(lambda calls: [n + "(" + ", ".join(k + eq + v for k, eq, v in args) + ")" for n, args in calls])


@pytest.mark.slow
@settings(max_examples=800, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(PY_CALLS, st.sampled_from(["[{}]", "{}", "[{}\n]"]))
def test_fast_python_path_equals_ast_path(calls, shape):
    text = shape.format(", ".join(calls))
    try:
        fast = parse_calls_fast(text, tokenize(text) or [])
    except Decline:
        return
    try:
        slow: object = parse_calls_ast(text)[0]
    except Fail as fail:
        slow = fail.kind
    assert repr(fast) == repr(slow)
