"""The report's tables, built once as plain strings and rendered by each format.

A ``Table`` holds already formatted cells (percentages, intervals, p-values)
and which columns are numeric (right-aligned everywhere). Markdown, the
console, LaTeX and HTML only escape and lay out; none of them recomputes a
number. The findings in words are in ``_summary``, variant labels in ``_labels``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from promptgrid.display import escape_controls

from ._format import DASH, ci_pct, fmt_num, pct, pval, with_ci
from ._labels import DIMENSION_TITLES, short_label
from ._model import ReportData

__all__ = [
    "Table",
    "accuracy_table",
    "baseline_tables",
    "category_table",
    "category_variant_table",
    "cost_table",
    "endpoint_table",
    "effects_tables",
    "failure_tables",
    "format_tax_table",
    "language_accuracy_table",
    "language_match_table",
    "language_summary_table",
    "markdown_table",
    "mode_failure_tables",
    "parse_share_table",
    "pass_k_table",
    "results_table",
    "sensitivity_table",
    "translation_tables",
    "unsupported_table",
]


@dataclass(frozen=True)
class Table:
    """One table of a report or comparison. Its text (model names, ids, labels) is made safe on creation:
    control characters are written as visible escapes (``escape_controls``), so no writer (Markdown, LaTeX,
    HTML, the terminal) can pass a raw ESC on."""

    key: str
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...]
    note: str = ""

    def __post_init__(self) -> None:
        safe = object.__setattr__
        safe(self, "title", escape_controls(self.title))
        safe(self, "note", escape_controls(self.note))
        safe(self, "headers", tuple(escape_controls(h) for h in self.headers))
        safe(self, "rows", tuple(tuple(escape_controls(c) for c in row) for row in self.rows))


def _table(
    key: str, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool], note: str = ""
) -> Table:
    return Table(key, title, tuple(headers), tuple(tuple(r) for r in rows), tuple(numeric), note)


def markdown_table(t: Table, tablefmt: str = "github") -> str:
    """``t`` as a Markdown (or terminal) table; cells hold model names and ids, so control characters are escaped."""
    align = ["right" if n else "left" for n in t.numeric]
    rows = [[escape_controls(c) for c in row] for row in t.rows]
    headers = [escape_controls(h) for h in t.headers]
    text = tabulate(rows, headers=headers, tablefmt=tablefmt, colalign=align, disable_numparse=True)
    return str(text)


def _label(data: ReportData, variant_id: str) -> str:
    label = short_label(data, variant_id)
    return f"{label} (baseline)" if variant_id == data.baseline else label


def _ci_note(data: ReportData) -> str:
    conf = round(100 * data.settings.confidence)
    how = "cluster bootstrap over cases (percentile)" if data.max_repeats > 1 else "Wilson score interval"
    return (
        f"{conf}% intervals in brackets: {how}; {data.settings.n_resamples:,} bootstrap resamples where bootstrapped."
    )


def accuracy_table(data: ReportData) -> Table:
    unsupported = {(u.model, u.variant_id) for u in data.unsupported}
    rows = []
    for v in data.variants:
        row = [_label(data, v.id)]
        for m in data.models:
            c = data.cell(m, v.id)
            row.append(with_ci(c.accuracy, c.ci) if c else "unsupported" if (m, v.id) in unsupported else DASH)
        rows.append(row)
    return _table(
        "accuracy",
        "AST accuracy (%) per variant and model",
        ["Variant"] + list(data.models),
        rows,
        [False] + [True] * len(data.models),
        _ci_note(data) + " Failed calls count as incorrect.",
    )


def results_table(data: ReportData) -> Table:
    rows = []
    for c in data.cells:
        rows.append(
            [
                c.model,
                _label(data, c.variant_id),
                fmt_num(c.n),
                fmt_num(c.correct),
                pct(c.accuracy),
                f"{pct(c.ci[0])}–{pct(c.ci[1])}",
                fmt_num(c.errors),
                pct(c.fsa),
                pct(c.format_match),
                pct(c.format_agnostic_accuracy),
                fmt_num(c.tool_f1),
                fmt_num(c.arg_f1),
            ]
        )
    return _table(
        "results",
        "All metrics per model and variant",
        [
            "Model",
            "Variant",
            "n",
            "Correct",
            "AST %",
            "95% CI",
            "Errors",
            "FSA %",
            "Format match %",
            "Format-agnostic %",
            "Tool F1",
            "Arg F1",
        ],
        rows,
        [False, False] + [True] * 10,
        "n: scored jobs (cases x repeats). FSA: function selection accuracy (MASSIVE-Agents). Format match: answer "
        "in the requested format (ITC). Format-agnostic: valid when parsed in whatever format the model used. "
        "F1: micro over calls.",
    )


def sensitivity_table(data: ReportData) -> Table:
    rows = []
    for s in data.sensitivity:
        rows.append(
            [
                s.model,
                fmt_num(s.n_variants),
                with_ci(s.mean_accuracy, s.mean_ci),
                f"{short_label(data, s.best_variant)}: {pct(s.best_accuracy)}",
                f"{short_label(data, s.worst_variant)}: {pct(s.worst_accuracy)}",
                f"{pct(s.spread)} {ci_pct(s.spread_ci)}",
                pct(s.spread_bias),
                f"{pct(s.std)} {ci_pct(s.std_ci)}",
                f"{pct(s.instance_sensitivity)} {ci_pct(s.instance_ci)}",
            ]
        )
    return _table(
        "sensitivity",
        "Format sensitivity per model",
        [
            "Model",
            "Variants",
            "Mean AST % [CI]",
            "Best variant",
            "Worst variant",
            "Spread pp [CI]",
            "Spread bias pp",
            "Std pp [CI]",
            "Instance sensitivity pp [CI]",
        ],
        rows,
        [False, True, True, False, False, True, True, True, True],
        "Spread = best - worst variant (BFCL's max delta); its interval re-picks best and worst in each bootstrap "
        "resample. Max - min is biased upwards by noise: 'spread bias' is the bootstrap estimate of that bias. "
        "Std: sample std across variants (n - 1, as bfcl-eval's accuracy_std). Instance sensitivity (ProSA): per case, "
        "mean |difference| of correctness between pairs of variants, averaged over cases.",
    )


def effects_tables(data: ReportData) -> list[Table]:
    """One table per model: marginal accuracy per dimension value and the matched-pair difference."""
    out: list[Table] = []
    for m in data.models:
        rows = []
        for e in (x for x in data.effects if x.model == m):
            rows.append(
                [
                    DIMENSION_TITLES.get(e.dimension, e.dimension),
                    e.value + (" (ref)" if e.value == e.reference else ""),
                    fmt_num(e.n_variants),
                    with_ci(e.marginal, e.marginal_ci),
                    DASH if e.value == e.reference else with_ci(e.diff, e.diff_ci, signed=True),
                    fmt_num(e.n_pairs),
                ]
            )
        if not rows:
            continue
        out.append(
            _table(
                f"effects-{len(out)}",
                f"{m}: dimension effects",
                ["Dimension", "Value", "Variants", "Marginal AST % [CI]", "vs ref, pp [CI]", "Matched pairs"],
                rows,
                [False, False, True, True, True, True],
                "Marginal: mean accuracy over the variants with this value, among the variants where the dimension "
                "varies (those with a partner differing only in this dimension). 'vs ref': mean over matched pairs "
                "(all other dimensions equal) of accuracy(value) - accuracy(reference). Bootstrap intervals over "
                "cases.",
            )
        )
    return out


def baseline_tables(data: ReportData) -> list[Table]:
    """One table per model: each variant against the baseline on the same cases."""
    base = short_label(data, data.baseline) if data.baseline else DASH
    test = "mid-p McNemar" if data.settings.mid_p else "exact McNemar"
    out: list[Table] = []
    for m in data.models:
        rows = []
        for t in (x for x in data.baseline_tests if x.model == m):
            rows.append(
                [
                    _label(data, t.variant_id),
                    fmt_num(t.n_cases),
                    pct(t.accuracy),
                    pct(t.baseline_accuracy),
                    with_ci(t.diff, t.diff_ci, signed=True),
                    f"{t.better}/{t.worse}",
                    pval(t.p_value),
                    pval(t.p_holm),
                    "yes" if t.significant else "",
                ]
            )
        if not rows:
            continue
        out.append(
            _table(
                f"baseline-{len(out)}",
                f"{m}: each variant against the baseline ({base})",
                [
                    "Variant",
                    "Cases",
                    "AST %",
                    "Baseline %",
                    "Diff pp [CI]",
                    "Better/worse",
                    "p",
                    "p (Holm)",
                    f"Significant (α={data.settings.alpha:g})",
                ],
                rows,
                [False, True, True, True, True, True, True, True, False],
                f"Paired on the same cases. p: {test} test on the discordant cases (better/worse; with repeats, "
                "per-case mean correctness is compared, a sign test). Holm-adjusted over the variants of each model. "
                "CI: paired bootstrap over cases.",
            )
        )
    return out


def _variant_columns_table(data: ReportData, name: str, title: str, by: Mapping[tuple[str, str, str], Any],
                           columns: Sequence[str]) -> Table:
    """One row per model and variant with any cell, one column per ``columns`` entry (a language, a category):
    the cell ``by[(model, variant_id, column)]``'s accuracy with its interval, a dash where there is none."""
    rows = []
    for m in data.models:
        for v in data.variants:
            if not any((m, v.id, col) in by for col in columns):
                continue
            row = [m, _label(data, v.id)]
            for col in columns:
                c = by.get((m, v.id, col))
                row.append(with_ci(c.accuracy, c.ci) if c else DASH)
            rows.append(row)
    return _table(name, title, ["Model", "Variant"] + list(columns), rows,
                  [False, False] + [True] * len(columns), _ci_note(data))


