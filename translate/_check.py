"""Checks that a translated prompt string is usable.

A bad translation measures the translator, not the model, so every
translation is checked before it is used. :func:`check_translation` returns
the problems as codes (:class:`CheckCode`); each rule is general, stated
here, and never tuned to a particular sentence:

``placeholder_missing``
    The ``{placeholders}`` of the source and the translation differ (as
    multisets: a dropped, renamed, translated or duplicated placeholder).
``tag_missing``
    The markup tags (``<TOOLCALL>``, ``</TOOLCALL>``, ...) differ (multiset).
``markup_changed``
    The same tags and placeholders, but not the same elements: when the
    source has markup, its element structure (which tags pair up, their
    nesting and order, the placeholders inside each) must survive. Tags
    that pair up (``<a>...</a>``, ``<a/>``) are elements; a tag without a
    partner (``the <TOOLCALL> section``) is prose that names one. The
    elements are read by ``xmltodict.parse``; a text declaring a DTD or
    entity is refused before parsing, and texts over
    :data:`MAX_MARKUP_CHARS` are not compared.
``protected_changed``
    A protected span of the source is not verbatim in the translation: the
    names the caller passes (function/parameter names, enum values) and the
    identifiers found automatically (inline code, ``snake_case``,
    ``dotted.names``, ``camelCase``, call expressions, quoted values,
    date formats, URLs). Placeholders and tags inside a span are left to the
    two checks above, so one damage gives one code.
``untranslated``
    The target is not the source language but the text was left as it was:
    identical to the source (a single short word, such as "Bot", may stay the
    same in Latin-script languages), or mostly in the source language.
``wrong_language``
    The text is in another language than the target. The script decides
    first (Devanagari for Hindi, kana for Japanese, Han without kana for
    Chinese, ...); within a script, langid decides, restricted to the
    plausible languages (target, source and the supported ones), on the text
    left after removing code, placeholders, tags and protected names, and
    only when that text is long enough to tell. A text that passes is then
    identified against every language langid knows (a translation into
    Vietnamese or Dutch instead of German): flagged only when it has at least
    :data:`MIN_BROAD_LETTERS` letters, the winner is neither the target, the
    source nor a close relative of the target that langid confuses with it
    (Galician for Portuguese, Marathi for Hindi, ...), and the winner beats
    the target with probability :data:`BROAD_CONFIDENCE` or more. A
    Latin-script text too short for langid (under :data:`MIN_BROAD_LETTERS`
    letters) into en, de, es, fr, it, pt or nl is judged by what it is
    written with: letters the target does not write ("Đặt một bàn." for
    German), or function words of another of these languages and none of the
    target's ("Reserva una mesa." for German); what the source has too (a
    kept name) does not count, and a short text with neither sign passes.
``length_ratio``
    The translation is implausibly short or long for the target language,
    in letters, with bands measured on the shipped reviewed catalogs
    (:data:`LANGUAGE_LENGTH_BOUNDS`; CJK text is much shorter in characters
    than English) and an absolute slack for short sources; or, when source
    and translation have the same number of sentences, one of its sentences
    is that much too short for its source sentence (most of it dropped while
    the whole keeps a plausible length); or it repeats a
    chunk the source does not (a translator stuck in a loop; on texts over
    1,000 characters, copies at most :data:`MIN_REPEAT_DISTANCE` characters
    apart, or more on shorter texts, so that the search stays linear).
``structure_changed``
    Line structure differs: line count, blank lines, markdown headings,
    list markers, code fences.
``back_translation_low``
    (only with a back-translation backend) translating back to the source
    language gives a text whose content words overlap too little with the
    source.

``stale`` and ``missing`` are used by catalog checks only: a catalog entry
whose English source changed, and a unit with no translation.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol
from xml.parsers.expat import ExpatError

from promptgrid.errors import TranslationError
from promptgrid.languages import (
    BROAD_LANGUAGES,
    SUPPORTED_LANGUAGES,
    base_language,
    identify_language,
    language_problem,
    script_of,
)

from ._protect import TAG_RE, Span, SpanKind, find_spans, mask, placeholders, tags, unmask

__all__ = [
    "CheckCode",
    "LANGUAGE_LENGTH_BOUNDS",
    "LENGTH_BOUNDS",
    "LENGTH_MEASURED",
    "MAX_MARKUP_CHARS",
    "TranslationCheck",
    "back_translation_similarity",
    "check_translation",
    "require_languages",
    "detect_language",
]


class CheckCode(str, Enum):
    """Machine-readable problem codes of a translation (values are stable)."""

    PLACEHOLDER_MISSING = "placeholder_missing"
    TAG_MISSING = "tag_missing"
    MARKUP_CHANGED = "markup_changed"
    PROTECTED_CHANGED = "protected_changed"
    WRONG_LANGUAGE = "wrong_language"
    UNTRANSLATED = "untranslated"
    LENGTH_RATIO = "length_ratio"
    STRUCTURE_CHANGED = "structure_changed"
    BACK_TRANSLATION_LOW = "back_translation_low"
    STALE = "stale"
    MISSING = "missing"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class TranslationCheck:
    """The outcome of :func:`check_translation` on one translation: ``ok`` iff ``problems`` is empty.

    ``problems`` lists codes in a fixed order (the order of :class:`CheckCode`);
    ``details`` maps each code to a sentence saying what was found, plus a few
    measurements (``length_ratio``, ``detected_language``, ...).
    """

    ok: bool
    problems: list[CheckCode] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": [p.value for p in self.problems], "details": self.details}


class _Translator(Protocol):
    def translate(self, texts: list[str], source: str, target: str) -> list[str]: ...


# --------------------------------------------------------------------------- scripts

_SCRIPT_RANGES: dict[str, tuple[tuple[int, int], ...]] = {
    "han": ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F)),
    "kana": ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F)),
    "hangul": ((0x1100, 0x11FF), (0x3130, 0x318F), (0xAC00, 0xD7AF)),
    "devanagari": ((0x0900, 0x097F), (0xA8E0, 0xA8FF)),
    "cyrillic": ((0x0400, 0x052F),),
    "arabic": ((0x0600, 0x06FF), (0x0750, 0x077F), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
    "hebrew": ((0x0590, 0x05FF),),
    "greek": ((0x0370, 0x03FF),),
    "thai": ((0x0E00, 0x0E7F),),
    "lao": ((0x0E80, 0x0EFF),),
    "bengali": ((0x0980, 0x09FF),),
    "gurmukhi": ((0x0A00, 0x0A7F),),
    "gujarati": ((0x0A80, 0x0AFF),),
    "tamil": ((0x0B80, 0x0BFF),),
    "telugu": ((0x0C00, 0x0C7F),),
    "kannada": ((0x0C80, 0x0CFF),),
    "malayalam": ((0x0D00, 0x0D7F),),
    "sinhala": ((0x0D80, 0x0DFF),),
    "georgian": ((0x10A0, 0x10FF),),
    "armenian": ((0x0530, 0x058F),),
    "ethiopic": ((0x1200, 0x137F),),
    "khmer": ((0x1780, 0x17FF),),
    "myanmar": ((0x1000, 0x109F),),
}


@functools.lru_cache(maxsize=4096)
def _char_script(ch: str) -> str | None:
    cp = ord(ch)
    if ch.isascii():
        return "latin" if ch.isalpha() else None
    for script, ranges in _SCRIPT_RANGES.items():
        if any(lo <= cp <= hi for lo, hi in ranges):
            # Marks and letters only: CJK punctuation lives in other blocks.
            return script if unicodedata.category(ch)[0] in "LM" else None
    if ch.isalpha() and "LATIN" in unicodedata.name(ch, ""):
        return "latin"
    return "other" if ch.isalpha() else None


def _script_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ch, n in Counter(text).items():  # each distinct character once: long texts use few
        script = _char_script(ch)
        if script:
            counts[script] = counts.get(script, 0) + n
    return counts


def _family_count(counts: dict[str, int], script: str) -> int:
    """Letters of a language's writing system ("japanese" is Han plus kana)."""
    if script == "japanese":
        return counts.get("han", 0) + counts.get("kana", 0)
    return counts.get(script, 0)


