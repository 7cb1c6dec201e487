"""``report.md`` and the table ``promptgrid report`` prints."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tabulate import tabulate

from promptgrid.display import escape_controls

from ._adaptive import adaptive_lines
from ._format import pct, pval, with_ci
from ._labels import shared_dimensions, short_label
from ._model import FigureRef, ReportData
from ._summary import measured_share, methods_points, sample_notes, summary_points
from ._tables import (
    Table,
    accuracy_table,
    baseline_tables,
    category_table,
    category_variant_table,
    cost_table,
    effects_tables,
    endpoint_table,
    failure_tables,
    format_tax_table,
    language_accuracy_table,
    language_match_table,
    language_summary_table,
    markdown_table,
    mode_failure_tables,
    parse_share_table,
    pass_k_table,
    results_table,
    sensitivity_table,
    translation_tables,
    unsupported_table,
)

__all__ = ["console_table", "markdown_report", "overview"]


def overview(data: ReportData) -> str:
    base = short_label(data, data.baseline) if data.baseline else "none"
    reps = f", up to {data.max_repeats} repeats per case" if data.max_repeats > 1 else ""
    langs = f", {len(data.languages)} languages ({', '.join(data.languages)})" if len(data.languages) > 1 else ""
    shared = shared_dimensions(data)
    shared = f" Shared by every variant: {shared}." if shared else ""
    unsupported = sum(u.count for u in data.unsupported)
    unsent = f" ({unsupported:,} unsupported, not sent)" if unsupported else ""
    return (
        f"{len(data.models)} model(s) x {len(data.variants)} variant(s) x {data.n_cases} case(s){reps}{langs}; "
        f"{data.n_rows:,} jobs{unsent}. Baseline variant: {base}.{shared}"
    )


def _escape_md(text: str) -> str:
    return text.replace("|", "\\|")


_FENCE_RUNS = re.compile("`+|~+")


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks or tildes in ``text``: model text cannot close it."""
    longest = max((len(run) for run in _FENCE_RUNS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def _section(t: Table, level: str = "###") -> list[str]:
    out = [f"{level} {t.title}", "", markdown_table(t), ""]
    if t.note:
        out += [f"_{t.note}_", ""]
    return out


def _image(figures: dict[str, FigureRef], name: str) -> list[str]:
    """The lines that link figure ``name`` with its caption; none when that figure was not drawn."""
    f = figures.get(name)
    return [f"![{f.title}]({f.path})", "", f"_{f.caption}_", ""] if f else []


def _summary_lines(data: ReportData) -> list[str]:
    """The Summary section: one bold headline per point with its sub-points, then the notes."""
    lines = ["## Summary", ""]
    for headline, points in summary_points(data):
        name, _, rest = headline.partition(": ")
        lines.append(f"- **{name}**: {rest}")
        lines += [f"  - {p}" for p in points]
    lines.append("")
    if data.notes:
        lines += ["Notes:", ""] + [f"- {n}" for n in data.notes] + [""]
    return lines


def _call_mode_lines(data: ReportData) -> list[str]:
    """The Call modes section (format tax, parse shares); none when no call mode was compared."""
    if not (data.format_tax or data.parse_shares):
        return []
    lines = ["## Call modes", ""]
    if data.format_tax:
        lines += _section(format_tax_table(data))
    if data.parse_shares:
        lines += _section(parse_share_table(data))
    return lines


def _grid_lines(data: ReportData, fig: dict[str, FigureRef]) -> list[str]:
    """The sections shown only when the grid has them: categories, dimension effects, call modes, unsupported
    jobs and the paired comparison with the baseline."""
    lines: list[str] = []
    if data.category_cells:
        lines += ["## Categories", ""] + _section(category_table(data)) + _section(category_variant_table(data))
    if data.effects:
        lines += ["## Dimension effects", ""] + _image(fig, "dimension_effects")
        for t in effects_tables(data):
            lines += _section(t)
    lines += _call_mode_lines(data)
    if data.unsupported:
        lines += ["## Unsupported jobs", ""] + _section(unsupported_table(data))
    if data.baseline_tests:
        lines += ["## Paired comparison with the baseline", ""]
        for t in baseline_tables(data):
            lines += _section(t)
    return lines


def _language_lines(data: ReportData, fig: dict[str, FigureRef]) -> list[str]:
    """The Languages section (per-language accuracy, summaries, translation, language match), when there is one."""
    lines: list[str] = []
    if data.language_cells or data.language_match:
        lines += ["## Languages", ""]
    if data.language_cells:
        lines += _image(fig, "languages") + _section(language_accuracy_table(data))
        if data.language_summaries:
            lines += _section(language_summary_table(data))
        if data.translation:
            lines += _image(fig, "translation")
            for t in translation_tables(data):
                lines += _section(t)
    if data.language_match:
        lines += _section(language_match_table(data))
    return lines


def _example_lines(data: ReportData) -> list[str]:
    """The failure examples, grouped under their mode, each model text in a fence it cannot close."""
    if not data.failure_examples:
        return []
    lines = ["### Examples", ""]
    mode = None
    for ex in data.failure_examples:
        if ex.mode != mode:
            mode = ex.mode
            lines += [f"**{mode}**", ""]
        fence = _fence(ex.text)
        lines += (
            [
                f"- {ex.model}, {_escape_md(short_label(data, ex.variant_id))}, "
                f"case {ex.case_id} (repeat {ex.repeat}):",
                "",
                f"  {fence}text",
            ]
            + [f"  {line}" for line in escape_controls(ex.text).split("\n")]  # \r stays visible
            + [f"  {fence}", ""]
        )
    return lines


def markdown_report(data: ReportData, figures: Sequence[FigureRef] = ()) -> str:
    """The whole report as GitHub-flavoured Markdown (figures linked, not embedded)."""
    fig = {f.name: f for f in figures}
    lines = ["# promptgrid format-sensitivity report", "", overview(data), ""]
    lines += _summary_lines(data)
    lines += adaptive_lines(data.adaptive, _image(fig, "adaptive"))
    lines += ["## Accuracy", ""] + _image(fig, "heatmap")
    lines += _section(accuracy_table(data))
    lines += ["## Sensitivity", ""] + _image(fig, "sensitivity")
    lines += _section(sensitivity_table(data))
    lines += _grid_lines(data, fig)
    lines += _language_lines(data, fig)
    if data.pass_k:
        lines += ["## Consistency over repeats (pass^k)", ""] + _section(pass_k_table(data))
    lines += ["## Failure modes", ""]
    for t in failure_tables(data) + mode_failure_tables(data):
        lines += _section(t)
    lines += _example_lines(data)
    lines += ["## Cost and latency", ""] + _image(fig, "speed") + _section(cost_table(data))
    if (endpoints := endpoint_table(data)) is not None:
        lines += _section(endpoints)
    lines += ["## Detailed results", ""] + _section(results_table(data))
    lines += ["## Methods", ""] + [f"- {p}" for p in methods_points(data)] + [""]
    # model text, model names and case ids are untrusted: no raw ANSI escapes or bidi overrides in report.md
    return escape_controls("\n".join(lines).rstrip()) + "\n"


def console_table(data: ReportData) -> str:
    """The accuracy table plus one sensitivity line per model, for the terminal."""
    t = accuracy_table(data)
    align = ["right" if n else "left" for n in t.numeric]
    out = [
        overview(data),
        "",
        tabulate(list(t.rows), headers=list(t.headers), tablefmt="simple", colalign=align, disable_numparse=True),
        "",
        t.note,
        "",
    ]
    if data.category_cells:
        c = category_table(data)
        align = ["right" if n else "left" for n in c.numeric]
        out += [
            c.title,
            tabulate(list(c.rows), headers=list(c.headers), tablefmt="simple", colalign=align, disable_numparse=True),
            "",
        ]
    adaptive = {r.get("model") for r in data.adaptive}
    for s in data.sensitivity:
        if s.model in adaptive:  # the goal's best, worst and spread follow (adaptive study), not these
            out.append(f"{s.model}: measured: {measured_share(data, s.model)}; each variant ran its own cells, so "
                       "best, worst and spread are the adaptive study's below")
            continue
        out.append(
            f"{s.model}: mean {with_ci(s.mean_accuracy, s.mean_ci)}; spread {pct(s.spread)} pp "
            f"[{pct(s.spread_ci[0])}, {pct(s.spread_ci[1])}] (worst {short_label(data, s.worst_variant)}, "
            f"best {short_label(data, s.best_variant)}); "
            f"std {pct(s.std)} pp"
        )
    for tax in data.format_tax:
        out.append(
            f"{tax.model}: {tax.call_mode} - prompt {with_ci(tax.diff, tax.diff_ci, signed=True)} pp on "
            f"{tax.n_cases} cases ({tax.reference}; p {pval(tax.p_value)})"
        )
    for u in data.unsupported:
        out.append(f"{u.model}: {u.count} job(s) of {short_label(data, u.variant_id)} unsupported, "
                   f"not sent: {u.reason}")
    for model, note in sample_notes(data).items():
        out.append(f"{model}: {note.sentence()}")
    for n in data.notes:
        out.append(f"note: {n}")
    return escape_controls("\n".join(out).rstrip()) + "\n"  # printed to a terminal: no raw escapes
