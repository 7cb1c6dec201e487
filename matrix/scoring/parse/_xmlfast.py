"""Fast path for XML answers written exactly in the shape the prompt shows.

An expat parse costs as much as bfcl-eval's whole XML decode, whatever builds
the tree. But most answers follow the prompt's example to the letter:

    <functions><function name="f"><params><param name="a" value="1" type="integer"/>...</params></function></functions>
    <functions><function name="f"><param name="a" type="integer">1</param>...</function></functions>

For those, one ``fullmatch`` checks the whole block (C speed) and one
``findall`` extracts functions and parameters. The grammar is deliberately
narrow -- double-quoted attributes in the example's order, whitespace only
between elements, no entities, comments, CDATA, carriage returns, tabs or
newlines inside attribute values, or characters XML forbids -- so that every
accepted block is well-formed XML whose ElementTree reading gives exactly
these values. Anything else returns ``None`` and the expat path decides.
"""

from __future__ import annotations

import re
from typing import Any

from promptgrid.variants import ReturnFormat

# Members bound to module names (an attribute read on an Enum class costs about 0.1 us on Python 3.11).
_VERBOSE_XML, _CONCISE_XML = ReturnFormat.VERBOSE_XML, ReturnFormat.CONCISE_XML

__all__ = ["fast_xml_calls", "items_in_prompt_shape"]

_WS = r"[ \t\n]*"
_SEP = r"[ \t\n]+"
_BANNED = r"<&\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff"  # markup, CR, chars XML forbids
_VAL = r'"[^"\t\n' + _BANNED + r']*"'
_TEXT = r"[^" + _BANNED + r"]*"

_V_PARAM = rf"<param{_SEP}name={_VAL}(?:{_SEP}value={_VAL})?(?:{_SEP}type={_VAL})?{_WS}/>"
_V_FUNC = (rf"<function{_SEP}name={_VAL}{_WS}(?:/>|>{_WS}"
           rf"(?:<params>{_WS}(?:{_V_PARAM}{_WS})*</params>{_WS}|(?:{_V_PARAM}{_WS})*)</function>)")
_VERBOSE_RE = re.compile(rf"<functions>{_WS}(?:{_V_FUNC}{_WS})*</functions>")
# Both item patterns start with a literal "<" so the regex engine can skip ahead.
# A verbose item is a <function> or <param> start tag (closers and <params> are
# not items: fewer matches and groups, which is most of findall's cost); the
# quotes stay in the value and type groups so that an absent attribute ("")
# differs from an empty one ('""').
_VERBOSE_ITEM_RE = re.compile(
    rf'<(function|param){_SEP}name="([^"]*)"(?:{_SEP}value=("[^"]*"))?(?:{_SEP}type=("[^"]*"))?'
)

_C_PARAM = rf"<param{_SEP}name={_VAL}(?:{_SEP}type={_VAL})?{_WS}>{_TEXT}</param>"
_C_FUNC = rf"<function{_SEP}name={_VAL}{_WS}(?:/>|>{_WS}(?:{_C_PARAM}{_WS})*</function>)"
_CONCISE_RE = re.compile(rf"<functions>{_WS}(?:{_C_FUNC}{_WS})*</functions>")
_CONCISE_ITEM_RE = re.compile(
    rf'<(?:(function){_SEP}name="([^"]*)"|param{_SEP}name="([^"]*)"(?:{_SEP}(type)="([^"]*)")?{_WS}>([^<]*)</param>)'
)

Converter = Any  # (raw, type_name, param_name) -> value


def fast_xml_calls(
    doc: str, verbose: bool, convert: Converter
) -> tuple[list[dict[str, dict[str, Any]]], ReturnFormat | None] | None:
    """(calls, detected shape) for a block in the prompt's exact shape, else None.

    ``convert(raw, type_name, param_name)`` applies bfcl-eval's type rules.
    """
    if "]]>" in doc:
        return None
    return _verbose_calls(doc, convert) if verbose else _concise_calls(doc, convert)