# --------------------------------------------------------------------------- language id

def _plausible(target: str, source: str) -> set[str]:
    return {base_language(target), base_language(source), *SUPPORTED_LANGUAGES}


# Latin-script languages langid may be asked about, for Latin-dominant text.
_NON_LATIN = {"ja", "zh", "hi", "ko", "ru", "uk", "bg", "ar", "fa", "ur", "he", "el", "th", "bn", "ta",
              "te", "mr", "ne", "ka", "am", "km", "my", "hy", "kn", "ml", "gu", "pa", "si", "lo", "sr"}

#: Fewest letters of prose before the language is judged at all.
MIN_LETTERS = 4
#: Fewest letters before langid may overrule a text written in the expected script.
MIN_LANGID_LETTERS = 20
#: langid's (restricted, normalized) probability needed to call a language.
LANGID_CONFIDENCE = 0.9


def detect_language(text: str, target: str, source: str = "en") -> tuple[str | None, float]:
    """The language of ``text`` among the plausible ones, with langid's probability.

    Script first: a text mostly in a non-Latin script is that script's
    language (Han with kana is Japanese, Han alone Chinese). Latin text goes to
    :func:`promptgrid.languages.identify_language` (the identifier scoring
    uses too), restricted to the plausible Latin-script languages. ``(None, 0)``
    when there are too few letters to tell.
    """
    counts = _script_counts(text)
    total = sum(counts.values())
    if total < MIN_LETTERS:
        return None, 0.0
    dominant = max(counts, key=lambda s: counts[s])
    cjk = counts.get("han", 0) + counts.get("kana", 0)
    if cjk / total >= 0.5:
        if counts.get("kana", 0) >= max(1, 0.05 * cjk):
            return "ja", 1.0
        return ("zh", 1.0) if cjk >= 6 or base_language(target) != "ja" else (base_language(target), 0.5)
    if dominant != "latin":
        candidates = [lang for lang in _plausible(target, source) if script_of(lang) == dominant]
        for lang in (base_language(target), base_language(source), *candidates):
            if script_of(lang) == dominant:
                return lang, 1.0
        # a script none of the plausible languages uses: name its language if langid can
        broad, _ = identify_language(text, BROAD_LANGUAGES)
        return (broad if script_of(broad) == dominant else dominant), 1.0
    # never empty: the supported languages include Latin-script ones langid knows
    latin = sorted(lang for lang in _plausible(target, source) if lang not in _NON_LATIN)
    return identify_language(text, tuple(latin))


#: Fewest letters before the broad identification may call another language.
MIN_BROAD_LETTERS = 20
#: Probability the broad winner needs against the target alone (the two compared by langid).
BROAD_CONFIDENCE = 0.999
# Languages langid confuses with a target on correct text (a dialect continuum, or
# a shared script and much vocabulary): never flagged as "another language".
# Measured on the shipped catalogs (174 entries per language, among all 97 languages):
# 51 Hindi entries are identified as Marathi (42) or Nepali (9), 7 Portuguese ones as
# Galician, 6 Spanish ones as Galician or Catalan.
_RELATIVES: dict[str, frozenset[str]] = {
    "pt": frozenset({"gl"}), "gl": frozenset({"pt", "es"}),
    "es": frozenset({"gl", "ca", "an"}), "ca": frozenset({"es", "oc", "an"}),
    "fr": frozenset({"wa", "oc", "br"}), "it": frozenset({"la"}), "de": frozenset({"lb"}),
    "nb": frozenset({"no", "nn", "da", "sv"}), "no": frozenset({"nb", "nn", "da", "sv"}),
    "nn": frozenset({"nb", "no", "da", "sv"}), "da": frozenset({"nb", "no", "nn", "sv"}),
    "sv": frozenset({"nb", "no", "nn", "da"}), "hr": frozenset({"bs", "sr", "sl"}),
    "bs": frozenset({"hr", "sr"}), "sr": frozenset({"hr", "bs", "mk"}), "cs": frozenset({"sk"}),
    "sk": frozenset({"cs"}), "id": frozenset({"ms", "jv"}), "ms": frozenset({"id", "jv"}),
    "hi": frozenset({"mr", "ne"}), "mr": frozenset({"hi", "ne"}), "ne": frozenset({"hi", "mr"}),
    "ru": frozenset({"uk", "be", "bg"}), "uk": frozenset({"ru", "be"}), "be": frozenset({"ru", "uk"}),
    "bg": frozenset({"mk", "ru"}), "mk": frozenset({"bg", "sr"}), "ur": frozenset({"fa"}),
    "fa": frozenset({"ur", "ps"}), "af": frozenset({"nl"}), "nl": frozenset({"af"}),
}
# Scripts that identify their language without langid (the checks above decide ja/zh).
_OWN_SCRIPTS = frozenset({"japanese", "han", "hangul"})


