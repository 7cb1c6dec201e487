"""The translations the renderer uses: overrides, reviewed catalogs, then the store.

Implements the ``promptgrid.templates`` Localization protocol::

    instruction(source, lang, key) -> str | None
    description(source, lang, key) -> str | None

Lookups go by the English *source text* (the key only breaks ties), so a
translation made for an older English string is never used for a new one.
Precedence, first found wins:

1. a manual override in the store (``set_override``, user catalogs);
2. a reviewed catalog shipped in ``translate/catalogs/`` (or given here);
3. a machine translation in the store that passed its checks (newest first);
4. an unreviewed catalog.

``None`` means missing; the renderer collects every missing unit and raises
one ``MissingTranslationError``. Nothing here touches the network, runs the
checks or writes a file: rendering stays fast and offline.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from promptgrid.errors import TranslationError
from promptgrid.languages import base_language, lookup_languages

from ._catalogs import CatalogIndex, TranslationCatalog, shipped_catalogs
from ._store import TranslationStore, default_store_path
from ._units import UnitKind

__all__ = ["CatalogLocalization", "default_localization"]


class CatalogLocalization:
    """Translations from a store and from catalogs, in the precedence above."""

    def __init__(self, catalogs: Iterable[TranslationCatalog] = (), store: TranslationStore | None = None) -> None:
        catalogs = tuple(catalogs)
        self.store = store
        self._reviewed = CatalogIndex(c for c in catalogs if c.reviewed)
        self._unreviewed = CatalogIndex(c for c in catalogs if not c.reviewed)

    def _find(self, kind: UnitKind, source: str, lang: str, key: str) -> str | None:
        if base_language(lang) == "en":
            return source
        if self.store is not None:
            override = self._override(source, lang)
            if override is not None:
                return override
        found = self._reviewed.lookup(kind, source, lang, key)
        if found is not None:
            return found
        if self.store is not None:
            found = self.store.lookup(source, lang)
            if found is not None:
                return found
        return self._unreviewed.lookup(kind, source, lang, key)

    def _override(self, source: str, lang: str) -> str | None:
        assert self.store is not None
        for code in lookup_languages(lang):
            row = self.store.get_override(source, code)
            if row is not None and row.ok:
                return row.text
        return None

    def instruction(self, source: str, lang: str, key: str) -> str | None:
        """The ``lang`` translation of an instruction string (key ``<catalog>.<key>``)."""
        return self._find(UnitKind.INSTRUCTIONS, source, lang, key)

    def description(self, source: str, lang: str, key: str) -> str | None:
        """The ``lang`` translation of a function/parameter description (key ``<function>.<param>``)."""
        return self._find(UnitKind.DESCRIPTIONS, source, lang, key)


def default_localization(store: str | os.PathLike[str] | None = None,
                         catalogs: Iterable[TranslationCatalog] | None = None) -> CatalogLocalization:
    """Shipped catalogs plus the translation store (default path when ``store`` is None).

    The store is opened read-only. The default store may not exist yet (it is
    then empty); a store the user names must exist.
    """
    path = Path(store) if store is not None else default_store_path()
    if store is not None and not path.is_file():
        raise TranslationError(
            f"translation store {path} does not exist. Create it with: promptgrid translate --store {path} ..."
        )
    return CatalogLocalization(shipped_catalogs() if catalogs is None else catalogs,
                               TranslationStore(path, readonly=True))
