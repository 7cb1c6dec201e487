"""Lenient XML reading for ``parse_any``: any ``<functions>`` blocks or bare
``<function>`` elements, both XML shapes, lenient type names, regex recovery
of malformed XML, and made-up call tags (``other_xml``).

Parsing itself goes through ``_xml.parse_tree`` (hardened expat); the regex
recovery runs only on short regions and only when expat rejects the XML.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from promptgrid.variants import ReturnFormat

from ._fail import Fail
from ._limits import MAX_SCAN_ATTEMPTS, MAX_XML_ELEMENTS
from ._pyast import literal_value
from ._result import EITHER_XML, OTHER_XML, ParseFailure
from ._xml import FAST_PATH_MAX_CHARS, KNOWN_TYPES, Node, has_dtd, parse_tree, shape_of
from ._xmlfast import fast_xml_calls, items_in_prompt_shape

__all__ = ["XmlFound", "find_xml_calls"]

#: Common type names models write instead of the prompt's.
TYPE_ALIASES = {
    "str": "string", "text": "string", "int": "integer", "long": "integer",
    "number": "float", "double": "float", "decimal": "float", "bool": "boolean",
    "list": "array", "none": "null", "map": "dict", "json": "dict",
}

_FUNCTIONS_OPEN_RE = re.compile(r"<functions(?:\s[^<>]*)?>")
_FUNCTION_START_RE = re.compile(r"<function[\s>/]")
# Regex recovery for malformed XML: <function name="..."> ... <param .../> or <param ...>text</param>
_REC_FUNCTION_RE = re.compile(r"<function\s+name\s*=\s*\\*([\"'])(.{0,200}?)\\*\1[^<>]{0,2000}?(/?)>", re.DOTALL)
_REC_PARAM_RE = re.compile(r"<param\b([^<>]*)>")
_REC_ATTR_RE = re.compile(r"([\w:.-]+)\s*=\s*\\*([\"'])(.*?)\\*\2", re.DOTALL)
_REC_PARAM_CLOSE_RE = re.compile(r"</param\s*>")
_MAX_RECOVER_CHARS = 100_000


def _lenient_value(raw: str, type_name: str, unknown: list[str]) -> Any:
    t = type_name.strip().lower()
    if t not in KNOWN_TYPES:
        if type_name not in unknown:
            unknown.append(type_name)
        t = TYPE_ALIASES.get(t, "string")
    try:
        if t == "integer":
            return int(raw)
        if t == "float":
            return float(raw)
        if t == "boolean":
            return raw.strip().lower() == "true"
        if t == "null":
            return None
        if t in ("array", "tuple", "object", "dict"):
            return literal_value(raw)
    except (ValueError, Fail):
        return raw
    return raw


def _lenient_decode(root: Node, unknown: list[str]) -> list[dict[str, dict[str, Any]]]:
    calls = []
    for func in root.children:
        if func.tag != "function" or "name" not in func.attrib:
            continue
        params: list[Node] = []
        for child in func.children:
            if child.tag == "params":
                params.extend(p for p in child.children if p.tag == "param")
            elif child.tag == "param":
                params.append(child)
        args: dict[str, Any] = {}
        for p in params:
            pname = p.attrib.get("name")
            if pname is None:
                continue
            raw = p.attrib["value"] if "value" in p.attrib else p.text.strip()
            args[pname] = _lenient_value(raw, p.attrib.get("type", "string"), unknown)
        calls.append({func.attrib["name"]: args})
    return calls


def _unescape(text: str) -> str:
    return html.unescape(text) if "&" in text else text


def _recover(region: str, unknown: list[str]) -> tuple[list[dict[str, dict[str, Any]]], ReturnFormat | None]:
    """Calls from malformed XML by regex (unclosed tags, backslash-escaped quotes).

    Best effort, for ``parse_any`` only; skipped on long regions (the regexes
    are linear per match but not overall on adversarial text).
    """
    calls: list[dict[str, dict[str, Any]]] = []
    if len(region) > _MAX_RECOVER_CHARS:
        return calls, None
    items, shape = items_in_prompt_shape(region)
    complete = (len(items) == region.count("<function ") + region.count("<function\n")
                and sum(len(p) for _, p in items) == region.count("<param ") + region.count("<param\n"))
    if items and complete and "&" not in region and "\\" not in region:
        for name, raw_params in items:
            calls.append({name: {p: _lenient_value(raw, t, unknown) for p, (raw, t) in raw_params.items()}})
        return calls, shape
    verbose = concise = 0
    starts = list(_REC_FUNCTION_RE.finditer(region))[:MAX_XML_ELEMENTS]
    for k, fm in enumerate(starts):
        stop = starts[k + 1].start() if k + 1 < len(starts) else len(region)
        args: dict[str, Any] = {}
        if not fm.group(3):
            for pm in _REC_PARAM_RE.finditer(region, fm.end(), stop):
                inside = pm.group(1)
                empty = inside.rstrip().endswith("/")
                attrs = {a.group(1): _unescape(a.group(3)) for a in _REC_ATTR_RE.finditer(inside)}
                if "name" not in attrs:
                    continue
                if "value" in attrs:
                    raw = attrs["value"]
                    verbose += 1
                elif not empty:
                    close = _REC_PARAM_CLOSE_RE.search(region, pm.end(), stop)
                    raw = _unescape(region[pm.end():close.start() if close else stop]).strip()
                    concise += 1
                else:
                    raw = ""
                args[attrs["name"]] = _lenient_value(raw, attrs.get("type", "string"), unknown)
        calls.append({_unescape(fm.group(2)): args})
    shape = (ReturnFormat.VERBOSE_XML if verbose > concise else ReturnFormat.CONCISE_XML if concise > verbose
             else None)
    return calls, shape


class XmlFound:
    """What the lenient reader found: calls, spans, shape, per-block count, notes."""

    __slots__ = ("calls", "spans", "detected", "unknown_types", "recovered", "blocks")

    def __init__(self) -> None:
        self.calls: list[dict[str, dict[str, Any]]] = []
        self.spans: list[tuple[int, int]] = []
        self.detected: str | None = None
        self.unknown_types: list[str] = []
        self.recovered = False
        self.blocks = 0


_INT_RE = re.compile(r"[+-]?[0-9]{1,30}")
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _plain_value(text: str) -> Any:
    """A leaf's text with the obvious scalar types (numbers, true/false)."""
    t = text.strip()
    if _INT_RE.fullmatch(t):
        return int(t)
    if _FLOAT_RE.fullmatch(t):
        return float(t)
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    return t


