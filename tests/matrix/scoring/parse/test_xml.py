"""Verbose and concise XML return formats: bfcl-eval's decoding rules."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptgrid.matrix.scoring.parse import Deviation, ParseFailure, _xml, parse_response
from promptgrid.matrix.scoring.parse._fail import Fail
from promptgrid.matrix.scoring.parse._xml import parse_tree

OK = None


def verbose(*calls: tuple[str, list[tuple[str, str, str]]]) -> str:
    out = "<functions>"
    for name, params in calls:
        out += f'<function name="{name}"><params>'
        out += "".join(f'<param name="{p}" value="{v}" type="{t}"/>' for p, v, t in params)
        out += "</params></function>"
    return out + "</functions>"


def concise(*calls: tuple[str, list[tuple[str, str, str]]]) -> str:
    out = "<functions>"
    for name, params in calls:
        out += f'<function name="{name}">'
        out += "".join(f'<param name="{p}" type="{t}">{v}</param>' for p, v, t in params)
        out += "</function>"
    return out + "</functions>"


TYPED = [("s", "x", "string"), ("i", "42", "integer"), ("f", "4.5", "float"), ("b", "TRUE", "boolean"),
         ("n", "", "null"), ("a", "[1, 'b']", "array"), ("t", "(1, 2)", "tuple"), ("d", "{'k': 1}", "dict"),
         ("o", "{'k': [1]}", "object"), ("u", "7", "int"), ("m", "3", "")]
TYPED_VALUES = {"s": "x", "i": 42, "f": 4.5, "b": True, "n": None, "a": [1, "b"], "t": (1, 2), "d": {"k": 1},
                "o": {"k": [1]}, "u": "7", "m": "3"}

VERBOSE_CASES = [
    (verbose(("f", TYPED)), False, OK, ({"f": TYPED_VALUES},)),
    (verbose(("f", []), ("g", [("a", "1", "integer")])), False, OK, ({"f": {}}, {"g": {"a": 1}})),
    ('<functions><function name="f"><param name="a" value="1" type="integer"/></function></functions>', False, OK,
     ({"f": {"a": 1}},)),  # params container optional
    ('<functions><function name="f"><param name="a" value=" 1 " type="integer"/></function></functions>', False,
     OK, ({"f": {"a": 1}},)),
    ('<functions><function name="f"><params><param name="a"/></params></function></functions>', False, OK,
     ({"f": {"a": ""}},)),  # no value, no type: empty string
    ('<functions><function name="f"><params><param name="a" type="string">x</param></params></function>'
     "</functions>", False, OK, ({"f": {"a": ""}},)),  # verbose reads value=, not the text
    ("```xml\n" + verbose(("f", [])) + "\n```", False, OK, ({"f": {}},)),
    ("I will call it: " + verbose(("f", [])) + " Done.", False, OK, ({"f": {}},)),
    ("<TOOLCALL>" + verbose(("f", [])) + "</TOOLCALL>", True, OK, ({"f": {}},)),
    ("<TOOLCALL>" + verbose(("f", [])) + "</TOOLCALL>", False, OK, ({"f": {}},)),
    ('<functions><function name="a&amp;b"><params><param name="q" value="&lt;&#65;&gt;"/></params></function>'
     "</functions>", False, OK, ({"a&b": {"q": "<A>"}},)),
    ("<functions></functions>", False, OK, ()),
    ('<functions><other/><function name="f"/></functions>', False, OK, ({"f": {}},)),
    # failures
    (verbose(("f", [])), True, ParseFailure.TAG_MISSING, ...),
    ("<TOOLCALL>" + verbose(("f", [])), True, ParseFailure.UNCLOSED_TAG, ...),
    ("<functions><function name='f'>", False, ParseFailure.UNCLOSED_TAG, ...),
    ("<functions><function name='f'></functions>", False, ParseFailure.UNCLOSED_TAG, ...),
    ('<functions><function name="f"><params><param name="a" value="4.5" type="integer"/></params></function>'
     "</functions>", False, ParseFailure.BAD_VALUE, ...),
    ('<functions><function name="f"><params><param name="a" value="[1," type="array"/></params></function>'
     "</functions>", False, ParseFailure.BAD_VALUE, ...),
    ('<functions><function name="f"><params><param name="a" value="x" type="float"/></params></function>'
     "</functions>", False, ParseFailure.BAD_VALUE, ...),
    ("<functions><function><params/></function></functions>", False, ParseFailure.NOT_A_CALL, ...),
    ("<functions><a:b/></functions>", False, ParseFailure.BAD_SYNTAX, ...),  # unbound prefix, as ElementTree
    ("<functions>&bogus;</functions>", False, ParseFailure.BAD_SYNTAX, ...),
    ("[f(a=1)]", False, ParseFailure.WRONG_FORMAT, ...),
    ('[{"function": "f", "parameters": {}}]', False, ParseFailure.WRONG_FORMAT, ...),
    ("There is no suitable function.", False, ParseFailure.PROSE_ONLY, ...),
    (concise(("f", [("a", "1", "integer")])), False, ParseFailure.WRONG_FORMAT, ...),  # int("") fails
]


@pytest.mark.parametrize(("text", "tag", "kind", "calls"), VERBOSE_CASES,
                         ids=[repr(c[0])[:40] for c in VERBOSE_CASES])
def test_verbose_xml_cases_match_bfcl(check_bfcl, text, tag, kind, calls):
    r = check_bfcl(text, "verbose_xml", tag)
    assert r.failure is kind, r.details
    if calls is not ...:
        assert r.calls == calls
        assert [type(v) for c in r.calls for a in c.values() for v in a.values()] == \
               [type(v) for c in calls for a in c.values() for v in a.values()]


CONCISE_CASES = [
    (concise(("f", TYPED)), False, OK, ({"f": TYPED_VALUES},)),
    ('<functions><function name="f"><param name="a" type="integer">\n 42 \n</param></function></functions>',
     False, OK, ({"f": {"a": 42}},)),
    ('<functions><function name="f"><param name="a">x<!-- c -->y</param></function></functions>', False, OK,
     ({"f": {"a": "xy"}},)),  # comments skipped, text joined (ElementTree)
    ('<functions><function name="f"><param name="a">x<b/>y</param></function></functions>', False, OK,
     ({"f": {"a": "x"}},)),  # text before the first child only (ElementTree)
    ('<functions><function name="f"><param name="a"><![CDATA[<x>]]></param></function></functions>', False, OK,
     ({"f": {"a": "<x>"}},)),
    ('<functions><function name="f"><params><param name="a" type="integer">1</param></params></function>'
     "</functions>", False, OK, ({"f": {}},)),  # concise ignores a <params> container
    ("<TOOLCALL>" + concise(("f", [("a", "x", "string")])) + "</TOOLCALL>", True, OK, ({"f": {"a": "x"}},)),
    ('<functions><function name="f"><param type="integer">1</param></function></functions>', False,
     ParseFailure.NOT_A_CALL, ...),
    ('<functions><function name="f"><param name="a" type="integer">one</param></function></functions>', False,
     ParseFailure.BAD_VALUE, ...),
]


@pytest.mark.parametrize(("text", "tag", "kind", "calls"), CONCISE_CASES,
                         ids=[repr(c[0])[:40] for c in CONCISE_CASES])
def test_concise_xml_cases_match_bfcl(check_bfcl, text, tag, kind, calls):
    r = check_bfcl(text, "concise_xml", tag)
    assert r.failure is kind, r.details
    if calls is not ...:
        assert r.calls == calls


def test_unknown_type_names_are_listed_and_values_kept_as_strings(check_bfcl):
    text = concise(("f", [("a", "1", "int"), ("b", "x", "str"), ("c", "2", "integer"), ("d", "3", "int")]))
    r = check_bfcl(text, "concise_xml", False)
    assert r.calls == ({"f": {"a": "1", "b": "x", "c": 2, "d": "3"}},)
    assert r.unknown_xml_types == ("int", "str")


def test_detected_xml_shape():
    assert parse_response(concise(("f", [("a", "1", "integer")])), "concise_xml", False).detected_format \
        == "concise_xml"
    r = parse_response(verbose(("f", [("a", "1", "integer")])), "concise_xml", False)
    assert r.ok and r.calls == ({"f": {}},) and r.detected_format == "verbose_xml"  # bfcl decodes it, empty
    bare = '<functions><function name="f"></function></functions>'
    assert parse_response(bare, "concise_xml", False).detected_format == "concise_xml"  # no evidence: as asked
    assert parse_response(bare, "verbose_xml", False).detected_format == "verbose_xml"


def test_nameless_verbose_param_is_a_flagged_deviation(bfcl):
    text = '<functions><function name="f"><params><param value="1"/></params></function></functions>'
    r = parse_response(text, "verbose_xml", False)
    assert r.failure is ParseFailure.NOT_A_CALL and r.bfcl_deviation is Deviation.NON_STRING_NAME
    assert bfcl(text, "verbose_xml", False) == ("ok", [{"f": {None: "1"}}])


@pytest.mark.parametrize(
    "doc",
    [
        "<functions><function name='f'>a<!--x-->b<?pi x?>c<x/>d</function></functions>",
        "<functions xmlns='u'><function name='f'/></functions>",
        "<functions><function name='f\nx' y='&quot;'/></functions>",
        "<functions><f:function xmlns:f='u' name='g'/></functions>",
    ],
)
def test_tree_matches_element_tree(doc):
    def mine(n):
        return (n.tag, sorted(n.attrib.items()), n.text, [mine(c) for c in n.children])

    def theirs(e):
        strip = lambda s: s[1:] if s.startswith("{") else s  # noqa: E731 -- expat's "u}tag" vs ET's "{u}tag"
        return (strip(e.tag), sorted((strip(k), v) for k, v in e.attrib.items()), e.text or "",
                [theirs(c) for c in e])

    assert mine(parse_tree(doc)) == theirs(ET.fromstring(doc))


def test_dtd_is_refused_even_outside_the_block(bfcl):
    text = '<!DOCTYPE x [<!ENTITY a "b">]>' + verbose(("f", []))
    r = parse_response(text, "verbose_xml", False)
    assert r.failure is ParseFailure.XML_ENTITY_REFUSED
    assert r.bfcl_deviation is Deviation.XML_DTD_REFUSED
    assert bfcl(text, "verbose_xml", False) == ("ok", [{"f": {}}])


def test_dtd_inside_the_block_fails_in_bfcl_too(bfcl):
    text = '<functions><!DOCTYPE x [<!ENTITY a "b">]><function name="&a;"/></functions>'
    r = parse_response(text, "verbose_xml", False)
    assert r.failure is ParseFailure.XML_ENTITY_REFUSED and r.bfcl_deviation is None
    assert bfcl(text, "verbose_xml", False)[0] == "raise"


def test_parse_tree_refuses_declarations_itself():
    with pytest.raises(Fail) as info:
        parse_tree('<!DOCTYPE functions [<!ENTITY a "b">]><functions>&a;</functions>')
    assert info.value.kind is ParseFailure.XML_ENTITY_REFUSED


# -- generated documents: our tree equals ElementTree's; the fast path equals expat's --

XML_SETTINGS = settings(max_examples=600, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
_PIECES = ["text", " sp ", "\n", "\t", "é", ">", "&amp;", "&lt;", "&#65;", "&bogus;", "<!--c-->", "<?pi x?>",
           "<![CDATA[<x>]]>", "\\\"", "]]>", "\r", "\x01", "\x85", "'", '"']
_ATTRS = ['name="f"', "name='g'", 'value="1"', 'type="integer"', 'type="int"', 'v="a>b"', 'name="f" name="g"',
          'xmlns="u"', 'x:y="1"', 'xmlns:x="u"', 'name="a\nb"', "a=b", 'value="[1, 2]"', 'type="array"']
_TAGS = ["function", "param", "params", "functions", "a", "x:p"]


@st.composite
def _elements(draw: st.DrawFn, depth: int = 0) -> str:
    tag = draw(st.sampled_from(_TAGS))
    attrs = " ".join(draw(st.lists(st.sampled_from(_ATTRS), max_size=3)))
    head = f"<{tag}{' ' if attrs else ''}{attrs}{draw(st.sampled_from(['', ' ', chr(10)]))}"
    if depth > 2 or draw(st.booleans()):
        return head + "/>"
    inner = draw(st.lists(st.sampled_from(_PIECES) | _elements(depth + 1), max_size=3))
    return head + ">" + "".join(inner) + f"</{tag}>"


XML_DOCS = st.builds(lambda els, cut: ("<functions>" + "".join(els) + "</functions>")[: cut or None],
                     st.lists(_elements(), max_size=3), st.integers(-3, 0))


def _mine(n: _xml.Node) -> tuple[object, ...]:
    return (n.tag, sorted(n.attrib.items()), n.text, [_mine(c) for c in n.children])


def _theirs(e: ET.Element) -> tuple[object, ...]:
    def strip(s: str) -> str:
        return s[1:] if s.startswith("{") else s  # expat's "u}tag" vs ElementTree's "{u}tag"

    return (strip(e.tag), sorted((strip(k), v) for k, v in e.attrib.items()), e.text or "",
            [_theirs(c) for c in e])


@pytest.mark.slow
@XML_SETTINGS
@given(XML_DOCS)
def test_generated_trees_match_element_tree(doc):
    try:
        mine: object = _mine(parse_tree(doc))
    except Fail:
        mine = "error"
    try:
        theirs: object = _theirs(ET.fromstring(doc))
    except ET.ParseError:
        theirs = "error"
    assert mine == theirs


_VALS = ["1", "4.5", "x", "", " 3 ", "true", "[1, 'a']", "{'k': 1}", "(1,2)", "a>b", "é", "\t", "a\nb", "&amp;",
         "'q'", "]]>", "\r", "\x01"]
_TYPES = ["integer", "float", "string", "boolean", "array", "dict", "null", "int", "", "Integer"]


@st.composite
def _prompt_shaped(draw: st.DrawFn, verbose: bool) -> str:
    sep = st.sampled_from([" ", "  ", "\n", "\t"])
    out = "<functions>" + draw(st.sampled_from(["", "\n"]))
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(["f", "math.gcd", "a b", "é"]))
        params = []
        for _ in range(draw(st.integers(0, 3))):
            attrs = [f'name="{draw(st.sampled_from(["a", "b", ""]))}"']
            if verbose and draw(st.booleans()):
                attrs.append(f'value="{draw(st.sampled_from(_VALS))}"')
            if draw(st.booleans()):
                attrs.append(f'type="{draw(st.sampled_from(_TYPES))}"')
            joined = draw(sep).join(attrs)
            text = draw(st.sampled_from(_VALS))
            params.append(f"<param {joined}/>" if verbose else f"<param {joined}>{text}</param>")
        body = "".join(params)
        if verbose and draw(st.booleans()):
            body = "<params>" + body + "</params>"
        out += f'<function name="{name}">' + body + "</function>" + draw(st.sampled_from(["", "\n"]))
    return out + "</functions>"


def _decode(doc: str, verbose: bool, fast: bool) -> object:
    with pytest.MonkeyPatch.context() as m:
        if not fast:
            m.setattr(_xml, "fast_xml_calls", lambda *args: None)
        try:
            decoded = _xml.parse_xml_calls(doc, verbose)[0]
        except Fail as fail:
            return fail.kind
    return repr(decoded.calls), decoded.detected, decoded.unknown_types


@pytest.mark.slow
@XML_SETTINGS
@given(st.booleans().flatmap(lambda v: st.tuples(st.just(v), _prompt_shaped(v))))
def test_xml_fast_path_equals_expat_path(case):
    verbose, doc = case
    assert _decode(doc, verbose, True) == _decode(doc, verbose, False)


def test_verdict_only_xml_parse_memoizes_no_failure():
    unclosed = '<functions><function name="f"><param name="a" type="integer">1</function></functions>'
    _xml._FAILURES.clear()
    with pytest.raises(Fail) as err:
        _xml.parse_xml_calls(unclosed, False, remember=False)
    assert err.value.kind is ParseFailure.UNCLOSED_TAG
    assert not _xml._FAILURES  # no format-agnostic re-read follows a verdict-only parse
    with pytest.raises(Fail):
        _xml.parse_xml_calls(unclosed, False)
    assert unclosed in _xml._FAILURES
