"""Number formatting shared by every output: one spelling of a percentage everywhere."""

from __future__ import annotations

import math

from ._model import Interval

__all__ = ["DASH", "ci_pct", "ci_pp", "fmt_num", "pct", "pp", "pval", "with_ci"]

DASH = "–"  # shown where a number cannot be computed


def _bad(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def pct(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage without the sign: 0.825 -> ``82.5``."""
    return DASH if _bad(x) else f"{100 * x:.{digits}f}"  # type: ignore[operator]


def pp(x: float | None, digits: int = 1) -> str:
    """A difference of fractions in signed percentage points: -0.031 -> ``-3.1``."""
    if _bad(x):
        return DASH
    value = 100 * x  # type: ignore[operator]
    if round(value, digits) == 0:
        value = 0.0  # no "-0.0"
    return f"{value:+.{digits}f}"


def ci_pct(ci: Interval, digits: int = 1) -> str:
    if _bad(ci[0]) or _bad(ci[1]):
        return ""
    return f"[{pct(ci[0], digits)}, {pct(ci[1], digits)}]"


def ci_pp(ci: Interval, digits: int = 1) -> str:
    if _bad(ci[0]) or _bad(ci[1]):
        return ""
    return f"[{pp(ci[0], digits)}, {pp(ci[1], digits)}]"


def with_ci(x: float, ci: Interval, *, signed: bool = False, digits: int = 1) -> str:
    """``82.5 [78.1, 86.0]`` (or signed percentage points)."""
    head = pp(x, digits) if signed else pct(x, digits)
    tail = ci_pp(ci, digits) if signed else ci_pct(ci, digits)
    return f"{head} {tail}".strip()


def pval(p: float) -> str:
    if _bad(p):
        return DASH
    if p < 0.001:
        return "<0.001"
    return f"{p:.3f}"


def fmt_num(x: float | int | None, digits: int = 2) -> str:
    if _bad(x):
        return DASH
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:,.{digits}f}"