def language_accuracy_table(data: ReportData) -> Table:
    by = {(c.model, c.variant_id, c.language): c for c in data.language_cells}
    return _variant_columns_table(data, "languages", "AST accuracy (%) per test language", by, data.languages)


def category_table(data: ReportData) -> Table:
    """Per model and dataset category, over all the model's variants: jobs, correct answers, accuracy."""
    rows = [
        [c.model, c.category, fmt_num(c.n_cases), fmt_num(c.n), fmt_num(c.correct), with_ci(c.accuracy, c.ci)]
        for m in data.models
        for cat in data.categories
        for c in data.category_cells
        if c.model == m and c.category == cat and not c.variant_id
    ]
    return _table(
        "categories",
        "AST accuracy (%) per dataset category, over all variants",
        ["Model", "Category", "Cases", "Jobs", "Correct", "AST % [CI]"],
        rows,
        [False, False, True, True, True, True],
        "Category: the test case's (simple, multiple, parallel, parallel_multiple, irrelevance). Irrelevance "
        "cases are answered correctly by making no call at all, so a model that never writes a correct call can "
        "still score there. Jobs: scored jobs of every variant; intervals as in the accuracy table (bootstrap over "
        "the category's cases when a case was asked more than once).",
    )


def category_variant_table(data: ReportData) -> Table:
    """Per model and variant: accuracy on each dataset category (one column per category)."""
    by = {(c.model, c.variant_id, c.category): c for c in data.category_cells if c.variant_id}
    return _variant_columns_table(data, "category-variants", "AST accuracy (%) per variant and dataset category",
                                  by, data.categories)


