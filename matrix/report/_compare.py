"""``compare_runs``: two runs of the same grid (e.g. two model versions), paired case by case.

Models are paired by name when the runs share model names (a re-run after a
change), otherwise every model of run A is paired with every model of run B
(two versions of one model). For each pair and each variant both runs hold,
the difference B - A is computed on the cases both runs answered, with a
paired bootstrap interval (resampling cases) and an exact McNemar test on the
discordant cases, Holm-adjusted over the variants of the pair. The pair's
mean accuracy, spread and std across variants are compared the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from promptgrid.display import escape_controls
from promptgrid.errors import ReportError
from promptgrid.matrix.report import stats
from promptgrid.matrix.running.results import ResultRow
from promptgrid.safeio import atomic_write

from ._csv import _write
from ._format import pct, pval, with_ci
from ._matrix import Resampler, paired, quiet_nan
from ._order import order_variants
from ._rows import Rows, as_results
from ._tables import Table, markdown_table

__all__ = ["CompareResult", "PairSummary", "VariantDiff", "compare_runs"]


@dataclass(frozen=True)
class VariantDiff:
    """One variant, model A (run A) against model B (run B); ``diff`` = B - A."""

    model_a: str
    model_b: str
    variant_id: str
    label: str
    n_cases: int
    accuracy_a: float
    accuracy_b: float
    diff: float
    diff_ci: tuple[float, float]
    a_better: int
    b_better: int
    p_value: float
    p_holm: float
    significant: bool


@dataclass(frozen=True)
class PairSummary:
    """Mean, spread and std across the shared variants for A and B, and their differences (B - A)."""

    model_a: str
    model_b: str
    n_variants: int
    n_cases: int
    mean_a: float
    mean_b: float
    mean_diff_ci: tuple[float, float]
    spread_a: float
    spread_b: float
    spread_diff_ci: tuple[float, float]
    std_a: float
    std_b: float
    std_diff_ci: tuple[float, float]
    n_significant: int


@dataclass(frozen=True)
class CompareResult:
    diffs: tuple[VariantDiff, ...]
    pairs: tuple[PairSummary, ...]
    files: tuple[Path, ...]
    console: str


def _sums(jobs: Iterable[ResultRow], model: str, cases: list[str], vids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    ci = {c: i for i, c in enumerate(cases)}
    vi = {v: i for i, v in enumerate(vids)}
    num, den = np.zeros((len(cases), len(vids))), np.zeros((len(cases), len(vids)))
    for j in jobs:
        if j.scored and j.model == model and j.case_id in ci and j.variant_id in vi:
            num[ci[j.case_id], vi[j.variant_id]] += j.correct
            den[ci[j.case_id], vi[j.variant_id]] += 1
    return num, den


def _pairs(models_a: list[str], models_b: list[str]) -> list[tuple[str, str]]:
    common = [m for m in models_a if m in models_b]
    if common:
        return [(m, m) for m in common]
    return [(a, b) for a in models_a for b in models_b]


def _spread(x: np.ndarray) -> np.ndarray:
    with quiet_nan():
        return np.asarray(np.nanmax(x, axis=-1) - np.nanmin(x, axis=-1))


def compare_runs(
    rows_a: Rows,
    rows_b: Rows,
    out_dir: Path | None = None,
    *,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    alpha: float = 0.05,
    names: tuple[str, str] = ("A", "B"),
) -> CompareResult:
    """Paired differences between two runs; raises ``ReportError`` when they share no variant or case."""
    jobs_a, jobs_b = as_results(rows_a), as_results(rows_b)
    names = (escape_controls(names[0]), escape_controls(names[1]))  # file names reach titles and messages
    infos = {v.id: v for v in order_variants(jobs_a + jobs_b)}
    order = list(infos)
    va = {j.variant_id for j in jobs_a if j.scored}
    vb = {j.variant_id for j in jobs_b if j.scored}
    shared_v = [v for v in order if v in va and v in vb]
    if not shared_v:
        raise ReportError(
            f"runs {names[0]} and {names[1]} share no variant ({len(va)} vs {len(vb)} scored variants); "
            "compare two runs of the same grid."
        )
    models_a = sorted({j.model for j in jobs_a})
    models_b = sorted({j.model for j in jobs_b})
    diffs: list[VariantDiff] = []
    pairs: list[PairSummary] = []
    for ma, mb in _pairs(models_a, models_b):
        ca = {j.case_id for j in jobs_a if j.scored and j.model == ma}
        cb = {j.case_id for j in jobs_b if j.scored and j.model == mb}
        cases = sorted(ca & cb)
        if not cases:
            continue
        na, da = _sums(jobs_a, ma, cases, shared_v)
        nb, db = _sums(jobs_b, mb, cases, shared_v)
        num, den = np.concatenate([na, nb], axis=1), np.concatenate([da, db], axis=1)
        rs = Resampler(len(cases), n_resamples, stats.seed_for(ma, mb, base=seed))
        rows = []
        for vi, vid in enumerate(shared_v):
            n, acc_b, acc_a, diff_boot, b_better, a_better = paired(rs, num, den, len(shared_v) + vi, vi)
            if n == 0:
                continue
            rows.append((vid, n, acc_a, acc_b, diff_boot, a_better, b_better, stats.mcnemar_exact(a_better, b_better)))
        if not rows:
            continue
        adjusted = stats.holm([r[7] for r in rows])
        pair_diffs = [
            VariantDiff(
                ma,
                mb,
                vid,
                infos[vid].label,
                n,
                acc_a,
                acc_b,
                acc_b - acc_a,
                stats.percentile_interval(diff_boot, confidence),
                a_better,
                b_better,
                p,
                ph,
                bool(ph < alpha),
            )
            for (vid, n, acc_a, acc_b, diff_boot, a_better, b_better, p), ph in zip(rows, adjusted, strict=True)
        ]
        diffs += pair_diffs
        # Pair summary on the variants with shared cases; each variant on the cases both runs have for it.
        cols = [shared_v.index(r[0]) for r in rows]
        mask = (da[:, cols] > 0) & (db[:, cols] > 0)
        a_acc = np.array([d.accuracy_a for d in pair_diffs])
        b_acc = np.array([d.accuracy_b for d in pair_diffs])
        boot_a = rs.ratio(na[:, cols] * mask, da[:, cols] * mask)
        boot_b = rs.ratio(nb[:, cols] * mask, db[:, cols] * mask)
        with quiet_nan():
            mean_d = np.nanmean(boot_b, axis=1) - np.nanmean(boot_a, axis=1)
            std_d = (
                (np.nanstd(boot_b, axis=1, ddof=1) - np.nanstd(boot_a, axis=1, ddof=1))
                if len(cols) > 1
                else np.zeros(1)
            )
        pairs.append(
            PairSummary(
                model_a=ma,
                model_b=mb,
                n_variants=len(cols),
                n_cases=len(cases),
                mean_a=float(a_acc.mean()),
                mean_b=float(b_acc.mean()),
                mean_diff_ci=stats.percentile_interval(mean_d, confidence),
                spread_a=float(a_acc.max() - a_acc.min()),
                spread_b=float(b_acc.max() - b_acc.min()),
                spread_diff_ci=stats.percentile_interval(_spread(boot_b) - _spread(boot_a), confidence),
                std_a=float(stats.sample_std(a_acc)),
                std_b=float(stats.sample_std(b_acc)),
                std_diff_ci=stats.percentile_interval(std_d, confidence),
                n_significant=sum(d.significant for d in pair_diffs),
            )
        )
    if not diffs:
        raise ReportError(
            f"runs {names[0]} and {names[1]} share variants but no case answered by both "
            f"(models {', '.join(models_a)} vs {', '.join(models_b)}); compare runs over the same dataset."
        )
    tables = _tables(diffs, pairs, names, alpha)
    console = "\n\n".join(f"{t.title}\n\n{markdown_table(t, 'simple')}" for t in tables) + "\n"
    files: list[Path] = []
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        md = [
            "# promptgrid run comparison",
            "",
            f"Run {names[0]} vs run {names[1]}; differences are {names[1]} - {names[0]}.",
            "",
        ]
        for t in tables:
            md += [f"## {t.title}", "", markdown_table(t), "", f"_{t.note}_" if t.note else "", ""]
        files.append(_write_file(out / "compare.md", "\n".join(md).rstrip() + "\n"))
        files.append(
            _write_file(
                out / "compare.csv",
                _write(
                    [
                        "model_a",
                        "model_b",
                        "variant_id",
                        "label",
                        "n_cases",
                        "accuracy_a",
                        "accuracy_b",
                        "diff",
                        "diff_ci_low",
                        "diff_ci_high",
                        "a_better",
                        "b_better",
                        "p_value",
                        "p_holm",
                        "significant",
                    ],
                    (
                        [
                            d.model_a,
                            d.model_b,
                            d.variant_id,
                            d.label,
                            d.n_cases,
                            d.accuracy_a,
                            d.accuracy_b,
                            d.diff,
                            *d.diff_ci,
                            d.a_better,
                            d.b_better,
                            d.p_value,
                            d.p_holm,
                            d.significant,
                        ]
                        for d in diffs
                    ),
                ),
            )
        )
        files.append(
            _write_file(
                out / "compare_summary.csv",
                _write(
                    [
                        "model_a",
                        "model_b",
                        "n_variants",
                        "n_cases",
                        "mean_a",
                        "mean_b",
                        "mean_diff_ci_low",
                        "mean_diff_ci_high",
                        "spread_a",
                        "spread_b",
                        "spread_diff_ci_low",
                        "spread_diff_ci_high",
                        "std_a",
                        "std_b",
                        "std_diff_ci_low",
                        "std_diff_ci_high",
                        "n_significant",
                    ],
                    (
                        [
                            p.model_a,
                            p.model_b,
                            p.n_variants,
                            p.n_cases,
                            p.mean_a,
                            p.mean_b,
                            *p.mean_diff_ci,
                            p.spread_a,
                            p.spread_b,
                            *p.spread_diff_ci,
                            p.std_a,
                            p.std_b,
                            *p.std_diff_ci,
                            p.n_significant,
                        ]
                        for p in pairs
                    ),
                ),
            )
        )
        files.append(_write_file(out / "compare.html", _html(tables, names)))
    return CompareResult(tuple(diffs), tuple(pairs), tuple(files), console)


def _write_file(path: Path, text: str) -> Path:
    return atomic_write(path, text)  # never over a run's own files, never half a file


def _tables(diffs: list[VariantDiff], pairs: list[PairSummary], names: tuple[str, str], alpha: float) -> list[Table]:
    a, b = names
    summary = Table(
        "summary",
        f"Summary ({b} - {a})",
        (
            "Model A",
            "Model B",
            "Variants",
            "Cases",
            f"Mean {a} %",
            f"Mean {b} %",
            "Mean diff pp [CI]",
            f"Spread {a} pp",
            f"Spread {b} pp",
            "Spread diff pp [CI]",
            f"Std {a} pp",
            f"Std {b} pp",
            "Significant",
        ),
        tuple(
            (
                p.model_a,
                p.model_b,
                str(p.n_variants),
                str(p.n_cases),
                pct(p.mean_a),
                pct(p.mean_b),
                with_ci(p.mean_b - p.mean_a, p.mean_diff_ci, signed=True),
                pct(p.spread_a),
                pct(p.spread_b),
                with_ci(p.spread_b - p.spread_a, p.spread_diff_ci, signed=True),
                pct(p.std_a),
                pct(p.std_b),
                f"{p.n_significant}/{p.n_variants}",
            )
            for p in pairs
        ),
        (False, False) + (True,) * 11,
        "Mean, spread (best - worst) and std across the shared variants; paired bootstrap over the cases both runs "
        f"answered. Significant: variants whose Holm-adjusted exact McNemar p < {alpha:g}.",
    )
    out = [summary]
    for ma, mb in dict.fromkeys((d.model_a, d.model_b) for d in diffs):
        ds = [d for d in diffs if d.model_a == ma and d.model_b == mb]
        out.append(
            Table(
                f"pair-{len(out)}",
                f"{ma} ({a}) vs {mb} ({b}) per variant",
                (
                    "Variant",
                    "Cases",
                    f"{a} %",
                    f"{b} %",
                    "Diff pp [CI]",
                    f"{a} better/{b} better",
                    "p",
                    "p (Holm)",
                    "Significant",
                ),
                tuple(
                    (
                        d.label,
                        str(d.n_cases),
                        pct(d.accuracy_a),
                        pct(d.accuracy_b),
                        with_ci(d.diff, d.diff_ci, signed=True),
                        f"{d.a_better}/{d.b_better}",
                        pval(d.p_value),
                        pval(d.p_holm),
                        "yes" if d.significant else "",
                    )
                    for d in ds
                ),
                (False,) + (True,) * 7 + (False,),
                "Paired on the cases both runs answered; exact McNemar test on the discordant cases, "
                "Holm-adjusted over variants; bootstrap interval of the difference.",
            )
        )
    return out


def _html(tables: list[Table], names: tuple[str, str]) -> str:
    """compare.html, rendered from the package's ``compare.html.j2`` (autoescape on)."""
    from ._html import render_page, table_view

    title = f"Run comparison: {names[1]} - {names[0]}"
    return render_page("compare.html.j2", title=title, tables=[table_view(t) for t in tables])
