"""The report's figures (matplotlib, Agg), as PNG bytes and SVG text.

Imported only when a report draws figures, so the rest of promptgrid never
pays for matplotlib. Figures are built with ``matplotlib.figure.Figure``
directly (no pyplot, no global backend switch) and rendered deterministically:
a fixed SVG hash salt and no dates in the metadata, so the same data gives
byte-identical files. Colour maps are perceptually uniform and colour-blind
safe: cividis/viridis for accuracies, RdBu (ColorBrewer, colour-blind safe)
for signed changes; series use the Okabe-Ito palette.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FuncFormatter

from promptgrid.display import escape_controls

from ._labels import DIMENSION_TITLES, display_labels, given_label
from ._model import ReportData

__all__ = ["Rendered", "render_figures"]

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
_MARKERS = ("o", "^", "s", "D", "v", "P", "X")
_RC: dict[str, Any] = {
    "svg.hashsalt": "promptgrid",
    "svg.fonttype": "none",  # text stays text: smaller, searchable, editable in a paper
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 150,  # layout at the PNG resolution: text layouts are cached per dpi
}


@dataclass(frozen=True)
class Rendered:
    """One figure: a file stem, a caption and the rendered bytes."""

    name: str
    title: str
    caption: str
    png: bytes
    svg: str


def _safe_text(fig: Figure) -> None:
    """Write every control character of the figure's text (model names, ids in labels, titles, legends) as a
    visible escape: a raw ESC would reach the SVG and matplotlib's missing-glyph warnings on the terminal."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            given = axis.get_major_formatter()
            if isinstance(given, (FixedFormatter, FuncFormatter)):  # the labels given with set_*ticks
                axis.set_major_formatter(FuncFormatter(lambda x, pos, f=given: escape_controls(str(f(x, pos)))))
    for text in fig.findobj(Text):
        raw = text.get_text()
        if isinstance(raw, str):
            safe = escape_controls(raw)
            if safe != raw:
                text.set_text(safe)


def _render(fig: Figure, name: str, title: str, caption: str, *, png_too: bool = True) -> Rendered:
    # Lay the figure out once (constrained layout), then freeze it: both files
    # are drawn without re-running the layout, which halves the render time.
    # ``png_too=False``: the SVG only (``png`` is empty), for a page that inlines it.
    _safe_text(fig)
    FigureCanvasAgg(fig)
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)
        fig.set_layout_engine("none")
    png, svg = io.BytesIO(), io.StringIO()
    if png_too:
        fig.savefig(png, format="png", dpi=150, metadata={"Software": "promptgrid"})
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": "promptgrid"})
    return Rendered(name, title, caption, png.getvalue(), svg.getvalue())


def _annotate(ax: Any, values: np.ndarray, fmt: str, cmap: Any, norm: Any, fontsize: float) -> None:
    for (r, c), v in np.ndenumerate(values):
        if math.isnan(v):
            ax.text(c, r, "–", ha="center", va="center", fontsize=fontsize, color="#666666")
            continue
        red, green, blue, _ = cmap(norm(v))
        light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.55
        ax.text(c, r, fmt.format(v), ha="center", va="center", fontsize=fontsize, color="black" if light else "white")


def _heatmap(
    values: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    *,
    cmap_name: str,
    vmin: float,
    vmax: float,
    fmt: str,
    colorbar: str,
    col_rotation: float = 55,
    title: str = "",
) -> Figure:
    n_rows, n_cols = values.shape
    width = max(6.0, 0.38 * n_cols + 0.075 * max(len(r) for r in rows) + 1.6)
    height = max(2.2, 0.42 * n_rows + 0.075 * max(len(c) for c in cols) + 1.0)
    fig = Figure(figsize=(width, height), layout="constrained")
    ax = fig.add_subplot()
    cmap = matplotlib.colormaps[cmap_name]
    norm = matplotlib.colors.Normalize(vmin=vmin, vmax=vmax)
    masked = np.ma.masked_invalid(values)
    im = ax.imshow(masked, cmap=cmap, norm=norm, aspect="auto")
    ax.set_xticks(
        range(n_cols), labels=list(cols), rotation=col_rotation, ha="right", rotation_mode="anchor", fontsize=8
    )
    ax.set_yticks(range(n_rows), labels=list(rows), fontsize=8)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if n_cols <= 60:
        _annotate(ax, values, fmt, cmap, norm, 7 if n_cols > 12 else 8)
    cb = fig.colorbar(im, ax=ax, fraction=0.025 if n_cols > 12 else 0.05, pad=0.01)
    cb.set_label(colorbar)
    cb.outline.set_visible(False)
    if title:
        ax.set_title(title, loc="left")
    return fig


