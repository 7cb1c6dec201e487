"""Rows -> ``ReportData``: every number a report shows is computed here, once.

This module computes the per-variant cells, the sensitivity, the dimension
effects and the baseline tests, and assembles the rest from ``_languages``
(per-language tables, pass^k), ``_categories`` (accuracy per dataset category)
and ``_usage`` (failure modes, cost, speed).
The bootstrap machinery is in ``_matrix``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from promptgrid.errors import ReportError
from promptgrid.matrix.report import stats
from promptgrid.matrix.running.results import ResultRow
from promptgrid.matrix.scoring.metrics import prf
from promptgrid.variants import DIMENSIONS

from ._call_modes import call_mode_of, call_modes_of, format_tax, mode_failures, parse_shares, unsupported_counts
from ._categories import category_of, category_order, category_stats
from ._languages import language_match_stats, language_stats, pass_k_stats, translation_kind
from ._matrix import (
    ModelData,
    Resampler,
    boundary_interval,
    ci_of,
    model_data,
    nanreduce,
    paired,
    quiet_nan,
)
from ._model import (
    NAN_INTERVAL,
    CategoryCell,
    Cell,
    DimensionEffect,
    FormatTax,
    Interval,
    LanguageCell,
    LanguageSummary,
    PairedTest,
    PassK,
    PendingJobs,
    ReportData,
    Sensitivity,
    Settings,
    SpeedPoint,
    TranslationDelta,
    UnsupportedJobs,
    VariantInfo,
)
from ._order import dimension_names, language_order, order_variants, resolve_baseline, value_str
from ._rows import Rows, as_results
from ._usage import cost_summary, endpoint_summaries, failure_stats, speed_points

__all__ = ["aggregate", "order_variants", "resolve_baseline"]


def _cells(
    md: ModelData, jobs: Sequence[ResultRow], infos: Mapping[str, VariantInfo], settings: Settings
) -> list[Cell]:
    by_variant: dict[str, list[ResultRow]] = defaultdict(list)
    for j in jobs:
        by_variant[j.variant_id].append(j)
    out = []
    for col, vid in enumerate(md.vids):
        vj = by_variant[vid]
        scored = [j for j in vj if j.scored]
        repeats = int(md.den["accuracy"][:, col].max())

        def rate_ci(metric: str, col: int = col, repeats: int = repeats) -> tuple[float, Interval]:
            k, n = float(md.num[metric][:, col].sum()), float(md.den[metric][:, col].sum())
            if n == 0:
                return math.nan, NAN_INTERVAL
            if repeats <= 1:
                return k / n, stats.wilson_interval(int(k), int(n), settings.confidence)
            if k in (0, n):
                return k / n, boundary_interval(k == n, md.den[metric][:, col], settings.confidence)
            return k / n, ci_of(md.boot(metric)[:, col], settings.confidence)

        acc, acc_ci = rate_ci("accuracy")
        fsa, fsa_ci = rate_ci("fsa")
        fm, fm_ci = rate_ci("format_match")
        fa, fa_ci = rate_ci("format_agnostic")
        tool = [sum(j.tool_tp for j in scored), sum(j.tool_fp for j in scored), sum(j.tool_fn for j in scored)]
        arg = [sum(j.arg_tp for j in scored), sum(j.arg_fp for j in scored), sum(j.arg_fn for j in scored)]
        out.append(
            Cell(
                model=md.model,
                variant_id=vid,
                label=infos[vid].label,
                n=len(scored),
                correct=sum(j.correct for j in scored),
                accuracy=acc,
                ci=acc_ci,
                ci_method="wilson" if repeats <= 1 else "bootstrap",
                errors=sum(j.error is not None for j in scored),
                unscored=sum(not j.scored and j.status != "unsupported" for j in vj),
                n_cases=int(np.count_nonzero(md.den["accuracy"][:, col])),
                repeats=repeats,
                fsa=fsa,
                fsa_ci=fsa_ci,
                format_match=fm,
                format_match_ci=fm_ci,
                format_agnostic_accuracy=fa,
                format_agnostic_ci=fa_ci,
                tool_f1=prf(*tool).f1,
                arg_f1=prf(*arg).f1,
            )
        )
    return out


def _sensitivity(
    md: ModelData, infos: Mapping[str, VariantInfo], settings: Settings, cells: Mapping[str, Cell]
) -> Sensitivity | None:
    num, den = md.num["accuracy"], md.den["accuracy"]
    if not md.vids:
        return None
    acc = num.sum(0) / den.sum(0)
    boot = md.boot()
    conf = settings.confidence
    # On a tie the best is the first variant in grid order and the worst the last one,
    # so an all-equal model does not name one variant as both.
    best, worst = int(np.argmax(acc)), len(acc) - 1 - int(np.argmin(acc[::-1]))
    spread_boot = nanreduce(np.nanmax, boot) - nanreduce(np.nanmin, boot)
    spread = float(acc[best] - acc[worst])
    if len(md.vids) > 1:
        std = float(stats.sample_std(acc))
        with quiet_nan():
            std_boot = np.nanstd(boot, axis=1, ddof=1)
    else:
        std, std_boot = 0.0, np.zeros(boot.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    per_case = stats.instance_sensitivity(scores)
    ok = ~np.isnan(per_case)
    inst = float(per_case[ok].mean()) if ok.any() else math.nan
    inst_boot = md.resampler.ratio(np.where(ok, per_case, 0.0), ok.astype(float))
    return Sensitivity(
        model=md.model,
        n_variants=len(md.vids),
        n_cases=len(md.cases),
        mean_accuracy=float(acc.mean()),
        mean_ci=ci_of(nanreduce(np.nanmean, boot), conf),
        best_variant=md.vids[best],
        best_label=infos[md.vids[best]].label,
        best_accuracy=float(acc[best]),
        best_ci=cells[md.vids[best]].ci,  # the cell's own interval (Wilson without repeats)
        worst_variant=md.vids[worst],
        worst_label=infos[md.vids[worst]].label,
        worst_accuracy=float(acc[worst]),
        worst_ci=cells[md.vids[worst]].ci,
        spread=spread,
        spread_ci=ci_of(spread_boot, conf),
        spread_bias=_selection_bias(spread_boot, boot, best, worst),
        std=std,
        std_ci=ci_of(std_boot, conf) if len(md.vids) > 1 else (0.0, 0.0),
        instance_sensitivity=inst,
        instance_ci=ci_of(inst_boot, conf),
    )


def _selection_bias(spread_boot: np.ndarray, boot: np.ndarray, best: int, worst: int) -> float:
    """How much of the spread noise alone makes: the mean, over bootstrap resamples, of what re-picking best and
    worst in the resample adds over the estimate's own best and worst (max - min minus best - worst there).

    Never negative, as no resample's max - min is below its best - worst. (The plain estimate, mean of the
    replicates' max - min minus the estimate's spread, carries the replicates' own centring error on top, and
    came out negative on small samples: a "noise" of -0.7 pp where noise can only widen the spread.)
    """
    if not spread_boot.size:
        return math.nan
    with quiet_nan():
        added = spread_boot - (boot[:, best] - boot[:, worst])
        return float(np.nanmean(added)) if np.isfinite(added).any() else math.nan


def _effects(md: ModelData, infos: Mapping[str, VariantInfo], settings: Settings) -> list[DimensionEffect]:
    num, den = md.num["accuracy"], md.den["accuracy"]
    if len(md.vids) < 2:
        return []
    acc = num.sum(0) / den.sum(0)
    boot = md.boot()
    # Variant.dimensions() omits call_mode at its default: missing means prompt, so prompt variants pair too.
    vinfos = [VariantInfo(i.id, i.label, {**i.dimensions, "call_mode": call_mode_of(i.dimensions)})
              for i in (infos[v] for v in md.vids)]
    dims = dimension_names(vinfos)
    out: list[DimensionEffect] = []
    for d in dims:
        groups: dict[tuple[tuple[str, str], ...], dict[str, int]] = defaultdict(dict)
        for col, v in enumerate(vinfos):
            if d not in v.dimensions:
                continue
            other = tuple((k, value_str(v.dimensions.get(k))) for k in dims if k != d)
            groups[other].setdefault(value_str(v.dimensions[d]), col)
        varying = [g for g in groups.values() if len(g) >= 2]
        if not varying:
            continue
        seen = [val for g in varying for val in g]
        known = (DIMENSIONS[d].values or ()) if d in DIMENSIONS else ()
        values = [value_str(x) for x in known if value_str(x) in seen]
        values += [x for x in dict.fromkeys(seen) if x not in values]
        default = value_str(DIMENSIONS[d].default) if d in DIMENSIONS else None
        ref = default if default in values else values[0]
        for val in values:
            cols = [g[val] for g in varying if val in g]
            pairs = [(g[val], g[ref]) for g in varying if val in g and ref in g]
            a, b = [p[0] for p in pairs], [p[1] for p in pairs]
            if pairs:
                diff = float(np.mean(acc[a] - acc[b]))
                diff_ci = (
                    (0.0, 0.0) if val == ref else ci_of(np.mean(boot[:, a] - boot[:, b], axis=1), settings.confidence)
                )
            else:
                diff, diff_ci = math.nan, NAN_INTERVAL
            out.append(
                DimensionEffect(
                    model=md.model,
                    dimension=d,
                    value=val,
                    reference=ref,
                    n_variants=len(cols),
                    marginal=float(np.mean(acc[cols])),
                    marginal_ci=ci_of(np.mean(boot[:, cols], axis=1), settings.confidence),
                    n_pairs=len(pairs),
                    diff=diff,
                    diff_ci=diff_ci,
                )
            )
    return out


def _baseline_tests(
    md: ModelData, baseline: str | None, infos: Mapping[str, VariantInfo], settings: Settings
) -> list[PairedTest]:
    if baseline is None or baseline not in md.vids:
        return []
    b = md.col(baseline)
    rows = []
    for col, vid in enumerate(md.vids):
        if vid == baseline:
            continue
        n, acc_v, acc_b, diff_boot, better, worse = paired(md.resampler, md.num["accuracy"], md.den["accuracy"], col, b)
        p = stats.mcnemar_exact(better, worse, mid_p=settings.mid_p) if n else math.nan
        rows.append((vid, n, acc_v, acc_b, diff_boot, better, worse, p))
    adjusted = stats.holm([r[7] for r in rows])
    return [
        PairedTest(
            model=md.model,
            variant_id=vid,
            label=infos[vid].label,
            baseline_id=baseline,
            n_cases=n,
            accuracy=acc_v,
            baseline_accuracy=acc_b,
            diff=acc_v - acc_b,
            diff_ci=ci_of(diff_boot, settings.confidence),
            better=better,
            worse=worse,
            p_value=p,
            p_holm=ph,
            significant=bool(ph < settings.alpha),
        )
        for (vid, n, acc_v, acc_b, diff_boot, better, worse, p), ph in zip(rows, adjusted, strict=True)
    ]


def _cases_common_to_variants(jobs: Sequence[ResultRow]) -> int:
    """How many cases every variant among ``jobs`` was scored on (the comparable intersection)."""
    sets: dict[str, set[str]] = defaultdict(set)
    for j in jobs:
        if j.scored:
            sets[j.variant_id].add(j.case_id)
    return len(set.intersection(*sets.values())) if sets else 0


def _model_case_sets(models: Sequence[str], by_model: Mapping[str, Sequence[ResultRow]]) -> list[str]:
    """A note when the models were scored on different case sets: their accuracies are then not comparable."""
    sets = {m: s for m in models if (s := {j.case_id for j in by_model[m] if j.scored})}
    if len({frozenset(s) for s in sets.values()}) < 2:
        return []
    shown = ", ".join(f"{m} {len(s)}" for m, s in sets.items())
    common = len(set.intersection(*sets.values()))
    return [f"The models ran different case sets ({shown} cases), so their accuracies are not comparable with "
            f"each other: {common} cases are common to all models. Run every model on the same cases to compare "
            "them."]


def _incomplete_variants(
    model: str, md: ModelData, mj: Sequence[ResultRow], model_cells: Sequence[Cell]
) -> list[str]:
    """A note when some of a model's variants ran on fewer cases than the model has: not comparable then."""
    incomplete = [c for c in model_cells if c.n_cases < len(md.cases)]
    if not incomplete:
        return []
    shown = ", ".join(f"{c.label} ({c.n_cases}/{len(md.cases)} cases)" for c in incomplete[:5])
    more = f" and {len(incomplete) - 5} more" if len(incomplete) > 5 else ""
    common = _cases_common_to_variants(mj)
    return [
        f"{model}: incomplete variants: {shown}{more}. Its variants ran different case sets, so their "
        f"accuracies are not comparable with each other ({common} cases are common to all of them); "
        "paired statistics use the cases both sides have."
    ]


