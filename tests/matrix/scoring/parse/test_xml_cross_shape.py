"""Concise XML read by the verbose decoder: the regex fast path must give expat's answer.

Answering verbose_xml prompts in concise XML is a common mistake; the fast
path (``_xmlfast._concise_read_as_verbose``) reads such blocks without expat,
so it is checked here against the expat path on generated concise blocks,
and on the one case where the verbose reading fails.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptgrid.matrix.scoring.parse import ParseFailure, _xml
from promptgrid.matrix.scoring.parse._fail import Fail

_VALS = ["1", "4.5", "x", "", " 3 ", "true", "[1, 'a']", "a>b", "é", "\t", "a\nb", "&amp;", "]]>", "\r", "\x01",
         "\x85", " "]
_TYPES = ["integer", "float", "string", "boolean", "array", "dict", "null", "int", "", "Integer", "tuple"]


def _decode(doc: str, fast: bool) -> object:
    with pytest.MonkeyPatch.context() as m:
        if not fast:
            m.setattr(_xml, "fast_xml_calls", lambda *args: None)
        try:
            decoded = _xml.parse_xml_calls(doc, True)[0]
        except Fail as fail:
            return fail.kind, fail.details, fail.bfcl_error_type, fail.deviation
    return repr(decoded.calls), decoded.detected, decoded.unknown_types, decoded.deviation


@st.composite
def _concise(draw: st.DrawFn) -> str:
    sep = st.sampled_from([" ", "  ", "\n", "\t"])
    out = "<functions>" + draw(st.sampled_from(["", "\n"]))
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(["f", "math.gcd", "a b", "é", ""]))
        if draw(st.integers(0, 5)) == 0:
            out += f'<function name="{name}"/>'
            continue
        body = ""
        for _ in range(draw(st.integers(0, 3))):
            attrs = [f'name="{draw(st.sampled_from(["a", "b", ""]))}"']
            if draw(st.booleans()):
                attrs.append(f'type="{draw(st.sampled_from(_TYPES))}"')
            body += f"<param {draw(sep).join(attrs)}>{draw(st.sampled_from(_VALS))}</param>" + draw(
                st.sampled_from(["", "\n", " "]))
        out += f'<function name="{name}">' + body + "</function>" + draw(st.sampled_from(["", "\n"]))
    return out + "</functions>"


@pytest.mark.slow
@settings(max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(_concise())
def test_concise_read_as_verbose_fast_path_equals_expat_path(doc):
    assert _decode(doc, True) == _decode(doc, False)


def test_concise_integer_read_as_verbose_fails_as_bad_value():
    doc = '<functions><function name="f"><param name="a" type="integer">1</param></function></functions>'
    assert _decode(doc, True)[0] is ParseFailure.BAD_VALUE
    assert _decode(doc, True) == _decode(doc, False)


def test_concise_strings_read_as_verbose_are_empty():
    doc = '<functions><function name="f"><param name="a" type="string">x</param><param name="b">y</param>' \
          "</function></functions>"
    assert _decode(doc, True) == ("[{'f': {'a': '', 'b': ''}}]", "concise_xml", [], None)
