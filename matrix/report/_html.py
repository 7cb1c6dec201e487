"""``report.html``: one self-contained page (inline CSS, figures as base64 PNG, no script).

A reader opens it from disk or an e-mail attachment: nothing is fetched, no
JavaScript runs. The summary comes first (per model: mean, best and worst
variant with their whole labels, spread, std, then the findings in words with
their intervals), then one section per table.

The page is rendered from the Jinja2 templates in ``templates/`` (shipped in
the package) with autoescape on: this module only gathers the values, and
every piece of text from the rows (model names, labels, responses) is
HTML-escaped by the template. Control characters (ANSI escapes, bidi
overrides) are written as visible escapes; model output is untrusted.
"""

from __future__ import annotations

import base64
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import jinja2

from promptgrid.display import escape_controls

from ._format import ci_pct, pct
from ._labels import short_label
from ._markdown import overview
from ._model import ReportData, Sensitivity
from ._summary import methods_points, summary_points
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
    mode_failure_tables,
    parse_share_table,
    pass_k_table,
    results_table,
    sensitivity_table,
    translation_tables,
    unsupported_table,
)

if TYPE_CHECKING:  # matplotlib only where figures are drawn
    from ._figures import Rendered

__all__ = ["html_report", "render_page"]


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("promptgrid.matrix.report", "templates"),
        autoescape=True,  # every value is escaped; the templates hold the only markup
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def render_page(template: str, **values: Any) -> str:
    """One of the package's HTML templates rendered with ``values`` (escaped), control characters made visible."""
    return escape_controls(_environment().get_template(template).render(**values))


# An interval at the end of a cell: ``82.5 [78.1, 86.0]``; a label's ``[bfcl_v4_clean]`` is not one.
_CI_RE = re.compile(r"^(.*?) (\[[-+0-9.,\s]*\])$")


@dataclass(frozen=True)
class _Cell:
    value: str
    ci: str
    cls: str


@dataclass(frozen=True)
class _Header:
    text: str
    numeric: bool


@dataclass(frozen=True)
class _TableView:
    key: str
    title: str
    headers: tuple[_Header, ...]
    rows: tuple[tuple[_Cell, ...], ...]
    note: str
    wrap: str


def _cell(text: str, numeric: bool, header: str) -> _Cell:
    cls = "num" if numeric else "text"
    if header.startswith("Significant") and text == "yes":
        cls += " sig"
    m = _CI_RE.match(text)
    return _Cell(m.group(1), m.group(2), cls) if m else _Cell(text, "", cls)


def table_view(t: Table) -> _TableView:
    """What the ``table`` macro shows of a table: headers, cells split from their intervals, the note."""
    return _TableView(
        t.key,
        t.title,
        tuple(_Header(h, n) for h, n in zip(t.headers, t.numeric, strict=True)),
        tuple(
            tuple(_cell(c, n, h) for c, n, h in zip(row, t.numeric, t.headers, strict=True)) for row in t.rows
        ),
        t.note,
        "table-wrap long" if len(t.rows) > 30 else "table-wrap",
    )


def _png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def _figure(fig: Rendered | None) -> dict[str, Any]:
    if fig is None:
        return {"kind": "figure", "figure": None}
    width, height = _png_size(fig.png)
    # Rendered at 150 dpi; show at the figure's physical size (96 CSS px per inch).
    return {"kind": "figure", "figure": {
        "data": base64.b64encode(fig.png).decode("ascii"),
        "width": round(width * 96 / 150),
        "height": round(height * 96 / 150),
        "title": fig.title,
        "caption": fig.caption,
    }}


def _table(t: Table) -> dict[str, Any]:
    return {"kind": "table", "table": table_view(t)}


_LABEL_RE = re.compile(r"(\S+->\S+)")


def _label_pieces(text: str) -> list[tuple[str, bool]]:
    """Text split into (piece, is a BFCL label such as ``json->python,False``): labels stay on one line."""
    return [(p, bool(i % 2)) for i, p in enumerate(_LABEL_RE.split(text)) if p]


def _stat(key: str, value: str, ci: str = "", sub: str = "", label: str = "", wide: bool = False) -> dict[str, Any]:
    return {"key": key, "value": value, "ci": ci, "sub": sub, "label": label, "wide": wide}


