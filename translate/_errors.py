"""The translate package's exceptions.

Both derive from ``promptgrid.variants.PromptgridError`` so the CLI prints
them without a traceback::

    PromptgridError
    +-- TranslationError        a backend failed (credentials, network, quota,
    |                           unusable output) or a translation is unusable
        +-- CatalogError        a translation catalog YAML file is invalid (file, line, key)

A translation that comes back but fails its checks is *not* an exception: it is
recorded, flagged, in the store (errors are data); ``TranslationError`` is for
failures that leave nothing to record.
"""

from __future__ import annotations

from promptgrid.variants import PromptgridError

__all__ = ["CatalogError", "TranslationError"]


class TranslationError(PromptgridError):
    """A translation backend failed, or its output cannot be used."""

    exit_code = 1


class CatalogError(TranslationError):
    """A translation catalog file is invalid; the message names file, line and key."""

    exit_code = 2
