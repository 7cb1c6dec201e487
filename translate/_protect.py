"""Protected spans: the parts of a prompt string a translator must not touch.

A translated prompt that silently breaks ``{output_format}`` or translates a
parameter name measures the translator, not the model. So, before any text
leaves for a translator, every span below is replaced by an opaque token
``⟦n⟧``; after translation the tokens are put back and *verified*: a missing,
duplicated or invented token is a problem recorded for that unit, never a
silently damaged prompt.

What is protected (first match wins where spans overlap):

- fenced code blocks (```...```) and inline code (`...`);
- URLs and e-mail addresses;
- markup tags (``<TOOLCALL>``, ``</TOOLCALL>``, ``<param name="x"/>``);
- ``{placeholders}`` and inline code-like braces (``{'key': 'value'}``);
- call expressions and lists of them (``func_name2(params)``,
  ``[f(a=1), g(b)]``, ``Action: ActionOne()``) but not prose such as
  ``function(s)``;
- date/time formats and values (``YYYY-MM-DD``, ``%Y-%m-%d``, ``2024-01-31``, ``14:30``);
- names given by the caller (function and parameter names, enum values,
  defaults), as whole words, case-sensitive;
- quoted values without spaces (``'celsius'``), the literals ``true``,
  ``false``, ``null``, and identifiers:
  ``snake_case``, ``dotted.names``, ``camelCase``, ``PascalCase`` with two humps.

The same detector feeds the ``protected_changed`` check, so what we protect is
exactly what we verify.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "Masked",
    "Span",
    "SpanKind",
    "TAG_RE",
    "TOKEN_RE",
    "find_spans",
    "is_identifier_like",
    "mask",
    "placeholders",
    "tags",
    "unmask",
]


class SpanKind(str, Enum):
    """Why a span is protected."""

    CODE = "code"
    URL = "url"
    TAG = "tag"
    PLACEHOLDER = "placeholder"
    CALL = "call"
    FORMAT = "format"
    NAME = "name"
    QUOTED = "quoted"
    IDENTIFIER = "identifier"


@dataclass(frozen=True)
class Span:
    """A protected substring ``text == source[start:end]``."""

    start: int
    end: int
    text: str
    kind: SpanKind


_FENCE_RE = re.compile(r"```.*?```", re.S)
_BACKTICK_RE = re.compile(r"`[^`\n]+`")
# Patterns whose span is a named group start where their run of name characters starts
# (``(?<![\w.+-])``), not at every word boundary inside it: the same spans as
# ``\b[\w.+-]+@...`` and ``[A-Za-z_][\w.]*\(...\)``, in linear time instead of
# rescanning the run from each of its positions.
_URL_RE = re.compile(r"\bhttps?://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]]"
                     r"|(?<![\w.+-])[.+-]*+(?P<email>[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b)")
# The original e-mail pattern, tried only where the previous address ended (see _url_matches).
_EMAIL_RE = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
# ``\s[^<>]*?``, not ``\s+[^<>]*?``: the same matches, without quadratic backtracking over spaces.
TAG_RE = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*?)?/?>")
_PLACEHOLDER_RE = re.compile(r"\{[A-Za-z_][\w.]*\}")
_BRACE_CODE_RE = re.compile(r"\{[^{}\n:'\"]*[:'\"][^{}\n]*\}")  # up to the first [:'"]: no backtracking
_CALL = r"[A-Za-z_][\w.]*\([^()\n]*\)"
_CALL_RE = re.compile(rf"\b[A-Z][a-z]+:[ \t]{_CALL}"
                      rf"|(?<![\w.])(?:[^\W_A-Za-z]|\.)*+(?P<call>[A-Za-z_][\w.]*+\([^()\n]*\))")
_CALL_LIST_RE = re.compile(rf"\[\s*{_CALL}(?:\s*,\s*{_CALL})*\s*\]")
# BFCL's multi-turn docs list a parameter's allowed values in its description: "[Enum]: USD, RMB, EUR" (to the
# end of the line). The values are what the model must write, so the marker and the list are kept verbatim.
_ENUM_LIST_RE = re.compile(r"\[Enum\]:[^\n]*")
_FORMAT_TOKEN = r"(?:YYYY|YY|MM|DD|HH|hh|mm|ss|SSS|SS)"
_FORMAT_RE = re.compile(
    rf"\b{_FORMAT_TOKEN}(?:[-/:.T]{_FORMAT_TOKEN})+(?:Z\b)?\b"
    r"|%[A-Za-z](?:[-/:. T]?%[A-Za-z])+"
    r"|\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?\b"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?\b"
)
# JSON literals a model writes as values ("If true, ..."). Capitalized True/None are
# left out: "None of the functions ..." starts many English sentences.
_LITERAL_RE = re.compile(r"\b(?:true|false|null)\b(?!-)")
_QUOTED_RE = re.compile(r"(?<![\w])(['\"])[^\s'\"]+\1(?![\w])")
_SNAKE = r"\b_?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"
_DOTTED = r"\b[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+\b"
_CAMEL = r"\b[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+\b|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"
_IDENT_RE = re.compile(rf"{_SNAKE}|{_DOTTED}|{_CAMEL}")

#: A token as sent to translators; tolerant of spaces a translator adds inside the brackets.
TOKEN_RE = re.compile(r"⟦\s*(\d+)\s*⟧")


def is_identifier_like(word: str) -> bool:
    """True for ``snake_case``, ``dotted.names``, ``camelCase`` and names with digits."""
    return bool(
        "_" in word
        or re.search(r"\w\.\w", word)
        or re.search(r"[a-z][A-Z]", word)
        or re.search(r"[A-Za-z]\d|\d[A-Za-z]", word)
    )


def _call_is_code(match: str) -> bool:
    """``func_name2(params)`` and ``ActionOne()`` are code; ``function(s)`` is prose."""
    head, _, args = match.partition("(")
    name = head.split(":")[-1].strip()
    args = args[:-1]
    return (
        is_identifier_like(name)
        or bool(re.search(r"[A-Z]", name[1:]))
        or args.strip() == ""
        or any(c in args for c in "=,'\"[]{}")
    )


def _dotted_is_prose(text: str) -> bool:
    """``e.g`` / ``i.e`` / ``U.S`` are abbreviations, not dotted names."""
    return all(len(part) <= 1 for part in text.split("."))


def _url_matches(text: str) -> Iterator[re.Match[str]]:
    """``finditer`` of ``\\bhttps?://...|\\b[\\w.+-]+@...`` in linear time.

    ``_URL_RE`` starts an address only where its run of ``[\\w.+-]`` starts;
    the one other place ``finditer`` would start one is where the previous
    address ended inside such a run (``a@b.com+c@d.com``), tried here.
    """
    pos = 0
    while (m := _URL_RE.search(text, pos)) is not None:
        while m is not None:
            yield m
            pos = m.end()
            m = _EMAIL_RE.match(text, pos) if m.lastgroup == "email" or m.re is _EMAIL_RE else None


def placeholders(text: str) -> Counter[str]:
    """The multiset of ``{placeholder}`` names in ``text``."""
    return Counter(_PLACEHOLDER_RE.findall(text))


def tags(text: str) -> Counter[str]:
    """The multiset of markup tags in ``text`` (outside inline code)."""
    return Counter(TAG_RE.findall(text))


_WORD_OR_DOT_RE = re.compile(r"[\w.]")
_WORD_CHAR_RE = re.compile(r"\w")
_WORD_RUN_RE = re.compile(r"\w+")
#: More names than this: the text's words are indexed once (see :func:`_name_matches`).
_MANY_NAMES = 16


def _word_starts(text: str) -> dict[str, list[int]]:
    """Where each maximal run of word characters of ``text`` starts."""
    starts: dict[str, list[int]] = {}
    for m in _WORD_RUN_RE.finditer(text):
        starts.setdefault(m.group(), []).append(m.start())
    return starts


def _name_matches(text: str, name: str, words: dict[str, list[int]] | None = None) -> Iterator[tuple[int, int]]:
    r"""What ``re.finditer(rf"(?<![\w.]){re.escape(name)}(?![\w])", text)`` finds, without a regex scan per name.

    A long text's source names thousands of spans: a regex scan per name was
    quadratic in practice (a 1 MB translation, 1,000 names: 20 s). A name of
    word characters only matches exactly the maximal word runs equal to it
    that follow no ``.``: looked up in ``words`` (:func:`_word_starts` of
    ``text``) when given; other names are found with ``str.find``.
    """
    if words is not None and _WORD_RUN_RE.fullmatch(name):
        for start in words.get(name, ()):
            if start == 0 or text[start - 1] != ".":
                yield start, start + len(name)
        return
    start = text.find(name)
    while start >= 0:
        end = start + len(name)
        if (start == 0 or not _WORD_OR_DOT_RE.match(text, start - 1)) and not _WORD_CHAR_RE.match(text, end):
            yield start, end
            start = text.find(name, end)
        else:
            start = text.find(name, start + 1)


def find_spans(text: str, names: Iterable[str] = ()) -> list[Span]:
    """Every protected span of ``text``, sorted, non-overlapping.

    ``names`` are extra strings to keep verbatim (whole words, case-sensitive):
    function and parameter names, enum values, defaults.
    """
    taken = [False] * len(text)
    spans: list[Span] = []

    def add(start: int, end: int, kind: SpanKind) -> None:
        if start >= end or any(taken[start:end]):
            return
        for i in range(start, end):
            taken[i] = True
        spans.append(Span(start, end, text[start:end], kind))

    def add_all(pattern: re.Pattern[str], kind: SpanKind, keep: Callable[[str], bool] | None = None) -> None:
        for m in _url_matches(text) if pattern is _URL_RE else pattern.finditer(text):
            group = m.lastgroup or 0  # a named group, where there is one, is the span
            if keep is None or keep(m.group(group)):
                add(m.start(group), m.end(group), kind)

    add_all(_FENCE_RE, SpanKind.CODE)
    add_all(_BACKTICK_RE, SpanKind.CODE)
    add_all(_URL_RE, SpanKind.URL)
    add_all(TAG_RE, SpanKind.TAG)
    add_all(_PLACEHOLDER_RE, SpanKind.PLACEHOLDER)
    add_all(_BRACE_CODE_RE, SpanKind.CODE)
    add_all(_CALL_LIST_RE, SpanKind.CALL)
    add_all(_ENUM_LIST_RE, SpanKind.CODE)
    add_all(_CALL_RE, SpanKind.CALL, _call_is_code)
    add_all(_FORMAT_RE, SpanKind.FORMAT)
    # Longest names first so "get_weather_now" wins over "get_weather".
    ordered = sorted({n for n in names if n and n.strip()}, key=len, reverse=True)
    words = _word_starts(text) if len(ordered) > _MANY_NAMES else None
    for name in ordered:
        for start, end in _name_matches(text, name, words):
            add(start, end, SpanKind.NAME)
    add_all(_QUOTED_RE, SpanKind.QUOTED)
    add_all(_LITERAL_RE, SpanKind.CODE)
    add_all(_IDENT_RE, SpanKind.IDENTIFIER, lambda s: not _dotted_is_prose(s))
    spans.sort(key=lambda s: s.start)
    return spans


@dataclass(frozen=True)
class Masked:
    """A text with its protected spans replaced by tokens ``⟦1⟧``, ``⟦2⟧``, ...

    ``originals[i]`` is what token ``i + 1`` stands for.
    """

    text: str
    originals: tuple[str, ...]

    @property
    def has_prose(self) -> bool:
        """Whether anything besides tokens, digits and punctuation is left to translate."""
        return bool(re.search(r"[^\W\d_]", TOKEN_RE.sub("", self.text)))


def mask(text: str, names: Iterable[str] = ()) -> Masked:
    """Replace every protected span of ``text`` by a token."""
    # Adjacent spans (``<TOOLCALL>{output_format}</TOOLCALL>``) become one token:
    # fewer tokens for the translator to carry, and they cannot be reordered apart.
    merged: list[tuple[int, int]] = []
    for span in find_spans(text, names):
        if merged and merged[-1][1] == span.start:
            merged[-1] = (merged[-1][0], span.end)
        else:
            merged.append((span.start, span.end))
    out: list[str] = []
    originals: list[str] = []
    pos = 0
    for start, end in merged:
        out.append(text[pos:start])
        originals.append(text[start:end])
        out.append(f"⟦{len(originals)}⟧")
        pos = end
    out.append(text[pos:])
    return Masked("".join(out), tuple(originals))


def unmask(translated: str, masked: Masked) -> tuple[str, list[str]]:
    """Put the protected spans back; return the text and what was wrong with the tokens.

    An empty list means every token came back exactly once and nothing else
    that looks like a token was invented. Tokens a translator dropped cannot
    be restored; tokens it invented are left as they are, so the damage stays
    visible.
    """
    problems: list[str] = []
    found = Counter(int(m.group(1)) for m in TOKEN_RE.finditer(translated))
    expected = Counter(int(m.group(1)) for m in TOKEN_RE.finditer(masked.text))
    for n in sorted(expected):
        if found[n] < expected[n]:
            problems.append(f"protected span {masked.originals[n - 1]!r} is missing")
        elif found[n] > expected[n]:
            problems.append(f"protected span {masked.originals[n - 1]!r} appears {found[n]} times")
    for n in sorted(set(found) - set(expected)):
        problems.append(f"unknown token ⟦{n}⟧ in the translation")

    def put_back(m: re.Match[str]) -> str:
        n = int(m.group(1))
        return masked.originals[n - 1] if 1 <= n <= len(masked.originals) else m.group(0)

    restored = TOKEN_RE.sub(put_back, translated)
    if "⟦" in TOKEN_RE.sub("", translated) or "⟧" in TOKEN_RE.sub("", translated):
        problems.append("a token came back damaged")
    return restored, problems