def language_match_table(data: ReportData) -> Table:
    rows = [
        [x.model, x.language, fmt_num(x.answers), fmt_num(x.n), fmt_num(x.matched), with_ci(x.rate, x.ci)]
        for x in data.language_match
    ]
    return _table(
        "language-match",
        "Language match of free-text answers (ITC LM)",
        ["Model", "Test language", "Answers", "Free text (n)", "Matched", "LM % [CI]"],
        rows,
        [False, False, True, True, True, True],
        "Language match: the share of free-text answers written in the language of the test case's query "
        "(identified with langid). It is defined only for answers that hold no function call: n counts those, "
        "out of every scored answer in that language (failed calls aside); answers with a call are not measured. "
        "Interval: Wilson over answers (repeats of a case count as separate answers).",
    )


def language_summary_table(data: ReportData) -> Table:
    rows = []
    for s in data.language_summaries:
        rows.append(
            [
                s.model,
                _label(data, s.variant_id),
                fmt_num(s.n_languages),
                with_ci(s.macro, s.macro_ci),
                s.best_language,
                pct(s.best_accuracy),
                s.worst_language,
                pct(s.worst_accuracy),
                f"{pct(s.gap)} {ci_pct(s.gap_ci)}",
                f"{pct(s.std)} {ci_pct(s.std_ci)}",
            ]
        )
    return _table(
        "language-summary",
        "Across languages (MASSIVE-Agents Table 2; Ticket-Bench gap and std)",
        [
            "Model",
            "Variant",
            "Languages",
            "Macro avg % [CI]",
            "Best lang",
            "Best %",
            "Worst lang",
            "Worst %",
            "Gap pp [CI]",
            "Std pp [CI]",
        ],
        rows,
        [False, False, True, True, False, True, False, True, True, True],
        "Macro average: accuracy per language, then the mean over languages. Gap: best - worst language (like the "
        "spread, biased upwards by noise). Std: sample "
        "std across languages. Intervals: bootstrap over cases within each language (stratified).",
    )


