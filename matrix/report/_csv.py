"""CSV files: raw numbers (fractions 0..1, full precision), one file per table.

``results.csv`` is the main file (one row per model x variant); the others
hold the sensitivity, effects, paired tests, accuracy per dataset category (per model: ``categories.csv``;
per model x variant: ``category_variants.csv``), language (accuracy, summary,
translation, language match), pass^k, failure and cost tables, and with call modes the unsupported jobs,
format tax, parse share and failure modes per call mode. Differences are fractions too (x100 for percentage points).
Empty cells mean "not computable". Control characters in text cells (a model name or case id with an ESC)
are written as visible escapes (``promptgrid.display.escape_controls``).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from typing import Any

from promptgrid.display import escape_controls
from promptgrid.variants import DIMENSIONS

from ._call_modes import call_mode_of
from ._model import ReportData

__all__ = ["RESULTS_COLUMNS", "csv_files"]

RESULTS_COLUMNS = (
    "model",
    "variant_id",
    "label",
    "n",
    "correct",
    "accuracy",
    "ci_low",
    "ci_high",
    "ci_method",
    "errors",
    "unscored",
    "n_cases",
    "repeats",
    "fsa",
    "fsa_ci_low",
    "fsa_ci_high",
    "format_match",
    "format_match_ci_low",
    "format_match_ci_high",
    "format_agnostic_accuracy",
    "format_agnostic_ci_low",
    "format_agnostic_ci_high",
    "tool_f1",
    "arg_f1",
    "is_baseline",
)


def _v(x: Any) -> Any:
    if isinstance(x, str):
        return escape_controls(x)
    if isinstance(x, float) and math.isnan(x):
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    return x


def _write(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([escape_controls(h) for h in headers])
    for r in rows:
        w.writerow([_v(x) for x in r])
    return buf.getvalue()


def _results_csv(data: ReportData) -> str:
    """``results.csv``: one row per model x variant, with a column per dimension the variants use."""
    dims = list(DIMENSIONS) + sorted({k for v in data.variants for k in v.dimensions} - set(DIMENSIONS))
    # A prompt-only run keeps the columns it had before call modes existed: call_mode only when a variant sets
    # it, and then "prompt" where Variant.dimensions() leaves it out (the default).
    with_modes = any("call_mode" in v.dimensions for v in data.variants)
    if not with_modes:
        dims.remove("call_mode")
    if not any("tool_results" in v.dimensions for v in data.variants):  # conversations only; "auto" is left out
        dims.remove("tool_results")
    dims_of = {v.id: {**v.dimensions, "call_mode": call_mode_of(v.dimensions)} if with_modes else v.dimensions
               for v in data.variants}
    return _write(
        list(RESULTS_COLUMNS) + dims,
        (
            [
                c.model,
                c.variant_id,
                c.label,
                c.n,
                c.correct,
                c.accuracy,
                c.ci[0],
                c.ci[1],
                c.ci_method,
                c.errors,
                c.unscored,
                c.n_cases,
                c.repeats,
                c.fsa,
                c.fsa_ci[0],
                c.fsa_ci[1],
                c.format_match,
                c.format_match_ci[0],
                c.format_match_ci[1],
                c.format_agnostic_accuracy,
                c.format_agnostic_ci[0],
                c.format_agnostic_ci[1],
                c.tool_f1,
                c.arg_f1,
                c.variant_id == data.baseline,
            ]
            + [dims_of[c.variant_id].get(d, "") for d in dims]
            for c in data.cells
        ),
    )


def _language_files(data: ReportData) -> dict[str, str]:
    """The language tables that have rows: per-language accuracy, language summaries, translation, language match."""
    files: dict[str, str] = {}
    if data.language_cells:
        files["languages.csv"] = _write(
            ["model", "variant_id", "label", "language", "n", "correct", "accuracy", "ci_low", "ci_high"],
            (
                [c.model, c.variant_id, c.label, c.language, c.n, c.correct, c.accuracy, *c.ci]
                for c in data.language_cells
            ),
        )
    if data.language_summaries:
        files["language_summary.csv"] = _write(
            [
                "model",
                "variant_id",
                "label",
                "n_languages",
                "macro",
                "macro_ci_low",
                "macro_ci_high",
                "best_language",
                "best_accuracy",
                "worst_language",
                "worst_accuracy",
                "gap",
                "gap_ci_low",
                "gap_ci_high",
                "std",
                "std_ci_low",
                "std_ci_high",
            ],
            (
                [
                    s.model,
                    s.variant_id,
                    s.label,
                    s.n_languages,
                    s.macro,
                    *s.macro_ci,
                    s.best_language,
                    s.best_accuracy,
                    s.worst_language,
                    s.worst_accuracy,
                    s.gap,
                    *s.gap_ci,
                    s.std,
                    *s.std_ci,
                ]
                for s in data.language_summaries
            ),
        )
    if data.translation:
        files["translation.csv"] = _write(
            [
                "model",
                "variant_id",
                "label",
                "english_variant_id",
                "translation",
                "prompt_language",
                "test_language",
                "n_cases",
                "accuracy",
                "english_accuracy",
                "delta",
                "delta_ci_low",
                "delta_ci_high",
                "relative",
            ],
            (
                [
                    d.model,
                    d.variant_id,
                    d.label,
                    d.english_variant_id,
                    d.translation,
                    d.prompt_language,
                    d.test_language,
                    d.n_cases,
                    d.accuracy,
                    d.english_accuracy,
                    d.delta,
                    *d.delta_ci,
                    d.relative,
                ]
                for d in data.translation
            ),
        )
    if data.language_match:
        files["language_match.csv"] = _write(
            ["model", "language", "answers", "n", "matched", "rate", "ci_low", "ci_high"],
            ([x.model, x.language, x.answers, x.n, x.matched, x.rate, *x.ci] for x in data.language_match),
        )
    return files


def csv_files(data: ReportData) -> dict[str, str]:
    """File name -> CSV text."""
    out = {
        "results.csv": _results_csv(data),
        "sensitivity.csv": _write(
            [
                "model",
                "n_variants",
                "n_cases",
                "mean_accuracy",
                "mean_ci_low",
                "mean_ci_high",
                "best_variant",
                "best_label",
                "best_accuracy",
                "worst_variant",
                "worst_label",
                "worst_accuracy",
                "spread",
                "spread_ci_low",
                "spread_ci_high",
                "spread_bias",
                "std",
                "std_ci_low",
                "std_ci_high",
                "instance_sensitivity",
                "instance_ci_low",
                "instance_ci_high",
            ],
            (
                [
                    s.model,
                    s.n_variants,
                    s.n_cases,
                    s.mean_accuracy,
                    *s.mean_ci,
                    s.best_variant,
                    s.best_label,
                    s.best_accuracy,
                    s.worst_variant,
                    s.worst_label,
                    s.worst_accuracy,
                    s.spread,
                    *s.spread_ci,
                    s.spread_bias,
                    s.std,
                    *s.std_ci,
                    s.instance_sensitivity,
                    *s.instance_ci,
                ]
                for s in data.sensitivity
            ),
        ),
        "dimension_effects.csv": _write(
            [
                "model",
                "dimension",
                "value",
                "reference",
                "n_variants",
                "marginal",
                "marginal_ci_low",
                "marginal_ci_high",
                "n_pairs",
                "diff",
                "diff_ci_low",
                "diff_ci_high",
            ],
            (
                [
                    e.model,
                    e.dimension,
                    e.value,
                    e.reference,
                    e.n_variants,
                    e.marginal,
                    *e.marginal_ci,
                    e.n_pairs,
                    e.diff,
                    *e.diff_ci,
                ]
                for e in data.effects
            ),
        ),
        "baseline_tests.csv": _write(
            [
                "model",
                "variant_id",
                "label",
                "baseline_id",
                "n_cases",
                "accuracy",
                "baseline_accuracy",
                "diff",
                "diff_ci_low",
                "diff_ci_high",
                "better",
                "worse",
                "p_value",
                "p_holm",
                "significant",
            ],
            (
                [
                    t.model,
                    t.variant_id,
                    t.label,
                    t.baseline_id,
                    t.n_cases,
                    t.accuracy,
                    t.baseline_accuracy,
                    t.diff,
                    *t.diff_ci,
                    t.better,
                    t.worse,
                    t.p_value,
                    t.p_holm,
                    t.significant,
                ]
                for t in data.baseline_tests
            ),
        ),
        "cost.csv": _write(
            [
                "model",
                "calls",
                "errors",
                "input_tokens",
                "output_tokens",
                "cost_usd",
                "latency_p50",
                "latency_p95",
                "output_tokens_per_s",
            ],
            (
                [
                    c.model,
                    c.calls,
                    c.errors,
                    c.input_tokens,
                    c.output_tokens,
                    "" if c.cost_usd is None else c.cost_usd,
                    c.latency_p50,
                    c.latency_p95,
                    c.output_tokens_per_s,
                ]
                for c in data.costs
            ),
        ),
        "failure_modes.csv": _write(
            ["model", "variant_id", "label", "mode", "count", "share"],
            ([f.model, f.variant_id, f.label, f.mode, f.count, f.share] for f in data.failure_counts),
        ),
    }
    if data.category_cells:
        category_columns = ["model", "category", "n_cases", "n", "correct", "accuracy", "ci_low", "ci_high",
                            "ci_method"]
        out["categories.csv"] = _write(
            category_columns,
            ([c.model, c.category, c.n_cases, c.n, c.correct, c.accuracy, *c.ci, c.ci_method]
             for c in data.category_cells if not c.variant_id),
        )
        out["category_variants.csv"] = _write(
            ["model", "variant_id", "label", *category_columns[1:]],
            ([c.model, c.variant_id, c.label, c.category, c.n_cases, c.n, c.correct, c.accuracy, *c.ci, c.ci_method]
             for c in data.category_cells if c.variant_id),
        )
    out.update(_language_files(data))
    if data.unsupported:
        out["unsupported.csv"] = _write(
            ["model", "variant_id", "label", "call_mode", "count", "reason"],
            ([u.model, u.variant_id, u.label, u.call_mode, u.count, u.reason] for u in data.unsupported),
        )
    if data.format_tax:
        out["format_tax.csv"] = _write(
            ["model", "call_mode", "reference", "n_pairs", "n_cases", "accuracy", "prompt_accuracy", "diff",
             "diff_ci_low", "diff_ci_high", "better", "worse", "p_value", "p_holm", "significant"],
            ([t.model, t.call_mode, t.reference, t.n_pairs, t.n_cases, t.accuracy, t.prompt_accuracy, t.diff,
              *t.diff_ci, t.better, t.worse, t.p_value, t.p_holm, t.significant] for t in data.format_tax),
        )
    if data.parse_shares:
        out["parse_share.csv"] = _write(
            ["model", "call_mode", "return_format", "n", "parsed", "parse_share", "parse_ci_low", "parse_ci_high",
             "correct", "accuracy", "accuracy_ci_low", "accuracy_ci_high"],
            ([x.model, x.call_mode, x.return_format, x.n, x.parsed, x.parse_share, *x.parse_ci, x.correct,
              x.accuracy, *x.accuracy_ci] for x in data.parse_shares),
        )
    if data.mode_failures:
        out["failure_modes_by_call_mode.csv"] = _write(
            ["model", "call_mode", "failure_mode", "count", "share"],
            ([f.model, f.call_mode, f.mode, f.count, f.share] for f in data.mode_failures),
        )
    if data.pass_k:
        out["pass_k.csv"] = _write(
            ["model", "variant_id", "label", "language", "k", "value", "ci_low", "ci_high", "n_cases"],
            ([p.model, p.variant_id, p.label, p.language, p.k, p.value, *p.ci, p.n_cases] for p in data.pass_k),
        )
    return out