def _other_xml(text: str) -> XmlFound | None:
    """Calls as made-up tags: ``<func_name><param>value</param>...</func_name>``.

    Some tool-tuned models answer this way when asked for BFCL's XML (the blog's
    watt-tool example). Only a text made of such elements and nothing else counts.
    """
    body = text.strip()
    if not (body.startswith("<") and body.endswith(">")) or body.startswith(("<!", "<?")):
        return None
    try:
        root = parse_tree("<calls>" + body + "</calls>")
    except Fail:
        return None
    if root.text.strip() or not root.children:
        return None
    found = XmlFound()
    for call in root.children:
        if call.attrib or any(p.children or p.attrib for p in call.children):
            return None
        if not call.children and call.text.strip():
            return None
        found.calls.append({call.tag: {p.tag: _plain_value(p.text) for p in call.children}})
    found.detected = OTHER_XML
    found.blocks = 1
    found.spans.append((text.find("<"), text.rfind(">") + 1))
    return found


def find_xml_calls(text: str, cheap: bool = False) -> XmlFound | Fail | None:
    """XML calls anywhere in ``text`` (any <functions> blocks, or bare <function>s).

    ``cheap``: the first block only, no regex recovery (for long texts).
    Without any ``<function`` element, a text made only of made-up call tags
    is read as ``other_xml``.
    """
    if "<function" not in text:
        return None if cheap else _other_xml(text)
    if has_dtd(text):
        return Fail(ParseFailure.XML_ENTITY_REFUSED, "XML: DOCTYPE/ENTITY declarations are refused")
    found = XmlFound()
    lenient = _lenient_converter(found.unknown_types)
    regions = _regions(text, cheap)
    shapes = []
    first_fail: Fail | None = None
    for start, end, doc in regions:
        read = _read_region(doc, cheap, found.unknown_types, lenient)
        if isinstance(read, Fail):
            if cheap or read.kind in _FINAL:
                return read
            first_fail = first_fail or read
            continue
        calls, shape, recovered = read
        found.recovered |= recovered
        if calls:
            found.blocks += 1
            found.calls.extend(calls)
            found.spans.append((start, end))
            shapes.append(shape)
    if not found.calls:
        if first_fail is None and regions:
            return Fail(ParseFailure.NOT_A_CALL, "XML: no <function> with a name")
        return first_fail
    known = [s for s in shapes if s is not None]
    found.detected = known[0] if known else EITHER_XML
    return found