def _prompt_lang(lang: str) -> str:
    return "test language" if lang == "query" else lang


def translation_tables(data: ReportData) -> list[Table]:
    out: list[Table] = []
    for m in data.models:
        ds = [d for d in data.translation if d.model == m]
        if not ds:
            continue
        several = len({d.english_variant_id for d in ds}) > 1
        rows_by: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        order: list[tuple[str, str]] = []
        for d in ds:
            name = f"{_prompt_lang(d.prompt_language)} {d.translation}"
            if several:
                name += f" vs {short_label(data, d.english_variant_id)}"
            key = (name, d.variant_id)
            if key not in rows_by:
                order.append(key)
            rows_by[key][d.test_language] = with_ci(d.delta, d.delta_ci, signed=True)
        langs = [lang for lang in data.languages if any(d.test_language == lang for d in ds)]
        rows = [[name] + [rows_by[(name, vid)].get(lang, DASH) for lang in langs] for name, vid in order]
        out.append(
            _table(
                f"translation-{len(out)}",
                f"{m}: change vs the English-only prompt (pp), per test language",
                ["Prompt translation"] + langs,
                rows,
                [False] + [True] * len(langs),
                "MASSIVE-Agents Fig. 4 layout: partial = function descriptions translated, full = instructions and "
                "descriptions. Difference in percentage points on the same cases, paired bootstrap CI. The relative "
                "change (%) is in translation.csv.",
            )
        )
    return out


def pass_k_table(data: ReportData) -> Table:
    langs = [lang for lang in list(data.languages) + ["overall"] if any(p.language == lang for p in data.pass_k)]
    by = {(p.model, p.variant_id, p.k, p.language): p for p in data.pass_k}
    keys = sorted(
        {(p.model, p.variant_id, p.k) for p in data.pass_k},
        key=lambda x: (x[0], [v.id for v in data.variants].index(x[1]), x[2]),
    )
    rows = []
    for m, vid, k in keys:
        row = [m, _label(data, vid), str(k)]
        for lang in langs:
            p = by.get((m, vid, k, lang))
            row.append(f"{p.value:.2f} [{p.ci[0]:.2f}, {p.ci[1]:.2f}]" if p and not math.isnan(p.value) else DASH)
        rows.append(row)
    return _table(
        "pass-k",
        "pass^k per language (Ticket-Bench Table 3)",
        ["Model", "Variant", "k"] + langs,
        rows,
        [False, False, True] + [True] * len(langs),
        "pass^k = mean over cases of (c/M)^k, c correct out of M repeats (Ticket-Bench, section 3.5); k = 1 is the "
        "accuracy. Bootstrap CI over cases.",
    )


