"""Variant order, the baseline variant, languages and dimension names of a report."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from promptgrid.errors import ReportError
from promptgrid.matrix.running.results import ResultRow
from promptgrid.variants import DIMENSIONS, builtin_grids, load_grid

from ._labels import labels_for
from ._model import VariantInfo

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

    ``baseline`` may be a variant id or a label that the report or the
    end-of-run table shows (full or shortened, a trailing " (baseline)"
    allowed), compared ignoring case and repeated spaces. Without an exact
    all-defaults variant, the one with the most dimensions at their default
    (first in order on a tie) - e.g. the English-only variant of a
    translation grid.
    """
    if baseline is not None:
        return _find_variant(baseline, variants)
    if not variants:
        return None

    def score(v: VariantInfo) -> int:
        return sum(1 for k, d in DIMENSIONS.items() if v.dimensions.get(k, d.default) == d.default)

    scores = [score(v) for v in variants]
    return variants[scores.index(max(scores))].id


def _norm(name: str) -> str:
    return " ".join(name.split()).casefold()


def _find_variant(wanted: str, variants: Sequence[VariantInfo]) -> str:
    """The id of the variant ``wanted`` names (id, label or shortened label); a ``ReportError`` otherwise."""
    short = labels_for(variants)
    names: dict[str, set[str]] = {}  # normalized name -> ids it names
    for v in variants:
        for name in (v.id, v.label, short.get(v.id, v.label)):
            names.setdefault(_norm(name), set()).add(v.id)
    key = _norm(wanted)
    if key.endswith("(baseline)") and key not in names:
        key = key[: -len("(baseline)")].strip()
    ids = names.get(key, set())
    if len(ids) == 1:
        return next(iter(ids))
    if ids:
        raise ReportError(f"--baseline {wanted!r} names {len(ids)} variants ({', '.join(sorted(ids))}); "
                          "give one of these ids.")
    shown = list(dict.fromkeys(n for v in variants for n in (short.get(v.id, v.label), v.id)))
    near = difflib.get_close_matches(wanted, shown, n=3, cutoff=0.5)
    hint = f" Close matches: {', '.join(repr(n) for n in near)}." if near else ""
    raise ReportError(f"--baseline {wanted!r} is not a variant id or label of this run.{hint} Give an id or a "
                      "label from the report's accuracy table (variant_id and label columns of results.csv).")


def language_order(langs: Iterable[str]) -> list[str]:
    uniq = set(langs)
    return (["en"] if "en" in uniq else []) + sorted(uniq - {"en"})


def value_str(value: Any) -> str:
    return str(value)


def dimension_names(infos: Iterable[VariantInfo]) -> list[str]:
    extra = sorted({k for v in infos for k in v.dimensions} - set(DIMENSIONS))
    return list(DIMENSIONS) + extra
