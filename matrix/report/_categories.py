"""Accuracy per dataset category (``Case.category``: simple, multiple, parallel, parallel_multiple,
irrelevance), per model over all its variants and per model x variant.

A model can reach a respectable overall accuracy from one category alone (an
irrelevance case answered with no call is correct however badly the model
writes calls); these cells show where the correct answers come from.

Intervals are those of the accuracy cells (``_compute._cells``): Wilson over
jobs when each case was asked once, else a bootstrap over the category's
cases (its own resampler, as the per-language statistics do: the categories
are fixed by the dataset, not sampled), with Wilson over cases for a rate of
exactly 0 or 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial

import numpy as np

from promptgrid.matrix.report import stats
from promptgrid.matrix.running.results import ResultRow
from promptgrid.records import CATEGORIES

from ._matrix import ModelData, Resampler, boundary_interval, ci_of
from ._model import CategoryCell, Interval, Settings, VariantInfo

__all__ = ["ALL_VARIANTS", "UNKNOWN_CATEGORY", "category_of", "category_order", "category_stats"]

ALL_VARIANTS = "all variants"
"""The label of a model's cell over all its variants (its ``variant_id`` is empty)."""
UNKNOWN_CATEGORY = "unknown"
"""The category of a row that carries none (an export from before categories were stored)."""


def category_of(j: ResultRow) -> str:
    return j.case_category or UNKNOWN_CATEGORY


def category_order(values: Iterable[str]) -> list[str]:
    """Categories in ``CATEGORIES`` order, then any other (a ``jsonl:`` file's own) alphabetically."""
    seen = set(values)
    return [c for c in CATEGORIES if c in seen] + sorted(seen - set(CATEGORIES))


def _interval(k: float, n: float, per_case_den: np.ndarray, boot: Callable[[], np.ndarray],
              confidence: float) -> tuple[Interval, str]:
    """The accuracy cells' rule: Wilson with one job per case, else bootstrap (Wilson over cases at 0 or 1)."""
    if per_case_den.max(initial=0) <= 1:
        return stats.wilson_interval(int(k), int(n), confidence), "wilson"
    if k in (0, n):
        return boundary_interval(k == n, per_case_den, confidence), "bootstrap"
    return ci_of(boot(), confidence), "bootstrap"


def category_stats(
    md: ModelData,
    jobs: Sequence[ResultRow],
    infos: Mapping[str, VariantInfo],
    categories: Sequence[str],
    settings: Settings,
) -> list[CategoryCell]:
    """Per category: the model's cell over all variants, then one per variant (grid order)."""
    category = {j.case_id: category_of(j) for j in jobs if j.scored}
    case_category = np.array([category[c] for c in md.cases])
    out: list[CategoryCell] = []
    for cat in categories:
        idx = np.flatnonzero(case_category == cat)
        if idx.size:
            out += _cells(md, cat, idx, infos, settings)
    return out


def _cells(md: ModelData, cat: str, idx: np.ndarray, infos: Mapping[str, VariantInfo],
           settings: Settings) -> list[CategoryCell]:
    rs = Resampler(idx.size, settings.n_resamples, stats.seed_for(md.model, "category", cat, base=settings.seed))
    num, den = md.num["accuracy"][idx], md.den["accuracy"][idx]
    pooled_num, pooled_den = num.sum(1), den.sum(1)
    boot: dict[str, np.ndarray] = {}  # resampled once, when a cell needs the bootstrap

    def pooled_boot() -> np.ndarray:
        return rs.ratio(pooled_num, pooled_den)

    def variant_boot(col: int) -> np.ndarray:
        if "variants" not in boot:
            boot["variants"] = rs.ratio(num, den)
        return boot["variants"][:, col]

    out: list[CategoryCell] = []
    k, n = float(pooled_num.sum()), float(pooled_den.sum())
    if n:
        ci, method = _interval(k, n, pooled_den, pooled_boot, settings.confidence)
        out.append(CategoryCell(md.model, cat, "", ALL_VARIANTS, int(n), int(k), int(np.count_nonzero(pooled_den)),
                                k / n, ci, method))
    for col, vid in enumerate(md.vids):
        k, n = float(num[:, col].sum()), float(den[:, col].sum())
        if not n:
            continue
        ci, method = _interval(k, n, den[:, col], partial(variant_boot, col), settings.confidence)
        out.append(CategoryCell(md.model, cat, vid, infos[vid].label, int(n), int(k),
                                int(np.count_nonzero(den[:, col])), k / n, ci, method))
    return out