def failure_tables(data: ReportData) -> list[Table]:
    out: list[Table] = []
    for m in data.models:
        fc = [f for f in data.failure_counts if f.model == m]
        if not fc:
            continue
        totals: dict[str, int] = defaultdict(int)
        for f in fc:
            totals[f.mode] += f.count
        modes = sorted(totals, key=lambda k: (-totals[k], k))
        by = {(f.variant_id, f.mode): f.count for f in fc}
        rows = []
        for v in data.variants:
            c = data.cell(m, v.id)
            if c is None:
                continue
            counts = [by.get((v.id, mode), 0) for mode in modes]
            rows.append(
                [_label(data, v.id), fmt_num(c.n), fmt_num(sum(counts))] + [fmt_num(n) if n else "" for n in counts]
            )
        rows.append(
            ["all variants", fmt_num(sum(c.n for c in data.cells if c.model == m)), fmt_num(sum(totals.values()))]
            + [fmt_num(totals[mode]) for mode in modes]
        )
        out.append(
            _table(
                f"failures-{len(out)}",
                f"{m}: failure modes per variant (counts)",
                ["Variant", "Jobs", "Failed"] + modes,
                rows,
                [False] + [True] * (2 + len(modes)),
                "call_error: the call itself failed (counted as incorrect).",
            )
        )
    return out


def endpoint_table(data: ReportData) -> Table | None:
    """Calls per endpoint of the models served by several (``api_base`` a list); None when no model was."""
    if not data.endpoints:
        return None
    rows = [[e.model, e.endpoint, fmt_num(e.calls), fmt_num(e.errors), fmt_num(e.latency_mean)]
            for e in data.endpoints]
    return _table("endpoints", "Calls per endpoint", ["Model", "Endpoint", "Calls", "Errors", "Mean latency (s)"],
                  rows, [False, False, True, True, True],
                  "Models with several endpoints (replicas): calls spread least-busy, a call that found its "
                  "endpoint down sent on to another. Per model call; errors after every retry.")


def cost_table(data: ReportData) -> Table:
    sens = {s.model: s for s in data.sensitivity}
    rows = []
    for c in data.costs:
        s = sens.get(c.model)
        rows.append(
            [
                c.model,
                fmt_num(c.calls),
                fmt_num(c.errors),
                fmt_num(c.input_tokens),
                fmt_num(c.output_tokens),
                DASH if c.cost_usd is None else f"{c.cost_usd:,.4f}",
                fmt_num(c.latency_p50),
                fmt_num(c.latency_p95),
                fmt_num(c.output_tokens_per_s, 1),
                with_ci(s.mean_accuracy, s.mean_ci) if s else DASH,
            ]
        )
    return _table(
        "cost",
        "Cost and latency per model",
        [
            "Model",
            "Calls",
            "Errors",
            "Input tokens",
            "Output tokens",
            "Cost (USD)",
            "Latency p50 (s)",
            "Latency p95 (s)",
            "Output tokens/s",
            "Mean AST % [CI]",
        ],
        rows,
        [False] + [True] * 9,
        "Output tokens/s: output tokens / latency over successful calls (includes time to first token). "
        "Percentiles: linear interpolation.",
    )


def unsupported_table(data: ReportData) -> Table:
    """Jobs never sent because the model cannot do the variant's call mode (the reason as stored)."""
    rows = [[u.model, _label(data, u.variant_id), u.call_mode, fmt_num(u.count), u.reason] for u in data.unsupported]
    return _table(
        "unsupported",
        "Unsupported jobs (not sent, in no rate)",
        ["Model", "Variant", "Call mode", "Jobs", "Reason"],
        rows,
        [False, False, False, True, False],
        "Decided before sending: the model (or its client) cannot do the variant's call mode. These jobs count "
        "neither as correct nor as incorrect nor as failed calls.",
    )


