"""Reviewed translation catalogs: YAML files of human-checked translations.

Shipped with promptgrid (package data) or written by users::

    translate/catalogs/<lang>.yaml                          instructions
    translate/catalogs/descriptions/<dataset>/<lang>.yaml   function descriptions

Format (one file per language and kind)::

    language: de
    kind: instructions          # or: descriptions
    reviewed: true
    units:
      classic.persona:
        source: "You are an expert in composing functions."
        text: "Sie sind ein Experte für das Verfassen von Funktionen."

``source`` is the English string the translation was made from. When the
English string changes, the entry becomes *stale*: it is reported by
``promptgrid check-translations`` and never used, because entries are looked
up by their source text, not by key alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from promptgrid.errors import CatalogError
from promptgrid.languages import lookup_languages
from promptgrid.variants._yaml import compose_yaml, plain, read_yaml_text

from ._units import UnitKind

__all__ = [
    "CatalogEntry",
    "CatalogIndex",
    "TranslationCatalog",
    "load_catalog",
    "load_catalogs",
    "shipped_catalogs",
]

_LANG_RE = re.compile(r"^[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$")


@dataclass(frozen=True)
class CatalogEntry:
    """One reviewed translation: the English ``source`` it was made from and its ``text``."""

    key: str
    source: str
    text: str
    line: int = 0


@dataclass(frozen=True)
class TranslationCatalog:
    """A parsed translation catalog file (reviewed translations of English units, one language).

    ``dataset`` is set for description catalogs under ``descriptions/<dataset>/``. Not to be confused
    with a template's style catalog (``promptgrid.templates.StyleCatalog``), the English strings themselves.
    """

    path: str
    language: str
    kind: UnitKind
    reviewed: bool
    entries: Mapping[str, CatalogEntry] = field(default_factory=dict)
    dataset: str | None = None
    shipped: bool = False


def _read(text: str, where: str) -> tuple[Any, dict[str, int]]:
    """The catalog's plain value and the line (1-based) of each key under ``units:``, from one parse with the
    bounds of ``promptgrid.variants._yaml.compose_yaml`` (size, tags, keys, aliases; errors name the line)."""
    node = compose_yaml(text, where, CatalogError)
    if node is None:
        return None, {}
    lines: dict[str, int] = {}
    units = node.value.get("units") if isinstance(node.value, dict) else None
    if units is not None and isinstance(units.value, dict):
        lines = {str(key): child.key_line for key, child in units.value.items()}
    return plain(node), lines


def load_catalog(path: str | Path, text: str | None = None, *, dataset: str | None = None,
                 shipped: bool = False) -> TranslationCatalog:
    """Parse and validate one catalog file; errors name the file, line and key."""
    where = str(path)
    if text is None:
        text = read_yaml_text(Path(path), where, CatalogError)
    data, lines = _read(text, where)  # bounded: size, aliases, tags, keys
    if not isinstance(data, dict):
        raise CatalogError(f"{where}: a translation catalog is a mapping with language, kind, reviewed and units")
    unknown = set(data) - {"language", "kind", "reviewed", "units", "dataset", "backend", "notes"}
    if unknown:
        raise CatalogError(f"{where}: unknown top-level key {sorted(unknown)[0]!r} "
                           "(expected language, kind, reviewed, units)")
    language = data.get("language")
    if not isinstance(language, str) or not _LANG_RE.match(language):
        raise CatalogError(f"{where}: 'language' must be a language code such as de or pt-BR, got {language!r}")
    try:
        kind = UnitKind(data.get("kind", "instructions"))
    except ValueError:
        raise CatalogError(f"{where}: 'kind' must be 'instructions' or 'descriptions', "
                           f"got {data.get('kind')!r}") from None
    reviewed = data.get("reviewed", False)
    if not isinstance(reviewed, bool):
        raise CatalogError(f"{where}: 'reviewed' must be true or false, got {reviewed!r}")
    units = data.get("units") or {}
    if not isinstance(units, dict):
        raise CatalogError(f"{where}: 'units' must map each key to {{source: ..., text: ...}}")
    entries = _entries(units, lines, where)
    ds = dataset if dataset is not None else data.get("dataset")
    return TranslationCatalog(where, language, kind, reviewed, entries, ds if isinstance(ds, str) else None, shipped)


def _entries(units: dict[Any, Any], lines: Mapping[str, int], where: str) -> dict[str, CatalogEntry]:
    """The catalog's ``units`` validated into entries; errors name the file, line and key."""
    entries: dict[str, CatalogEntry] = {}
    for key, value in units.items():
        line = lines.get(str(key), 0)
        at = f"{where}, line {line}" if line else where
        if not isinstance(value, dict) or not isinstance(value.get("source"), str) \
                or not isinstance(value.get("text"), str):
            raise CatalogError(f"{at}: unit {key!r} must have string fields 'source' and 'text'")
        extra = set(value) - {"source", "text", "note", "reviewed_by"}
        if extra:
            raise CatalogError(f"{at}: unit {key!r} has unknown field {sorted(extra)[0]!r} (expected source, text)")
        entries[str(key)] = CatalogEntry(str(key), value["source"], value["text"], line)
    return entries


