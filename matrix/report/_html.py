"""``report.html``: one self-contained page (inline CSS, figures as base64 PNG, no script).

A reader opens it from disk or an e-mail attachment: nothing is fetched, no
JavaScript runs. The summary comes first (per model: mean, best and worst
variant, spread, std, then the findings in words with their intervals), then
one section per table. Every piece of text from the rows (model names, labels,
responses) is HTML-escaped and its control characters (ANSI escapes, bidi
overrides) are written as visible escapes; model output is untrusted.
"""

from __future__ import annotations

import base64
import html
import re
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

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

__all__ = ["html_report"]

_CSS = """
:root { --fg:#1d2330; --muted:#5b6472; --line:#e3e6eb; --bg:#ffffff; --soft:#f5f7fa; --accent:#0b5cad;
        --good:#0072B2; --bad:#b8430a; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 15px/1.55 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "DejaVu Sans", Arial, sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 28px 32px 64px; }
h1 { font-size: 28px; margin: 0 0 4px; letter-spacing: -0.01em; }
h2 { font-size: 21px; margin: 44px 0 10px; padding-top: 10px; border-top: 2px solid var(--fg); }
h3 { font-size: 16px; margin: 26px 0 6px; }
p.meta { color: var(--muted); margin: 0 0 14px; }
nav.toc { display: flex; flex-wrap: wrap; gap: 6px 18px; padding: 10px 0 14px; border-bottom: 1px solid var(--line);
          font-size: 14px; }
nav.toc a { color: var(--accent); text-decoration: none; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 18px; margin-top: 12px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 16px 18px; background: var(--soft); }
.card h3 { margin: 0 0 10px; font-size: 17px; overflow-wrap: anywhere; }
.stats { display: grid; grid-template-columns: repeat(12, 1fr); gap: 10px; margin-bottom: 12px; }
.stat { grid-column: span 3; background: var(--bg); border: 1px solid var(--line); border-radius: 6px;
        padding: 8px 10px; }
.stat.wide { grid-column: span 6; }
.stat .label { font-weight: 600; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; color: var(--fg); }
.stat .k { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: 0.04em; }
.stat .v { font-size: 22px; font-weight: 650; font-variant-numeric: tabular-nums; line-height: 1.25; }
.stat .v .ci { display: block; font-size: 13px; font-weight: 400; }
.stat .ci, td .ci { color: var(--muted); font-size: 0.86em; font-variant-numeric: tabular-nums; white-space: nowrap; }
.stat .sub { font-size: 13px; color: var(--muted); overflow-wrap: anywhere; }
.card ul { margin: 0; padding-left: 20px; }
.card li { margin: 4px 0; }
.nw { white-space: nowrap; }
.notes { border-left: 4px solid #E69F00; background: #fff8ea; padding: 8px 14px; margin: 18px 0 0; }
.notes p { margin: 4px 0; }
figure { margin: 14px 0 10px; }
figure img { max-width: 100%; height: auto; display: block; }
figcaption, .note { color: var(--muted); font-size: 13px; margin-top: 6px; max-width: 980px; }
.table-wrap { overflow-x: auto; margin: 8px 0 4px; border: 1px solid var(--line); border-radius: 6px; }
.table-wrap.long { max-height: 78vh; overflow-y: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13.5px; }
thead th { position: sticky; top: 0; background: #eef1f5; z-index: 1; font-weight: 600; text-align: left;
           border-bottom: 1px solid #cfd5dd; white-space: normal; vertical-align: bottom; }
th, td { padding: 5px 10px; vertical-align: top; white-space: nowrap; }
tbody tr:nth-child(even) td { background: #fafbfc; }
tbody tr:hover td { background: #eef5fc; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.sig { font-weight: 700; color: var(--good); }
details { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; background: var(--soft); }
details > summary { cursor: pointer; padding: 6px 12px; font-weight: 600; }
.example { padding: 4px 12px 10px; }
.example .where { font-size: 13px; color: var(--muted); }
pre { background: #1f2430; color: #e6e6e6; padding: 8px 10px; border-radius: 4px; overflow-x: auto;
      white-space: pre-wrap; word-break: break-word; font-size: 12.5px; margin: 4px 0 8px; }
ol.methods li { margin: 6px 0; }
code { font-size: 0.92em; background: var(--soft); padding: 0 3px; border-radius: 3px; }
@media print { .table-wrap { max-height: none; overflow: visible; } thead th { position: static; } }
"""

_CI_RE = re.compile(r"^(.*?) (\[[^\]]*\])$")


