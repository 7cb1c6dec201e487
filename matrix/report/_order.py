"""Variant order, the baseline variant, languages and dimension names of a report."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from promptgrid.variants import DIMENSIONS, builtin_grids, load_grid
from promptgrid.errors import closest

from promptgrid.errors import ReportError
from ._model import VariantInfo
from promptgrid.matrix.running.results import ResultRow

__all__ = ["dimension_names", "language_order", "order_variants", "resolve_baseline", "value_str"]


def order_variants(jobs: Sequence[ResultRow]) -> list[VariantInfo]:
    """Variants in their grid's order when one built-in grid holds them all, else as first seen.

    The store may return rows in any order; the grid order is what BFCL's
    heatmap uses (return format outermost, then tag, then doc format).
    """
    infos: dict[str, VariantInfo] = {}
    for j in jobs:
        if j.variant_id not in infos:
            infos[j.variant_id] = VariantInfo(j.variant_id, j.label or j.variant_id, dict(j.dimensions))
    ids = set(infos)
    best: list[str] | None = None
    for name in builtin_grids():
        try:
            grid_ids = [v.id for v in load_grid(name).variants]
        except Exception:  # noqa: BLE001 - a broken built-in grid must not stop a report
            continue
        if ids <= set(grid_ids) and (best is None or len(grid_ids) < len(best)):
            best = grid_ids
    if best is None:
        return list(infos.values())
    return [infos[i] for i in best if i in infos]


def resolve_baseline(baseline: str | None, variants: Sequence[VariantInfo]) -> str | None:
    """The baseline variant: the one asked for, else the all-defaults (BFCL default) variant.

    Without an exact all-defaults variant, the one with the most dimensions at
    their default (first in order on a tie) - e.g. the English-only variant of
    a translation grid.
    """
    ids = [v.id for v in variants]
    if baseline is not None:
        if baseline not in ids:
            raise ReportError(
                f"--baseline {baseline!r} is not a variant of this run.{closest(baseline, ids)}"
                " The run's variants are listed in the report's accuracy table (variant_id column of results.csv)."
            )
        return baseline
    if not variants:
        return None

    def score(v: VariantInfo) -> int:
        return sum(1 for k, d in DIMENSIONS.items() if v.dimensions.get(k, d.default) == d.default)

    scores = [score(v) for v in variants]
    return variants[scores.index(max(scores))].id


def language_order(langs: Iterable[str]) -> list[str]:
    uniq = set(langs)
    return (["en"] if "en" in uniq else []) + sorted(uniq - {"en"})


def value_str(value: Any) -> str:
    return str(value)


def dimension_names(infos: Iterable[VariantInfo]) -> list[str]:
    extra = sorted({k for v in infos for k in v.dimensions} - set(DIMENSIONS))
    return list(DIMENSIONS) + extra
