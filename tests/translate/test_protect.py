from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptgrid.translate import SpanKind, find_spans, mask, segment, unmask
from promptgrid.translate._protect import TOKEN_RE


def spans(text: str, names: tuple[str, ...] = ()) -> list[tuple[str, SpanKind]]:
    return [(s.text, s.kind) for s in find_spans(text, names)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("in the format of {output_format}.", [("{output_format}", SpanKind.PLACEHOLDER)]),
        ("the <TOOLCALL> section", [("<TOOLCALL>", SpanKind.TAG)]),
        ("use `get_weather` now", [("`get_weather`", SpanKind.CODE)]),
        ("```{format}\n{functions}\n```", [("```{format}\n{functions}\n```", SpanKind.CODE)]),
        ("a city_name value", [("city_name", SpanKind.IDENTIFIER)]),
        ("call alarm.set please", [("alarm.set", SpanKind.IDENTIFIER)]),
        ("the getWeather and ActionOne names", [("getWeather", SpanKind.IDENTIFIER),
                                               ("ActionOne", SpanKind.IDENTIFIER)]),
        ("(e.g., Action: ActionOne())", [("Action: ActionOne()", SpanKind.CALL)]),
        ("as [func_name1(a=1), func_name2(params)] here",
         [("[func_name1(a=1), func_name2(params)]", SpanKind.CALL)]),
        ("date as YYYY-MM-DD or HH:MM", [("YYYY-MM-DD", SpanKind.FORMAT), ("HH:MM", SpanKind.FORMAT)]),
        ("strftime %Y-%m-%d", [("%Y-%m-%d", SpanKind.FORMAT)]),
        ("see https://example.org/a.", [("https://example.org/a", SpanKind.URL)]),
        ("unit, e.g. 'celsius'", [("'celsius'", SpanKind.QUOTED)]),
        # prose that looks a little like code stays prose
        ("any of the function(s), e.g. this", []),
        ("the User's questions, i.e. all", []),
        ("You MUST NOT use JSON", []),
    ],
)
def test_find_spans(text: str, expected: list[tuple[str, SpanKind]]) -> None:
    assert spans(text) == expected


def test_names_are_whole_words_and_case_sensitive() -> None:
    found = spans("Use get_weather, not get_weather_now; Unit or unit", ("get_weather", "unit"))
    assert ("get_weather", SpanKind.NAME) in found
    assert ("get_weather_now", SpanKind.IDENTIFIER) in found
    assert ("unit", SpanKind.NAME) in found
    assert ("Unit", SpanKind.NAME) not in found


def test_adjacent_spans_become_one_token() -> None:
    masked = mask("format of <TOOLCALL>{output_format}</TOOLCALL>. {param_types} Do")
    assert masked.text == "format of ⟦1⟧. ⟦2⟧ Do"
    assert masked.originals == ("<TOOLCALL>{output_format}</TOOLCALL>", "{param_types}")


def test_unmask_restores_reordered_tokens() -> None:
    masked = mask("Use {a} before {b}.")
    restored, problems = unmask("Vor ⟦2⟧ benutze ⟦ 1 ⟧.", masked)
    assert restored == "Vor {b} benutze {a}."
    assert problems == []


@pytest.mark.parametrize(
    ("translated", "needle"),
    [
        ("Benutze ⟦1⟧.", "'{b}' is missing"),
        ("Benutze ⟦1⟧ ⟦1⟧ ⟦2⟧.", "appears 2 times"),
        ("Benutze ⟦1⟧ ⟦2⟧ ⟦3⟧.", "unknown token"),
        ("Benutze ⟦1⟧ ⟦2.", "damaged"),
    ],
)
def test_unmask_reports_damage(translated: str, needle: str) -> None:
    _, problems = unmask(translated, mask("Use {a} before {b}."))
    assert any(needle in p for p in problems), problems


prose = st.text(alphabet=st.sampled_from(list("abcdefghij XYZ,.!?äé日本")), max_size=30)
protected = st.sampled_from(["{output_format}", "<TOOLCALL>", "`x_y`", "get_weather", "YYYY-MM-DD",
                             "alarm.set(time=1)", "'celsius'", "https://a.org/x"])


@given(st.lists(st.tuples(prose, protected), max_size=6), prose)
def test_mask_unmask_roundtrip(parts: list[tuple[str, str]], tail: str) -> None:
    text = "".join(p + " " + s + " " for p, s in parts) + tail
    masked = mask(text)
    restored, problems = unmask(masked.text, masked)
    assert restored == text
    assert problems == []
    rest = TOKEN_RE.sub(" ", masked.text)
    for original in masked.originals:
        # No protected span is left standing on its own (it may still occur inside
        # a longer word, e.g. "aX" in "aXä", which is not an identifier there).
        if original.strip():
            assert not re.search(rf"(?<!\w){re.escape(original)}(?!\w)", rest), original


def test_segment_keeps_structure_and_skips_code_only_lines() -> None:
    text = "## Task\n- Do this with `x_y`.\n\n```json\n{\"a\": 1}\n```\n{functions}\n"
    seg = segment(text)
    assert [m.text for m in seg.segments] == ["Task", "Do this with ⟦1⟧."]
    out, problems = seg.assemble({"Task": "Aufgabe", "Do this with ⟦1⟧.": "Tu das mit ⟦1⟧."})
    assert out == "## Aufgabe\n- Tu das mit `x_y`.\n\n```json\n{\"a\": 1}\n```\n{functions}\n"
    assert problems == []


def test_every_real_unit_survives_segmenting_unchanged() -> None:
    from promptgrid.translate import description_units, instruction_units

    datasets = pytest.importorskip("promptgrid.matrix.datasets")
    functions = [f for case in datasets.load_dataset("mini").cases for f in case.functions]
    units = instruction_units() + description_units(functions)
    assert len(units) > 150
    for unit in units:
        seg = segment(unit.source, unit.protected)
        out, problems = seg.assemble({m.text: m.text for m in seg.segments})
        assert (out, problems) == (unit.source, []), unit.key
        for m in seg.segments:  # nothing protected is left for the translator to touch
            assert "{" not in m.text and "<TOOLCALL>" not in m.text and "`" not in m.text, unit.key