def _cell(text: str, numeric: bool, header: str) -> str:
    cls = "num" if numeric else "text"
    if header.startswith("Significant") and text == "yes":
        cls += " sig"
    m = _CI_RE.match(text)
    body = f'{html.escape(m.group(1))} <span class="ci">{html.escape(m.group(2))}</span>' if m else html.escape(text)
    return f'<td class="{cls}">{body}</td>'


def _table(t: Table, heading: str = "h3") -> str:
    # Headers may wrap at spaces and after underscores (failure-mode codes), never inside a word.
    head = "".join(
        f'<th class="{"num" if n else ""}" scope="col">{html.escape(h).replace("_", "_<wbr>")}</th>'
        for h, n in zip(t.headers, t.numeric)
    )
    body = "\n".join(
        "<tr>" + "".join(_cell(c, n, h) for c, n, h in zip(row, t.numeric, t.headers)) + "</tr>" for row in t.rows
    )
    note = f'<p class="note">{html.escape(t.note)}</p>' if t.note else ""
    wrap = "table-wrap long" if len(t.rows) > 30 else "table-wrap"
    return (
        f'<{heading} id="{html.escape(t.key)}">{html.escape(t.title)}</{heading}>\n<div class="{wrap}"><table>'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table></div>{note}"
    )


def _png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def _figure(fig: Rendered | None) -> str:
    if fig is None:
        return ""
    png = fig.png
    width, height = _png_size(png)
    # Rendered at 150 dpi; show at the figure's physical size (96 CSS px per inch).
    w, h = round(width * 96 / 150), round(height * 96 / 150)
    data = base64.b64encode(png).decode("ascii")
    title = html.escape(fig.title)
    return (
        f'<figure><img src="data:image/png;base64,{data}" width="{w}" height="{h}" alt="{title}">'
        f"<figcaption><b>{title}.</b> {html.escape(fig.caption)}</figcaption></figure>"
    )


_LABEL_RE = re.compile(r"(\S+->\S+)")


def _keep_labels(text: str) -> str:
    """Escape text, keeping BFCL labels (``json->python,False``) on one line."""
    parts = _LABEL_RE.split(text)
    return "".join(
        f'<span class="nw">{html.escape(p)}</span>' if i % 2 else html.escape(p) for i, p in enumerate(parts)
    )


def _card(data: ReportData, s: Sensitivity, points: Sequence[str]) -> str:
    def stat(key: str, value: str, ci: str = "", sub: str = "", label: str = "", wide: bool = False) -> str:
        ci_html = f' <span class="ci">{html.escape(ci)}</span>' if ci else ""
        label_html = f'<div class="sub label" title="{html.escape(label)}">{html.escape(label)}</div>' if label else ""
        sub_html = f'<div class="sub">{html.escape(sub)}</div>' if sub else ""
        cls = "stat wide" if wide else "stat"
        return (
            f'<div class="{cls}"><div class="k">{html.escape(key)}</div>{label_html}'
            f'<div class="v">{html.escape(value)}{ci_html}</div>{sub_html}</div>'
        )

    tiles = "".join(
        [
            stat(
                "Mean accuracy",
                f"{pct(s.mean_accuracy)}%",
                ci_pct(s.mean_ci),
                f"{s.n_variants} variants, {s.n_cases} cases",
            ),
            stat(
                "Spread", f"{pct(s.spread)} pp", ci_pct(s.spread_ci), f"best − worst; noise ≈ {pct(s.spread_bias)} pp"
            ),
            stat("Std", f"{pct(s.std)} pp", ci_pct(s.std_ci), "across variants (n − 1)"),
            stat("Instance sens.", f"{pct(s.instance_sensitivity)} pp", ci_pct(s.instance_ci), "ProSA, per case"),
            stat(
                "Best variant",
                f"{pct(s.best_accuracy)}%",
                ci_pct(s.best_ci),
                label=short_label(data, s.best_variant),
                wide=True,
            ),
            stat(
                "Worst variant",
                f"{pct(s.worst_accuracy)}%",
                ci_pct(s.worst_ci),
                label=short_label(data, s.worst_variant),
                wide=True,
            ),
        ]
    )
    items = "".join(f"<li>{_keep_labels(p)}</li>" for p in points)
    return f'<div class="card"><h3>{html.escape(s.model)}</h3><div class="stats">{tiles}</div><ul>{items}</ul></div>'


