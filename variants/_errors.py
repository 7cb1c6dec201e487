"""promptgrid's exceptions.

Every error a user can cause derives from one base class, so the CLI can print
it without a traceback and exit non-zero::

    PromptgridError                 base; ``exit_code`` says how the CLI exits
    +-- GridError                   a grid YAML is invalid (file, line, key, suggestion)
    +-- TemplateError               a template or style catalog is missing or invalid
    +-- DatasetError                a dataset cannot be found or a record is malformed
    +-- MissingTranslationError     a variant needs translations that are not available
    +-- MissingDependencyError      an optional package is needed for this feature
    +-- RunError                    (matrix.runconfig) a run directory or run config is unusable
    +-- LocalModelError             (matrix.clients) the local model cannot be loaded
    +-- UnknownReturnFormatError    (matrix.parse) a parser was asked for a format that does not exist
    +-- ReportError                 (matrix.report) rows or a run directory cannot make a report
    +-- TranslationError            (translate) a backend failed or a translation is unusable
        +-- CatalogError            a catalog file is malformed

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
    "DatasetError",
    "GridError",
    "MissingDependencyError",
    "MissingTranslationError",
    "PromptgridError",
    "TemplateError",
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


def closest(word: str, candidates: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest candidate, or ``""``."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.5)
    return f" Did you mean {matches[0]!r}?" if matches else ""