def _broad_language(prose: str, counts: dict[str, int], target: str, source: str) -> tuple[str, float] | None:
    """Another language than ``target`` that ``prose`` is confidently in, among all langid knows.

    ``None`` when the text is too short, written in a script that names its
    language (kana, Han, Hangul), in the target, the source or a relative of
    the target, or when the winner does not beat the target by
    :data:`BROAD_CONFIDENCE`. ``source`` is left to ``untranslated``.
    """
    total = sum(counts.values())
    target_script = script_of(target)
    if total < MIN_BROAD_LETTERS or target not in BROAD_LANGUAGES:
        return None
    if target_script in _OWN_SCRIPTS and _family_count(counts, target_script) >= 0.5 * total:
        return None
    lang, _ = identify_language(prose, BROAD_LANGUAGES)
    if lang in (target, source) or lang in _RELATIVES.get(target, ()):
        return None
    _, against_target = identify_language(prose, (lang, target))
    return (lang, against_target) if against_target >= BROAD_CONFIDENCE else None


# --------------------------------------------------------------------------- prose

_WS_RE = re.compile(r"\s+")
_WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*", re.UNICODE)


def _strip_spans(text: str, spans: Sequence[Span]) -> str:
    out, pos = [], 0
    for span in spans:
        out.append(text[pos:span.start])
        out.append(" ")
        pos = span.end
    out.append(text[pos:])
    return "".join(out)


def _prose(text: str, names: Iterable[str]) -> str:
    """``text`` without code, placeholders, tags, identifiers and protected names."""
    return _strip_spans(text, find_spans(text, names))


def _normalize(text: str) -> str:
    return _WS_RE.sub(" ", text).strip().casefold()


def _content_length(prose: str) -> int:
    """Characters that carry language: letters and marks (no spaces, digits or punctuation)."""
    return sum(n for ch, n in Counter(prose).items() if unicodedata.category(ch)[0] in "LM")


# Letters of a reviewed translation per letter of its English source, measured on the
# shipped catalogs (translate/catalogs/, instructions and mini descriptions: 174 entries
# per language, of which 45 have a source of 40 letters or more; these 45 are measured,
# shorter ones are noisy): (5th percentile, median, 95th percentile, maximum).
# tests/translate/test_length_bands.py measures them again. CJK needs far fewer
# characters than English (ja median 0.53, zh 0.34); Latin-script languages more.
LENGTH_MEASURED: dict[str, tuple[float, float, float, float]] = {
    "de": (1.02, 1.25, 1.61, 1.85), "es": (0.96, 1.11, 1.35, 1.42), "fr": (0.90, 1.17, 1.35, 1.59),
    "it": (1.00, 1.09, 1.30, 1.32), "pt": (0.90, 1.08, 1.26, 1.38), "hi": (0.83, 0.97, 1.17, 1.36),
    "ja": (0.39, 0.53, 0.65, 0.82), "zh": (0.28, 0.34, 0.43, 0.63),
}
#: English letters of slack: a short source is judged with this many letters' worth of
#: translation added to both bounds ("City" -> "Stadtname" passes), in target letters.
LENGTH_SLACK = 8


def _band(p05: float, median: float, p95: float, maximum: float) -> tuple[float, float, int]:
    """(low, high, slack) from measured ratios: low 0.7 x p05, high the larger of 1.5 x p95 and
    1.25 x max, slack LENGTH_SLACK English letters at the median ratio (rounded up)."""
    return round(0.7 * p05, 2), round(max(1.5 * p95, 1.25 * maximum), 2), math.ceil(LENGTH_SLACK * median)


#: (low, high, slack in letters) per target language, from :data:`LENGTH_MEASURED`: a
#: translation of an English source of ``n`` letters must have between ``low * n - slack``
#: and ``high * n + slack`` letters (ja: 0.27 n - 5, so one word left of a 34-letter
#: sentence fails; zh: 0.2 n - 3).
LANGUAGE_LENGTH_BOUNDS: dict[str, tuple[float, float, int]] = {
    lang: _band(*measured) for lang, measured in LENGTH_MEASURED.items()
}

# Languages without a shipped catalog, by the target's writing system: (low, high),
# wider than the measured bands. Korean is not measured (no catalog): its band is
# Japanese's (Hangul syllables, like kana and kanji, hold about two English letters).
LENGTH_BOUNDS: dict[str, tuple[float, float]] = {
    "latin": (0.6, 2.0),
    "japanese": (0.27, 1.0),
    "han": (0.2, 0.8),
    "hangul": (0.27, 1.0),
    "devanagari": (0.55, 2.0),
    "cyrillic": (0.6, 2.0),
    "arabic": (0.45, 1.7),
    "hebrew": (0.45, 1.7),
    "greek": (0.6, 2.0),
    "thai": (0.45, 1.9),
}
_DEFAULT_BOUNDS = (0.35, 2.5)
# Slack of the scripts whose letters hold more than one English letter (as in _band).
_SCRIPT_SLACK: dict[str, int] = {"japanese": 5, "han": 3, "hangul": 5}


# A chunk said twice in a row: at least 10 characters from a letter on, the copies
# apart by separators only (or 6 characters from a CJK one, back to back).
_REPEAT_RE = re.compile(r"([^\W\d_][^\n]{9,}?)[\s,;:、，。.]*\1")
_CJK_REPEAT_RE = re.compile(r"([\u3040-\u30ff\u3400-\u9fff][^\n]{5,}?)\1")
_REPEAT_SEPARATORS = " ,;:、，。."  # [\s,;:、，。.] once whitespace is collapsed to spaces
#: Longest flattened text searched by the regexes above: their backtracking is quadratic.
_REPEAT_REGEX_CHARS = 1_000
#: Longer texts are searched for copies up to ``max(MIN_REPEAT_DISTANCE, REPEAT_WORK // length)``
#: characters apart (every distance up to about 4,400 characters, 500 on a 1 MB line): linear time.
MIN_REPEAT_DISTANCE = 500
REPEAT_WORK = 20_000_000
# Sampled positions per copy length that must all be equal before a distance is searched in full.
_SAMPLES = 8


def _repeated_chunk(text: str) -> str | None:
    """A chunk of at least 10 letters (6 for CJK) immediately repeated, or a sentence said twice."""
    flat = _WS_RE.sub(" ", text).strip()
    if len(flat) <= _REPEAT_REGEX_CHARS:
        m = _REPEAT_RE.search(flat) or _CJK_REPEAT_RE.search(flat)
        found = m.group(1) if m else None
    else:
        found = _first_repeat(flat, MIN_REPEAT_DISTANCE)
    if found:
        return found
    sentences = [s.strip().casefold() for s in re.split(r"(?<=[.!?。！？।])\s*|\n", text)]
    seen: set[str] = set()
    short: set[str] = set()
    for sentence in sentences:
        # Letters are counted on a sentence's second occurrence only (the same string as its first).
        if sentence in seen and sentence not in short:
            if _content_length(sentence) >= 8:
                return sentence
            short.add(sentence)
        seen.add(sentence)
    return None


