"""The report's input: ``ResultRow`` (``promptgrid.matrix.running.results``), the one result record.

Rows come from the run store (``RunStore(run_dir).rows()``), from an exported
JSONL file (``read_results``) or, for convenience, as dicts in the export's
layout (read with ``ResultRow.from_dict``, so the same checks apply). A job given
twice is counted once when both rows are equal, and refused when they differ
(``unique_rows``).

How a row counts (``ResultRow.scored`` / ``ResultRow.correct``):

- ``error`` set (the call failed): scored, incorrect in every rate, and
  counted separately as an error;
- ``valid`` true/false: scored;
- ``valid`` None and no error: *unscored* (the run was not scored yet); left
  out of every rate and reported in the notes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from promptgrid.errors import ReportError
from promptgrid.matrix.running.results import ResultRow, unique_rows

__all__ = ["Rows", "as_results"]

Rows = Iterable[ResultRow | Mapping[str, Any]]
"""What ``build_report``, ``aggregate`` and ``compare_runs`` accept: ``ResultRow``, or dicts in the export's layout."""


def as_results(rows: Rows) -> list[ResultRow]:
    """The rows as ``ResultRow`` (dicts are read with ``from_dict``; errors name the row)."""
    out = [
        r if isinstance(r, ResultRow) else ResultRow.from_dict(r, where=f"row {i}")
        for i, r in enumerate(rows, 1)
    ]
    if not out:
        raise ReportError("no rows to report on: the run has no results yet (run it with: promptgrid run ...).")
    return unique_rows(out, lambda i: f"row {i + 1}")

