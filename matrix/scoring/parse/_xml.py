"""XML call lists, verbose and concise:

    <functions><function name="f"><params><param name="a" value="1" type="integer"/></params></function></functions>
    <functions><function name="f"><param name="a" type="integer">1</param></function></functions>

bfcl-eval cuts the first ``<functions>...</functions>`` out of the text and
parses it with ``xml.etree.ElementTree``. Here the same block is parsed by
expat directly (the parser under both ElementTree and xmltodict) into a
minimal tree with ElementTree's semantics -- an element's text is the
character data before its first child, comments and processing instructions
are skipped, namespace prefixes must be bound -- and with everything that
could make XML expensive refused: a DOCTYPE or entity declaration anywhere in
the answer fails with ``XML_ENTITY_REFUSED`` before expat sees it, and expat
is also set to refuse DTDs, entity declarations, external entities and
parameter entities should one get through; depth and element count are
bounded. (xmltodict is not used: it merges an element's text with its
children's tails and groups children by name, which loses what bfcl-eval's
rules depend on.)

Values are converted by the ``type`` attribute as bfcl-eval does:
integer -> int(), float -> float(), boolean -> ``== "true"`` (any case),
null -> None, array/tuple/object/dict -> literal_eval (bounded), string and
any other name -> the raw string. So ``type="int"`` keeps "40" a string; the
result lists such names in ``unknown_xml_types``.

Blocks written exactly in the prompt's shape skip expat (``_xmlfast``); the
lenient reader for ``parse_any`` is in ``_xmlany``.
"""

from __future__ import annotations

import pyexpat
import re
from typing import Any

from promptgrid.variants import ReturnFormat

from ._fail import Fail
from ._limits import MAX_DEPTH, MAX_XML_ELEMENTS
from ._pyast import literal_value
from ._result import Deviation, ParseFailure
from ._xmlfast import fast_xml_calls

__all__ = [
    "DTD_RE",
    "FAST_PATH_MAX_CHARS",
    "KNOWN_TYPES",
    "Node",
    "XmlDecoded",
    "has_dtd",
    "parse_tree",
    "parse_xml_calls",
    "shape_of",
]

