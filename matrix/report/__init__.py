"""Sensitivity reports: statistics, tables, figures and one self-contained HTML page.

``build_report(rows, out_dir, baseline=..., formats=...)`` works from result
rows (``ResultRow``: ``RunStore.rows()``, ``read_results`` of an exported JSONL
file, or ``synthetic_rows``), so it runs on a finished run, an export or
synthetic rows alike. ``compare_runs`` pairs two runs of the same grid.
``digest(rows)`` says in a few lines what a run's numbers mean (the end of
``promptgrid run``). A conversation run's report (``Result`` records: pass^k, turns, languages, its
HTML page and figures) is ``_conversations``, ``_conversation_languages``, ``_conversation_html`` and
``_conversation_figures`` (exported by ``promptgrid.matrix.conversations``).
matplotlib is imported only when figures are drawn; the names here are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from promptgrid._lazy import lazy_exports as _lazy_exports
from promptgrid.errors import ReportError

if _TYPE_CHECKING:
    from ._build import FORMATS, ReportResult, build_report, expand_formats, write_files
    from ._compare import CompareResult, VariantDiff, compare_runs
    from ._compute import aggregate
    from ._digest import ModeCount, ModelDigest, SampleNote, digest, explain
    from ._model import (
        Cell,
        CostSummary,
        DimensionEffect,
        EndpointSummary,
        FailureCount,
        FailureExample,
        FormatTax,
        LanguageCell,
        LanguageSummary,
        ModeFailure,
        PairedTest,
        ParseShare,
        PassK,
        PendingJobs,
        ReportData,
        Sensitivity,
        Settings,
        SpeedPoint,
        TranslationDelta,
        UnsupportedJobs,
        VariantInfo,
    )
    from ._synthetic import synthetic_rows

# The names below are imported on first use (PEP 562): ``promptgrid.matrix.report.stats`` (a Wilson interval for
# score-file) and the CLI's other light users do not pay for the whole report (tables, figures, templates).
_LAZY = {
    "Cell": "._model",
    "CompareResult": "._compare",
    "CostSummary": "._model",
    "DimensionEffect": "._model",
    "EndpointSummary": "._model",
    "FORMATS": "._build",
    "FailureCount": "._model",
    "FailureExample": "._model",
    "FormatTax": "._model",
    "LanguageCell": "._model",
    "LanguageSummary": "._model",
    "ModeCount": "._digest",
    "ModeFailure": "._model",
    "ModelDigest": "._digest",
    "PairedTest": "._model",
    "ParseShare": "._model",
    "PassK": "._model",
    "PendingJobs": "._model",
    "ReportData": "._model",
    "ReportResult": "._build",
    "SampleNote": "._digest",
    "Sensitivity": "._model",
    "Settings": "._model",
    "SpeedPoint": "._model",
    "TranslationDelta": "._model",
    "UnsupportedJobs": "._model",
    "VariantDiff": "._compare",
    "VariantInfo": "._model",
    "aggregate": "._compute",
    "build_report": "._build",
    "compare_runs": "._compare",
    "digest": "._digest",
    "expand_formats": "._build",
    "write_files": "._build",
    "explain": "._digest",
    "synthetic_rows": "._synthetic",
}


__all__ = [
    "FORMATS",
    "Cell",
    "CompareResult",
    "CostSummary",
    "DimensionEffect",
    "EndpointSummary",
    "FailureCount",
    "FailureExample",
    "FormatTax",
    "LanguageCell",
    "LanguageSummary",
    "ModeCount",
    "ModeFailure",
    "ModelDigest",
    "PairedTest",
    "ParseShare",
    "PassK",
    "PendingJobs",
    "ReportData",
    "ReportError",
    "ReportResult",
    "SampleNote",
    "Sensitivity",
    "Settings",
    "SpeedPoint",
    "TranslationDelta",
    "UnsupportedJobs",
    "VariantDiff",
    "VariantInfo",
    "aggregate",
    "build_report",
    "compare_runs",
    "digest",
    "expand_formats",
    "write_files",
    "explain",
    "synthetic_rows",
]

__getattr__, __dir__ = _lazy_exports(__name__, _LAZY, __all__)
