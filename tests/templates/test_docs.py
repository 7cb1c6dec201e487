"""Function-doc renderers: documented bfcl quirks, clean fixes, and properties over generated schemas."""

from __future__ import annotations

import json
import re
from typing import Any
from xml.parsers.expat import ExpatError

import pytest
import xmltodict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptgrid.templates import DocFlavour, dedupe_language_hint, render_function_docs

HINT = " Note that the provided function is in Python 3 syntax."

FN = {
    "name": "lookup",
    "description": "Find caf\u00e9s & bars <nearby>." + HINT + HINT,
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string", "description": "The city."},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags.", "default": ["a", "b"]},
            "opts": {
                "type": "dict",
                "description": "Options.",
                "properties": {"limit": {"type": "integer", "description": "Max.", "default": 5}},
                "required": ["limit"],
            },
            "unit": {"type": "string", "enum": ["km", "mi"], "description": "Unit.", "default": "km, metric"},
        },
        "required": ["city"],
    },
}
FN2 = {"name": "ping", "description": "Ping.", "parameters": {"type": "dict", "properties": {}}}


# --------------------------------------------------------------------------- bfcl quirks, kept


def test_bfcl_json_is_indent4_with_ascii_escapes() -> None:
    out = render_function_docs([FN], "json", "bfcl")
    assert out == json.dumps([FN], indent=4)
    assert "caf\\u00e9" in out and "caf\u00e9" not in out


def test_bfcl_python_layout_and_spacing() -> None:
    out = render_function_docs([FN, FN2], "python", "bfcl")
    first, second = out.split("# Function: ping\n")
    assert first.startswith('# Function: lookup\n    """\n    Find caf\u00e9s')
    assert first.endswith('    """\n' + "\n" * 5)  # five blank lines between functions
    assert out.endswith('    """\n' + "\n" * 3)  # and three after the last
    assert "        tags (list[str], default=['a', 'b']): Tags.\n" in out
    assert "            limit (int, default=5): Max.\n" in out
    assert "unit (str, default='km, metric'): Unit. Enum values: ['km', 'mi'].\n" in out
    assert second == '    """\n    Ping.\n\n    """\n\n\n\n'  # no Args: section without parameters


def test_bfcl_xml_quirks() -> None:
    out = render_function_docs([FN], "xml", "bfcl")
    assert "<desc>Find caf\u00e9s & bars <nearby>." in out  # not escaped
    assert '<param name="tags" type="array[string]" required="false" default="[\'a\' \'b\']">' in out
    assert 'default="\'km metric\'"' in out  # commas removed from the default's repr
    assert '<param name="limit" type="integer" required="true" default="5">' in out
    assert out.count(HINT) == 2
    with pytest.raises(ExpatError):
        xmltodict.parse(f"<root>{out}</root>")


def test_clean_fixes() -> None:
    xml = render_function_docs([FN, FN2], "xml", "clean")
    assert "<desc>Find caf\u00e9s &amp; bars &lt;nearby&gt;." in xml
    # written by xmltodict.unparse (XMLGenerator): an attribute holding '"' is quoted with "'"
    assert 'default="km, metric"' in xml and """default='["a", "b"]'""" in xml
    assert '<function name="ping">\n  <desc>Ping.</desc>\n  <params></params>\n</function>' in xml
    assert xml.count(HINT) == 1 and not xml.endswith("\n") and "\n\n\n" not in xml
    parsed = xmltodict.parse(f"<root>{xml}</root>")["root"]["function"]
    assert parsed[0]["desc"] == "Find caf\u00e9s & bars <nearby>." + HINT
    js = render_function_docs([FN], "json", "clean")
    assert "caf\u00e9" in js and json.loads(js)[0]["description"].count(HINT) == 1
    py = render_function_docs([FN, FN2], "python", "clean")
    assert py.count(HINT) == 1 and '    """\n\n# Function: ping' in py and py.endswith('"""')


def test_clean_xml_quotes_and_line_ends() -> None:
    fn = {"name": "f", "description": "a\r\nb", "parameters": {"type": "dict", "properties": {
        "p": {"type": "string", "description": "x", "default": "it's \"q\"\tz"}}}}
    xml = render_function_docs([fn], "xml", "clean")
    assert "<desc>a&#13;\nb</desc>" in xml  # a CR survives a parse as CR, not LF
    assert 'default="it\'s &quot;q&quot;&#9;z"' in xml  # both quotes in the value: '"' escaped
    parsed = xmltodict.parse(xml)["function"]
    assert parsed["desc"] == "a\r\nb" and parsed["params"]["param"]["@default"] == "it's \"q\"\tz"


def test_dedupe_language_hint() -> None:
    assert dedupe_language_hint("x." + HINT * 3) == "x." + HINT
    assert dedupe_language_hint("x." + HINT) == "x." + HINT
    assert dedupe_language_hint("no hint") == "no hint"


def test_unknown_format_and_empty_list() -> None:
    with pytest.raises(ValueError, match="unknown doc format 'yaml'"):
        render_function_docs([FN], "yaml")
    for fmt in ("json", "python", "xml"):
        for flavour in DocFlavour:
            assert render_function_docs([], fmt, flavour) in ("", "[]")


# --------------------------------------------------------------------------- properties