# Failures no other region or recovery can undo.
_FINAL = (ParseFailure.TOO_DEEP, ParseFailure.TOO_LARGE, ParseFailure.XML_ENTITY_REFUSED)


def _lenient_converter(unknown: list[str]) -> Callable[[str, str, str], Any]:
    """A converter for ``fast_xml_calls`` applying the lenient type rules (unknown names into ``unknown``)."""
    def lenient(raw: str, type_name: str, param: str) -> Any:
        return _lenient_value(raw, type_name, unknown)

    return lenient


def _regions(text: str, cheap: bool) -> list[tuple[int, int, str]]:
    """(start, end, document) of each <functions> block, else of the bare <function>s wrapped in one; or none."""
    regions: list[tuple[int, int, str]] = []
    pos = 0
    for _ in range(1 if cheap else MAX_SCAN_ATTEMPTS):
        m = _FUNCTIONS_OPEN_RE.search(text, pos) if "<functions" in text else None
        if m is None:
            break
        close = text.find("</functions>", m.end())
        end = len(text) if close < 0 else close + 12
        regions.append((m.start(), end, text[m.start():end]))
        pos = end
    if regions:
        return regions
    m = _FUNCTION_START_RE.search(text)
    if m is None:
        return regions
    last = text.rfind("</function", m.start())
    close = text.find(">", last) if last >= 0 else -1
    end = close + 1 if close >= 0 else len(text)
    return [(m.start(), end, "<functions>" + text[m.start():end] + "</functions>")]


def _read_region(doc: str, cheap: bool, unknown: list[str], lenient: Callable[[str, str, str], Any]
                 ) -> tuple[list[dict[str, dict[str, Any]]], ReturnFormat | None, bool] | Fail:
    """(calls, shape, recovered) of one region, or its failure.

    The prompt's exact shapes first (no tree needed), then expat, then (unless
    ``cheap`` or the failure is final) the regex recovery.
    """
    verbose_first = "value=" in doc
    if len(doc) < FAST_PATH_MAX_CHARS:
        fast = fast_xml_calls(doc, verbose_first, lenient) or fast_xml_calls(doc, not verbose_first, lenient)
        if fast is not None:
            return fast[0], fast[1], False
    try:
        root = parse_tree(doc)
        calls = _lenient_decode(root, unknown)
        shape = shape_of([c for c in root.children if c.tag == "function"])
    except Fail as fail:
        if cheap or fail.kind in _FINAL:
            return fail
        calls, shape = _recover(doc, unknown)
        return (calls, shape, True) if calls else fail
    return calls, shape, False
