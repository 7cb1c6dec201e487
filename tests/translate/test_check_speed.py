"""The translation checks on long, untrusted translations: linear time, the same decisions.

Speed targets (a 1 MB line in under 2 s) belong to benchmarks/translation_check.py;
here a 200 KB line only has to finish far below what the quadratic regexes took
(160,000 characters: 33 s). The rewritten patterns and the repeat search are
compared with the backtracking originals on generated texts.
"""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from promptgrid.translate import check_translation
from promptgrid.translate import _check as check
from promptgrid.translate import _protect as protect

# The original patterns (quadratic on long runs), as the reference.
_OLD_URL = re.compile(r"\bhttps?://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]]|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_OLD_TAG = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s+[^<>]*?)?/?>")
_OLD_BRACE = re.compile(r"\{[^{}\n]*[:'\"][^{}\n]*\}")
_OLD_CALL = re.compile(r"(?:\b[A-Z][a-z]+:[ \t])?[A-Za-z_][\w.]*\([^()\n]*\)")

_PIECES = ["a", "B", "x", "_", ".", "+", "-", "@", "(", ")", "[", "]", ",", " ", "\t", "\n", ":", "'", '"', "{",
           "}", "<", ">", "/", "1", "é", "`", "Action: ", "http://", "foo", "x.y", "=", "true", "a@b.com", "<a ",
           "</a>", "{x}", "f(a=1)", "ab_cd", "camelCase", "日本", "あ", ";", "、", "。"]
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


def _spans(matches: object) -> list[tuple[int, int]]:
    return [m.span(m.lastgroup or 0) for m in matches]  # type: ignore[attr-defined]


@settings(max_examples=400)
@given(_TEXTS)
def test_linear_patterns_match_the_originals(text: str) -> None:
    assert _spans(protect._url_matches(text)) == _spans(_OLD_URL.finditer(text))
    assert _spans(protect._CALL_RE.finditer(text)) == _spans(_OLD_CALL.finditer(text))
    assert protect.TAG_RE.findall(text) == _OLD_TAG.findall(text)
    assert protect._BRACE_CODE_RE.findall(text) == _OLD_BRACE.findall(text)


@settings(max_examples=400)
@given(_TEXTS, st.booleans())
def test_repeat_search_matches_the_regexes(text: str, repeat: bool) -> None:
    if repeat and len(text) > 4:  # plant a repeat, with or without separators between the copies
        i = len(text) // 3
        text = text[:i] + text[i:i + 12] + ", " + text[i:i + 12] + text[i + 12:]
    flat = check._WS_RE.sub(" ", text).strip()
    m = check._REPEAT_RE.search(flat) or check._CJK_REPEAT_RE.search(flat)
    got = check._first_repeat(flat, len(flat)) if flat else None
    assert got == (m.group(1) if m else None)


def test_long_repeat_found_past_the_regex_bound() -> None:
    chunk = "der Wert wird zurückgegeben, "
    text = " ".join(f"wort{i:05d}x" for i in range(200)) + " " + chunk * 3
    assert len(text) > check._REPEAT_REGEX_CHARS
    assert check._repeated_chunk(text) == "der Wert wird zurückgegeben"


def test_long_hostile_translation_is_checked_quickly() -> None:
    size = 200_000
    part = size // 5
    hostile = "".join(["x" * part, " ", "a." * (part // 2), " <a" + " " * part, " {" + "'" * part, " ", "a-" * part])
    source = ("Return the value of each parameter in the given type. " * (size // 55))[:size]
    check_translation("Call it.", "Ruf sie auf.", "en", "de")  # langid's model loads outside the timing
    start = time.perf_counter()
    for translation in (hostile, source.replace("value", "Wert")):
        check_translation(source, translation, "en", "de")
    # Quadratic, this took minutes; linear, about a second: the bound is wide for slow machines.
    assert time.perf_counter() - start < 30