def _first_repeat(flat: str, min_distance: int) -> str | None:
    """What ``_REPEAT_RE`` (else ``_CJK_REPEAT_RE``) finds in ``flat``, by distance instead of backtracking.

    A match is a start ``i`` and a distance ``d`` to the second copy: the
    chunk ``flat[i:i + L]`` equals ``flat[i + d:i + d + L]`` with only
    separators between, so ``L >= max(10, d - s)`` where ``s`` counts the
    separators just before ``i + d``. For each ``d`` the common prefixes of
    ``flat`` and ``flat[d:]`` are compared in one vectorized pass; the leftmost
    ``i`` wins, then the shortest chunk, as with the regex. Distances are
    searched up to ``max(min_distance, REPEAT_WORK // len(flat))`` (all of
    them on texts up to about 4,400 characters).
    """
    import numpy as np  # on first use: promptgrid must import fast

    n = len(flat)
    max_distance = min(n, max(min_distance, REPEAT_WORK // n))
    codes = np.frombuffer(flat.encode("utf-32-le"), dtype=np.uint32)
    # Per distinct character, not per position: a lookup table over the text's code points.
    table = np.zeros(int(codes.max()) + 1, dtype=bool)
    table[[ord(c) for c in set(flat) if _LETTER_RE.match(c)]] = True
    letter = table[codes]
    table[:] = False
    table[[ord(c) for c in _REPEAT_SEPARATORS if ord(c) < table.size]] = True
    sep = table[codes]
    index = np.arange(n + 1)
    # seps_before[x]: separators immediately before position x
    last_other = np.maximum.accumulate(np.where(np.concatenate(([False], ~sep)), index, 0))
    seps_before = index - last_other
    cjk = ((codes >= 0x3040) & (codes <= 0x30FF)) | ((codes >= 0x3400) & (codes <= 0x9FFF))
    for starts, min_len, gaps in ((letter, 10, True), (cjk, 6, False)):
        if not starts.any():  # a chunk starts with a letter (a CJK character): none, no match
            continue
        max_gap = int(seps_before.max()) if gaps else 0
        best: tuple[int, int] | None = None
        for d in range(min_len, max_distance + 1):
            end = n - d if best is None else min(n - d, best[0] + 1)
            if end <= 0:
                break
            # Common prefixes of flat[i:] and flat[i + d:] for i < end, exact up to i + d
            # (enough: a chunk is at most d long).
            span = min(n - d, end + d)
            length = max(min_len, d - max_gap)
            step = length // _SAMPLES
            # A run of `length` equal positions holds `length // step` consecutive multiples of
            # `step`: when the sampled positions have no such run, neither has the text (exact).
            if step > 1 and (codes[:span:step] == codes[d:d + span:step]).tobytes().find(
                    b"\x01" * (length // step)) < 0:
                continue
            equal = codes[:span] == codes[d:d + span]
            run = b"\x01" * length
            if equal.tobytes().find(run, 0, end - 1 + len(run)) < 0:  # no copy long enough from i < end
                continue
            positions = np.arange(span)
            next_diff = np.minimum.accumulate(np.where(equal, span, positions)[::-1])[::-1]
            common = next_diff[:end] - positions[:end]
            need = np.maximum(min_len, d - seps_before[d:d + end]) if gaps else np.full(end, d)
            hits = np.flatnonzero(starts[:end] & (common >= need))
            if hits.size:
                i = int(hits[0])
                if best is None or i < best[0] or (i == best[0] and int(need[i]) < best[1]):
                    best = (i, int(need[i]))
        if best is not None:
            return flat[best[0]:best[0] + best[1]]
    return None


# --------------------------------------------------------------------------- structure

_HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s")
_LIST_RE = re.compile(r"^\s*(?:([-*+•])|(\d+)[.)])\s")


def _line_shape(line: str) -> tuple[str, ...]:
    if not line.strip():
        return ("blank",)
    if line.lstrip().startswith("```"):
        return ("fence",)
    m = _HEADING_RE.match(line)
    if m:
        return ("heading", str(len(m.group(1))))
    m = _LIST_RE.match(line)
    if m:
        return ("bullet",) if m.group(1) else ("numbered",)
    return ("text",)


def _structure_problem(source: str, translation: str) -> str | None:
    src_lines, tr_lines = source.split("\n"), translation.split("\n")
    if len(src_lines) != len(tr_lines):
        return f"the source has {len(src_lines)} lines, the translation {len(tr_lines)}"
    for i, (a, b) in enumerate(zip(src_lines, tr_lines, strict=True), 1):
        sa, sb = _line_shape(a), _line_shape(b)
        if sa != sb:
            return f"line {i} is {' '.join(sa)} in the source but {' '.join(sb)} in the translation"
    return None


# --------------------------------------------------------------------------- markup

#: Longest text (source or translation) whose element structure is compared: the
#: parse is bounded; prompt strings are a few hundred characters.
MAX_MARKUP_CHARS = 20_000
# Declarations that make an XML parser expand entities (billion laughs) or read files.
_DTD_RE = re.compile(r"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
# The wrapper element around a text, so that several top-level elements parse.
_ROOT = "promptgrid-markup"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _as_xml(text: str) -> str:
    """``text`` as an XML document whose elements are its paired tags; all else is escaped text.

    A closing tag pairs with the nearest open tag of its name; open tags
    between them, and tags that find no partner, are prose (escaped).
    """
    matches = list(TAG_RE.finditer(text))
    paired = [False] * len(matches)
    open_tags: list[tuple[str, int]] = []
    for i, m in enumerate(matches):
        tag = m.group()
        name = tag.strip("</>").split()[0]
        if tag.endswith("/>"):
            paired[i] = True
        elif not tag.startswith("</"):
            open_tags.append((name, i))
        else:
            for depth in range(len(open_tags) - 1, -1, -1):
                if open_tags[depth][0] == name:
                    paired[i] = paired[open_tags[depth][1]] = True
                    del open_tags[depth:]
                    break
    out, pos = [f"<{_ROOT}>"], 0
    for m, keep in zip(matches, paired, strict=True):
        if keep:
            out += [_escape(text[pos:m.start()]), m.group()]
            pos = m.end()
    out += [_escape(text[pos:]), f"</{_ROOT}>"]
    return "".join(out)


def _elements(node: Any) -> tuple[Any, ...]:
    """The element structure of an ``xmltodict.parse`` result.

    Per element: its attributes, its child elements (by name, in order) and
    the placeholders in its text (``<TOOLCALL>{output_format}</TOOLCALL>``
    must keep ``{output_format}`` inside); the rest of the text is left out.
    """
    if node is None:
        return ()
    if isinstance(node, str):
        return tuple(("{}", name) for name in sorted(placeholders(node).elements()))
    out: list[Any] = []
    for key, value in node.items():
        if key == "#text":
            out += _elements(value)
        elif key.startswith("@"):
            out.append((key, value))
        else:
            out += [(key, _elements(child)) for child in (value if isinstance(value, list) else [value])]
    return tuple(out)


def _markup(text: str) -> tuple[Any, ...]:
    """The element structure of ``text`` (``ValueError`` if its markup does not parse)."""
    import xmltodict  # on first use: its xml.sax.saxutils imports urllib.request (~25 ms)

    try:
        parsed = xmltodict.parse(_as_xml(text), disable_entities=True)
    except ExpatError as exc:
        raise ValueError(f"its markup does not parse ({exc})") from None
    return _elements(parsed[_ROOT])


def _show(elements: tuple[Any, ...]) -> str:
    """``<a>(<b> {x})``: elements with what they contain, placeholders; attributes left out."""
    parts = []
    for key, inner in elements:
        if key == "{}":
            parts.append(inner)
        elif not key.startswith("@"):
            shown = _show(inner)
            parts.append(f"<{key}>({shown})" if shown else f"<{key}>")
    return " ".join(parts)


def _markup_problem(source: str, translation: str) -> str | None:
    """Why the translation does not keep the source's element structure (``None``: it does, or no markup).

    Only called when both have the same tags and placeholders; a source
    that cannot be compared (a DTD, over the size bound, markup that does
    not parse) is not judged.
    """
    if len(source) > MAX_MARKUP_CHARS or len(translation) > MAX_MARKUP_CHARS or _DTD_RE.search(source):
        return None
    if _DTD_RE.search(translation):
        return "the translation declares a DTD or entity (refused, not parsed)"
    try:
        want = _markup(source)
    except ValueError:
        return None
    try:
        got = _markup(translation)
    except ValueError as exc:
        return f"in the translation, {exc}"
    if got != want:
        return f"elements {_show(want)} in the source but {_show(got)} in the translation"
    return None


# --------------------------------------------------------------------------- protected

def _required(span: Span) -> str:
    """What must survive of a protected span: its content without placeholders and tags
    (checked separately) and without the quotes/backticks around it."""
    text = span.text
    if span.kind is SpanKind.QUOTED or (span.kind is SpanKind.CODE and text.startswith("`")
                                        and not text.startswith("```")):
        text = text.strip("`'\"")
    return _strip_markup(text)


def _strip_markup(text: str) -> str:
    text = re.sub(r"\{[A-Za-z_][\w.]*\}", "", text)
    return TAG_RE.sub("", text)


def _protected_problems(source_spans: Sequence[Span], translation: str) -> list[str]:
    """What of the source's protected spans (``find_spans(source, names)``) is not in the translation."""
    missing: dict[str, None] = {}  # ordered, and a set: a long source has thousands of spans
    translation = _strip_markup(translation)
    # Many spans, a long text: a whole word of the translation is looked up, not searched for, and a
    # string of word characters and dots is in the translation iff it is in one of its distinct words.
    words = set(_NAME_TOKEN_RE.findall(translation)) if len(source_spans) > _MANY_SPANS else set()
    distinct = "\n".join(words)
    for span in source_spans:
        if span.kind in (SpanKind.PLACEHOLDER, SpanKind.TAG):
            continue
        required = _required(span)
        if not required.strip() or required in words or required in missing:
            continue
        if required not in (distinct if words and _NAME_TOKEN_RE.fullmatch(required) else translation):
            missing[required] = None
    return list(missing)


_NAME_TOKEN_RE = re.compile(r"[\w.]+")
#: More source spans than this: the translation's words are indexed once.
_MANY_SPANS = 64


# --------------------------------------------------------------------------- back-translation

_EN_STOPWORDS = frozenset(
    "a an the of to in on at for and or but is are be been was were you your it its this that these those "
    "with as by from if then than not no do does any all each one more most can will should must may "
    "into out about which who what when where how there here their they them we our i".split()
)


def _content_words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD_RE.findall(text) if len(w) > 2 and w.casefold() not in _EN_STOPWORDS}


def back_translation_similarity(source: str, back: str) -> float:
    """Dice overlap of the content words of the source and of its back-translation (0..1)."""
    a, b = _content_words(source), _content_words(back)
    if not a and not b:
        return 1.0
    return 2 * len(a & b) / (len(a) + len(b))


#: Back-translation similarity below this is flagged.
BACK_TRANSLATION_THRESHOLD = 0.3


# --------------------------------------------------------------------------- main check

def require_languages(codes: Mapping[str, object]) -> None:
    """Raise ``TranslationError`` for the first code of ``codes`` (what it is called -> the code) that does not name
    a language promptgrid knows (``language_problem``): no check could judge a text in it."""
    for name, code in codes.items():
        problem = language_problem(code)
        if problem:
            raise TranslationError(f"{name} {problem}.")


def check_translation(
    source: str,
    translation: str,
    source_lang: str,
    target_lang: str,
    protected: Iterable[str] = (),
    *,
    back_translator: _Translator | None = None,
) -> TranslationCheck:
    """Check one translation; see the module docstring for each rule.

    Raises ``TranslationError`` when ``source_lang`` or ``target_lang`` is empty or not a language code
    promptgrid knows (``promptgrid.languages.language_problem``): its checks could not judge the text.
    """
    require_languages({"source_lang": source_lang, "target_lang": target_lang})
    names = tuple(p for p in protected if isinstance(p, str) and p)
    problems: set[CheckCode] = set()
    details: dict[str, Any] = {}
    src_base, tgt_base = base_language(source_lang), base_language(target_lang)

    _check_markup(source, translation, problems, details)
    src_spans = find_spans(source, names)  # once: a scan of a long source is not free
    missing = _protected_problems(src_spans, translation)
    if missing:
        problems.add(CheckCode.PROTECTED_CHANGED)
        details["protected_changed"] = "not verbatim in the translation: " + ", ".join(repr(m) for m in missing)
    structure = _structure_problem(source, translation)
    if structure:
        problems.add(CheckCode.STRUCTURE_CHANGED)
        details["structure_changed"] = structure

    # Names of the source's spans are removed from both texts before judging language and length.
    span_names = names + tuple(s.text for s in src_spans)
    src_prose = _strip_spans(source, src_spans)
    tr_prose = _prose(translation, span_names)
    src_len, tr_len = _content_length(src_prose), _content_length(tr_prose)
    language_of_text = tgt_base
    if src_len >= 1 and tgt_base != src_base:
        language_of_text = _check_language(source, translation, src_prose, tr_prose, source_lang, target_lang,
                                           problems, details)

    if src_len >= 1 and CheckCode.UNTRANSLATED not in problems:
        length = _length_problem(src_prose, tr_prose, src_len, tr_len, language_of_text, src_base)
        details["length_ratio"] = round(tr_len / src_len, 3)
        if length:
            problems.add(CheckCode.LENGTH_RATIO)
            details["length_ratio_problem"] = length

    if back_translator is not None and tgt_base != src_base and src_len >= 1:
        back = _back_translate(back_translator, translation, span_names, target_lang, source_lang)
        similarity = back_translation_similarity(source, back)
        details["back_translation"] = back
        details["back_translation_similarity"] = round(similarity, 3)
        if similarity < BACK_TRANSLATION_THRESHOLD:
            problems.add(CheckCode.BACK_TRANSLATION_LOW)

    ordered = [code for code in CheckCode if code in problems]
    return TranslationCheck(not ordered, ordered, details)


def _check_markup(source: str, translation: str, problems: set[CheckCode], details: dict[str, Any]) -> None:
    """Add the placeholder, tag and markup problems of ``translation`` to ``problems`` and ``details``; one
    damage gets one code (markup is judged only when placeholders and tags are intact)."""
    if placeholders(source) != placeholders(translation):
        lost = placeholders(source) - placeholders(translation)
        extra = placeholders(translation) - placeholders(source)
        problems.add(CheckCode.PLACEHOLDER_MISSING)
        details["placeholder_missing"] = _diff_message("placeholder", lost, extra)
    src_tags, tr_tags = tags(source), tags(translation)
    if src_tags != tr_tags:
        problems.add(CheckCode.TAG_MISSING)
        details["tag_missing"] = _diff_message("tag", src_tags - tr_tags, tr_tags - src_tags)
    elif src_tags and CheckCode.PLACEHOLDER_MISSING not in problems:  # one damage, one code
        markup = _markup_problem(source, translation)
        if markup:
            problems.add(CheckCode.MARKUP_CHANGED)
            details["markup_changed"] = markup


def _check_language(
    source: str, translation: str, src_prose: str, tr_prose: str, source_lang: str, target_lang: str,
    problems: set[CheckCode], details: dict[str, Any],
) -> str:
    """Add the language problem of ``translation`` (if any) and the detected language to ``problems`` and
    ``details``; return the language the text is in, for the length check."""
    code, message, detected = _language_problem(source, translation, src_prose, tr_prose, source_lang, target_lang)
    if detected:
        details["detected_language"] = detected
    if not code:
        return base_language(target_lang)
    problems.add(code)
    details[code.value] = message
    return detected if code is CheckCode.WRONG_LANGUAGE and detected else base_language(source_lang)


def _back_translate(backend: _Translator, text: str, names: Sequence[str], source: str, target: str) -> str:
    """Translate ``text`` back, with its protected spans masked like any other translation."""
    if not getattr(backend, "masks", True):
        return backend.translate([text], source, target)[0]
    masked = mask(text, names)
    restored, _ = unmask(backend.translate([masked.text], source, target)[0], masked)
    return restored


def _diff_message(what: str, lost: Any, extra: Any) -> str:
    parts = []
    if lost:
        parts.append(f"missing {what}s: " + ", ".join(sorted(lost.elements())))
    if extra:
        parts.append(f"unexpected {what}s: " + ", ".join(sorted(extra.elements())))
    return "; ".join(parts)


# English function words that are not also common words of the supported
# Latin-script languages (no "a", "in", "die", "no", "do", "on", "as", "will"):
# their presence is evidence of English, whatever the target.
_EN_FUNCTION_WORDS = frozenset(
    "the of to you your is are be been and or for with that this these those if should must not any from by "
    "at it its can each when which what they them their there has have into only than then would may more "
    "other all".split()
)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?。！？।])\s*|\n")


def _foreign_letters(text: str) -> re.Pattern[str] | None:
    """A character class of the letters of ``text`` in a script other than Latin (``None``: there are none).

    Each distinct character is looked at once, not each word's characters.
    """
    foreign = sorted(c for c in set(text) if _char_script(c) not in ("latin", None))
    return re.compile("[" + "".join(re.escape(c) for c in foreign) + "]") if foreign else None


def _latin_words(text: str, foreign: re.Pattern[str] | None) -> list[str]:
    """The words of ``text`` written in Latin letters only (``foreign``: ``_foreign_letters`` of ``text``
    or of a text that contains it)."""
    words = _WORD_RE.findall(text)
    return words if foreign is None else [w for w in words if w.isascii() or not foreign.search(w)]


def _copied_sentence(src_prose: str, tr_prose: str) -> str | None:
    """A sentence of the translation that is the source's English, left as it was.

    At least four words, 80% of them words of the source, two of them English
    function words: a list of kept names ("string, integer, float") is not a
    copied sentence, "You SHOULD NOT include any other text" is.
    """
    foreign = _foreign_letters(tr_prose)
    # The sentences' words are the text's words (none spans a split): fewer than two
    # function words in the whole text, none in a sentence. Distinct words are cased once.
    distinct = Counter(_latin_words(tr_prose, foreign))
    if sum(n for w, n in distinct.items() if w.casefold() in _EN_FUNCTION_WORDS) < 2:
        return None
    source_words = {w.casefold() for w in _WORD_RE.findall(src_prose)}
    for sentence in _SENTENCE_SPLIT_RE.split(tr_prose):
        words = [w.casefold() for w in _latin_words(sentence, foreign)]
        if len(words) < 4:
            continue
        shared = sum(w in source_words for w in words)
        function = sum(w in _EN_FUNCTION_WORDS for w in words)
        if shared >= 0.8 * len(words) and function >= 2:
            return sentence.strip()
    return None


def _language_problem(source: str, translation: str, src_prose: str, tr_prose: str,
                      source_lang: str, target_lang: str) -> tuple[CheckCode | None, str, str | None]:
    """(code, message, detected language): the script and plausible-language checks, then the broad one, then
    (on a text too short for langid) the short-text one."""
    identical = _normalize(translation) == _normalize(source)
    counts = _script_counts(tr_prose)  # once: a long translation is not free to scan
    code, message, detected = _plausible_language_problem(src_prose, tr_prose, counts, identical,
                                                           source_lang, target_lang)
    if code is CheckCode.WRONG_LANGUAGE and detected not in ("ja", "zh"):
        # the plausible languages only name the nearest one; name the language itself if langid is sure
        return _broad_problem(tr_prose, counts, target_lang, source_lang) or (code, message, detected)
    if code is not None or identical:
        return code, message, detected
    return (_broad_problem(tr_prose, counts, target_lang, source_lang)
            or _short_text_problem(src_prose, tr_prose, counts, target_lang, source_lang)
            or (code, message, detected))


# The letters each Latin-script language writes (casefolded), for texts too short for langid
# (``_short_text_problem``); a target not listed here is not judged on a short text.
_ALPHABETS: dict[str, frozenset[str]] = {
    lang: frozenset("abcdefghijklmnopqrstuvwxyz" + extra) for lang, extra in {
        "en": "", "de": "äöüß", "es": "áéíóúüñ", "fr": "àâæçéèêëîïôœùûüÿ", "it": "àèéìíîòóùú",
        "pt": "áâãàçéêíóôõúü", "nl": "áéíóúàèëïöüĳ",
    }.items()
}
# Common function words of the Latin-script languages above, each list with every short word the language
# uses often, also those other lists have ("de" is Spanish, French, Portuguese and Dutch): a word counts as
# evidence of another language only when the target's own list lacks it.
_FUNCTION_WORDS: dict[str, frozenset[str]] = {lang: frozenset(words.split()) for lang, words in {
    "en": "the a an of to in on at you your is are be and or for with that this from by it as can each when "
          "which what do not no if",
    "de": "der die das den dem des ein eine einen einem einer und oder für mit ist sind nicht von zu auf im in "
          "an am um es ich sie wir ihr du da bei aus nach bitte kein keine",
    "es": "el la los las un una unos unas y o a de en es son del al por para que con mi tu su sus se no lo le "
          "te me dos uno da van",
    "fr": "le la les un une des et ou à a où de en est sont du au par pour que dans avec mon ton son ses je "
          "vous nous il elle ne pas se te me sur",
    "it": "il lo la gli le i un una uno e o a ad di da in è sono del della al per con che mi tu su se non ne "
          "ti es",
    "pt": "o a os as um uma uns umas e ou de em é são do da dos das ao por para com que meu teu seu se não "
          "te me no na à la lo",
    "nl": "de het een en of van te op in is zijn voor met ik je jij wij u niet aan",
}.items()}
_ANY_ALPHABET = frozenset().union(*_ALPHABETS.values())
#: Fewest letters a short text needs foreign to the target's alphabet (and absent from the source) to fail; one
#: is enough when it is in none of the alphabets above ("ı", "ặ").
MIN_FOREIGN_LETTERS = 2


def _short_text_problem(src_prose: str, tr_prose: str, counts: dict[str, int], target_lang: str,
                        source_lang: str) -> tuple[CheckCode, str, str | None] | None:
    """``wrong_language`` for a Latin-script text too short for langid (under :data:`MIN_BROAD_LETTERS`
    letters), judged by what langid cannot see there: at least :data:`MIN_FOREIGN_LETTERS` letters the
    target's alphabet does not have, or one that none of the listed alphabets has ("Đặt một bàn." for
    German), or function words of another listed language and none of the target's ("Reserva una mesa." for
    German). Letters and words that the source has too (a name kept as it is) do not count. None for a
    target without a known alphabet (``_ALPHABETS``), or a longer text; a short text with neither sign
    ("Zarezerwuj stolik." for German) passes."""
    tgt_base = base_language(target_lang)
    alphabet = _ALPHABETS.get(tgt_base)
    total = sum(counts.values())
    if alphabet is None or total >= MIN_BROAD_LETTERS or counts.get("latin", 0) < 0.5 * total:
        return None
    source_letters = set(src_prose.casefold())
    foreign = [c for c in tr_prose.casefold() if c.isalpha() and c not in alphabet and c not in source_letters]
    if len(foreign) >= MIN_FOREIGN_LETTERS or any(c not in _ANY_ALPHABET for c in foreign):
        guess, _ = identify_language(tr_prose, BROAD_LANGUAGES)
        named = f" (looks {guess})" if guess != tgt_base else ""
        return (CheckCode.WRONG_LANGUAGE, f"expected {tgt_base}: a short text with letters {tgt_base} does not "
                f"write: {''.join(dict.fromkeys(foreign))}{named}", guess if guess != tgt_base else None)
    words = {w.casefold() for w in _WORD_RE.findall(tr_prose)} - {w.casefold() for w in _WORD_RE.findall(src_prose)}
    own = _FUNCTION_WORDS[tgt_base]
    if words & own:
        return None
    src_base = base_language(source_lang)
    others = {lang: words & fw for lang, fw in _FUNCTION_WORDS.items() if lang not in (tgt_base, src_base)}
    found = sorted({w for hits in others.values() for w in hits if len(w) > 1})  # "e-mail" has an "e"
    if not found:
        return None
    best = max(others, key=lambda lang: len(others[lang]))
    return (CheckCode.WRONG_LANGUAGE, f"expected {tgt_base}: a short text with function words of another language "
            f"({', '.join(found)}) and none of {tgt_base}'s", best)


def _broad_problem(tr_prose: str, counts: dict[str, int], target_lang: str, source_lang: str
                   ) -> tuple[CheckCode, str, str] | None:
    """``wrong_language`` when the broad identification finds another language (see :func:`_broad_language`)."""
    tgt_base = base_language(target_lang)
    broad = _broad_language(tr_prose, counts, tgt_base, base_language(source_lang))
    if broad is None:
        return None
    lang, probability = broad
    return (CheckCode.WRONG_LANGUAGE,
            f"expected {tgt_base}, detected {lang} (probability {probability:.4f} against {tgt_base})", lang)


def _plausible_language_problem(src_prose: str, tr_prose: str, counts: dict[str, int], identical: bool,
                                source_lang: str, target_lang: str) -> tuple[CheckCode | None, str, str | None]:
    """The script decides, then langid among the plausible languages (``counts``: the translation's scripts)."""
    src_base, tgt_base = base_language(source_lang), base_language(target_lang)
    if identical:
        return _identical_problem(src_prose, src_base, tgt_base)
    if src_base == "en":
        copied = _copied_sentence(src_prose, tr_prose)
        if copied:
            return CheckCode.UNTRANSLATED, f"left in English: {copied[:60]!r}", src_base
    total = sum(counts.values())
    if total < MIN_LETTERS:
        return None, "", None
    target_script = script_of(tgt_base)
    target_letters = _family_count(counts, target_script)
    latin = _latin_words(tr_prose, _foreign_letters(tr_prose))
    english = sum(w.casefold() in _EN_FUNCTION_WORDS for w in latin) if src_base == "en" else 0
    if target_script != "latin" and (
        target_letters >= 0.5 * total or (target_letters >= 8 and english < 2)
    ):
        # Written in the target's script (Latin words left are names and loanwords).
        return _target_script_problem(tr_prose, counts, source_lang, target_lang)
    detected, confidence = detect_language(tr_prose, target_lang, source_lang)
    if detected is None:
        return None, "", None
    latin_share = counts.get("latin", 0) / total
    mostly_english = english >= 3 and english >= 0.25 * len(latin)
    if detected == tgt_base and not mostly_english:
        return None, "", detected
    if latin_share >= 0.5 and (detected == src_base or mostly_english):
        return _source_like_problem(tr_prose, counts, detected, confidence, mostly_english, source_lang, target_lang)
    return _other_language_problem(counts, total, detected, confidence, target_script, tgt_base)


def _identical_problem(src_prose: str, src_base: str, tgt_base: str) -> tuple[CheckCode | None, str, str | None]:
    """A translation identical to its source is untranslated, unless it is one short word between Latin scripts."""
    words = _WORD_RE.findall(src_prose)
    if not (script_of(tgt_base) == "latin" and script_of(src_base) == "latin"
            and len(words) <= 1 and _content_length(src_prose) <= 10):
        return CheckCode.UNTRANSLATED, "the translation is identical to the source", src_base
    return None, "", None


def _target_script_problem(tr_prose: str, counts: dict[str, int], source_lang: str,
                           target_lang: str) -> tuple[CheckCode | None, str, str | None]:
    """A text written in the target's script: only Japanese and Chinese can still be confused."""
    tgt_base = base_language(target_lang)
    detected, _ = detect_language(tr_prose, target_lang, source_lang)
    if tgt_base in ("ja", "zh") and detected in ("ja", "zh") and detected != tgt_base:
        if counts.get("han", 0) + counts.get("kana", 0) >= 6:
            return CheckCode.WRONG_LANGUAGE, f"the text looks {detected}, not {tgt_base}", detected
    return None, "", detected


def _source_like_problem(tr_prose: str, counts: dict[str, int], detected: str, confidence: float,
                         mostly_english: bool, source_lang: str,
                         target_lang: str) -> tuple[CheckCode | None, str, str | None]:
    """A mostly Latin text that langid calls the source language (or that is mostly English function words)."""
    src_base = base_language(source_lang)
    letters = counts.get("latin", 0)
    if script_of(base_language(target_lang)) != "latin" or mostly_english or (
            letters >= MIN_LANGID_LETTERS and confidence >= LANGID_CONFIDENCE):
        # langid among the plausible languages said "source": a third language it does
        # not know of (Dutch, Vietnamese) is not an untranslated text.
        other = None if mostly_english else _broad_problem(tr_prose, counts, target_lang, source_lang)
        return other or (CheckCode.UNTRANSLATED, f"the translation is mostly {src_base} (detected {detected})",
                         src_base)
    return None, "", detected


def _other_language_problem(counts: dict[str, int], total: int, detected: str, confidence: float,
                            target_script: str, tgt_base: str) -> tuple[CheckCode | None, str, str | None]:
    """``wrong_language`` when langid names another language, unless a short or unsure Latin text."""
    if detected == tgt_base:
        return None, "", detected
    if target_script == "latin" and max(counts, key=counts.__getitem__) == "latin":
        if total < MIN_LANGID_LETTERS or confidence < LANGID_CONFIDENCE:
            return None, "", detected
    return CheckCode.WRONG_LANGUAGE, f"expected {tgt_base}, detected {detected}", detected


# Sentence ends: after . ! ? and a space, after CJK and Devanagari stops, at line ends.
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？।])|\n")
_LETTER_RE = re.compile(r"[^\W\d_]")
#: Longest text whose sentences are paired (shipped catalog strings are under 500 characters).
MAX_SENTENCE_CHECK_CHARS = 20_000