def format_tax_table(data: ReportData) -> Table:
    """Per model, each call mode against prompt mode on the same cases (the 'format tax')."""
    test = "mid-p McNemar" if data.settings.mid_p else "exact McNemar"
    rows = [
        [
            t.model,
            t.call_mode,
            t.reference,
            fmt_num(t.n_pairs),
            fmt_num(t.n_cases),
            pct(t.accuracy),
            pct(t.prompt_accuracy),
            with_ci(t.diff, t.diff_ci, signed=True),
            f"{t.better}/{t.worse}",
            pval(t.p_value),
            pval(t.p_holm),
            "yes" if t.significant else "",
        ]
        for t in data.format_tax
    ]
    return _table(
        "format-tax",
        "Call mode against prompt mode (format tax)",
        ["Model", "Call mode", "Compared with", "Variants", "Cases", "Mode AST %", "Prompt AST %", "Diff pp [CI]",
         "Better/worse", "p", "p (Holm)", f"Significant (α={data.settings.alpha:g})"],
        rows,
        [False, False, False] + [True] * 8 + [False],
        "Diff = accuracy(mode) - accuracy(prompt) on the same cases. Constrained: each variant against the "
        "prompt variant with the same return format and other dimensions, averaged over formats. Native (no "
        "return format): against the mean of the prompt variants over the format dimensions. CI: paired bootstrap "
        f"over cases; p: {test} (sign) test on the per-case differences, Holm over the modes of each model.",
    )


def parse_share_table(data: ReportData) -> Table:
    """Per model, call mode and return format: answers that parse as calls beside the accuracy."""
    rows = [
        [
            p.model,
            p.call_mode,
            p.return_format,
            fmt_num(p.n),
            with_ci(p.parse_share, p.parse_ci),
            with_ci(p.accuracy, p.accuracy_ci),
        ]
        for p in data.parse_shares
    ]
    return _table(
        "parse-share",
        "Answers that parse as calls, and accuracy, per call mode and return format",
        ["Model", "Call mode", "Return format", "n", "Parse as calls % [CI]", "AST % [CI]"],
        rows,
        [False, False, False, True, True, True],
        "Parse as calls: scored answers that are no failed call and fail for no format-level reason (no call, "
        "prose, other format, unclosed tag, malformed call, tool arguments not JSON, ...): well-formed calls, "
        "right or wrong; a correct answer counts as parsed. Native answers have no return format (-). "
        "Wilson intervals over jobs.",
    )


def mode_failure_tables(data: ReportData) -> list[Table]:
    """One table per model: failure-mode counts per call mode (only when the run has more than one)."""
    out: list[Table] = []
    jobs = {(p.model, p.call_mode): 0 for p in data.parse_shares}
    for p in data.parse_shares:
        jobs[(p.model, p.call_mode)] += p.n
    for m in data.models:
        mf = [f for f in data.mode_failures if f.model == m]
        if not mf:
            continue
        totals: dict[str, int] = defaultdict(int)
        for f in mf:
            totals[f.mode] += f.count
        modes = sorted(totals, key=lambda k: (-totals[k], k))
        by = {(f.call_mode, f.mode): f.count for f in mf}
        rows = []
        for cm in dict.fromkeys(p.call_mode for p in data.parse_shares if p.model == m):
            counts = [by.get((cm, mode), 0) for mode in modes]
            rows.append([cm, fmt_num(jobs[(m, cm)]), fmt_num(sum(counts))] + [fmt_num(n) if n else "" for n in counts])
        out.append(
            _table(
                f"mode-failures-{len(out)}",
                f"{m}: failure modes per call mode (counts)",
                ["Call mode", "Jobs", "Failed"] + modes,
                rows,
                [False] + [True] * (2 + len(modes)),
                "bad_tool_arguments: native tool-call arguments that are not a valid JSON object; "
                "call_error: the call itself failed.",
            )
        )
    return out
