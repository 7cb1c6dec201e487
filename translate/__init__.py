"""Translation of instructions and function descriptions: backends, store, checks.

A translated prompt that silently breaks ``{output_format}`` or translates a
parameter name measures the translator, not the model. This package makes
translations one can trust:

- units (:mod:`._units`): what is translatable and its key;
- protected spans (:mod:`._protect`): masked before a translator sees the
  text, restored and verified after;
- backends (:mod:`._backends`): Amazon Translate, any model ``promptgrid run`` takes,
  reviewed catalogs (:mod:`._catalogs`), behind one ``translate`` protocol;
- the translation store (:mod:`._store`): each (source, target, backend)
  translated once;
- checks (:mod:`._check`): placeholders, tags, protected names, language,
  length, structure;
- localization (:mod:`._localization`): what the renderer reads, with
  precedence override > reviewed catalog > machine translation.
"""

from promptgrid.errors import CatalogError, TranslationError, TranslationStoreError

from ._backends import CatalogBackend, TranslationBackend, make_backend
from ._catalogs import CatalogEntry, CatalogIndex, TranslationCatalog, load_catalog, load_catalogs, shipped_catalogs
from ._check import CheckCode, TranslationCheck, back_translation_similarity, check_translation, detect_language
from ._errors import TranslationInputError
from ._localization import CatalogLocalization, default_localization
from ._pipeline import LanguageSummary, TargetSummary, TranslateReport, UnitResult, segment, translate_units
from ._protect import Masked, Span, SpanKind, find_spans, mask, unmask
from ._store import StoredTranslation, TranslationStore, default_store_path, source_hash
from ._units import Unit, UnitKind, description_units, english_catalog, instruction_catalog_names, instruction_units
from ._verify import Finding, check_catalog, check_store

__all__ = [
    "CatalogBackend",
    "CatalogEntry",
    "CatalogError",
    "CatalogIndex",
    "CatalogLocalization",
    "CheckCode",
    "Finding",
    "LanguageSummary",
    "Masked",
    "Span",
    "SpanKind",
    "StoredTranslation",
    "TargetSummary",
    "TranslateReport",
    "TranslationBackend",
    "TranslationCatalog",
    "TranslationCheck",
    "TranslationError",
    "TranslationInputError",
    "TranslationStore",
    "TranslationStoreError",
    "Unit",
    "UnitKind",
    "UnitResult",
    "back_translation_similarity",
    "check_catalog",
    "check_store",
    "check_translation",
    "default_localization",
    "default_store_path",
    "description_units",
    "detect_language",
    "english_catalog",
    "find_spans",
    "instruction_catalog_names",
    "instruction_units",
    "load_catalog",
    "load_catalogs",
    "make_backend",
    "mask",
    "segment",
    "shipped_catalogs",
    "source_hash",
    "translate_units",
    "unmask",
]