def _left_out_notes(jobs: Sequence[ResultRow], unsupported: Sequence[UnsupportedJobs]) -> list[str]:
    """Notes on the jobs that no rate counts (unsupported, unscored) and on failed calls counted as incorrect."""
    notes: list[str] = []
    if unsupported:
        notes.append(
            f"{sum(u.count for u in unsupported)} job(s) were not sent because the model cannot do the variant's "
            "call mode (unsupported): they are left out of every rate and listed under 'Unsupported jobs'."
        )
    unscored = sum(not j.scored and j.status != "unsupported" for j in jobs)
    if unscored:
        notes.append(
            f"{unscored} job(s) have neither a verdict nor an error and are left out of every rate"
            " (score the run first: promptgrid score RUN_DIR)."
        )
    errors = sum(j.error is not None for j in jobs if j.scored)
    if errors:
        notes.append(f"{errors} failed call(s) are counted as incorrect in every rate (column 'errors').")
    return notes


def aggregate(
    rows: Rows,
    *,
    baseline: str | None = None,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    alpha: float = 0.05,
    mid_p: bool = False,
    pending: PendingJobs | None = None,
) -> ReportData:
    """Compute every table of the report from result rows (``ResultRow``, or dicts as exported).

    ``pending``: the run directory's unanswered jobs (``PendingJobs.from_run_record``), stated first in the notes.
    """
    if n_resamples < 100:
        raise ReportError(f"n_resamples must be at least 100 for a usable interval, got {n_resamples}.")
    settings = Settings(n_resamples=n_resamples, seed=seed, confidence=confidence, alpha=alpha, mid_p=mid_p)
    # A canonical job order makes every number independent of the order the store returns rows in
    # (float sums included); variant order comes from the grid, not from this sort.
    given = as_results(rows)
    variant_infos = order_variants(given)  # grid order, else the order the rows first name them
    jobs = sorted(given, key=lambda j: (j.model, j.case_id, j.variant_id, j.repeat))
    infos = {v.id: v for v in variant_infos}
    order = [v.id for v in variant_infos]
    base = resolve_baseline(baseline, variant_infos)
    models = sorted({j.model for j in jobs})
    by_model: dict[str, list[ResultRow]] = defaultdict(list)
    for j in jobs:
        by_model[j.model].append(j)
    languages = language_order(j.case_language for j in jobs if j.scored)
    varies_language = any(translation_kind(v.dimensions) is not None for v in variant_infos)
    do_languages = len(languages) > 1 or varies_language
    modes = call_modes_of(variant_infos)
    several_modes = len(modes) > 1
    categories = category_order(category_of(j) for j in jobs if j.scored)
    do_categories = len(categories) > 1

    cells: list[Cell] = []
    sens: list[Sensitivity] = []
    effects: list[DimensionEffect] = []
    tax: list[FormatTax] = []
    tests: list[PairedTest] = []
    lcells: list[LanguageCell] = []
    ccells: list[CategoryCell] = []
    lsum: list[LanguageSummary] = []
    deltas: list[TranslationDelta] = []
    passk: list[PassK] = []
    speed: list[SpeedPoint] = []
    notes: list[str] = [pending.note()] if pending is not None else []
    max_repeats = 0
    n_cases = len({j.case_id for j in jobs if j.scored})
    for model in models:
        mj = by_model[model]
        md = model_data(model, mj, order, n_resamples, seed)
        if not md.vids:
            notes.append(f"{model}: no scored job; left out of every table.")
            continue
        model_cells = _cells(md, mj, infos, settings)
        cells += model_cells
        max_repeats = max([max_repeats] + [c.repeats for c in model_cells])
        s = _sensitivity(md, infos, settings, {c.variant_id: c for c in model_cells})
        if s is not None:
            sens.append(s)
        effects += _effects(md, infos, settings)
        if several_modes:
            tax += format_tax(md, infos, settings)
        tests += _baseline_tests(md, base, infos, settings)
        if base is not None and base not in md.vids:
            notes.append(f"{model}: the baseline variant was not run for this model; no paired tests.")
        per_lang: dict[str, tuple[Resampler, np.ndarray]] = {}
        if do_languages:
            lc, ls, dl, per_lang = language_stats(md, infos, languages, settings, seed)
            lcells += lc
            lsum += ls
            deltas += dl
        passk += pass_k_stats(md, infos, per_lang, settings)
        if do_categories:
            ccells += category_stats(md, mj, infos, categories, settings)
        speed += speed_points(md, mj, infos, confidence)
        notes += _incomplete_variants(model, md, mj, model_cells)

    notes += _model_case_sets(models, by_model)
    unsupported = unsupported_counts(jobs, order, infos)
    notes += _left_out_notes(jobs, unsupported)
    fcounts, fexamples = failure_stats(jobs, order, infos, cells)
    return ReportData(
        settings=settings,
        models=tuple(m for m in models if any(c.model == m for c in cells)),
        variants=tuple(variant_infos),
        baseline=base,
        cells=tuple(cells),
        sensitivity=tuple(sens),
        effects=tuple(effects),
        baseline_tests=tuple(tests),
        languages=tuple(languages) if do_languages else (),
        language_cells=tuple(lcells),
        language_summaries=tuple(lsum),
        translation=tuple(deltas),
        language_match=tuple(language_match_stats(jobs, confidence)),
        pass_k=tuple(passk),
        failure_counts=tuple(fcounts),
        failure_examples=tuple(fexamples),
        costs=tuple(cost_summary(m, by_model[m]) for m in models),
        speed=tuple(speed),
        n_rows=len(jobs),
        n_cases=n_cases,
        max_repeats=max_repeats,
        notes=tuple(notes),
        pending=pending,
        unsupported=tuple(unsupported),
        format_tax=tuple(tax),
        parse_shares=tuple(parse_shares(jobs, infos, confidence)) if modes != ["prompt"] else (),
        mode_failures=tuple(mode_failures(jobs, infos)) if several_modes else (),
        endpoints=tuple(endpoint_summaries(jobs)),
        categories=tuple(categories) if do_categories else (),
        category_cells=tuple(ccells),
    )
