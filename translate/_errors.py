"""The translation commands' input errors.

``TranslationError`` (``promptgrid.errors``) exits 1: a backend failed while
translating. What the caller gave that cannot be used (an unknown backend or
model, a language code, an unset key variable, a catalog without the
language) is a ``TranslationInputError``: still a ``TranslationError`` for
``except`` clauses, but the command exits 2, as every other command does on
bad input, and it is raised before anything is sent or stored.
"""

from __future__ import annotations

from promptgrid.errors import TranslationError

__all__ = ["TranslationInputError"]


class TranslationInputError(TranslationError):
    """Bad input to a translation command (backend, model, language, key variable, catalog): exit 2."""

    exit_code = 2