def _accuracy_heatmap(data: ReportData) -> Rendered:
    labels = display_labels(data)
    cols = [labels[v.id] + (" *" if v.id == data.baseline else "") for v in data.variants]
    values = np.full((len(data.models), len(data.variants)), np.nan)
    for r, m in enumerate(data.models):
        for c, v in enumerate(data.variants):
            cell = data.cell(m, v.id)
            if cell is not None:
                values[r, c] = 100 * cell.accuracy
    fig = _heatmap(
        values,
        list(data.models),
        cols,
        cmap_name="viridis",
        vmin=0,
        vmax=100,
        fmt="{:.1f}",
        colorbar="AST accuracy (%)",
    )
    return _render(
        fig,
        "heatmap",
        "AST accuracy per model and variant",
        "Labels use BFCL's notation {doc format}->{return format},{tool-call tag}, with md for markdown and exp for "
        "the experimental style" + ("; labels the grid gave are shown as written" if _has_given(data) else "")
        + "; * marks the baseline. Values in %; intervals are in the accuracy table.",
    )


def _has_given(data: ReportData) -> bool:
    return any(given_label(v) for v in data.variants)


def _effects_chart(data: ReportData) -> Rendered | None:
    dims = list(dict.fromkeys(e.dimension for e in data.effects))
    if not dims:
        return None
    ncols = min(4, len(dims))
    nrows = math.ceil(len(dims) / ncols)
    fig = Figure(figsize=(3.2 * ncols + 0.6, 2.9 * nrows + 0.5), layout="constrained")
    # One y scale for every panel, so effects of different dimensions compare by eye.
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    models = list(data.models)
    width = 0.7 / max(1, len(models))
    for i, d in enumerate(dims):
        ax = axes[i // ncols][i % ncols]
        values = list(dict.fromkeys(e.value for e in data.effects if e.dimension == d))
        for mi, m in enumerate(models):
            es = {e.value: e for e in data.effects if e.dimension == d and e.model == m}
            xs, ys, lo, hi = [], [], [], []
            for vi, value in enumerate(values):
                e = es.get(value)
                if e is None or math.isnan(e.marginal):
                    continue
                xs.append(vi + (mi - (len(models) - 1) / 2) * width)
                ys.append(100 * e.marginal)
                lo.append(100 * (e.marginal - e.marginal_ci[0]))
                hi.append(100 * (e.marginal_ci[1] - e.marginal))
            ax.errorbar(
                xs,
                ys,
                yerr=[lo, hi],
                fmt=_MARKERS[mi % len(_MARKERS)],
                color=OKABE_ITO[mi % len(OKABE_ITO)],
                capsize=3,
                markersize=5,
                linewidth=1.2,
                label=m if i == 0 else None,
            )
        ax.set_xticks(
            range(len(values)),
            labels=values,
            rotation=25 if max(map(len, values)) > 6 else 0,
            ha="right" if max(map(len, values)) > 6 else "center",
            fontsize=8,
        )
        ax.set_xlim(-0.6, len(values) - 0.4)
        ax.set_title(DIMENSION_TITLES.get(d, d), loc="left")
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        if i % ncols == 0:
            ax.set_ylabel("Mean AST accuracy (%)")
        ax.tick_params(axis="y", labelleft=True)
    for j in range(len(dims), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    fig.legend(loc="outside lower center", ncols=min(4, len(models)), frameon=False)
    conf = round(100 * data.settings.confidence)
    return _render(
        fig,
        "dimension_effects",
        "Dimension effects",
        f"Mean accuracy over the variants taking each value (among those where the dimension varies), "
        f"with {conf}% bootstrap intervals over cases.",
    )


def _sensitivity_chart(data: ReportData) -> Rendered | None:
    if not data.sensitivity:
        return None
    ss = list(data.sensitivity)
    fig = Figure(figsize=(7.5, 0.5 * len(ss) + 1.3), layout="constrained")
    ax = fig.add_subplot()
    for i, s in enumerate(ss):
        y = len(ss) - 1 - i
        ax.plot([100 * s.worst_accuracy, 100 * s.best_accuracy], [y, y], color="#999999", linewidth=3, zorder=1)
        ax.errorbar(
            [100 * s.worst_accuracy],
            [y],
            xerr=[[100 * (s.worst_accuracy - s.worst_ci[0])], [100 * (s.worst_ci[1] - s.worst_accuracy)]],
            fmt="o",
            color=OKABE_ITO[3],
            capsize=3,
            label="worst variant" if i == 0 else None,
            zorder=2,
        )
        ax.errorbar(
            [100 * s.best_accuracy],
            [y],
            xerr=[[100 * (s.best_accuracy - s.best_ci[0])], [100 * (s.best_ci[1] - s.best_accuracy)]],
            fmt="s",
            color=OKABE_ITO[0],
            capsize=3,
            label="best variant" if i == 0 else None,
            zorder=2,
        )
        ax.plot(
            [100 * s.mean_accuracy],
            [y],
            marker="|",
            markersize=14,
            color="black",
            label="mean over variants" if i == 0 else None,
            linestyle="none",
            zorder=3,
        )
    ax.set_yticks(range(len(ss)), labels=[s.model for s in reversed(ss)])
    ax.set_xlabel("AST accuracy (%)")
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.7, len(ss) - 0.3)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    fig.legend(loc="outside lower center", ncols=3, frameon=False)
    return _render(
        fig,
        "sensitivity",
        "Best and worst variant per model",
        "The grey bar is the spread; whiskers are bootstrap intervals of each variant's accuracy.",
    )


def _language_heatmap(data: ReportData) -> Rendered | None:
    if not data.language_cells or len(data.languages) < 2:
        return None
    by = {(c.model, c.variant_id, c.language): c.accuracy for c in data.language_cells}
    rows, values = [], []
    several_models = len(data.models) > 1
    for m in data.models:
        for v in data.variants:
            if not any((m, v.id, lang) in by for lang in data.languages):
                continue
            label = display_labels(data)[v.id]
            rows.append(f"{m} · {label}" if several_models else label)
            values.append([100 * by[(m, v.id, lang)] if (m, v.id, lang) in by else np.nan for lang in data.languages])
    fig = _heatmap(
        np.array(values),
        rows,
        list(data.languages),
        cmap_name="viridis",
        vmin=0,
        vmax=100,
        fmt="{:.1f}",
        colorbar="AST accuracy (%)",
        col_rotation=0,
    )
    return _render(
        fig,
        "languages",
        "AST accuracy per test language",
        "Rows: model and variant; columns: the language of the test cases.",
    )


def _translation_heatmap(data: ReportData) -> Rendered | None:
    if not data.translation:
        return None
    models = [m for m in data.models if any(d.model == m for d in data.translation)]
    langs = [lang for lang in data.languages if any(d.test_language == lang for d in data.translation)]
    vmax = max(5.0, max(abs(100 * d.delta) for d in data.translation if not math.isnan(d.delta)))
    panels = []
    for m in models:
        ds = [d for d in data.translation if d.model == m]
        row_keys = list(dict.fromkeys((d.prompt_language, d.translation, d.variant_id) for d in ds))
        vals = np.full((len(row_keys), len(langs)), np.nan)
        for d in ds:
            vals[row_keys.index((d.prompt_language, d.translation, d.variant_id)), langs.index(d.test_language)] = (
                100 * d.delta
            )
        names = [f"{'test lang' if p == 'query' else p} {t}" for p, t, _ in row_keys]
        panels.append((m, names, vals))
    height = sum(0.45 * len(p[1]) + 0.9 for p in panels) + 0.6
    fig = Figure(figsize=(max(5.5, 0.75 * len(langs) + 3.2), height), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=[len(p[1]) + 1 for p in panels])
    cmap = matplotlib.colormaps["RdBu"]
    norm = matplotlib.colors.Normalize(vmin=-vmax, vmax=vmax)
    im = None
    for ax, (m, names, vals) in zip(axes[:, 0], panels, strict=True):
        im = ax.imshow(np.ma.masked_invalid(vals), cmap=cmap, norm=norm, aspect="auto")
        ax.set_xticks(range(len(langs)), labels=langs)
        ax.set_yticks(range(len(names)), labels=names)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        _annotate(ax, vals, "{:+.1f}", cmap, norm, 8)
        ax.set_title(m, loc="left")
    axes[-1, 0].set_xlabel("Test language")
    if im is not None:
        cb = fig.colorbar(im, ax=axes[:, 0].tolist(), fraction=0.04, pad=0.02)
        cb.set_label("Change vs English-only (pp)")
        cb.outline.set_visible(False)
    return _render(
        fig,
        "translation",
        "Change versus the English-only prompt",
        "MASSIVE-Agents Fig. 4 layout: percentage points, blue = better, red = worse than the English-only "
        "prompt on the same cases; partial = descriptions translated, full = instructions too.",
    )


def _speed_chart(data: ReportData) -> Rendered | None:
    pts = [p for p in data.speed if not math.isnan(p.output_tokens_per_s)]
    if not pts:
        return None
    templates = list(dict.fromkeys(p.template for p in pts))
    models = list(dict.fromkeys(p.model for p in pts))
    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for p in pts:
        mi, ti = models.index(p.model), templates.index(p.template)
        ax.errorbar(
            [p.output_tokens_per_s],
            [100 * p.accuracy],
            yerr=[[100 * (p.accuracy - p.ci[0])], [100 * (p.ci[1] - p.accuracy)]],
            fmt=_MARKERS[ti % len(_MARKERS)],
            color=OKABE_ITO[mi % len(OKABE_ITO)],
            capsize=3,
            markersize=7,
        )
        ax.annotate(
            p.model + (f" ({p.template})" if len(templates) > 1 else ""),
            (p.output_tokens_per_s, 100 * p.accuracy),
            textcoords="offset points",
            xytext=(7, 4),
            fontsize=8,
        )
    ax.set_xlabel("Output speed (tokens/s)")
    ax.set_ylabel("Mean AST accuracy over variants (%)")
    ax.set_ylim(0, 100)
    xs = [p.output_tokens_per_s for p in pts]
    ax.set_xlim(0, max(xs) * 1.35)
    ax.grid(color="#eeeeee", linewidth=0.6)
    ax.set_axisbelow(True)
    if len(templates) > 1:
        for ti, t in enumerate(templates):
            ax.plot([], [], _MARKERS[ti % len(_MARKERS)], color="#555555", label=t, linestyle="none")
        ax.legend(frameon=False, title="template")
    return _render(
        fig,
        "speed",
        "Accuracy against output speed",
        "MASSIVE-Agents Fig. 2 layout: mean accuracy over variants (bootstrap interval) against output "
        "tokens per second measured in this run.",
    )


def _adaptive_chart(data: ReportData) -> Rendered | None:
    """An adaptive run's estimates after each round against the calls spent: best, worst (and spread)."""
    traces = [(r["model"], r.get("trace") or []) for r in data.adaptive]
    traces = [(m, t) for m, t in traces if t]
    if not traces:
        return None
    fig = Figure(figsize=(6.5, 2.6 * len(traces) + 0.6), layout="constrained")
    axes = fig.subplots(len(traces), 1, squeeze=False)[:, 0]
    for ax, (model, trace) in zip(axes, traces, strict=True):
        calls = [p["calls"] for p in trace]
        for i, (what, name) in enumerate((("best", "best variant"), ("worst", "worst variant"))):
            values = [100 * (p[what]["accuracy"]["value"]) for p in trace]
            low = [100 * (p[what]["accuracy"]["low"] if p[what]["accuracy"]["low"] is not None else math.nan)
                   for p in trace]
            high = [100 * (p[what]["accuracy"]["high"] if p[what]["accuracy"]["high"] is not None else math.nan)
                    for p in trace]
            ax.plot(calls, values, marker=_MARKERS[i], color=OKABE_ITO[i], label=name, markersize=4)
            ax.fill_between(calls, low, high, color=OKABE_ITO[i], alpha=0.15, linewidth=0)
        kind = trace[-1]["best"]["accuracy"]["kind"]
        ax.set_title(f"{model} ({kind})", loc="left")
        ax.set_ylabel("Accuracy (%)")
        ax.set_ylim(0, 100)
        ax.grid(color="#eeeeee", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.legend(frameon=False, fontsize=8)
    axes[-1].set_xlabel("Calls spent")
    return _render(
        fig,
        "adaptive",
        "Adaptive study: estimates against calls spent",
        "After each round of the adaptive plan: the accuracy of the variant that was then the best and the worst, "
        "with 95% intervals (measured or estimated, as the title says).",
    )


def render_figures(data: ReportData) -> list[Rendered]:
    """Every figure that applies to this report, in the order the report shows them."""
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]  # rc keys are typed as literals
        figures: list[Rendered | None] = [
            _adaptive_chart(data),
            _accuracy_heatmap(data) if data.cells else None,
            _sensitivity_chart(data),
            _effects_chart(data),
            _language_heatmap(data),
            _translation_heatmap(data),
            _speed_chart(data),
        ]
    return [f for f in figures if f is not None]
