"""The report's adaptive-study section: what an adaptive run (``--goal``/``--budget``) found, per model.

Works from ``AdaptiveResult.to_dict()`` (the schema of docs/adaptive.md), as
``ReportData.adaptive`` holds it: the same dicts go into ``report.json``. Every
number is printed with its 95% interval and how it was obtained: *measured*
(a proportion of cells that ran) or *estimated* (predicted for cells that did
not run, by the distribution goal's logistic model).

The headline of an adaptive model (the report's summary, the console, the end
of ``run``) is the goal's best, worst and spread (``headline``); the only other
best and worst it states are those measured on the cells every variant ran
(``common_sentence``), and where they name other variants it says why. Spreads
are in percentage points; variants tied with the best (worst) are named as
ties, and a run whose variants all tie says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promptgrid.display import escape_controls

from ._tables import Table, markdown_table

__all__ = ["adaptive_console", "adaptive_lines", "adaptive_rows", "adaptive_table", "common_sentence", "headline",
           "names", "spread_text"]

HEADERS = ("model", "", "variant", "accuracy", "95% interval", "how", "cells behind it")
HOW = ("measured: a proportion of the cells that ran; estimated: predicted for the cells that did not run by the "
       "distribution goal's logistic model (grid dimensions as covariates, case difficulty), the measured cells "
       "counted as they came out. Spreads are in percentage points. 'Common cells': measured on the (case, repeat) "
       "cells every variant ran, the only measured comparison of all variants on the same cases. The other tables "
       "of this report use each variant's own measured cells, and the variants ran different case sets: compare "
       "variants with the estimates here.")


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _pp(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f} pp"


SHOWN_TIES = 4
"""Tied variants named at most; the rest are counted."""


def _label(r: Mapping[str, Any], vid: str) -> str:
    for v in r.get("variants") or ():
        if v["variant_id"] == vid:
            return str(v.get("label") or vid)
    for what in ("best", "worst"):
        v = r.get(what) or {}
        if v.get("variant_id") == vid:
            return str(v.get("label") or vid)
    return vid


def names(r: Mapping[str, Any], what: str, found: Mapping[str, Any] | None = None) -> str:
    """The best (``what`` = best) or worst variant's label, with the variants tied with it: ``a, b (tied)``.
    ``found``: where the variant and its ties are (``r`` itself, or ``r["common"]``)."""
    found = r if found is None else found
    v = found.get(what) or {}
    ids = list((found.get("ties") or {}).get(what) or ())
    if len(ids) < 2:
        return str(v.get("label") or v.get("variant_id") or "-")
    first = v.get("variant_id")
    headline_choice = (r.get(what) or {}).get("variant_id")
    if found is not r and headline_choice in ids:  # the headline's variant first, where it is among the tied
        first = headline_choice
    ids = [first] + [i for i in ids if i != first] if first in ids else ids
    shown = ", ".join(_label(r, i) for i in ids[:SHOWN_TIES])
    more = f" and {len(ids) - SHOWN_TIES} more" if len(ids) > SHOWN_TIES else ""
    return f"{shown}{more} (tied)"


def _all_tied(found: Mapping[str, Any]) -> bool:
    b, w = found.get("best"), found.get("worst")
    return bool(b and w and b["accuracy"]["value"] is not None
                and b["accuracy"]["value"] == w["accuracy"]["value"])


def spread_text(e: Mapping[str, Any]) -> str:
    """``64.5 pp [52.2, 77.0]``."""
    interval = _interval(e)
    return _pp(e["value"]) + ("" if interval == "-" else f" {interval}")


def headline(r: Mapping[str, Any]) -> str:
    """The model's headline in words: the goal's best, worst and spread, each with its interval and how it was
    obtained (``estimated`` over every cell, or ``measured`` on each variant's own cells)."""
    b, w, s = r.get("best"), r.get("worst"), r.get("spread")
    share = f", {100 * r['spent'] / r['product']:.0f}% of the product" if r.get("product") else ""
    head = f"adaptive study (goal {r['goal']}, {r['spent']:,} of {r['product']:,} jobs{share})"
    if not (b and w and s):
        return f"{head}: no variant has an outcome yet."
    kind = b["accuracy"]["kind"]
    how = ("estimated over every cell by the logistic model" if kind == "estimated" else
           "measured on each variant's own cells" + (" (best and worst chosen by the logistic model)"
                                                     if r["goal"] == "best-worst" else ""))
    if _all_tied(r):
        return (f"{head}, {how}: all variants tie at {_pct(b['accuracy']['value'])} {_interval(b['accuracy'])} "
                f"(spread {spread_text(s)}).")
    text = (f"{head}, {how}: best variant {names(r, 'best')} at {_pct(b['accuracy']['value'])} "
            f"{_interval(b['accuracy'])}, worst {names(r, 'worst')} at {_pct(w['accuracy']['value'])} "
            f"{_interval(w['accuracy'])}; spread (best - worst) {spread_text(s)} {kind}")
    median = (r.get("quantiles") or {}).get("p50")
    if median and median.get("value") is not None:
        text += f"; median variant {_pct(median['value'])} {_interval(median)}"
    return text + "."


def common_sentence(r: Mapping[str, Any]) -> str:
    """What the cells every variant ran say, measured, and why it may name other variants than the headline."""
    c = r.get("common") or {}
    cells = int(c.get("cells") or 0)
    if not cells or not c.get("spread"):
        return ("Measured: no cell was run on every variant (each ran its own cases), so no measured best or worst "
                "compares them all; the per-variant accuracies are over different case sets.")
    noise = c.get("noise")
    noise_text = "" if noise is None else f", of which about {_pp(noise)} is expected from sampling noise alone"
    where = f"on the {cells:,} cells every variant ran ({c.get('cases', cells):,} cases)"
    if _all_tied(c):
        text = f"Measured {where}: all variants tie at {_pct(c['best']['accuracy']['value'])}"
    else:
        text = (f"Measured {where}: best {names(r, 'best', c)} at {_pct(c['best']['accuracy']['value'])} "
                f"{_interval(c['best']['accuracy'])}, worst {names(r, 'worst', c)} at "
                f"{_pct(c['worst']['accuracy']['value'])} {_interval(c['worst']['accuracy'])}, spread "
                f"{spread_text(c['spread'])}{noise_text}")
    differ = [what for what in ("best", "worst") if _differs(r, c, what)]
    if differ:
        named = " and ".join(f"{names(r, what)} {what}" for what in differ)
        text += (f". These {cells:,} cells are a small part of what ran; the headline, which uses every cell, "
                 f"names {named}")
    return text + "."


def _differs(r: Mapping[str, Any], c: Mapping[str, Any], what: str) -> bool:
    """The common cells' best (worst) is none of the headline's tied best (worst), nor the other way round."""
    ours = set((r.get("ties") or {}).get(what) or ()) | {(r.get(what) or {}).get("variant_id")}
    theirs = set((c.get("ties") or {}).get(what) or ()) | {(c.get(what) or {}).get("variant_id")}
    return not (ours & theirs) and not (_all_tied(r) or _all_tied(c))


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
                name = "all variants (tied)" if _all_tied(r) else names(r, what)
                rows.append([r["model"], what, name, _pct(a["value"]), _interval(a), a["kind"], f"{a['n']:,}"])
        s = r.get("spread")
        if s:
            rows.append([r["model"], "spread", "best - worst", _pp(s["value"]), _interval(s), s["kind"],
                         f"{s['n']:,}"])
        c = r.get("common") or {}
        if c.get("spread"):
            for what in ("best", "worst"):
                a = c[what]["accuracy"]
                name = "all variants (tied)" if _all_tied(c) else names(r, what, c)
                rows.append([r["model"], f"{what}, common cells", name, _pct(a["value"]), _interval(a), a["kind"],
                             f"{a['n']:,}"])
            rows.append([r["model"], "spread, common cells", "best - worst", _pp(c["spread"]["value"]),
                         _interval(c["spread"]), c["spread"]["kind"], f"{c['spread']['n']:,}"])
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
        b = r.get("best")
        if b and _all_tied(r):
            a = b["accuracy"]
            out.append(f"    all variants tie at {_pct(a['value'])} {_interval(a)} ({a['kind']})")
        else:
            for what in ("best", "worst"):
                v = r.get(what)
                if v:
                    a = v["accuracy"]
                    out.append(escape_controls(f"    {what}: {names(r, what)} {_pct(a['value'])} {_interval(a)} "
                                               f"({a['kind']}, {a['n']} cells)"))
        s = r.get("spread")
        if s:
            out.append(f"    spread: {spread_text(s)} ({s['kind']})")
        qs = r.get("quantiles") or {}
        if qs:
            shown = ", ".join(f"{k} {_pct(q['value'])} {_interval(q)}" for k, q in qs.items())
            out.append(f"    quantiles ({next(iter(qs.values()))['kind']}): {shown}")
        if s:
            out.append(escape_controls(f"    {common_sentence(r)}"))
    return "\n".join(out) + "\n"
