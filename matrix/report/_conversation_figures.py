"""The figures of a conversation run's HTML report, drawn with the single-turn report's figure helpers.

``conversation_figures(report, languages)`` returns ``Rendered`` figures
(``promptgrid.matrix.report._figures``: PNG bytes and SVG text, deterministic,
colour-blind-safe palettes, control characters in labels made visible):

- ``pass_k``: per model, both pass^k of every variant with their bootstrap intervals;
- ``turns``: accuracy by turn position, a heatmap of (model, variant) by turn;
- ``native_gap``: native minus prompt per matched pair of variants and overall, with intervals;
- ``languages``: accuracy per (model, variant) and language, when the run has several languages.

A figure whose data is empty is left out. Imported only when the HTML report is written (matplotlib).
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from promptgrid.matrix.report._figures import _MARKERS, _RC, OKABE_ITO, Rendered, _heatmap, _render

from ._conversation_languages import LanguageReport
from ._conversations import TAU_BENCH_PASS_K, TICKET_BENCH_PASS_K, ConversationReport

__all__ = ["conversation_figures"]

# Labels and model names are data: a ``$`` in them is a character, never the start of mathtext.
_CONVERSATION_RC: dict[str, Any] = {**_RC, "text.parse_math": False}


def _svg(fig: Figure, name: str, title: str, caption: str) -> Rendered:
    """The figure as the page inlines it: SVG only (``Rendered.png`` is empty)."""
    return _render(fig, name, title, caption, png_too=False)


def _row_name(report: ConversationReport, model: str, variant_id: str, several: bool) -> str:
    label = report.labels.get(variant_id, variant_id)
    return f"{model} · {label}" if several else label


def _err(value: float, ci: tuple[float, float]) -> tuple[float, float]:
    """Whisker lengths below and above ``value`` (0 where the interval is unknown)."""
    low, high = ci
    if math.isnan(value) or math.isnan(low) or math.isnan(high):
        return 0.0, 0.0
    return max(0.0, value - low), max(0.0, high - value)


def _pass_k_chart(report: ConversationReport) -> Rendered | None:
    models = [m.model for m in report.models]
    panels = [(m, [v for v in report.variants if v.model == m and v.entries]) for m in models]
    panels = [(m, vs) for m, vs in panels if vs]
    if not panels:
        return None
    height = sum(0.3 * len(vs) + 0.8 for _, vs in panels) + 0.8
    fig = Figure(figsize=(7.5, height), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True, height_ratios=[len(vs) + 1 for _, vs in panels])
    for ax, (model, vs) in zip(axes[:, 0], panels, strict=True):
        ys = np.arange(len(vs))[::-1]
        for i, (name, attr, offset) in enumerate(((TAU_BENCH_PASS_K, "pass_k_tau", 0.15),
                                                  (TICKET_BENCH_PASS_K, "pass_k_ticket", -0.15))):
            points = [getattr(v, attr) for v in vs]
            values = [p.value for p in points]
            errs = np.array([_err(p.value, p.ci) for p in points]).T
            ax.errorbar(values, ys + offset, xerr=errs, fmt=_MARKERS[i], color=OKABE_ITO[i], capsize=3,
                        markersize=5, linewidth=1.2, label=name if ax is axes[0, 0] else None)
        ax.set_yticks(ys, labels=[report.labels.get(v.variant_id, v.variant_id) for v in vs], fontsize=8)
        ax.set_ylim(-0.7, len(vs) - 0.3)
        ax.set_xlim(-0.02, 1.02)
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_title(model, loc="left")
    axes[-1, 0].set_xlabel(f"pass^{report.k}")
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    conf = f"{100 * report.confidence:g}%"
    return _svg(fig, "pass_k", f"pass^{report.k} per variant",
                   f"Both definitions per variant, k = {report.k}: mean over the variant's conversations of "
                   f"C(c,k)/C(n,k) (tau-bench) and of (c/n)^k (Ticket-Bench); whiskers are {conf} bootstrap "
                   "intervals over conversations.")


def _turn_heatmap(report: ConversationReport) -> Rendered | None:
    turns = sorted({p.turn for t in report.turn_accuracy for p in t.positions})
    rows = [t for t in report.turn_accuracy if t.positions]
    if not turns or not rows:
        return None
    several = len({t.model for t in rows}) > 1
    values = np.full((len(rows), len(turns)), np.nan)
    for r, t in enumerate(rows):
        for p in t.positions:
            values[r, turns.index(p.turn)] = 100 * p.accuracy
    fig = _heatmap(values, [_row_name(report, t.model, t.variant_id, several) for t in rows],
                   [f"turn {i}" for i in turns], cmap_name="viridis", vmin=0, vmax=100, fmt="{:.0f}",
                   colorbar="turns valid (%)", col_rotation=0)
    return _svg(fig, "turns", "Accuracy by turn position",
                   "Per variant and turn index: % valid of the finished episodes that have that turn; the table "
                   "below gives each cell's number of episodes.")


def _native_gap_chart(report: ConversationReport) -> Rendered | None:
    rows: list[tuple[str, float, tuple[float, float], bool]] = []
    several = len(report.native_gap) > 1
    for g in report.native_gap:
        prefix = f"{g.model} · " if several else ""
        if g.overall is not None and not math.isnan(g.overall.diff):
            rows.append((f"{prefix}overall ({g.overall.natives} native, {g.overall.prompts} prompt)",
                         g.overall.diff, g.overall.diff_ci, True))
        for p in g.pairs:
            if not math.isnan(p.diff):
                rows.append((f"{prefix}{report.labels.get(p.native, p.native)} − "
                             f"{report.labels.get(p.prompt, p.prompt)}", p.diff, p.diff_ci, False))
    if not rows:
        return None
    fig = Figure(figsize=(7.5, 0.32 * len(rows) + 1.3), layout="constrained")
    ax = fig.add_subplot()
    ys = np.arange(len(rows))[::-1]
    for y, (_, diff, ci, overall) in zip(ys, rows, strict=True):
        low, high = _err(100 * diff, (100 * ci[0], 100 * ci[1]))
        ax.errorbar([100 * diff], [y], xerr=[[low], [high]], fmt="D" if overall else "o",
                    color=OKABE_ITO[3] if overall else OKABE_ITO[0], capsize=3, markersize=6 if overall else 5)
    ax.axvline(0, color="#555555", linewidth=0.8)
    ax.set_yticks(ys, labels=[r[0] for r in rows], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    reach = max([5.0] + [abs(100 * v) for _, d, ci, _ in rows for v in (d, *ci) if not math.isnan(v)])
    ax.set_xlim(-reach * 1.08, reach * 1.08)
    ax.set_xlabel("native − prompt (percentage points of pass rate)")
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    return _svg(fig, "native_gap", "Native vs prompt call mode",
                   "Mean per-conversation pass rate of each native variant minus that of the prompt variant equal "
                   "to it in the other dimensions (dots), and of all native minus all prompt variants (diamonds), "
                   "with paired bootstrap intervals.")


def _language_heatmap(languages: LanguageReport | None, report: ConversationReport) -> Rendered | None:
    if languages is None or len(languages.languages) < 2 or not languages.summaries:
        return None
    keys = list(dict.fromkeys((s.model, s.variant_id) for s in languages.summaries))
    langs = list(languages.languages)
    by = {(s.model, s.variant_id, s.language): s.accuracy for s in languages.summaries}
    several = len({m for m, _ in keys}) > 1
    values = np.array([[100 * by[(m, v, lang)] if (m, v, lang) in by else np.nan for lang in langs]
                       for m, v in keys])
    fig = _heatmap(values, [_row_name(report, m, v, several) for m, v in keys], langs, cmap_name="viridis", vmin=0,
                   vmax=100, fmt="{:.0f}", colorbar="accuracy (%)", col_rotation=0)
    return _svg(fig, "languages", "Accuracy per language",
                   "Valid / finished episodes per variant and language of the conversation; the points against "
                   f"{languages.baseline} (paired by template) are in the tables below.")


def conversation_figures(report: ConversationReport, languages: LanguageReport | None = None) -> list[Rendered]:
    """Every figure that applies to this report, in the order the page shows them (module docstring)."""
    with matplotlib.rc_context(_CONVERSATION_RC):  # type: ignore[arg-type]  # rc keys are typed as literals
        figures = [_pass_k_chart(report), _turn_heatmap(report), _native_gap_chart(report),
                   _language_heatmap(languages, report)]
    return [f for f in figures if f is not None]
