"""A llama.cpp GBNF grammar per (functions, return format, tool-call tag).

Every sentence of ``gbnf_grammar(functions, fmt, tag)`` is an answer that
``parse_response(text, fmt, tag)`` reads as 1 to ``max_calls`` calls of the
case's functions, each with its required parameters (in declaration order,
then any of its optional ones, in declaration order) and values of the
declared types. Built from the function names and parameter types only;
never from a ground truth.

Values per declared kind:

- string: a quoted string (python: double quotes with ``\\" \\\\ \\n \\t``
  escapes; json: the same plus ``\\/``; XML: the raw text, with the five XML
  entities, no control characters, ``<``, ``>`` or ``&`` unescaped: ``]]>`` is
  not well-formed); an ``enum`` is the alternatives instead;
- integer: ``-?(0|[1-9][0-9]{0,15})``; float: the same with ``.`` and 1-15
  digits (a float is always written with a decimal point);
- boolean: ``True``/``False`` (python), ``true``/``false`` (json, XML);
- array/tuple: ``[...]`` of up to ``max_items`` values of the item kind (any
  value when no item schema); dict with properties: an object/dict literal
  with the declared keys (same required/optional rule as parameters); dict
  without properties: string keys to any values;
- any: any literal, nested at most ``ANY_DEPTH`` levels.

XML values: scalars as text under the matching ``type`` attribute, arrays
and dicts as Python literals with single-quoted strings (the parser
``literal_eval``s them) that hold no ``"``, ``'``, ``\\``, ``<``, ``>`` or ``&``.
In the python format, functions whose names are not dotted identifiers, and
optional parameters that are not identifiers (or are keywords such as
``from``), are left out (such a required parameter leaves its function out):
Python cannot write such calls.

Bounds so generation ends: at most ``max_calls`` calls, ``max_items`` items
per array/dict, ``max_string`` characters per string, 16 digits per number,
0-2 whitespace characters where whitespace is allowed.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Mapping, Sequence
from typing import Any

from promptgrid.variants import ReturnFormat

from ._format import python_literal, xml_type
from ._schema import MAX_CALLS, ConstraintError
from ._types import Schema, items_of, kind, properties_of, required_params

__all__ = ["ANY_DEPTH", "MAX_ITEMS", "MAX_STRING", "gbnf_grammar"]

MAX_ITEMS = 16
MAX_STRING = 128
ANY_DEPTH = 2

_ATTR_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;",
                               "\n": "&#10;", "\t": "&#9;"})
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})

# Shared primitive rules (name -> body). Dialects: "py" (Python), "json", "xl" (Python literal inside XML).
# Never in a string: control characters and surrogates (not text; llama.cpp would emit them as
# invalid UTF-8); XML also forbids U+FFFE and U+FFFF.
_BANNED = r"\x00-\x1f\uD800-\uDFFF"
_XML_BANNED = _BANNED + r"\uFFFE\uFFFF"
_PRIMITIVES = {
    "ws": r"[ \t\n]{0,2}",
    "int": r'"-"? ("0" | [1-9] [0-9]{0,15})',
    "float": r'"-"? ("0" | [1-9] [0-9]{0,15}) "." [0-9]{1,15}',
    "py-char": r'[^"\\' + _BANNED + r'] | "\\" ["\\nt]',
    "json-char": r'[^"\\' + _BANNED + r'] | "\\" ["\\/nt]',
    "xl-char": r"[^\"'\\<>&" + _XML_BANNED + "]",
    "xml-entity": r'"&" ("amp" | "lt" | "gt" | "quot" | "apos") ";"',
    "attr-char": r'[^"<>&' + _XML_BANNED + r"] | xml-entity",
    "text-char": r"[^<>&" + _XML_BANNED + r"] | xml-entity",
}
_BOOL = {"py": '"True" | "False"', "json": '"true" | "false"', "xl": '"True" | "False"'}
_NULL = {"py": '"None"', "json": '"null"', "xl": '"None"'}
_QUOTE = {"py": '"\\""', "json": '"\\""', "xl": "\"'\""}


def lit(text: str) -> str:
    """``text`` as a GBNF string literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class _Builder:
    """Collects rules, sharing identical bodies under one name."""

    def __init__(self, max_items: int, max_string: int) -> None:
        self.rules: dict[str, str] = {}
        self.names_by_body: dict[str, str] = {}
        self.max_items = max_items
        self.max_string = max_string

    def prim(self, name: str) -> str:
        """A primitive rule's name (added on first use, with the primitives it uses)."""
        if name not in self.rules:
            if name in ("attr-char", "text-char"):
                self.prim("xml-entity")
            self.rules[name] = _PRIMITIVES[name]
        return name

    def rule(self, hint: str, body: str) -> str:
        """A rule with this body (reusing an identical one); returns its name."""
        known = self.names_by_body.get(body)
        if known is not None:
            return known
        base = re.sub(r"[^a-zA-Z0-9]+", "-", hint).strip("-").lower()[:40] or "r"
        name, n = base, 1
        while name in self.rules or name in _PRIMITIVES:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        self.names_by_body[body] = name
        return name

    def render(self, root: str) -> str:
        lines = [f"root ::= {root}"]
        lines += [f"{name} ::= {body}" for name, body in self.rules.items()]
        return "\n".join(lines) + "\n"

    # -- sequences -------------------------------------------------------------------

    def seq(self, hint: str, required: list[str], optional: list[str], sep: str) -> str:
        """Required items in order, then any subset of the optional ones in order, separated by ``sep``.

        Returns a (possibly empty) GBNF expression; tails are shared rules, so
        the size is linear in the number of items.
        """
        tails: list[str] = [""] * (len(optional) + 1)
        for i in range(len(optional) - 1, -1, -1):
            rest = tails[i + 1]
            body = f"({sep} {optional[i]})? {rest}".strip()
            tails[i] = self.rule(f"{hint}-tail", body)
        if required:
            return " ".join([required[0]] + [f"{sep} {r}" for r in required[1:]] + ([tails[0]] if optional else []))
        if not optional:
            return ""
        starts = [f"{optional[i]} {tails[i + 1]}".strip() for i in range(len(optional))]
        return f"({self.rule(f'{hint}-opts', ' | '.join(starts))})?"

    # -- values ----------------------------------------------------------------------------

    def string(self, dialect: str) -> str:
        char = self.prim({"py": "py-char", "json": "json-char", "xl": "xl-char"}[dialect])
        q = _QUOTE[dialect]
        return self.rule(f"{dialect}-string", f"{q} ({char}){{0,{self.max_string}}} {q}")

    def literal(self, value: Any, dialect: str) -> str:
        if dialect == "json":
            return lit(json.dumps(value, ensure_ascii=False))
        if dialect == "py":
            return lit(python_literal(value))
        if isinstance(value, str):  # "xl": single-quoted, and nothing XML would need escaped
            return lit(repr(value).translate(_ATTR_ESCAPES))
        return lit(python_literal(value).translate(_ATTR_ESCAPES))

    def array(self, item: str, dialect: str) -> str:
        ws = self.prim("ws")
        more = f'("," {ws} {item}){{0,{self.max_items - 1}}}'
        return self.rule(f"{dialect}-array-{item}", f'"[" {ws} ({item} {more})? {ws} "]"')

    def any_value(self, dialect: str, depth: int = ANY_DEPTH) -> str:
        scalars = [self.string(dialect), self.prim("float"), self.prim("int"),
                   self.rule(f"{dialect}-bool", _BOOL[dialect]), self.rule(f"{dialect}-null", _NULL[dialect])]
        if depth > 0:
            inner = self.any_value(dialect, depth - 1)
            scalars += [self.array(inner, dialect), self.free_dict(dialect, inner)]
        return self.rule(f"{dialect}-any{depth}", " | ".join(scalars))

    def free_dict(self, dialect: str, value: str | None = None) -> str:
        ws = self.prim("ws")
        value = value or self.any_value(dialect, ANY_DEPTH - 1)
        member = self.rule(f"{dialect}-member-{value}", f'{self.string(dialect)} {ws} ":" {ws} {value}')
        more = f'("," {ws} {member}){{0,{self.max_items - 1}}}'
        return self.rule(f"{dialect}-dict-{value}", f'"{{" {ws} ({member} {more})? {ws} "}}"')

    def value(self, p: Schema, dialect: str, hint: str) -> str:
        """The rule for a value of schema ``p`` in ``dialect``."""
        enum = p.get("enum")
        if isinstance(enum, list) and enum:
            return self.rule(f"{hint}-enum", " | ".join(dict.fromkeys(self.literal(v, dialect) for v in enum)))
        k = kind(p)
        if k == "string":
            return self.string(dialect)
        if k == "integer":
            return self.prim("int")
        if k == "float":
            return self.prim("float")
        if k == "boolean":
            return self.rule(f"{dialect}-bool", _BOOL[dialect])
        if k in ("array", "tuple"):
            items = items_of(p)
            item = self.any_value(dialect, ANY_DEPTH - 1) if items is None else self.value(items, dialect,
                                                                                          f"{hint}-item")
            return self.array(item, dialect)
        if k == "dict":
            props = properties_of(p)
            if not props:
                return self.free_dict(dialect)
            ws = self.prim("ws")
            members = {}
            for name, sub in props.items():
                members[name] = self.rule(f"{hint}-{name}", f'{self.literal(name, dialect)} {ws} ":" {ws} '
                                                            f'{self.value(sub, dialect, f"{hint}-{name}")}')
            req = required_params(p)
            body = self.seq(hint, [members[n] for n in req], [members[n] for n in props if n not in req],
                            f'"," {ws}')
            return self.rule(f"{hint}-obj", f'"{{" {ws} {body} {ws} "}}"')
        return self.any_value(dialect)

    # -- XML parameter values ----------------------------------------------------------------

    def xml_value(self, p: Schema, verbose: bool, hint: str) -> list[tuple[str, str]]:
        """(type attribute, value rule) alternatives for one XML parameter."""
        enum = p.get("enum")
        if isinstance(enum, list) and enum:
            by_type: dict[str, list[str]] = {}
            for v in enum:
                raw = v if isinstance(v, str) else ("true" if v is True else "false" if v is False
                                                    else "" if v is None else python_literal(v))
                escaped = raw.translate(_ATTR_ESCAPES if verbose else _TEXT_ESCAPES)
                by_type.setdefault(xml_type(v), []).append(lit(escaped))
            return [(t, self.rule(f"{hint}-enum-{t}", " | ".join(dict.fromkeys(alts)))) for t, alts in by_type.items()]
        k = kind(p)
        if k in ("string", "any"):
            text_char = self.prim("attr-char" if verbose else "text-char")
            text = self.rule("xml-attr-string" if verbose else "xml-text-string",
                             f"({text_char}){{0,{self.max_string}}}")
        if k == "string":
            return [("string", text)]
        if k == "integer":
            return [("integer", self.prim("int"))]
        if k == "float":
            return [("float", self.prim("float"))]
        if k == "boolean":
            return [("boolean", self.rule("xml-bool", '"true" | "false"'))]
        if k in ("array", "tuple", "dict"):
            return [({"tuple": "tuple", "dict": "dict"}.get(k, "array"), self.value(p, "xl", hint))]
        return [("string", text), ("integer", self.prim("int")), ("float", self.prim("float")),
                ("boolean", self.rule("xml-bool", '"true" | "false"')),
                ("array", self.array(self.any_value("xl", ANY_DEPTH - 1), "xl")), ("dict", self.free_dict("xl"))]


