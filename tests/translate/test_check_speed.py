"""The translation checks on long, untrusted translations: linear time, the same decisions.

Speed targets (a 1 MB line in under 2 s) belong to benchmarks/translation_check.py;
here a 200 KB line only has to finish far below what the quadratic regexes took
(160,000 characters: 33 s). The rewritten patterns and the repeat search are
compared with the backtracking originals on generated texts.
"""

from __future__ import annotations

import re
import time

from hypothesis import example, given, settings
from hypothesis import strategies as st

from promptgrid.translate import _check as check
from promptgrid.translate import _protect as protect
from promptgrid.translate import check_translation

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


_WORDS = ["the", "of", "you", "must", "muſt", "K", "THE", "Wert", "für", "日本語", "テキスト", "वाक्य", "Größe",
          "function", "value", "call", "it", "ﬁle", "x_y", "über", ".", "!", "?", "。", "\n", ", ", " ", "  "]
_SENTENCES = st.lists(st.sampled_from(_WORDS), max_size=60).map(" ".join)


def _old_latin_words(text: str) -> list[str]:
    return [w for w in check._WORD_RE.findall(text)
            if w.isascii() or all(check._char_script(c) in ("latin", None) for c in w)]


def _old_copied_sentence(src_prose: str, tr_prose: str) -> str | None:
    source_words = {w.casefold() for w in check._WORD_RE.findall(src_prose)}
    for sentence in check._SENTENCE_SPLIT_RE.split(tr_prose):
        words = [w.casefold() for w in _old_latin_words(sentence)]
        if len(words) < 4:
            continue
        shared = sum(w in source_words for w in words)
        function = sum(w in check._EN_FUNCTION_WORDS for w in words)
        if shared >= 0.8 * len(words) and function >= 2:
            return sentence.strip()
    return None


def _old_repeated_sentence(text: str) -> str | None:
    seen: set[str] = set()
    for sentence in (s.strip().casefold() for s in re.split(r"(?<=[.!?。！？।])\s*|\n", text)):
        if check._content_length(sentence) >= 8:
            if sentence in seen:
                return sentence
            seen.add(sentence)
    return None


@settings(max_examples=300)
@given(_SENTENCES, _SENTENCES)
def test_word_scans_match_the_per_word_originals(source: str, translation: str) -> None:
    """Scripts looked up per distinct character, the function-word prefilter: the same words and sentences."""
    assert check._latin_words(translation, check._foreign_letters(translation)) == _old_latin_words(translation)
    for src in (source, translation):  # a translation that copies its source, or another text
        assert check._copied_sentence(src, translation) == _old_copied_sentence(src, translation)
    flat = check._WS_RE.sub(" ", translation).strip()
    if not (check._REPEAT_RE.search(flat) or check._CJK_REPEAT_RE.search(flat)):
        assert check._repeated_chunk(translation) == _old_repeated_sentence(translation)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=20, max_size=300).map("".join),
       st.integers(16, 200), st.sampled_from(["", " ", ", ", ". ", "  ;"]), st.floats(0, 1))
def test_sampled_repeat_search_matches_the_regexes(text: str, length: int, between: str, at: float) -> None:
    """Long copies far apart (the distances whose positions are sampled before a full search)."""
    flat = check._WS_RE.sub(" ", text).strip()
    i = int(at * len(flat))
    chunk = (flat[i:] + flat[:i])[:length]
    for planted in (flat, flat[:i] + chunk + between + chunk + flat[i:]):
        planted = check._WS_RE.sub(" ", planted).strip()
        m = check._REPEAT_RE.search(planted) or check._CJK_REPEAT_RE.search(planted)
        assert check._first_repeat(planted, len(planted)) == (m.group(1) if m else None)


_NAMES = st.sampled_from(["x", "x.y", "get_x", "a", "ab_cd", "é", "日本", "{x}", "<a ", "f(a=1)", "a-b", ".x", "x."])


@settings(max_examples=300)
@given(_TEXTS, st.lists(_NAMES, max_size=20))
@example("x.x x xx a.b(x) .x é.x_", ["x", "x.", ".x", "b", "x_"])
def test_name_matches_match_the_regex(text: str, names: list[str]) -> None:
    """Names looked up among the text's word runs, or found with str.find: what the per-name regex found."""
    words = protect._word_starts(text)
    for name in names:
        want = [m.span() for m in re.finditer(rf"(?<![\w.]){re.escape(name)}(?![\w])", text)]
        assert list(protect._name_matches(text, name)) == want
        assert list(protect._name_matches(text, name, words)) == want


def _old_protected_problems(source_spans: list[protect.Span], translation: str) -> list[str]:
    missing: list[str] = []
    translation = check._strip_markup(translation)
    for span in source_spans:
        if span.kind in (protect.SpanKind.PLACEHOLDER, protect.SpanKind.TAG):
            continue
        required = check._required(span)
        if required.strip() and required not in translation and required not in missing:
            missing.append(required)
    return missing


@settings(max_examples=100)
@given(st.lists(_TEXTS, min_size=1, max_size=8), _TEXTS)
def test_protected_spans_of_a_long_source_match_the_search(parts: list[str], translation: str) -> None:
    """Over _MANY_SPANS source spans, the translation's words are indexed: the same spans are missing."""
    source = " ".join(parts * (1 + 3 * check._MANY_SPANS // max(1, len(parts))) + [f"v_{i}" for i in range(80)])
    spans = protect.find_spans(source)
    assert len(spans) > check._MANY_SPANS
    for kept in (" ".join([translation, *parts, "v_1 v_2.v_3 xv_4"]), translation):
        assert check._protected_problems(spans, kept) == _old_protected_problems(spans, kept)


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
