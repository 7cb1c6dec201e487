"""Translation units: what is translatable, and the key each piece is known by.

Two kinds of units:

- ``instructions``: every string of the English prose catalogs of the built-in
  templates (``templates/catalogs/<catalog>.yaml``: classic, experimental,
  bfcl_v1_zero_shot, massive_one_shot), keyed ``<catalog>.<key>``
  (``classic.persona``). ``formats.yaml`` holds output-format examples and is
  never translated.
- ``descriptions``: the description of each function and of each parameter of
  a dataset, keyed ``<function>.description`` and ``<function>.<param>``,
  nested properties ``<function>.<param>.<child>``.

Never translated: names, types, enum values, defaults, ``{placeholders}``,
tags, code; the unit carries the names to keep verbatim (``protected``), the
rest is found by :mod:`._protect`.

Datasets live above this package (``promptgrid.matrix.datasets``), so
:func:`description_units` takes the functions as an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from promptgrid.errors import TranslationError

from ._protect import is_identifier_like

__all__ = [
    "NEVER_TRANSLATED_CATALOGS",
    "Unit",
    "UnitKind",
    "description_units",
    "english_catalog",
    "instruction_catalog_names",
    "instruction_units",
]

NEVER_TRANSLATED_CATALOGS = ("formats",)


class UnitKind(str, Enum):
    """The two kinds of translatable text."""

    INSTRUCTIONS = "instructions"
    DESCRIPTIONS = "descriptions"


@dataclass(frozen=True)
class Unit:
    """One translatable English string.

    ``protected`` lists names that must come back verbatim (function and
    identifier-like parameter names, enum values, defaults).
    """

    key: str
    kind: UnitKind
    source: str
    protected: tuple[str, ...] = ()


def instruction_catalog_names() -> tuple[str, ...]:
    """The English prose catalogs shipped with the templates (``formats`` excluded)."""
    from promptgrid.templates import builtin_catalog_names

    return tuple(n for n in builtin_catalog_names() if n not in NEVER_TRANSLATED_CATALOGS)


def english_catalog(name: str, *, bfcl_data: str | None = None) -> dict[str, str]:
    """The flat ``key -> English string`` mapping of a built-in catalog.

    ``experimental_bfcl`` (bfcl-eval's own wording) is read from an installed
    bfcl-eval, as the renderer does.
    """
    from promptgrid.errors import TemplateError
    from promptgrid.templates import BFCL_STYLE, load_bfcl_style, load_catalog_file

    try:
        catalog = load_bfcl_style(bfcl_data) if name == BFCL_STYLE else load_catalog_file(name)
    except TemplateError as exc:
        raise TranslationError(str(exc)) from None
    return dict(catalog.strings)


def instruction_units(catalogs: Iterable[str] | None = None, *, include_bfcl: bool = False,
                      bfcl_data: str | None = None) -> list[Unit]:
    """Every instruction string of the given built-in catalogs (default: all of them).

    With ``include_bfcl``, bfcl-eval's ``experimental_bfcl`` wording is added
    when an installed bfcl-eval provides it (silently skipped otherwise).
    """
    from promptgrid.templates import BFCL_STYLE

    names = list(catalogs if catalogs is not None else instruction_catalog_names())
    if include_bfcl and catalogs is None:
        names.append(BFCL_STYLE)
    units = []
    for name in names:
        try:
            strings = english_catalog(name, bfcl_data=bfcl_data)
        except TranslationError:
            if name == BFCL_STYLE and catalogs is None:
                continue
            raise
        for key, source in strings.items():
            if source.strip():
                units.append(Unit(f"{name}.{key}", UnitKind.INSTRUCTIONS, source))
    return units


def _values(schema: Mapping[str, Any]) -> Iterator[str]:
    """Enum values and the default of a parameter schema, as strings."""
    for value in schema.get("enum") or ():
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
            yield str(value)
    default = schema.get("default")
    if isinstance(default, str) and default.strip():
        yield default


def _walk(properties: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(name, schema)`` for each property, nested objects and arrays of objects included."""
    if not isinstance(properties, Mapping):
        return
    for name, schema in properties.items():
        if not isinstance(schema, Mapping):
            continue
        yield str(name), schema
        yield from _walk(schema.get("properties"))
        items = schema.get("items")
        if isinstance(items, Mapping):
            yield from _walk(items.get("properties"))


def _protected_names(function: Mapping[str, Any]) -> tuple[str, ...]:
    """Names a description of ``function`` must keep verbatim.

    The function name, and the parameter names, enum values and defaults that
    look like code (``city_name``, ``maxResults``, ``EUR``): the model has to
    write them exactly. Plain words are left to the translator (see
    :func:`_code_like`).
    """
    names: list[str] = [str(function.get("name", ""))]
    params = function.get("parameters")
    for param, schema in _walk(params.get("properties") if isinstance(params, Mapping) else None):
        names.append(param)
        names.extend(_values(schema))
    return tuple(dict.fromkeys(n for n in names if n and _code_like(n)))


def _code_like(name: str) -> bool:
    """Names that are code wherever they appear: ``get_weather``, ``maxResults``, ``EUR``, ``4x4``.

    A plain word (``city``, ``comfort``) is a word in prose ("Size and comfort
    of the car") and must be translated there; when a description quotes it
    (``'comfort'``) the quotes protect it anyway.
    """
    return is_identifier_like(name) or not name.isalpha() or (len(name) >= 2 and name.isupper())


def description_units(functions: Iterable[Mapping[str, Any]]) -> list[Unit]:
    """Every function and parameter description of ``functions`` (BFCL JSON-schema dicts).

    Keys are the renderer's (``promptgrid.templates.description_units``):
    ``<func>.description``, ``<func>.<param>``, ``<func>.<param>.<child>``,
    ``<func>.<param>[].<child>``. A function that appears in several cases
    yields its units once.
    """
    from promptgrid.templates import description_units as template_units

    units: dict[tuple[str, str], Unit] = {}
    texts_of: dict[str, str] = {}
    for function in functions:
        protected = _protected_names(function)
        for key, text in template_units([function]):
            if not text.strip():
                continue
            if texts_of.setdefault(key, text) != text and key.endswith(".description"):
                # A parameter named "description" has the key of its function's description
                # (``create_ticket.description``); it is listed as "<key> (parameter)", as catalogs write it
                # (translations are looked up by their English text, so the key only has to be unique).
                key = f"{key} (parameter)"
            units.setdefault((key, text), Unit(key, UnitKind.DESCRIPTIONS, text, protected))
    return list(units.values())