def _xml_attr(text: str) -> str:
    return text.translate(_ATTR_ESCAPES)


def _identifier(name: str) -> bool:
    """Whether Python can write ``name`` as a keyword argument (``from`` cannot)."""
    return name.isidentifier() and not keyword.iskeyword(name)


def _python_name_ok(name: str) -> bool:
    return all(_identifier(part) for part in name.split("."))


def _call_rule(b: _Builder, f: Mapping[str, Any], fmt: ReturnFormat, hint: str) -> str | None:
    """The rule for one call of ``f`` in ``fmt``, or ``None`` when ``fmt`` cannot write it."""
    name = str(f.get("name", ""))
    params = f.get("parameters")
    if not isinstance(params, Mapping):
        params = {}
    props = properties_of(params)
    req = required_params(params)
    ws = b.prim("ws")
    if fmt is ReturnFormat.PYTHON:
        if not _python_name_ok(name) or not all(_identifier(n) for n in req):
            return None
        args = {n: b.rule(f"{hint}-{n}", f'{lit(n + "=")} {b.value(sub, "py", f"{hint}-{n}")}')
                for n, sub in props.items() if _identifier(n)}
        body = b.seq(hint, [args[n] for n in req], [args[n] for n in args if n not in req], f'"," {ws}')
        return b.rule(f"{hint}-call", f'{lit(name + "(")} {ws} {body} {ws} ")"')
    if fmt is ReturnFormat.JSON:
        args = {n: b.rule(f"{hint}-{n}", f'{lit(json.dumps(n, ensure_ascii=False))} {ws} ":" {ws} '
                                         f'{b.value(sub, "json", f"{hint}-{n}")}')
                for n, sub in props.items()}
        body = b.seq(hint, [args[n] for n in req], [args[n] for n in args if n not in req], f'"," {ws}')
        head = lit('{"function": ' + json.dumps(name, ensure_ascii=False) + ', "parameters": {')
        return b.rule(f"{hint}-call", f'{head} {ws} {body} {ws} "}}}}"')
    verbose = fmt is ReturnFormat.VERBOSE_XML
    args = {}
    for n, sub in props.items():
        alts = []
        open_tag = '<param name="' + _xml_attr(n) + '"'
        for type_name, value in b.xml_value(sub, verbose, f"{hint}-{n}"):
            if verbose:
                before, after = open_tag + ' value="', '" type="' + type_name + '"/>'
            else:
                before, after = open_tag + ' type="' + type_name + '">', "</param>"
            alts.append(f"{lit(before)} {value} {lit(after)}")
        args[n] = b.rule(f"{hint}-{n}", " | ".join(alts))
    body = b.seq(hint, [args[n] for n in req], [args[n] for n in args if n not in req], ws)
    head = f'<function name="{_xml_attr(name)}">'
    if verbose:
        return b.rule(f"{hint}-call", f'{lit(head + "<params>")} {ws} {body} {ws} "</params></function>"')
    return b.rule(f"{hint}-call", f'{lit(head)} {ws} {body} {ws} "</function>"')


