"""parse_any: calls in any format, and what the response looks like."""

from __future__ import annotations

import pytest

from promptgrid.matrix.scoring.parse import ParseFailure, format_matches, parse_any

F1 = {"get_weather": {"city": "Paris", "days": 3}}
F2 = {"math.gcd": {"num1": 40, "num2": 50}}

PY = "[get_weather(city='Paris', days=3), math.gcd(num1=40, num2=50)]"
JS = ('[{"function": "get_weather", "parameters": {"city": "Paris", "days": 3}}, '
      '{"function": "math.gcd", "parameters": {"num1": 40, "num2": 50}}]')
VX = ('<functions><function name="get_weather"><params><param name="city" value="Paris" type="string"/>'
      '<param name="days" value="3" type="integer"/></params></function><function name="math.gcd"><params>'
      '<param name="num1" value="40" type="integer"/><param name="num2" value="50" type="integer"/></params>'
      "</function></functions>")
CX = ('<functions><function name="get_weather"><param name="city" type="string">Paris</param>'
      '<param name="days" type="integer">3</param></function><function name="math.gcd">'
      '<param name="num1" type="integer">40</param><param name="num2" type="integer">50</param>'
      "</function></functions>")
BODIES = {"python": PY, "json": JS, "verbose_xml": VX, "concise_xml": CX}


@pytest.mark.parametrize("fmt", list(BODIES))
@pytest.mark.parametrize(
    ("wrap", "tag", "prose", "fence"),
    [
        ("{}", False, False, False),
        ("<TOOLCALL>{}</TOOLCALL>", True, False, False),
        ("<toolcall>\n{}\n</toolcall>", True, False, False),
        ("Sure, here are the calls:\n{}\nLet me know!", False, True, False),
        ("```\n{}\n```", False, False, True),
        ("Here:\n```python\n{}\n```", False, True, True),
        ("<TOOLCALL>```json\n{}\n```</TOOLCALL>", True, False, True),
        ("Thinking first.\n<TOOLCALL>{}</TOOLCALL>", True, True, False),
        ("<TOOLCALL>{}", True, False, False),  # unclosed tag: read to the end
    ],
)
def test_any_format_any_wrapping(fmt, wrap, tag, prose, fence):
    r = parse_any(wrap.format(BODIES[fmt]))
    assert r.ok, r.details
    assert r.calls == (F1, F2)
    assert r.detected_format == fmt
    assert (r.tag_found, r.prose, r.code_fence, r.per_call_wrapping) == (tag, prose, fence, False)
    assert r.bfcl_error_type is None


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("<TOOLCALL>get_weather(city='Paris', days=3)</TOOLCALL>\n<TOOLCALL>math.gcd(num1=40, num2=50)</TOOLCALL>",
         "python"),
        ("[get_weather(city='Paris', days=3)]\n[math.gcd(num1=40, num2=50)]", "python"),
        ('[{"function": "get_weather", "parameters": {"city": "Paris", "days": 3}}]\n'
         '[{"function": "math.gcd", "parameters": {"num1": 40, "num2": 50}}]', "json"),
        (VX.replace("</function><function", "</function></functions>\n<functions><function"), "verbose_xml"),
        (CX.replace("</function><function", "</function></functions><functions><function"), "concise_xml"),
    ],
)
def test_per_call_wrapping(text, fmt):
    r = parse_any(text)
    assert r.ok and r.calls == (F1, F2) and r.detected_format == fmt
    assert r.per_call_wrapping


def test_calls_on_separate_lines_without_a_list():
    r = parse_any("get_weather(city='Paris', days=3)\nmath.gcd(num1=40, num2=50)")
    assert r.calls == (F1, F2) and r.detected_format == "python" and not r.per_call_wrapping


def test_bulleted_calls_in_prose():
    r = parse_any("I will make two calls:\n- get_weather(city='Paris', days=3)\n- math.gcd(num1=40, num2=50)\n")
    assert r.calls == (F1, F2) and r.prose


def test_a_call_mentioned_mid_sentence_is_not_a_call():
    r = parse_any("You could call get_weather(city='Paris') if you had the date.")
    assert r.failure is ParseFailure.PROSE_ONLY and r.calls is None


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}',
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 3}"}',
        '{"type": "function", "function": {"name": "get_weather", '
        '"arguments": "{\\"city\\": \\"Paris\\", \\"days\\": 3}"}}',
        '{"tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]}',
    ],
)
def test_common_json_call_shapes(text):
    r = parse_any(text)
    assert r.calls == (F1,) and r.detected_format == "json"


def test_a_json_object_that_is_not_a_call():
    r = parse_any('{"name": "John", "age": 3}')
    assert r.failure is ParseFailure.NOT_A_CALL and r.detected_format == "json"


def test_xml_lenient_types_and_recovery():
    r = parse_any('<functions><function name="f"><param name="a" type="int">40</param></function></functions>')
    assert r.calls == ({"f": {"a": 40}},) and r.unknown_xml_types == ("int",)
    broken = ('<functions><function name=\\"f\\"><params><param name=\\"a\\" value=\\"1\\" type=\\"integer\\"/>'
              "</function></functions>")
    r = parse_any(broken)
    assert r.calls == ({"f": {"a": 1}},) and r.detected_format == "verbose_xml"
    assert "recovery" in r.details


def test_bare_function_elements_without_wrapper():
    r = parse_any('<function name="f"><param name="a" type="integer">1</param></function>')
    assert r.calls == ({"f": {"a": 1}},) and r.detected_format == "concise_xml"


def test_xml_without_params_is_ambiguous():
    r = parse_any('<functions><function name="f"/></functions>')
    assert r.detected_format == "xml"
    assert format_matches("xml", "verbose_xml") and format_matches("xml", "concise_xml")
    assert not format_matches("xml", "json") and not format_matches(None, "python")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", ParseFailure.EMPTY),
        ("   ", ParseFailure.EMPTY),
        ("I'm sorry, I can't help with that.", ParseFailure.PROSE_ONLY),
        ("<TOOLCALL>I need more information.</TOOLCALL>", ParseFailure.PROSE_ONLY),
        ('[{"function": "f", "parameters": {"a": 1}]', ParseFailure.UNCLOSED_BRACKET),
        ("[f(a=__import__('os').getcwd() + 'x')]", ParseFailure.UNSAFE_EXPRESSION),
        ("<!DOCTYPE x><functions><function name='f'/></functions>", ParseFailure.XML_ENTITY_REFUSED),
        ("['a', 'b']", ParseFailure.NOT_A_CALL),
    ],
)
def test_failures(text, kind):
    r = parse_any(text)
    assert r.failure is kind and r.calls is None


def test_empty_call_list_is_a_valid_parse_of_no_calls():
    r = parse_any("[]")
    assert r.ok and r.calls == () and r.detected_format is None


def test_mixed_formats_are_noted():
    r = parse_any("<TOOLCALL>[f(a=1)]</TOOLCALL><TOOLCALL>" + '[{"function": "g", "parameters": {}}]</TOOLCALL>')
    assert r.calls == ({"f": {"a": 1}}, {"g": {}}) and r.detected_format == "python"
    assert "mixed formats" in r.details and r.per_call_wrapping


def test_values_are_never_evaluated_in_parse_any(tmp_path):
    canary = tmp_path / "canary"
    r = parse_any(f"[f(a=open({str(canary)!r}, 'w').write('x') + 1)]")
    assert r.failure is ParseFailure.UNSAFE_EXPRESSION and not canary.exists()
