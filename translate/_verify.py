"""Verify every translation we have: shipped catalogs and the translation store.

Catalog entries are compared with the current English units first: an entry
whose key is unknown, or whose ``source`` is no longer the English string, is
``stale``; an English unit with no entry is ``missing``; every other entry goes
through :func:`check_translation`. Stored translations are checked again (the
checks may have changed since they were stored). Results are kept between
commands by :mod:`._memo` (keyed by the inputs and the checking code).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._catalogs import TranslationCatalog
from ._check import CheckCode
from ._memo import memo
from ._store import TranslationStore
from ._units import Unit

__all__ = ["Finding", "check_catalog", "check_store"]


@dataclass(frozen=True)
class Finding:
    """The verdict on one translation (or on one missing one)."""

    language: str
    kind: str
    origin: str
    key: str
    ok: bool
    problems: tuple[str, ...] = ()
    detail: str = ""


def _detail(details: Mapping[str, Any], problems: Iterable[str]) -> str:
    parts = []
    for code in problems:
        message = details.get(f"{code}_problem") or details.get(code)
        parts.append(f"{code}: {message}" if isinstance(message, str) else code)
    return "; ".join(parts)


def check_catalog(catalog: TranslationCatalog, english: Mapping[str, Unit] | None = None, *,
                  required: Iterable[str] | None = None, back_translator: Any = None) -> list[Finding]:
    """Check each entry of ``catalog``.

    ``english`` (key -> unit) enables the stale check; ``required`` lists the
    keys a catalog must have (default: every key of ``english``), for the
    missing check.
    """
    findings: list[Finding] = []
    kind = catalog.kind.value
    checks = memo()  # results kept between commands (._memo), unless back-translated
    for key, entry in catalog.entries.items():
        where = f"{catalog.path}:{entry.line}" if entry.line else catalog.path
        unit = english.get(key) if english is not None else None
        if english is not None and unit is None:
            findings.append(Finding(catalog.language, kind, where, key, False, (CheckCode.STALE.value,),
                                    "stale: no English unit has this key any more"))
            continue
        if unit is not None and unit.source != entry.source:
            findings.append(Finding(catalog.language, kind, where, key, False, (CheckCode.STALE.value,),
                                    f"stale: the English text is now {unit.source[:80]!r}"))
            continue
        result = checks.check(entry.source, entry.text, "en", catalog.language,
                              unit.protected if unit is not None else (), back_translator=back_translator)
        problems = tuple(p.value for p in result.problems)
        findings.append(Finding(catalog.language, kind, where, key, result.ok, problems,
                                _detail(result.details, problems)))
    if english is not None:
        for key in english if required is None else required:
            if key not in catalog.entries:
                findings.append(Finding(catalog.language, kind, catalog.path, key, False,
                                        (CheckCode.MISSING.value,), "missing: no translation of this unit"))
    checks.flush()
    return findings


def check_store(store: TranslationStore, languages: Iterable[str] | None = None, *,
                back_translator: Any = None) -> list[Finding]:
    """Check every stored translation and override again."""
    findings: list[Finding] = []
    checks = memo()
    for row in store.rows(languages):
        protected = row.details.get("protected") or ()
        result = checks.check(row.source, row.text, "en", row.target, tuple(protected),
                              back_translator=back_translator)
        problems = tuple(p.value for p in result.problems)
        key = ", ".join(row.keys) if row.keys else row.source[:60]
        findings.append(Finding(row.target, row.kind or "?", f"store:{row.backend}", key, result.ok, problems,
                                _detail(result.details, problems)))
    checks.flush()
    return findings