def gbnf_grammar(functions: Sequence[Mapping[str, Any]], return_format: ReturnFormat | str, tool_call_tag: bool,
                 *, max_calls: int = MAX_CALLS, max_items: int = MAX_ITEMS, max_string: int = MAX_STRING,
                 min_calls: int = 1) -> str:
    """The GBNF grammar of answers calling ``functions`` in ``return_format`` (see the module docstring).

    ``min_calls=0`` also admits the empty answer of the format (``[]``,
    ``<functions></functions>``): a conversation's model ends its turn with it.
    Raises :class:`ConstraintError` when no function can be written in the
    format (or there are none), or a bound is below 1.
    """
    fmt = ReturnFormat(return_format)
    if min(max_calls, max_items, max_string) < 1:
        raise ConstraintError("max_calls, max_items and max_string must be at least 1")
    if min_calls not in (0, 1):
        raise ConstraintError("min_calls must be 0 or 1")
    b = _Builder(max_items, max_string)
    calls = [c for i, f in enumerate(functions)
             if (c := _call_rule(b, f, fmt, f"f{i}-{f.get('name', '')}")) is not None]
    if not calls:
        raise ConstraintError(f"no function of this case can be written in the {fmt.value} return format"
                              if functions else "a case without functions cannot be constrained to calls")
    ws = b.prim("ws")
    call = b.rule("call", " | ".join(calls))
    sep = f'"," {ws}' if fmt in (ReturnFormat.PYTHON, ReturnFormat.JSON) else ws
    many = f"{call} ({sep} {call}){{0,{max_calls - 1}}}" if max_calls > 1 else call
    if min_calls == 0:
        many = f"({many})?"
    if fmt in (ReturnFormat.PYTHON, ReturnFormat.JSON):
        inner = f'"[" {ws} {many} {ws} "]"'
    else:
        inner = f'"<functions>" {ws} {many} {ws} "</functions>"'
    root = f'"<TOOLCALL>" {inner} "</TOOLCALL>"' if tool_call_tag else inner
    return b.render(root)
