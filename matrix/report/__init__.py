"""Sensitivity reports: statistics, tables, figures and one self-contained HTML page.

``build_report(rows, out_dir, baseline=..., formats=...)`` works from result
rows (``ResultRow``: ``RunStore.rows()``, ``read_results`` of an exported JSONL
file, or ``synthetic_rows``), so it runs on a finished run, an export or
synthetic rows alike. ``compare_runs`` pairs two runs of the same grid.
``digest(rows)`` says in a few lines what a run's numbers mean (the end of
``promptgrid run``).
matplotlib is imported only when figures are drawn.
"""

from promptgrid.errors import ReportError

from ._build import FORMATS, ReportResult, build_report, expand_formats
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
    "explain",
    "synthetic_rows",
]