def _dropped_sentence(src_prose: str, tr_prose: str, low: float, slack: int) -> str | None:
    """A sentence of the translation too short for its source sentence (most of it dropped).

    Judged only when source and translation have the same number of sentences
    (two or more), paired in order, with the whole text's lower bound: a text
    can keep its length overall while one of its sentences is cut to a word.
    Not on texts over :data:`MAX_SENTENCE_CHECK_CHARS` (prompts are far shorter;
    a megabyte of untrusted text is judged as a whole).
    """
    if len(src_prose) > MAX_SENTENCE_CHECK_CHARS or len(tr_prose) > MAX_SENTENCE_CHECK_CHARS:
        return None
    source = [s for s in _SENTENCE_END_RE.split(src_prose) if _LETTER_RE.search(s)]
    if len(source) < 2:
        return None
    translated = [s for s in _SENTENCE_END_RE.split(tr_prose) if _LETTER_RE.search(s)]
    if len(translated) != len(source):
        return None
    for number, (src, tr) in enumerate(zip(source, translated, strict=True), 1):
        src_len, tr_len = _content_length(src), _content_length(tr)
        if tr_len < low * src_len - slack:  # full slack: pieces split at commas/colons are short
            return f"sentence {number} has {tr_len} letters for {src_len} in the source: most of it dropped"
    return None


