"""Failure modes of prose with quotes and apostrophes, and of answers cut mid-call (issue 21, Why 2)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import promptgrid as pg
from promptgrid.matrix.report._call_modes import PARSE_FAILURE_MODES
from promptgrid.matrix.scoring import FailureMode as F
from promptgrid.matrix.scoring import score
from promptgrid.matrix.scoring.parse._text import ends_cut
from promptgrid.variants import ReturnFormat, Variant
from support.builders import checked_case, fn

FORMATS = [f.value for f in ReturnFormat]


@pytest.fixture(scope="module")
def weather() -> object:
    return checked_case("simple", [fn("get_weather", ["city"], city="string")],
                        [{"get_weather": {"city": ["Paris"]}}], case_id="simple_w")


def test_issue_example_prose_with_apostrophe_is_prose() -> None:
    variant = pg.load_grid("demo").variants[1]
    case = pg.load_dataset("mini:en")[0]
    for text in ("The formula is F = (C * 9/5) + 32. Here's how: C = 350.",
                 "The formula is F = (C * 9/5) + 32. Here is how: C = 350."):
        assert pg.score(text, variant, case).failure_mode is F.PROSE_INSTEAD_OF_CALL, text


# Prose in several languages: words with apostrophes, quoted words, numbers and
# punctuation; never ( ) [ ] { } < > or backticks. Parentheses are left out: in the
# python format "(how)" is an expression and "how (it's)" a call cut in a string,
# which the scorer rightly files as call attempts (the issue's sentence, with its
# "(C * 9/5)", is checked above).
_WORDS = ["here's", "how", "it's", "don't", "formula", "l'eau", "c'est", "aujourd'hui", "qu'il", "fait",
          "Wetter", "heute", "geht's", "gibt's", "tiempo", "hace", "l'acqua", "dell'anno", "nell'aria",
          "thời", "tiết", "hôm", "nay", "天気", "です", "погода", "сегодня", "o'clock", "rock'n'roll",
          "350", "9/5", "32", "F", "C", "=", "+", "*", "-", "°C", "%"]
_QUOTES = [("'", "'"), ('"', '"'), ("«\u00a0", "\u00a0»"), ("„", "“"), ("“", "”"), ("‘", "’"), ("'", ""),
           ('"', ""), ("", "'")]
_PUNCT = ["", ".", ",", ";", ":", "!", "?", "…", " -"]


@st.composite
def _piece(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4))
    opening, closing = draw(st.sampled_from([("", "")] * 3 + _QUOTES))
    return opening + " ".join(words) + closing + draw(st.sampled_from(_PUNCT))


_PROSE = st.lists(_piece(), min_size=1, max_size=12).map(" ".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_PROSE, fmt=st.sampled_from(FORMATS), tag=st.booleans())
def test_prose_without_call_syntax_is_never_unclosed_tag(weather: object, text: str, fmt: str, tag: bool) -> None:
    mode = score(text, Variant(return_format=fmt, tool_call_tag=tag), weather).failure_mode
    assert mode is not F.UNCLOSED_TAG
    assert mode in {F.PROSE_INSTEAD_OF_CALL, F.TAG_MISSING}, (text, fmt, tag, mode)


CUT = [
    'Sure:\n```python\n[get_weather(city="Par',
    '```json\n[{"function": "get_weather", "parameters": {"city": "Pa',
    '[get_weather(city="Paris"',
    "Here's the call:\n```\nget_weather(city='Paris', ",
    '<functions><function name="get_weather"><param name="city" type="string">Par',
]


@pytest.mark.parametrize("text", CUT)
@pytest.mark.parametrize("fmt", FORMATS)
def test_answer_cut_mid_call_is_truncated(weather: object, text: str, fmt: str) -> None:
    """Without the tag (the issue's case), and inside a <TOOLCALL> that the cut left open."""
    if text.startswith("<functions>") and "xml" not in fmt:
        pytest.skip("complete-looking XML in a non-XML variant is another format")
    assert score(text, Variant(return_format=fmt), weather).failure_mode is F.TRUNCATED
    assert score("<TOOLCALL>" + text, Variant(return_format=fmt, tool_call_tag=True),
                 weather).failure_mode is F.TRUNCATED


@pytest.mark.parametrize(("text", "fmt", "tag", "mode"), [
    ("[get_weather(city='Paris']", "python", False, F.UNCLOSED_TAG),  # closed by the wrong bracket
    ("```python\n[get_weather(city='Paris')]", "python", False, F.CODE_FENCE),  # complete call, fence left open
    ("<TOOLCALL>[get_weather(city='Paris')]", "python", True, F.UNCLOSED_TAG),  # complete call, tag left open
    ('<functions><function name="get_weather"><param name="city" type="string">Paris</param></function>'
     '</functions>', "python", False, F.OTHER_FORMAT),
    ("```python\n[get_weather(city='Par", "python", True, F.TAG_MISSING),  # the tag comes first: never written
])
def test_complete_or_broken_answers_are_not_truncated(weather: object, text: str, fmt: str, tag: bool,
                                                      mode: F) -> None:
    assert score(text, Variant(return_format=fmt, tool_call_tag=tag), weather).failure_mode is mode


@pytest.mark.parametrize(("text", "cut"), [
    ("Here's how: [f(a=1", True),  # the apostrophe before the call opens no string
    ("Here's how: [f(a=1)]", False),
    ("[f(a='it''s')]", False),
    ('[{"f": {"a": "x\\"y"}}', True),  # escaped quote, then the closing bracket is missing
    ('[{"f": {"a": "x\\"y"}}]', False),
    ("[f(a=1]", False),
    ("```\n[f(a=1)]\n```", False),
    ("```python", True),
    ("Sure:\n```python\n", True),
    ("<functions><function name='f'>", True),
    ("<functions><function name='f'></function></functions>", False),
    ('<functions><function name="f"><params><param name="a" value="{\'k\': \'v\'}" type="dict"/>'
     '</function></functions>', False),  # </params> missing, but not cut; quotes in XML are attributes
    ("no brackets at all, it's prose", False),
    ("[" + "x" * 100_001, False),  # over the bound: not judged
])
def test_ends_cut(text: str, cut: bool) -> None:
    assert ends_cut(text) is cut


def test_truncated_is_a_format_level_failure() -> None:
    assert F.TRUNCATED.value in PARSE_FAILURE_MODES
    assert "token limit" in F.TRUNCATED.description
