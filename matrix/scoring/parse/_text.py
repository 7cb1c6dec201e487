"""Text around the calls: bfcl-eval's bracket wrapping, <TOOLCALL> blocks,
Markdown code fences, and whether anything left over is prose.

All searches are ``str.find`` or precompiled linear regexes: the text may be
a megabyte of anything. (bfcl-eval's ``<TOOLCALL>(.*?)</TOOLCALL>`` regex is
quadratic on many unclosed tags; the first-open/first-close search below finds
the same block in linear time.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "TAG_CLOSE",
    "TAG_OPEN",
    "BfclText",
    "Blocks",
    "bfcl_bracketed",
    "ends_cut",
    "fenced_pieces",
    "has_fence",
    "is_prose",
    "might_have_tag",
    "toolcall_blocks",
]

TAG_OPEN = "<TOOLCALL>"
TAG_CLOSE = "</TOOLCALL>"
_ANY_TAG_RE = re.compile(r"<[ \t]*(/?)[ \t]*toolcall[ \t]*>", re.IGNORECASE)
_FENCE_MARK_RE = re.compile(r"```[ \t]*[A-Za-z0-9_+.-]*")
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n`]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_NOT_PROSE = " \t\r\n`'\"[](),;:.!"
_MAX_BLOCKS = 1000
_PROSE_WINDOW = 10_000
_CUT_MAX_CHARS = 100_000
_CLOSER = {"(": ")", "[": "]", "{": "}"}
_FIRST_BRACKET_RE = re.compile(r"[\[({]")
# What ``ends_cut`` reads, as (bracket, closing single quote, closing double
# quote): a bracket, or a string (a backslash escapes the next character; the
# closing quote's group is empty when the text ends first). A quote always
# starts a match, so each string is read once, left to right.
_CUT_TOKEN_RE = re.compile(r"""([()\[\]{}])|'[^'\\]*(?:\\.[^'\\]*)*(')?|"[^"\\]*(?:\\.[^"\\]*)*(")?""", re.DOTALL)


def bfcl_bracketed(text: str) -> str:
    """``BfclText(text).s`` alone (what the verdict-only decode needs)."""
    core = text.strip("`\n ")
    s = core if core.startswith("[") else "[" + core
    return s if s.endswith("]") else s + "]"


class BfclText:
    """bfcl-eval's pre-processing of a response, with a map back to the text.

    ``default_decode_ast_prompting`` strips backticks, newlines and spaces
    from both ends, then adds ``[`` / ``]`` when missing; the decoders then
    work on that string ``s``.
    """

    __slots__ = ("text", "s", "lead", "added", "core_len")

    def __init__(self, text: str) -> None:
        core = text.strip("`\n ")
        self.text = text
        self.lead = len(text) - len(text.lstrip("`\n ")) if core else len(text)
        self.core_len = len(core)
        self.added = 0 if core.startswith("[") else 1
        s = core if not self.added else "[" + core
        self.s = s if s.endswith("]") else s + "]"

    def to_text(self, pos: int) -> int:
        """A position in ``s`` mapped to the original text (clamped to the core)."""
        return self.lead + min(max(pos - self.added, 0), self.core_len)


@dataclass(frozen=True)
class Blocks:
    """<TOOLCALL> blocks of a text (any letter case), for the lenient reader."""

    contents: tuple[tuple[int, int], ...]  # (start, end) of each block's content
    outside: str  # the text with every block removed
    unclosed: bool  # the last tag was opened and never closed
    exact: bool  # a tag spelled exactly <TOOLCALL> is present


def might_have_tag(text: str) -> bool:
    """Cheap pre-check before the (slower) tag regex: plain finds, no copy."""
    return "oolcall" in text or "OOLCALL" in text or "oolCall" in text


def toolcall_blocks(text: str) -> Blocks | None:
    """Every <TOOLCALL>...</TOOLCALL> block; an unclosed last one runs to the end."""
    if not might_have_tag(text):
        return None
    contents: list[tuple[int, int]] = []
    outside: list[str] = []
    pos = 0
    open_at: int | None = None
    for n, m in enumerate(_ANY_TAG_RE.finditer(text)):
        if n > _MAX_BLOCKS * 2:
            break
        closing = bool(m.group(1))
        if not closing and open_at is None:
            outside.append(text[pos:m.start()])
            open_at = m.end()
        elif closing and open_at is not None:
            contents.append((open_at, m.start()))
            open_at = None
            pos = m.end()
    unclosed = open_at is not None
    if unclosed:
        contents.append((open_at, len(text)))  # type: ignore[arg-type]
    else:
        outside.append(text[pos:])
    if not contents:
        return None
    return Blocks(tuple(contents), "".join(outside), unclosed, TAG_OPEN in text)


def has_fence(text: str) -> bool:
    return "```" in text


def fenced_pieces(text: str) -> tuple[list[tuple[int, int]], str] | None:
    """Contents of Markdown code fences (spans) and the text outside them, or None."""
    if "```" not in text:
        return None
    spans: list[tuple[int, int]] = []
    outside: list[str] = []
    pos = 0
    for m in _FENCE_RE.finditer(text):
        outside.append(text[pos:m.start()])
        spans.append((m.start(2), m.end(2)))
        pos = m.end()
        if len(spans) >= _MAX_BLOCKS:
            break
    outside.append(text[pos:])
    return spans, "".join(outside)


def is_prose(rest: str) -> bool:
    """Whether leftover text is prose (not just whitespace, fences, tags, quotes, brackets).

    A leftover over 20,000 characters is judged by its first and last 10,000
    (bounded time on hostile input; real answers are far shorter).
    """
    if not rest or rest.isspace():
        return False
    if len(rest) > 2 * _PROSE_WINDOW:
        rest = rest[:_PROSE_WINDOW] + "\n" + rest[-_PROSE_WINDOW:]
    if "`" in rest:
        rest = _FENCE_MARK_RE.sub("", rest)
    if "<" in rest and might_have_tag(rest):
        rest = rest.replace(TAG_OPEN, "").replace(TAG_CLOSE, "")  # C speed for the usual spelling
        if might_have_tag(rest):
            rest = _ANY_TAG_RE.sub("", rest)
    return bool(rest.strip(_NOT_PROSE))


def ends_cut(text: str) -> bool:
    """Whether the text stops mid-call, as an answer cut at the token limit does.

    Cut means: the text ends inside a Markdown code fence that is never closed
    and whose content is empty or itself cut; or inside an XML ``<functions>``
    block that is never closed (a text with a closed one is not cut: an element
    left open inside it is a broken call); or inside a string or an open bracket, counted
    from the first bracket of the call text (so an apostrophe in the prose
    before it is not a string). A bracket closed by the wrong bracket is a
    broken call, not a cut one. Texts over 100,000 characters are not judged
    (False): bounded time on hostile input.
    """
    if len(text) > _CUT_MAX_CHARS:
        return False
    region = _after_open_fence(text)
    if region is None:
        return True
    opened = region.rfind("<functions")
    if opened >= 0:
        # XML: its quotes are attribute delimiters, not strings; only the block's end counts.
        return region.find("</functions>", opened) < 0
    return _ends_open(region)


def _after_open_fence(text: str) -> str | None:
    """The content of a last code fence left open (None when it is empty), or the whole text when none is."""
    if not text.count("```") % 2:
        return text
    region = text[text.rfind("```") + 3:]
    newline = region.find("\n")
    region = "" if newline < 0 and _FENCE_MARK_RE.fullmatch("```" + region.strip()) else region[newline + 1:]
    return region if region.strip() else None


def _ends_open(region: str) -> bool:
    """Whether ``region`` ends inside a string or an open bracket, from its first bracket on (False at a mismatch)."""
    m = _FIRST_BRACKET_RE.search(region)
    if m is None:
        return False
    stack: list[str] = []
    for bracket, single, double in _CUT_TOKEN_RE.findall(region, m.start()):
        if bracket in _CLOSER:
            stack.append(_CLOSER[bracket])
        elif bracket:
            if not stack or stack.pop() != bracket:
                return False
        elif not (single or double):
            return True  # a string that is never closed
    return bool(stack)
