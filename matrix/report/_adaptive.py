"""The report's adaptive-study section: what an adaptive run (``--goal``/``--budget``) found, per model.

Works from ``AdaptiveResult.to_dict()`` (the schema of docs/adaptive.md), as
``ReportData.adaptive`` holds it: the same dicts go into ``report.json``. Every
number is printed with its 95% interval and how it was obtained: *measured*
(a proportion of cells that ran) or *estimated* (predicted for cells that did
not run, by the distribution goal's logistic model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promptgrid.display import escape_controls

from ._tables import Table, markdown_table

__all__ = ["adaptive_console", "adaptive_lines", "adaptive_rows", "adaptive_table"]

HEADERS = ("model", "", "variant", "accuracy", "95% interval", "how", "cells behind it")
HOW = ("measured: a proportion of the cells that ran; estimated: predicted for the cells that did not run by the "
       "distribution goal's logistic model (grid dimensions as covariates, case difficulty), the measured cells "
       "counted as they came out. The other tables of this report use the measured cells only, and the variants "
       "ran different case sets: compare variants with the estimates here.")


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _interval(e: Mapping[str, Any]) -> str:
    if e.get("low") is None or e.get("high") is None:
        return "-"
    return f"[{100 * e['low']:.1f}, {100 * e['high']:.1f}]"


def _spent(r: Mapping[str, Any]) -> str:
    share = f" ({100 * r['spent'] / r['product']:.0f}% of the product)" if r.get("product") else ""
    rounds = f"{r['rounds_done']}/{r['rounds']} rounds"
    left = "" if r.get("complete") else "; not complete: run the same command again to go on"
    return (f"goal {r['goal']}, seed {r['seed']}: {r['spent']:,} of {r['product']:,} jobs spent{share}, budget "
            f"{r['budget']:,}, {rounds}{left}")


def adaptive_rows(results: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """The table rows: best, worst, spread and the quantiles of each model."""
    rows: list[list[str]] = []
    for r in results:
        for what in ("best", "worst"):
            v = r.get(what)
            if v:
                a = v["accuracy"]
                rows.append([r["model"], what, v.get("label") or v["variant_id"], _pct(a["value"]), _interval(a),
                             a["kind"], f"{a['n']:,}"])
        s = r.get("spread")
        if s:
            rows.append([r["model"], "spread", "best - worst", _pct(s["value"]), _interval(s), s["kind"],
                         f"{s['n']:,}"])
        for name, q in (r.get("quantiles") or {}).items():
            rows.append([r["model"], f"quantile {name}", "over variants", _pct(q["value"]), _interval(q), q["kind"],
                         f"{q['n']:,}"])
    return rows


def adaptive_table(results: Sequence[Mapping[str, Any]]) -> Table:
    """Best, worst, spread and quantiles per model, each marked measured or estimated."""
    return Table("adaptive", "Adaptive study", HEADERS, tuple(tuple(r) for r in adaptive_rows(results)),
                 (False, False, False, True, True, False, True), HOW)


def variants_table(results: Sequence[Mapping[str, Any]]) -> Table:
    """Every variant's accuracy as the goal estimates it (estimated or measured)."""
    rows = tuple((r["model"], v.get("label") or v["variant_id"], _pct(v["accuracy"]["value"]),
                  _interval(v["accuracy"]), v["accuracy"]["kind"], f"{v['accuracy']['n']:,}")
                 for r in results for v in r.get("variants") or ())
    return Table("adaptive_variants", "Every variant", ("model", "variant", "accuracy", "95% interval", "how",
                                                        "cells measured"), rows,
                 (False, False, True, True, False, True))


def spent_lines(results: Sequence[Mapping[str, Any]]) -> list[str]:
    return [escape_controls(f"{r['model']}: {_spent(r)}.") for r in results]


def adaptive_lines(results: Sequence[Mapping[str, Any]], figure: list[str] | None = None) -> list[str]:
    """The Markdown section (empty without adaptive results)."""
    if not results:
        return []
    out = ["## Adaptive study", ""] + [f"- {line}" for line in spent_lines(results)] + [""]
    out += (figure or [])
    out += [markdown_table(adaptive_table(results)), "", f"_{HOW}_", ""]
    if any(r["goal"] == "distribution" for r in results):
        out += ["### Every variant", "", markdown_table(variants_table(results)), ""]
    return out


def adaptive_console(results: Sequence[Mapping[str, Any]]) -> str:
    """A few lines for the terminal (``report`` and the end of ``run``)."""
    if not results:
        return ""
    out = ["adaptive study:"]
    for r, line in zip(results, spent_lines(results), strict=True):
        out.append(f"  {line}")
        for what in ("best", "worst"):
            v = r.get(what)
            if v:
                a = v["accuracy"]
                name = v.get("label") or v["variant_id"]
                out.append(escape_controls(f"    {what}: {name} {_pct(a['value'])} {_interval(a)} "
                                           f"({a['kind']}, {a['n']} cells)"))
        s = r.get("spread")
        if s:
            out.append(f"    spread: {_pct(s['value'])} {_interval(s)} ({s['kind']})")
        qs = r.get("quantiles") or {}
        if qs:
            shown = ", ".join(f"{k} {_pct(q['value'])} {_interval(q)}" for k, q in qs.items())
            out.append(f"    quantiles ({next(iter(qs.values()))['kind']}): {shown}")
    return "\n".join(out) + "\n"