def _verbose_calls(
    doc: str, convert: Converter
) -> tuple[list[dict[str, dict[str, Any]]], ReturnFormat | None] | None:
    """``fast_xml_calls`` for the verbose decoder (a concise block is read as expat + ``_xml`` would)."""
    if _VERBOSE_RE.fullmatch(doc) is None:
        return _concise_read_as_verbose(doc, convert)
    calls: list[dict[str, dict[str, Any]]] = []
    args: dict[str, Any] = {}
    evidence = "<params>" in doc  # as in _xml.shape_of: a <params> container or a value= is verbose
    for kind, name, quoted_value, quoted_type in _VERBOSE_ITEM_RE.findall(doc):
        if kind == "function":
            args = {}
            calls.append({name: args})
            continue
        value = quoted_value[1:-1]
        if quoted_value:
            evidence = True
        if not quoted_type or quoted_type == '"string"':
            args[name] = value
        elif quoted_type == '"integer"' and value.isdigit() and value.isascii() and len(value) < 18:
            args[name] = int(value)
        else:
            args[name] = convert(value, quoted_type[1:-1], name)
    return calls, _VERBOSE_XML if evidence else None


def _concise_calls(
    doc: str, convert: Converter
) -> tuple[list[dict[str, dict[str, Any]]], ReturnFormat | None] | None:
    """``fast_xml_calls`` for the concise decoder."""
    if _CONCISE_RE.fullmatch(doc) is None:
        return None
    calls: list[dict[str, dict[str, Any]]] = []
    args: dict[str, Any] = {}
    evidence = 0
    for is_func, fname, pname, has_type, type_name, text in _CONCISE_ITEM_RE.findall(doc):
        if is_func:
            args = {}
            calls.append({fname: args})
        else:
            raw = text.strip()
            evidence += bool(raw)
            if not has_type or type_name == "string":
                args[pname] = raw
            elif type_name == "integer" and raw.isdigit() and raw.isascii() and len(raw) < 18:
                args[pname] = int(raw)
            else:
                args[pname] = convert(raw, type_name, pname)
    return calls, _CONCISE_XML if evidence else None


def _concise_read_as_verbose(
    doc: str, convert: Converter
) -> tuple[list[dict[str, dict[str, Any]]], ReturnFormat | None] | None:
    """A concise block read by the verbose decoder, as expat + ``_xml`` would read it.

    Answering in the other XML format is a common mistake. The verbose reader
    takes each value from a ``value`` attribute, which concise ``<param>``s do
    not have: every value is ``""`` converted by its ``type`` (so
    ``type="integer"`` fails as BAD_VALUE), and the shape is concise where a
    parameter has text. The concise grammar guarantees well-formed XML whose
    tree holds exactly these items, so the result is expat's.
    """
    if _CONCISE_RE.fullmatch(doc) is None:
        return None
    calls: list[dict[str, dict[str, Any]]] = []
    args: dict[str, Any] = {}
    evidence = 0
    for is_func, fname, pname, has_type, type_name, text in _CONCISE_ITEM_RE.findall(doc):
        if is_func:
            args = {}
            calls.append({fname: args})
        else:
            evidence += bool(text.strip())
            args[pname] = "" if not has_type or type_name == "string" else convert("", type_name, pname)
    return calls, _CONCISE_XML if evidence else None


def items_in_prompt_shape(text: str) -> tuple[list[tuple[str, dict[str, tuple[str, str]]]], ReturnFormat | None]:
    """Functions and raw parameters written in the prompt's shape, anywhere in ``text``.

    No validation: this is the first, cheap step of recovering calls from a
    malformed block (an unclosed tag, a stray character). Returns
    ``[(name, {param: (raw, type)})]`` and the shape seen.
    """
    found: list[tuple[str, dict[str, tuple[str, str]]]] = []
    params: dict[str, tuple[str, str]] = {}
    verbose = concise = 0
    for kind, name, quoted_value, quoted_type in _VERBOSE_ITEM_RE.findall(text):
        if kind == "function":
            params = {}
            found.append((name, params))
        elif name and found:
            verbose += bool(quoted_value)
            params[name] = (quoted_value[1:-1], quoted_type[1:-1] if quoted_type else "string")
    if not verbose:
        found, params = [], {}
        for is_func, fname, pname, has_type, type_name, ptext in _CONCISE_ITEM_RE.findall(text):
            if is_func:
                params = {}
                found.append((fname, params))
            elif found:
                concise += bool(ptext.strip())
                params[pname] = (ptext.strip(), type_name if has_type else "string")
    shape = _VERBOSE_XML if verbose else _CONCISE_XML if concise else None
    return found, shape
