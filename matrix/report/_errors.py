"""The report's user error (a subclass of promptgrid's base error)."""

from __future__ import annotations

from promptgrid.variants import PromptgridError

__all__ = ["ReportError"]


class ReportError(PromptgridError):
    """Rows, a run directory or a report option cannot be used to build a report."""

    exit_code = 2