def _iter_shipped() -> Iterator[TranslationCatalog]:
    root = resources.files("promptgrid.translate").joinpath("catalogs")
    if not root.is_dir():
        return
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.is_file() and entry.name.endswith(".yaml"):
            yield load_catalog(f"translate/catalogs/{entry.name}", entry.read_text(encoding="utf-8"),
                               shipped=True)
    descriptions = root.joinpath("descriptions")
    if descriptions.is_dir():
        for ds_dir in sorted(descriptions.iterdir(), key=lambda e: e.name):
            if not ds_dir.is_dir():
                continue
            for entry in sorted(ds_dir.iterdir(), key=lambda e: e.name):
                if entry.is_file() and entry.name.endswith(".yaml"):
                    yield load_catalog(f"translate/catalogs/descriptions/{ds_dir.name}/{entry.name}",
                                       entry.read_text(encoding="utf-8"), dataset=ds_dir.name, shipped=True)


@lru_cache(maxsize=1)
def shipped_catalogs() -> tuple[TranslationCatalog, ...]:
    """Every catalog shipped in ``translate/catalogs/`` (read once per process)."""
    return tuple(_iter_shipped())


def load_catalogs(paths: Iterable[str | Path]) -> tuple[TranslationCatalog, ...]:
    """Catalog files given by the user; a folder means every ``*.yaml`` under it."""
    out: list[TranslationCatalog] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(load_catalog(f) for f in sorted(path.rglob("*.yaml")))
        elif path.is_file():
            out.append(load_catalog(path))
        else:
            raise CatalogError(f"translation catalog {p} does not exist")
    return tuple(out)


class CatalogIndex:
    """Catalog entries indexed by (kind, language, source text), for lookups by source.

    A translation is found by the English text it was made from; ``key``
    only breaks ties when one English string has different translations
    under different keys.
    """

    def __init__(self, catalogs: Iterable[TranslationCatalog]) -> None:
        self._by_source: dict[tuple[UnitKind, str, str], list[tuple[str, str]]] = {}
        for catalog in catalogs:
            for entry in catalog.entries.values():
                slot = self._by_source.setdefault((catalog.kind, catalog.language, entry.source), [])
                slot.append((entry.key, entry.text))

    def lookup(self, kind: UnitKind, source: str, lang: str, key: str | None = None) -> str | None:
        for code in lookup_languages(lang):
            found = self._by_source.get((kind, code, source))
            if found:
                for entry_key, text in found:
                    if entry_key == key:
                        return text
                return found[0][1]
        return None

    def __bool__(self) -> bool:
        return bool(self._by_source)