def _adaptive_card(data: ReportData, found: dict[str, Any], points: Sequence[str]) -> dict[str, Any]:
    """An adaptive model's tiles: the goal's best, worst and spread (estimated or measured, as they were
    obtained), the median variant where the goal estimates it, and the cells that ran; the headline in words and
    what the cells every variant ran say come first among the points."""
    from ._adaptive import _all_tied, names

    def ci(e: dict[str, Any]) -> str:
        return "" if e.get("low") is None or e.get("high") is None else ci_pct((e["low"], e["high"]))

    def value(e: dict[str, Any], unit: str) -> str:
        return "-" if e.get("value") is None else f"{pct(e['value'])}{unit}"

    stats: list[dict[str, Any]] = []
    b, w, s = found.get("best"), found.get("worst"), found.get("spread")
    if b and w and s:
        kind = b["accuracy"]["kind"]

        def cells(e: dict[str, Any]) -> str:
            n = e["accuracy"]["n"]
            return f"estimated; {n:,} cells measured" if kind == "estimated" else f"measured on {n:,} cells"

        if _all_tied(found):
            stats.append(_stat("All variants tie", value(b["accuracy"], "%"), ci(b["accuracy"]), kind))
        else:
            stats += [_stat("Best variant", value(b["accuracy"], "%"), ci(b["accuracy"]),
                            cells(b), label=names(found, "best"), wide=True),
                      _stat("Worst variant", value(w["accuracy"], "%"), ci(w["accuracy"]),
                            cells(w), label=names(found, "worst"),
                            wide=True)]
        stats.append(_stat("Spread", value(s, " pp"), ci(s), f"best − worst, {s['kind']}"))
    median = (found.get("quantiles") or {}).get("p50")
    if median and median.get("value") is not None:
        stats.append(_stat("Median variant", value(median, "%"), ci(median), median["kind"]))
    share = f"{100 * found['spent'] / found['product']:.0f}% of {found['product']:,}" if found.get("product") else ""
    stats.append(_stat("Cells run", f"{found['spent']:,}", "", f"goal {found['goal']}; {share}"))
    from ._adaptive import headline

    return {"model": found["model"], "stats": stats,
            "points": [_label_pieces(p) for p in [headline(found)[:1].upper() + headline(found)[1:], *points]]}


def _card(data: ReportData, s: Sensitivity, points: Sequence[str]) -> dict[str, Any]:
    from ._summary import adaptive_of

    found = adaptive_of(data, s.model)
    if found is not None:
        return _adaptive_card(data, found, points)
    stat = _stat
    stats = [
        stat("Mean accuracy", f"{pct(s.mean_accuracy)}%", ci_pct(s.mean_ci),
             f"{s.n_variants} variants, {s.n_cases} cases"),
        stat("Spread", f"{pct(s.spread)} pp", ci_pct(s.spread_ci), f"best − worst; noise ≈ {pct(s.spread_bias)} pp"),
        stat("Std", f"{pct(s.std)} pp", ci_pct(s.std_ci), "across variants (n − 1)"),
        stat("Instance sens.", f"{pct(s.instance_sensitivity)} pp", ci_pct(s.instance_ci), "ProSA, per case"),
        # The whole label, wrapped where it is long: best and worst may differ only at the end.
        stat("Best variant", f"{pct(s.best_accuracy)}%", ci_pct(s.best_ci),
             label=short_label(data, s.best_variant), wide=True),
        stat("Worst variant", f"{pct(s.worst_accuracy)}%", ci_pct(s.worst_ci),
             label=short_label(data, s.worst_variant), wide=True),
    ]
    return {"model": s.model, "stats": stats, "points": [_label_pieces(p) for p in points]}


def _examples(data: ReportData) -> dict[str, Any]:
    groups = []
    for mode in dict.fromkeys(e.mode for e in data.failure_examples):
        exs = [e for e in data.failure_examples if e.mode == mode]
        groups.append({
            "mode": mode,
            "total": sum(f.count for f in data.failure_counts if f.mode == mode),
            "examples": [
                {"model": e.model, "label": short_label(data, e.variant_id), "case_id": e.case_id,
                 "repeat": e.repeat, "text": e.text}
                for e in exs
            ],
        })
    return {"kind": "examples", "groups": groups}


def _section(sid: str, title: str, *parts: dict[str, Any]) -> dict[str, Any]:
    """One section of the page: its anchor id, its title and its parts (tables, figures, lists)."""
    return {"id": sid, "title": title, "parts": list(parts)}