#: The lower bound's slack fades out between these source lengths (letters): a short label
#: ("City") may translate to a word of any length, but a whole sentence cut to one word
#: ("Send a text message to one of your contacts." -> "メッセージ") must fail.
LOW_SLACK_FULL, LOW_SLACK_NONE = 16, 64


def _low_slack(slack: int, src_len: int) -> float:
    """The lower bound's slack for a source of ``src_len`` letters (see ``LOW_SLACK_FULL``)."""
    if src_len <= LOW_SLACK_FULL:
        return slack
    return slack * max(0.0, (LOW_SLACK_NONE - src_len) / (LOW_SLACK_NONE - LOW_SLACK_FULL))


def _length_bounds(lang: str, source: str) -> tuple[float, float, int]:
    """(low, high, slack) for a translation into ``lang`` (a code, or a script's name) from ``source``."""
    if source == "en" and lang in LANGUAGE_LENGTH_BOUNDS:
        return LANGUAGE_LENGTH_BOUNDS[lang]
    script = lang if lang in LENGTH_BOUNDS else script_of(lang)
    low, high = LENGTH_BOUNDS.get(script, _DEFAULT_BOUNDS)
    return low, high, _SCRIPT_SLACK.get(script, LENGTH_SLACK)


def _length_problem(src_prose: str, tr_prose: str, src_len: int, tr_len: int, lang: str,
                    source: str = "en") -> str | None:
    low, high, slack = _length_bounds(lang, source)
    if tr_len < low * src_len - _low_slack(slack, src_len) or tr_len == 0:
        return f"{tr_len} letters for {src_len} in the source: too short for {lang} (truncated?)"
    dropped = _dropped_sentence(src_prose, tr_prose, low, slack)
    if dropped:
        return dropped
    if tr_len > high * src_len + slack:
        return f"{tr_len} letters for {src_len} in the source: too long for {lang}"
    repeated = _repeated_chunk(tr_prose)
    if repeated and not _repeated_chunk(src_prose):
        return f"the translation repeats {repeated[:40]!r}"
    return None