def html_report(data: ReportData, figures: Sequence[Rendered] = ()) -> str:
    """The report as one self-contained HTML page."""
    figs = {f.name: f for f in figures}
    sections: list[tuple[str, str, str]] = []  # (id, title, html)

    summary = summary_points(data)
    by_model = {s.model: s for s in data.sensitivity}
    # The headline sentence of each model is shown as the tiles; the points follow as a list.
    cards = "".join(_card(data, by_model[s.model], points) for s, (_, points) in zip(data.sensitivity, summary))
    notes = ""
    if data.notes:
        notes = '<div class="notes">' + "".join(f"<p>{html.escape(n)}</p>" for n in data.notes) + "</div>"
    sections.append(("summary", "Summary", f'<div class="cards">{cards}</div>{notes}'))

    sections.append(("accuracy-section", "Accuracy", _figure(figs.get("heatmap")) + _table(accuracy_table(data))))
    sections.append(
        ("sensitivity-section", "Sensitivity", _figure(figs.get("sensitivity")) + _table(sensitivity_table(data)))
    )
    if data.effects:
        sections.append(
            (
                "effects-section",
                "Dimension effects",
                _figure(figs.get("dimension_effects")) + "".join(_table(t) for t in effects_tables(data)),
            )
        )
    if data.format_tax or data.parse_shares:
        body = _table(format_tax_table(data)) if data.format_tax else ""
        body += _table(parse_share_table(data)) if data.parse_shares else ""
        sections.append(("call-modes-section", "Call modes", body))
    if data.unsupported:
        sections.append(("unsupported-section", "Unsupported jobs", _table(unsupported_table(data))))
    if data.baseline_tests:
        sections.append(("baseline-section", "Against the baseline", "".join(_table(t) for t in baseline_tables(data))))
    if data.language_cells or data.language_match:
        body = ""
        if data.language_cells:
            body += _figure(figs.get("languages")) + _table(language_accuracy_table(data))
        if data.language_summaries:
            body += _table(language_summary_table(data))
        if data.translation:
            body += _figure(figs.get("translation")) + "".join(_table(t) for t in translation_tables(data))
        if data.language_match:
            body += _table(language_match_table(data))
        sections.append(("languages-section", "Languages", body))
    if data.pass_k:
        sections.append(("pass-k-section", "Consistency (pass^k)", _table(pass_k_table(data))))
    body = "".join(_table(t) for t in failure_tables(data) + mode_failure_tables(data))
    if data.failure_examples:
        body += "<h3>Examples</h3>"
        modes = list(dict.fromkeys(e.mode for e in data.failure_examples))
        for mode in modes:
            exs = [e for e in data.failure_examples if e.mode == mode]
            inner = "".join(
                f'<div class="example"><div class="where">{html.escape(e.model)} · '
                f"{html.escape(short_label(data, e.variant_id))} · case {html.escape(e.case_id)} "
                f"(repeat {e.repeat})</div><pre>{html.escape(e.text)}</pre></div>"
                for e in exs
            )
            total = sum(f.count for f in data.failure_counts if f.mode == mode)
            body += (
                f'<details open><summary>{html.escape(mode)} <span class="ci">({total:,} jobs; '
                f"{len(exs)} shown)</span></summary>{inner}</details>"
            )
    sections.append(("failures-section", "Failure modes", body))
    endpoints = endpoint_table(data)
    sections.append(("cost-section", "Cost and latency", _figure(figs.get("speed")) + _table(cost_table(data))
                     + (_table(endpoints) if endpoints is not None else "")))
    sections.append(("results-section", "Detailed results", _table(results_table(data))))
    methods = "".join(f"<li>{html.escape(p)}</li>" for p in methods_points(data))
    sections.append(("methods", "Methods", f'<ol class="methods">{methods}</ol>'))

    toc = "".join(f'<a href="#{sid}">{html.escape(title)}</a>' for sid, title, _ in sections)
    body_html = "\n".join(
        f'<section id="{sid}"><h2>{html.escape(title)}</h2>\n{inner}\n</section>' for sid, title, inner in sections
    )
    return escape_controls(
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>promptgrid report</title>\n"
        f"<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
        "<header><h1>Format-sensitivity report</h1>"
        f'<p class="meta">{html.escape(overview(data))}</p></header>\n'
        f'<nav class="toc">{toc}</nav>\n{body_html}\n'
        '<p class="note">Generated by promptgrid. Accuracies in %, differences in percentage points (pp); '
        f"brackets are {round(100 * data.settings.confidence)}% intervals.</p>\n"
        "</main>\n</body>\n</html>\n"
    )