#: A DOCTYPE or ENTITY declaration anywhere: refused before parsing.
DTD_RE = re.compile(r"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
#: The types bfcl-eval's converter knows; others stay raw strings.
KNOWN_TYPES = frozenset(
    {"string", "integer", "float", "boolean", "null", "array", "tuple", "object", "dict"}
)
FAST_PATH_MAX_CHARS = 100_000  # longer blocks go to expat (its limits apply)
_ERR = pyexpat.errors.codes
_UNCLOSED_CODES = frozenset(
    {_ERR[pyexpat.errors.XML_ERROR_TAG_MISMATCH], _ERR[pyexpat.errors.XML_ERROR_NO_ELEMENTS],
     _ERR[pyexpat.errors.XML_ERROR_UNCLOSED_TOKEN]}
)


class Node:
    """An element: tag, attributes, child elements, text before the first child."""

    __slots__ = ("tag", "attrib", "children", "text")

    def __init__(self, tag: str, attrib: dict[str, str]) -> None:
        self.tag = tag
        self.attrib = attrib
        self.children: list[Node] = []
        self.text = ""


class _Refused(Exception):
    pass


class _Limit(Exception):
    def __init__(self, kind: ParseFailure, details: str) -> None:
        super().__init__(details)
        self.kind = kind


class _Builder:
    __slots__ = ("stack", "root", "count")

    def __init__(self) -> None:
        self.stack: list[Node] = []
        self.root: Node | None = None
        self.count = 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.count += 1
        if self.count > MAX_XML_ELEMENTS:
            raise _Limit(ParseFailure.TOO_LARGE, f"XML: more than {MAX_XML_ELEMENTS} elements")
        if len(self.stack) >= MAX_DEPTH:
            raise _Limit(ParseFailure.TOO_DEEP, f"XML: elements nested deeper than {MAX_DEPTH}")
        node = Node(tag, attrib)
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.root = node
        self.stack.append(node)

    def end(self, tag: str) -> None:
        self.stack.pop()

    def data(self, text: str) -> None:
        if self.stack:
            node = self.stack[-1]
            if not node.children:  # after a child it is that child's tail
                node.text += text


def _refuse(*args: Any) -> Any:
    """Any DTD, entity declaration or external entity reference: stop parsing."""
    raise _Refused


def has_dtd(text: str) -> bool:
    return "<!" in text and DTD_RE.search(text) is not None


# Recent failures, keyed by the document (the lenient reader re-reads what the
# strict parser just failed on). Trees are not kept: callers own them.
_FAILURES: dict[str, Fail] = {}
_MEMO_SIZE = 64


def parse_tree(doc: str, *, remember: bool = True) -> Node:
    """Parse one XML document into :class:`Node`; raises :class:`Fail`.

    ``remember=False`` keeps a failure out of the memo (no re-read will follow).
    """
    known = _FAILURES.get(doc)
    if known is not None:
        raise known.fresh()
    try:
        return _parse_tree(doc)
    except Fail as fail:
        if not remember:
            raise
        if len(_FAILURES) >= _MEMO_SIZE:
            _FAILURES.clear()
        _FAILURES[doc] = fail  # only ever read through fresh(), never raised again
        raise


def _parse_tree(doc: str) -> Node:
    if has_dtd(doc):
        raise Fail(ParseFailure.XML_ENTITY_REFUSED, "XML: DOCTYPE/ENTITY declarations are refused")
    n_open = doc.count("<")
    if n_open > 2 * MAX_XML_ELEMENTS + 2:  # every element needs a "<": refuse before parsing
        raise Fail(ParseFailure.TOO_LARGE, f"XML: more than {MAX_XML_ELEMENTS} elements",
                   deviation=Deviation.LIMITS)
    if n_open <= MAX_DEPTH:
        fail = _malformed(doc)
        if fail is not None:
            raise fail
    builder = _Builder()
    parser = _new_parser()
    parser.buffer_text = True
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(doc, True)
    except pyexpat.ExpatError as exc:
        raise _expat_failure(exc, doc) from None
    except _Refused:
        raise Fail(ParseFailure.XML_ENTITY_REFUSED, "XML: DTD or entity refused") from None
    except _Limit as exc:
        raise Fail(exc.kind, str(exc), deviation=Deviation.LIMITS) from None
    except (UnicodeError, ValueError, RecursionError) as exc:
        raise Fail(ParseFailure.BAD_SYNTAX, f"XML: {type(exc).__name__}") from None
    if builder.root is None:
        raise Fail(ParseFailure.BAD_SYNTAX, "XML: no element")
    return builder.root


def _malformed(doc: str) -> Fail | None:
    """The failure of a document expat rejects, found at C speed; None if it is well-formed.

    Malformed blocks (an unclosed tag, a stray "&") are common and fail
    whatever the tree holds: a parser that calls Python code only to refuse a
    DTD finds out first. Used only on documents with at most MAX_DEPTH "<"
    (so no limit of the full parse could fire first) and no DTD (``has_dtd``),
    so the failure is the one the full parse reports.
    """
    try:
        _new_parser().Parse(doc, True)
    except pyexpat.ExpatError as exc:
        return _expat_failure(exc, doc)
    except _Refused:
        return Fail(ParseFailure.XML_ENTITY_REFUSED, "XML: DTD or entity refused")
    except (UnicodeError, ValueError) as exc:
        return Fail(ParseFailure.BAD_SYNTAX, f"XML: {type(exc).__name__}")
    return None


def _new_parser() -> Any:
    """A namespace-aware expat parser (as ElementTree's) refusing DTDs, entity declarations, external entities."""
    parser = pyexpat.ParserCreate(None, "}")
    parser.SetParamEntityParsing(pyexpat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse
    parser.EntityDeclHandler = _refuse
    parser.UnparsedEntityDeclHandler = _refuse
    parser.ExternalEntityRefHandler = _refuse
    return parser


def _expat_failure(exc: pyexpat.ExpatError, doc: str) -> Fail:
    message = pyexpat.errors.messages.get(exc.code, str(exc))
    where = f"line {exc.lineno}, column {exc.offset}"
    if exc.code in _UNCLOSED_CODES:
        kind = ParseFailure.UNCLOSED_TAG
    elif "\\\"" in doc or "\\'" in doc:
        kind = ParseFailure.BAD_ESCAPING
    else:
        kind = ParseFailure.BAD_SYNTAX
    return Fail(kind, f"XML: {message} ({where})")


# -- bfcl-eval's strict decode -------------------------------------------------

class XmlDecoded:
    """Calls of one <functions> block plus what the checker's classifier needs."""

    __slots__ = ("calls", "unknown_types", "detected", "deviation")

    def __init__(self) -> None:
        self.calls: list[dict[str, dict[str, Any]]] = []
        self.unknown_types: list[str] = []
        self.detected: str | None = None
        self.deviation: Deviation | None = None


def _convert(raw: str, type_name: str, param: str, out: XmlDecoded) -> Any:
    if type_name == "string":
        return raw
    try:
        if type_name == "integer":
            return int(raw)
        if type_name == "float":
            return float(raw)
    except ValueError:
        raise Fail(ParseFailure.BAD_VALUE, f"XML: {param}={raw[:40]!r} is not a valid {type_name}") from None
    if type_name == "boolean":
        return raw.lower() == "true"
    if type_name == "null":
        return None
    if type_name in ("array", "tuple", "object", "dict"):
        try:
            return literal_value(raw)
        except Fail as fail:
            raise Fail(fail.kind, f"XML: {param} ({type_name}): {fail.details}",
                       deviation=fail.deviation) from None
    if type_name not in out.unknown_types:
        out.unknown_types.append(type_name)
    return raw


def shape_of(functions: list[Node]) -> ReturnFormat | None:
    """``VERBOSE_XML`` / ``CONCISE_XML`` by the evidence in the params, None if none."""
    verbose = concise = 0
    for func in functions:
        for child in func.children:
            if child.tag == "params":
                verbose += 1
                params = child.children
            elif child.tag == "param":
                params = [child]
            else:
                continue
            for_verbose, for_concise = _param_evidence(params)
            verbose += for_verbose
            concise += for_concise
    if verbose > concise:
        return ReturnFormat.VERBOSE_XML
    if concise > verbose:
        return ReturnFormat.CONCISE_XML
    return None


def _param_evidence(params: list[Node]) -> tuple[int, int]:
    """How many ``<param>``s hold a ``value`` attribute (verbose) and how many hold text instead (concise)."""
    verbose = concise = 0
    for p in params:
        if p.tag != "param":
            continue
        if "value" in p.attrib:
            verbose += 1
        elif p.text.strip():
            concise += 1
    return verbose, concise


def parse_xml_calls(body: str, verbose: bool, *, remember: bool = True) -> tuple[XmlDecoded, tuple[int, int], bool]:
    """bfcl-eval's verbose/concise XML decode of ``body``: (decoded, span, more_blocks).

    ``remember=False``: a failure is not memoized for a format-agnostic
    re-read (none follows when only the verdict is wanted).
    """
    i = body.find("<functions>")
    if i < 0:
        raise Fail(ParseFailure.BAD_SYNTAX, "XML: no <functions> element")
    j = body.find("</functions>", i + 11)
    if j < 0:
        raise Fail(ParseFailure.UNCLOSED_TAG, "XML: <functions> is never closed")
    end = j + 12
    doc = body[i:end]
    more = body.find("<functions>", end) >= 0
    out = XmlDecoded()
    if len(doc) < FAST_PATH_MAX_CHARS and not has_dtd(doc):
        fast = fast_xml_calls(doc, verbose, lambda raw, type_name, param: _convert(raw, type_name, param, out))
        if fast is not None:
            out.calls, out.detected = fast
            return out, (i, end), more
    _decode_tree(parse_tree(doc, remember=remember), verbose, out)
    return out, (i, end), more


def _decode_tree(root: Node, verbose: bool, out: XmlDecoded) -> None:
    """bfcl-eval's decode of a parsed <functions> element into ``out`` (calls, shape); raises :class:`Fail`."""
    functions = [f for f in root.children if f.tag == "function"]
    nameless_param = False
    for func in functions:
        try:
            name = func.attrib["name"]
        except KeyError:
            raise Fail(ParseFailure.NOT_A_CALL, "XML: <function> without a name attribute") from None
        if verbose:
            args, nameless = _verbose_args(func, out)
            nameless_param |= nameless
        else:
            args = _concise_args(func, name, out)
        out.calls.append({name: args})
    if nameless_param:
        # bfcl-eval stores such a value under the key None and lets its checker fail.
        raise Fail(ParseFailure.NOT_A_CALL, "XML: <param> without a name attribute",
                   bfcl_error_type=None, deviation=Deviation.NON_STRING_NAME)
    out.detected = shape_of(functions)


def _verbose_args(func: Node, out: XmlDecoded) -> tuple[dict[Any, Any], bool]:
    """A verbose <function>'s arguments (from ``value`` attributes), and whether a <param> has no name."""
    args: dict[Any, Any] = {}
    nameless = False
    container = next((c for c in func.children if c.tag == "params"), None)
    for p in (container or func).children:
        if p.tag != "param":
            continue
        pname = p.attrib.get("name")
        if pname is None:
            nameless = True
        args[pname] = _convert(p.attrib.get("value", ""), p.attrib.get("type", "string"), str(pname), out)
    return args, nameless


def _concise_args(func: Node, name: str, out: XmlDecoded) -> dict[str, Any]:
    """A concise <function>'s arguments (from each <param>'s text); a nameless <param> raises :class:`Fail`."""
    args: dict[str, Any] = {}
    for p in func.children:
        if p.tag != "param":
            continue
        try:
            pname = p.attrib["name"]
        except KeyError:
            raise Fail(ParseFailure.NOT_A_CALL, f"XML: <param> of {name} without a name") from None
        args[pname] = _convert(p.text.strip(), p.attrib.get("type", "string"), pname, out)
    return args