def _adaptive_sections(data: ReportData, figs: Mapping[str, Rendered]) -> list[dict[str, Any]]:
    """The Adaptive study section, when the report has one."""
    if not data.adaptive:
        return []
    from ._adaptive import adaptive_table, spent_lines, variants_table

    adaptive_parts = [{"kind": "methods", "points": spent_lines(data.adaptive)}, _figure(figs.get("adaptive")),
                      _table(adaptive_table(data.adaptive))]
    if any(r["goal"] == "distribution" for r in data.adaptive):
        adaptive_parts.append(_table(variants_table(data.adaptive)))
    return [_section("adaptive-section", "Adaptive study", *adaptive_parts)]


def _grid_sections(data: ReportData, figs: Mapping[str, Rendered]) -> list[dict[str, Any]]:
    """The sections shown only when the grid has them: categories, dimension effects, call modes, unsupported
    jobs and the comparison with the baseline."""
    sections: list[dict[str, Any]] = []
    if data.category_cells:
        sections.append(_section("categories-section", "Categories", _table(category_table(data)),
                                 _table(category_variant_table(data))))
    if data.effects:
        sections.append(_section("effects-section", "Dimension effects", _figure(figs.get("dimension_effects")),
                                 *(_table(t) for t in effects_tables(data))))
    if data.format_tax or data.parse_shares:
        sections.append(_section("call-modes-section", "Call modes",
                                 *([_table(format_tax_table(data))] if data.format_tax else []),
                                 *([_table(parse_share_table(data))] if data.parse_shares else [])))
    if data.unsupported:
        sections.append(_section("unsupported-section", "Unsupported jobs", _table(unsupported_table(data))))
    if data.baseline_tests:
        sections.append(_section("baseline-section", "Against the baseline",
                                 *(_table(t) for t in baseline_tables(data))))
    return sections


def _language_sections(data: ReportData, figs: Mapping[str, Rendered]) -> list[dict[str, Any]]:
    """The Languages section (per-language accuracy, summaries, translation, language match), when there is one."""
    if not (data.language_cells or data.language_match):
        return []
    parts: list[dict[str, Any]] = []
    if data.language_cells:
        parts += [_figure(figs.get("languages")), _table(language_accuracy_table(data))]
    if data.language_summaries:
        parts.append(_table(language_summary_table(data)))
    if data.translation:
        parts += [_figure(figs.get("translation")), *(_table(t) for t in translation_tables(data))]
    if data.language_match:
        parts.append(_table(language_match_table(data)))
    return [_section("languages-section", "Languages", *parts)]


def html_report(data: ReportData, figures: Sequence[Rendered] = ()) -> str:
    """The report as one self-contained HTML page."""
    figs = {f.name: f for f in figures}
    summary = summary_points(data)
    by_model = {s.model: s for s in data.sensitivity}
    # The headline sentence of each model is shown as the tiles; the points follow as a list.
    cards = [_card(data, by_model[s.model], points) for s, (_, points) in zip(data.sensitivity, summary, strict=True)]
    sections = [_section("summary", "Summary", {"kind": "cards", "cards": cards, "notes": list(data.notes)})]
    sections += _adaptive_sections(data, figs)
    sections.append(_section("accuracy-section", "Accuracy", _figure(figs.get("heatmap")),
                             _table(accuracy_table(data))))
    sections.append(_section("sensitivity-section", "Sensitivity", _figure(figs.get("sensitivity")),
                             _table(sensitivity_table(data))))
    sections += _grid_sections(data, figs)
    sections += _language_sections(data, figs)
    if data.pass_k:
        sections.append(_section("pass-k-section", "Consistency (pass^k)", _table(pass_k_table(data))))
    failures = [_table(t) for t in failure_tables(data) + mode_failure_tables(data)]
    if data.failure_examples:
        failures.append(_examples(data))
    sections.append(_section("failures-section", "Failure modes", *failures))
    endpoints = endpoint_table(data)
    sections.append(_section("cost-section", "Cost and latency", _figure(figs.get("speed")),
                             _table(cost_table(data)), *([_table(endpoints)] if endpoints is not None else [])))
    sections.append(_section("results-section", "Detailed results", _table(results_table(data))))
    sections.append(_section("methods", "Methods", {"kind": "methods", "points": methods_points(data)}))
    return render_page("report.html.j2", overview=overview(data), sections=sections,
                       confidence=round(100 * data.settings.confidence))
