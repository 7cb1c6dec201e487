"""Properties every parser has on any input, and hostile inputs.

- any string: a ParseResult, never an exception (hypothesis, 10,000 examples
  per parser: python, json, verbose_xml, concise_xml, parse_any; the tag is
  drawn too);
- model output is never executed: generated inputs embed code that would
  create a canary file if evaluated (eval'd binops, calls, lambdas);
- entity expansion (billion laughs, external and parameter entities) is
  refused; 100,000 nested brackets / tags / calls fail, they do not crash;
- inputs up to MAX_INPUT_CHARS (1 MB) parse in under 50 ms each (median of 3).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptgrid.matrix.scoring.parse import (
    MAX_INPUT_CHARS,
    ParseFailure,
    ParseResult,
    _xml,
    decode_bfcl,
    parse_any,
    parse_response,
)
from promptgrid.matrix.scoring.parse._fail import Fail
from promptgrid.variants import ReturnFormat


def _decoded(text: str, fmt: str, tag: bool) -> ParseResult:
    """``decode_bfcl`` (the verdict-only decode) as a record, so every test below runs it too."""
    calls, fail = decode_bfcl(text, fmt, tag)
    assert (calls is None) != (fail is None)
    if fail is None:
        return ParseResult(tuple(calls))
    return ParseResult(None, fail.kind, bfcl_error_type=fail.bfcl_error_type, bfcl_deviation=fail.deviation,
                       details=fail.details)


PARSERS: list[tuple[str, Callable[[str], ParseResult]]] = [
    (f"{fmt}{'+tag' if tag else ''}", (lambda f, t: lambda text: parse_response(text, f, t))(fmt, tag))
    for fmt in ReturnFormat
    for tag in (False, True)
] + [("any", parse_any)] + [
    (f"decode-{fmt}{'+tag' if tag else ''}", (lambda f, t: lambda text: _decoded(text, f, t))(fmt, tag))
    for fmt in ReturnFormat
    for tag in (False, True)
]
PARSER_IDS = [name for name, _ in PARSERS]
PARSER_FNS = [fn for _, fn in PARSERS]

# -- any string: never raises, never runs code ---------------------------------

CANARY = Path(tempfile.gettempdir()) / f"promptgrid-parse-canary-{os.getpid()}"
_C = repr(str(CANARY))
CANARY_CODE = [
    f"__import__('pathlib').Path({_C}).write_text('x')",
    f"open({_C},'w')",
    f"open({_C}, 'w').write('x')",
    f"(lambda: open({_C},'w'))()",
    f"lambda: __import__('pathlib').Path({_C}).touch()",
    f"1 + __import__('pathlib').Path({_C}).write_text('x')",
    f"2 ** len(open({_C},'w').name)",
    f"[open({_C},'w') for _ in '1']",
    f"{{'k': open({_C},'w')}}",
]
# Whole calls around each payload, so that a generated text is often a valid
# call list whose value would run the payload if anything evaluated it.
CANARY_CALLS = [form.format(code) for code in CANARY_CODE
                for form in ("[f(a={})]", "f(a={})", "[g(b=1, c={}), h()]", "<TOOLCALL>[f(a={})]</TOOLCALL>")]
FRAGMENTS = CANARY_CODE + CANARY_CALLS + [
    "[", "]", "(", ")", "{", "}", ",", ":", "=", "==", " ", "\n", "\t", "\\", '\\"', "'", '"', "`",
    "<TOOLCALL>", "</TOOLCALL>", "<toolcall>", "```", "```json\n", "```python\n", "```xml\n",
    "f(", "math.gcd(", "a=", "b =", "1", "-2.5", "1e3", "007", "'x'", '"y"', "True", "None", "null",
    "+", "-", "*", "**", "/", "//", "%", "~", "not ", "lambda: ", "x[0]", "f'{1}'", "\\x41", "\\u00e9",
    "<functions>", "</functions>", '<function name="f">', "<function>", "</function>", "<params>",
    "</params>", '<param name="a" value="1" type="integer"/>', '<param name="b" type="int">', "</param>",
    '<param name="c" value="[1, 2]" type="array"/>', '<param name="d" type="dict">', "<![CDATA[", "]]>",
    "<!DOCTYPE x [", "<!ENTITY a 'b'>", "]>", "&a;", "&amp;", "&#0;", "<a:b>", "<!--", "-->", "<?pi?>",
    '[{"function": "f", "parameters": {"a": 1}}]', '{"function": "g", "parameters": ', '"function"',
    '"parameters"', '{"name": "f", "arguments": "{}"}', "}]", "[{", "Sure! ", "Hope this helps.",
    "é", "日本", "\x00", "\ud800", "\u2028", "\r\n",
]
# Cheap by design (the file must run in well under two minutes on two cores):
# a short list of sampled fragments plus a few arbitrary characters. Each
# example goes through all nine parsers (the five above and the verdict-only
# decode of each format), so hypothesis pays its per-example cost once for
# all of them; every parser still sees 10,000 examples.
TEXTS = st.builds(
    lambda parts, noise, at: "".join(parts[:at]) + noise + "".join(parts[at:]),
    st.lists(st.sampled_from(FRAGMENTS), max_size=14),
    st.text(max_size=6),
    st.integers(0, 14),
)
PROPERTY_SETTINGS = settings(
    max_examples=10_000, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def _check(result: ParseResult) -> None:
    assert isinstance(result, ParseResult)
    assert (result.calls is None) == (result.failure is not None)
    assert not CANARY.exists(), "model output was executed"


@pytest.fixture(autouse=True, scope="module")
def _no_canary():
    CANARY.unlink(missing_ok=True)
    yield
    assert not CANARY.exists(), "model output was executed"


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(text=TEXTS, tag=st.booleans())
def test_every_parser_on_any_text_never_raises_never_executes(text, tag):
    """python, json, verbose_xml, concise_xml (strict and verdict-only, tag drawn) and parse_any.

    The verdict-only decode also keeps the strict parse's bfcl outcome: the
    same calls, or a failure with the same bfcl error type and deviation.
    """
    for fmt in ReturnFormat:
        full = parse_response(text, fmt, tag)
        _check(full)
        quick = _decoded(text, fmt, tag)
        _check(quick)
        assert repr(quick.calls) == repr(full.calls), (text, fmt)
        assert (quick.bfcl_error_type, quick.bfcl_deviation) == (full.bfcl_error_type, full.bfcl_deviation), (text, fmt)
    _check(parse_any(text))


# -- entity expansion ----------------------------------------------------------

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<functions><function name="f"><param name="a" value="&lol9;" type="string"/>
<param name="b" type="string">&lol9;</param></function></functions>"""

EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE functions [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<functions><function name="f"><param name="a" type="string">&xxe;</param></function></functions>"""

PARAMETER_ENTITY = """<!DOCTYPE functions [<!ENTITY % p SYSTEM "http://example.invalid/x.dtd"> %p;]>
<functions><function name="f"/></functions>"""


@pytest.mark.parametrize("doc", [BILLION_LAUGHS, EXTERNAL, PARAMETER_ENTITY,
                                 "<TOOLCALL>" + BILLION_LAUGHS + "</TOOLCALL>",
                                 BILLION_LAUGHS.replace("DOCTYPE", "doctype")])
def test_entities_are_refused_not_expanded(doc):
    for fmt in ("verbose_xml", "concise_xml"):
        for tag in (False, True):
            r = parse_response(doc, fmt, tag)
            assert r.calls is None
            assert r.failure in (ParseFailure.XML_ENTITY_REFUSED, ParseFailure.TAG_MISSING), r
            if tag is ("<TOOLCALL>" in doc) or not tag:
                assert r.failure is ParseFailure.XML_ENTITY_REFUSED
    assert parse_any(doc).failure is ParseFailure.XML_ENTITY_REFUSED


@pytest.mark.parametrize("doc", [BILLION_LAUGHS, EXTERNAL, PARAMETER_ENTITY])
def test_expat_itself_refuses_declarations(monkeypatch, doc):
    """Defense in depth: with the textual pre-check disabled, the expat handlers refuse."""
    monkeypatch.setattr(_xml, "has_dtd", lambda text: False)
    body = doc[doc.index("<!DOCTYPE"):]
    with pytest.raises(Fail) as info:
        _xml.parse_tree(body)
    assert info.value.kind is ParseFailure.XML_ENTITY_REFUSED


# -- deep nesting --------------------------------------------------------------

N = 100_000
DEEP = {
    "open_square": "[" * N,
    "open_curly": "{" * N,
    "open_tags": "<a>" * N,
    "open_calls": "f(" * N,
    "closed_square": "[" * N + "]" * N,
    "closed_curly": '{"a":' * N + "1" + "}" * N,
    "closed_tags": "<functions>" + "<a>" * N + "</a>" * N + "</functions>",
    "closed_calls": "f(a=" * N + "1" + ")" * N,
    "unary": "[f(a=" + "-" * N + "1)]",
    "binop": "[f(a=" + "1+" * N + "1)]",
    "attribute": "[f(a=x" + ".y" * N + ")]",
    "json_in_tag": "<TOOLCALL>" + "[" * N + "</TOOLCALL>",
    "not_ops": "[f(a=" + "not " * N + "1)]",
}


@pytest.mark.parametrize("name", list(DEEP))
@pytest.mark.parametrize("parse", PARSER_FNS, ids=PARSER_IDS)
def test_deep_nesting_is_a_failure_not_a_crash(name, parse):
    r = parse(DEEP[name])
    assert isinstance(r, ParseResult)
    assert r.calls is None or r.failure is None  # a result either way, never an exception


def test_deep_nesting_reports_depth_or_size():
    assert parse_response("[" * N, "python", False).failure in (ParseFailure.TOO_DEEP, ParseFailure.TOO_LARGE)
    assert parse_response(DEEP["closed_square"], "json", False).failure is ParseFailure.TOO_DEEP
    assert parse_response(DEEP["closed_tags"], "verbose_xml", False).failure is ParseFailure.TOO_LARGE
    deep_xml = "<functions>" + "<a>" * 200 + "</a>" * 200 + "</functions>"
    assert parse_response(deep_xml, "verbose_xml", False).failure is ParseFailure.TOO_DEEP
    deep_py = "[f(a=" + "[" * 150 + "]" * 150 + ")]"
    assert parse_response(deep_py, "python", False).failure is ParseFailure.TOO_DEEP


def test_over_the_size_limit_is_too_large():
    text = "[f(a='" + "x" * MAX_INPUT_CHARS + "')]"
    for _, parse in PARSERS:
        assert parse(text).failure is ParseFailure.TOO_LARGE


# -- code in values, listed -------------------------------------------------------


def _payloads(canary: Path) -> list[str]:
    c = repr(str(canary))
    code = [
        f"__import__('pathlib').Path({c}).write_text('x')",
        f"open({c}, 'w').write('x')",
        f"(lambda: open({c}, 'w'))()",
        f"[open({c}, 'w') for _ in [1]]",
    ]
    texts = []
    for expr in code:
        texts += [
            f"[f(a={expr})]", f"[f(a=1 + {expr})]", f"[f(a={expr} * 2)]", f"[f(a=-({expr}))]",
            f"[f(a=lambda: {expr})]", f"[f(a=[{expr}])]", f"[f(a={{'k': {expr}}})]",
            f"[f(a=x[{expr}])]", f"<TOOLCALL>[f(a=2 ** {expr})]</TOOLCALL>", f"[{expr}]",
            f'<functions><function name="f"><param name="a" value="{expr}" type="dict"/></function></functions>',
            f'<functions><function name="f"><param name="a" type="array">[{expr}]</param></function></functions>',
            f'[{{"function": "f", "parameters": {{"a": "{expr}"}}}}]',
        ]
    return texts


def test_canary_payloads_are_live_under_bfcl_eval(tmp_path, bfcl_unguarded_decode):
    """The payloads do run when evaluated: bfcl-eval's decoder creates the canary.

    This is the remote-code-execution the deliberate difference removes; the
    file is created in pytest's tmp_path and is harmless.
    """
    canary = tmp_path / "canary"
    bfcl_unguarded_decode(f"[f(a=1 + len(open({str(canary)!r}, 'w').name))]", "python", False)
    assert canary.exists()
    canary.unlink()
    result = parse_response(f"[f(a=1 + len(open({str(canary)!r}, 'w').name))]", "python", False)
    assert result.failure is ParseFailure.UNSAFE_EXPRESSION and not canary.exists()


@pytest.mark.parametrize("parse", PARSER_FNS, ids=PARSER_IDS)
def test_model_output_is_never_executed(tmp_path, parse):
    canary = tmp_path / "canary"
    for text in _payloads(canary):
        parse(text)
        assert not canary.exists(), text


# -- megabyte inputs ----------------------------------------------------------------


def _fill(unit: str, size: int = MAX_INPUT_CHARS) -> str:
    return (unit * (size // len(unit) + 1))[:size]


BIG = {
    "prose": _fill("The quick brown fox jumps over the lazy dog. "),
    "python_long_string": "[f(a='" + "x" * (MAX_INPUT_CHARS - 20) + "')]",
    "python_escaped_string": "[f(a='" + _fill("ab\\n", MAX_INPUT_CHARS - 21) + "')]",
    "json_many_calls": "[" + _fill('{"function": "f", "parameters": {"a": 1}}, ', MAX_INPUT_CHARS - 40)
    + '{"function": "f", "parameters": {}}]',
    "xml_many_calls": "<functions>"
    + _fill('<function name="f"><param name="a" type="integer">1</param></function>', MAX_INPUT_CHARS - 30)
    + "</functions>",
    "brackets": _fill("[{(<"),
    "tags_and_fences": _fill("<TOOLCALL>```json\n[{"),
}
# A guard against super-linear parsing of megabyte answers, not a speed target (benchmarks/score.py measures
# speed): a quadratic parser takes seconds on these inputs, a linear one ~10-30 ms. 50 ms failed once on a
# machine running two benchmarks beside the suite (json: 51.2 ms); 250 ms keeps the guard and drops the flake.
_BUDGET_S = 0.250


@pytest.mark.parametrize("name", list(BIG))
def test_megabyte_inputs_parse_fast(name):
    """Median of 3 under 250 ms per parse, for every parser: linear, not quadratic (robust to a loaded machine)."""
    text = BIG[name]
    assert len(text) <= MAX_INPUT_CHARS
    slow = []
    for parser_name, parse in PARSERS:
        times = []
        for _ in range(3):
            start = time.perf_counter()
            parse(text)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        if median > _BUDGET_S:
            slow.append(f"{parser_name}: {median * 1000:.1f} ms")
    assert not slow, f"{name}: " + ", ".join(slow)
