"""promptgrid's exceptions.

Every error a user can cause derives from one base class, so the CLI can print
it without a traceback and exit non-zero::

    PromptgridError                 base; ``exit_code`` says how the CLI exits
    +-- GridError                   a grid YAML is invalid (file, line, key, suggestion)
    +-- TemplateError               a template or style catalog is missing or invalid
    +-- DatasetError                a dataset cannot be found or a record is malformed
    +-- MissingTranslationError     a variant needs translations that are not available
    +-- MissingDependencyError      an optional package is needed for this feature
    +-- RunError                    a run directory, run config or run option is unusable
    |   +-- StoreError              a run's store.sqlite3 is corrupt, truncated, foreign or newer
    |       +-- StoreFullError      the disk filled up while a run was writing its store
    +-- LocalModelError             the local model cannot be found or loaded
    +-- UnknownReturnFormatError    a parser was asked for a format that does not exist (also a ValueError)
    +-- ReportError                 rows or a run directory cannot make a report
    +-- OutputError                 an output path would destroy an input or a run's store, or cannot be written
    +-- InputLimitError             an input file or one of its lines is larger than the bound for it
    +-- TranslationError            a backend failed or a translation is unusable
        +-- CatalogError            a catalog file is malformed
        +-- TranslationStoreError   a translation store is corrupt, truncated, foreign or newer

They are all defined here, in the package root, so every layer (variants <-
templates <- translate <- matrix) raises from one hierarchy; each is
re-exported by the package that raises it, and by ``promptgrid`` itself.

A response that cannot be parsed is not an error: it is data (a ParseResult
with a failure kind), scored as incorrect. A model call that fails is data too
(a stored error), never an exception out of the runner.

Messages say what was wrong and how to fix it. They are complete sentences and
name the file, line and key when the error comes from a file.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "CatalogError",
    "DatasetError",
    "GridError",
    "InputLimitError",
    "LocalModelError",
    "MissingDependencyError",
    "MissingTranslationError",
    "OutputError",
    "PromptgridError",
    "ReportError",
    "RunError",
    "StoreError",
    "StoreFullError",
    "TemplateError",
    "TranslationError",
    "TranslationStoreError",
    "UnknownReturnFormatError",
    "closest",
]


class PromptgridError(Exception):
    """Base class of every error promptgrid raises on bad input or environment."""

    exit_code: int = 1


class GridError(PromptgridError):
    """A grid YAML file is invalid."""

    exit_code = 2


class TemplateError(PromptgridError):
    """A template, a style catalog or a template directory is missing or invalid."""

    exit_code = 2


class DatasetError(PromptgridError):
    """A dataset cannot be found, or one of its records is malformed."""

    exit_code = 2


class MissingTranslationError(PromptgridError):
    """A variant asks for a language whose translations are not available."""

    exit_code = 2


class MissingDependencyError(PromptgridError):
    """An optional package is needed for the feature that was asked for."""

    exit_code = 2

    def __init__(self, feature: str, install: str) -> None:
        super().__init__(f"{feature} requires optional dependencies. Install with: {install}")
        self.install = install


class RunError(PromptgridError):
    """A run directory, run config or run option is unusable."""

    exit_code = 2


class StoreError(RunError):
    """A run directory's ``store.sqlite3`` cannot be read or written: corrupt, truncated, not a promptgrid
    store, written by a newer promptgrid, or unusable for another reason the message names."""

    exit_code = 2


class StoreFullError(StoreError):
    """The disk (or quota) filled up while the store was written. The run stopped; the answers it could
    not store were spilled beside the store and are added to it by the next run in that directory."""

    exit_code = 2


class LocalModelError(PromptgridError):
    """A local model file cannot be found or loaded."""

    exit_code = 2


class UnknownReturnFormatError(PromptgridError, ValueError):
    """``return_format`` is not one of the four formats (a caller error, not model output)."""

    exit_code = 2


class ReportError(PromptgridError):
    """Rows, a run directory or a report option cannot be used to build a report."""

    exit_code = 2


class OutputError(PromptgridError):
    """An output path is an input or a run directory's own file, or cannot be written."""

    exit_code = 2


class InputLimitError(PromptgridError):
    """An input file (a JSONL file, ``--bfcl-data``), one of its lines or an archive's expanded content is
    larger than the bound ``promptgrid.safeio`` sets for it (the message names the file, the bound and the
    setting that raises it)."""

    exit_code = 2


class TranslationError(PromptgridError):
    """A translation backend failed, or its output cannot be used.

    A translation that comes back but fails its checks is *not* an exception:
    it is recorded, flagged, in the store; ``TranslationError`` is for
    failures that leave nothing to record.
    """

    exit_code = 1


class CatalogError(TranslationError):
    """A translation catalog file is invalid; the message names file, line and key."""

    exit_code = 2


class TranslationStoreError(TranslationError):
    """A translation store (``--store``) cannot be used: not SQLite, truncated or corrupt, another program's
    database (refused before anything is written to it), written by a newer promptgrid, or unreadable."""

    exit_code = 2


def closest(word: str, candidates: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest candidate, or ``""``."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.5)
    return f" Did you mean {matches[0]!r}?" if matches else ""