_special = st.sampled_from(["&", "<", ">", '"', "'", ",", "&amp;", "]]>", "\r\n", "{x}", "\\", "\u00e9", "\u65e5"])
texts = st.lists(st.one_of(st.text(max_size=8), _special), max_size=5).map("".join)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}(\.[A-Za-z_][A-Za-z0-9_]{0,8})?", fullmatch=True)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False), texts)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    base = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "number", "float", "boolean", "any"])},
        optional={"description": texts, "default": scalars, "enum": st.lists(scalars, min_size=1, max_size=3)},
    )
    return base


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    props = st.dictionaries(st.one_of(names, texts.filter(bool)), children, max_size=3)
    obj = props.flatmap(lambda p: st.fixed_dictionaries(
        {"type": st.sampled_from(["dict", "object"]), "properties": st.just(p)},
        optional={"description": texts,
                  "required": st.lists(st.sampled_from(sorted(p)), unique=True) if p else st.just([]),
                  "default": st.dictionaries(names, scalars, max_size=2)},
    ))
    arr = st.fixed_dictionaries(
        {"type": st.sampled_from(["array", "tuple"]), "items": children},
        optional={"description": texts, "default": st.lists(scalars, max_size=3)},
    )
    mapping = st.fixed_dictionaries(
        {"type": st.just("dict"), "additionalProperties": st.one_of(children, st.booleans())},
        optional={"description": texts},
    )
    return st.one_of(obj, arr, mapping)


schemas = st.recursive(_leaf(), _extend, max_leaves=6)


@st.composite
def functions(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        props = draw(st.dictionaries(st.one_of(names, texts.filter(bool)), schemas, max_size=4))
        params: dict[str, Any] = {"type": "dict", "properties": props}
        if draw(st.booleans()):
            params["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
        hint = draw(st.sampled_from(["", HINT, HINT + HINT]))
        out.append({"name": draw(names), "description": draw(texts) + hint, "parameters": params})
    return out


_settings = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@_settings
@given(functions())
def test_every_format_and_flavour_renders(fns: list[dict[str, Any]]) -> None:
    for fmt in ("json", "python", "xml"):
        for flavour in DocFlavour:
            out = render_function_docs(fns, fmt, flavour)
            assert isinstance(out, str)
            for fn in fns:
                assert fn["name"] in out


@pytest.mark.slow
@_settings
@given(functions())
def test_json_round_trips(fns: list[dict[str, Any]]) -> None:
    assert json.loads(render_function_docs(fns, "json", "bfcl")) == json.loads(json.dumps(fns))
    clean = json.loads(render_function_docs(fns, "json", "clean"))
    assert [f["description"] for f in clean] == [dedupe_language_hint(f["description"]) for f in fns]


def _x(text: str) -> str:
    """What an XML parser gives back for ``text``: characters XML 1.0 cannot carry become U+FFFD."""
    return re.sub("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]", "\ufffd", text)


def _param_desc(schema: dict[str, Any]) -> str:
    desc = str(schema.get("description", ""))
    return desc + (f" Enum values: {schema['enum']}." if "enum" in schema else "")


@pytest.mark.slow
@_settings
@given(functions())
def test_clean_xml_parses_and_keeps_text(fns: list[dict[str, Any]]) -> None:
    out = render_function_docs(fns, "xml", "clean")
    parsed = xmltodict.parse(f"<functions>{out}</functions>", force_list=("function", "param"))
    got = parsed["functions"]["function"]
    assert [f["@name"] for f in got] == [_x(f["name"]) for f in fns]
    for parsed_fn, fn in zip(got, fns, strict=True):
        # xmltodict strips surrounding whitespace from element text
        assert (parsed_fn["desc"] or "") == _x(dedupe_language_hint(fn["description"])).strip()
        props = fn["parameters"]["properties"]
        params = (parsed_fn["params"] or {}).get("param", [])
        assert [p["@name"] for p in params] == [_x(n) for n in props]
        for p, schema in zip(params, props.values(), strict=True):
            assert (p["desc"] or "") == _x(_param_desc(schema)).strip()
            if isinstance(schema.get("default"), str):
                assert p["@default"] == _x(schema["default"])
            elif "default" in schema:
                assert json.loads(p["@default"]) == json.loads(json.dumps(schema["default"]))


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (str(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [repr(value)]


@pytest.mark.slow
@_settings
@given(functions())
def test_bfcl_xml_parses_when_nothing_needs_escaping(fns: list[dict[str, Any]]) -> None:
    """bfcl-eval does not escape: its XML is well-formed only while no text needs escaping."""
    out = render_function_docs(fns, "xml", "bfcl")
    needs_escaping = any(c in s for s in _strings(fns) for c in '&<>"')
    if not needs_escaping and _x(out) == out:
        xmltodict.parse(f"<functions>{out}</functions>")  # must not raise


def test_bfcl_xml_breaks_on_special_characters() -> None:
    fn = {"name": "f", "description": "a & b", "parameters": {"type": "dict", "properties": {}}}
    with pytest.raises(ExpatError):
        xmltodict.parse(render_function_docs([fn], "xml", "bfcl"))
    assert xmltodict.parse(render_function_docs([fn], "xml", "clean"))["function"]["desc"] == "a & b"
