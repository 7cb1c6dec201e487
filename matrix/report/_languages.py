"""Language statistics: per-language accuracy, MASSIVE-Agents Table 2 and Fig. 4, Ticket-Bench pass^k,
ITC language match.

Language statistics resample cases within each language (stratified
bootstrap): the languages are fixed by the design, not sampled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from promptgrid.matrix.report import stats
from promptgrid.matrix.running.results import ResultRow
from promptgrid.matrix.scoring import metrics

from ._matrix import ModelData, Resampler, boundary_interval, ci_of, paired, quiet_nan
from ._model import LanguageCell, LanguageMatch, LanguageSummary, PassK, Settings, TranslationDelta, VariantInfo
from ._order import language_order, value_str

__all__ = ["LANG_DIMS", "language_match_stats", "language_stats", "pass_k_stats", "translation_kind"]

LANG_DIMS = ("instruction_language", "description_language")


def translation_kind(dims: Mapping[str, Any]) -> tuple[str, str] | None:
    instr = str(dims.get("instruction_language", "en"))
    desc = str(dims.get("description_language", "en"))
    if instr == "en" and desc == "en":
        return None
    if instr == "en":
        return "partial", desc
    if desc == "en":
        return "instructions", instr
    return "full", instr if instr == desc else f"{instr}+{desc}"


def language_stats(
    md: ModelData, infos: Mapping[str, VariantInfo], languages: Sequence[str], settings: Settings, seed: int
) -> tuple[list[LanguageCell], list[LanguageSummary], list[TranslationDelta], dict[str, tuple[Resampler, np.ndarray]]]:
    """Per-language cells, language summaries and translation deltas of one model, and the per-language
    resamplers (reused for pass^k)."""
    per_lang = _language_resamplers(md, languages, settings, seed)
    cells, acc_l, boot_l = _language_cells(md, infos, per_lang, settings.confidence)
    summaries = _language_summaries(md, infos, list(per_lang), acc_l, boot_l, settings.confidence)
    deltas = _translation_deltas(md, infos, per_lang, settings.confidence)
    return cells, summaries, deltas, per_lang


def _language_resamplers(
    md: ModelData, languages: Sequence[str], settings: Settings, seed: int
) -> dict[str, tuple[Resampler, np.ndarray]]:
    """One resampler per language over that language's cases (stratified bootstrap), with those cases' rows."""
    case_lang = np.array(md.case_language)
    per_lang: dict[str, tuple[Resampler, np.ndarray]] = {}
    for lang in languages:
        idx = np.flatnonzero(case_lang == lang)
        if idx.size:
            per_lang[lang] = (
                Resampler(idx.size, settings.n_resamples, stats.seed_for(md.model, lang, base=seed)),
                idx,
            )
    return per_lang


def _language_cells(
    md: ModelData, infos: Mapping[str, VariantInfo], per_lang: Mapping[str, tuple[Resampler, np.ndarray]],
    conf: float,
) -> tuple[list[LanguageCell], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Accuracy per variant x language, and per language the accuracies and bootstrap draws of every variant."""
    num, den = md.num["accuracy"], md.den["accuracy"]
    cells: list[LanguageCell] = []
    acc_l: dict[str, np.ndarray] = {}
    boot_l: dict[str, np.ndarray] = {}
    for lang, (rs, idx) in per_lang.items():
        n_l, d_l = num[idx], den[idx]
        with np.errstate(invalid="ignore", divide="ignore"):
            acc_l[lang] = np.where(d_l.sum(0) > 0, n_l.sum(0) / np.where(d_l.sum(0) > 0, d_l.sum(0), 1), np.nan)
        boot_l[lang] = rs.ratio(n_l, d_l)
        for col, vid in enumerate(md.vids):
            n, k = int(d_l[:, col].sum()), int(n_l[:, col].sum())
            if n == 0:
                continue
            ci = _language_cell_ci(k, n, d_l[:, col], boot_l[lang][:, col], conf)
            cells.append(LanguageCell(md.model, vid, infos[vid].label, lang, n, k, k / n, ci))
    return cells, acc_l, boot_l


def _language_cell_ci(k: int, n: int, den: np.ndarray, boot: np.ndarray, conf: float) -> tuple[float, float]:
    """The interval of one variant x language: Wilson without repeats, else the boundary rule or the bootstrap."""
    if int(den.max()) <= 1:
        return stats.wilson_interval(k, n, conf)
    if k in (0, n):
        return boundary_interval(k == n, den, conf)
    return ci_of(boot, conf)


def _language_summaries(
    md: ModelData, infos: Mapping[str, VariantInfo], langs: Sequence[str], acc_l: Mapping[str, np.ndarray],
    boot_l: Mapping[str, np.ndarray], conf: float,
) -> list[LanguageSummary]:
    """Per variant measured in two or more languages: macro accuracy, best and worst language, gap and spread."""
    summaries: list[LanguageSummary] = []
    for col, vid in enumerate(md.vids):
        have = [lang for lang in langs if not math.isnan(acc_l[lang][col])]
        if len(have) < 2:
            continue
        accs = np.array([acc_l[lang][col] for lang in have])
        boots = np.stack([boot_l[lang][:, col] for lang in have], axis=1)
        bi, wi = int(np.argmax(accs)), len(accs) - 1 - int(np.argmin(accs[::-1]))
        with quiet_nan():
            macro_b = np.nanmean(boots, axis=1)
            gap_b = np.nanmax(boots, axis=1) - np.nanmin(boots, axis=1)
            std_b = np.nanstd(boots, axis=1, ddof=1)
        summaries.append(
            LanguageSummary(
                model=md.model,
                variant_id=vid,
                label=infos[vid].label,
                n_languages=len(have),
                macro=float(accs.mean()),
                macro_ci=ci_of(macro_b, conf),
                best_language=have[bi],
                best_accuracy=float(accs[bi]),
                worst_language=have[wi],
                worst_accuracy=float(accs[wi]),
                gap=float(accs[bi] - accs[wi]),
                gap_ci=ci_of(gap_b, conf),
                std=float(stats.sample_std(accs)),
                std_ci=ci_of(std_b, conf),
            )
        )
    return summaries


def _without_languages(dims: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """A variant's dimensions other than its prompt languages, as a sortable key."""
    return tuple(sorted((k, value_str(v)) for k, v in dims.items() if k not in LANG_DIMS))


def _translation_deltas(
    md: ModelData, infos: Mapping[str, VariantInfo], per_lang: Mapping[str, tuple[Resampler, np.ndarray]],
    conf: float,
) -> list[TranslationDelta]:
    """Each translated variant against its English twin (same other dimensions), per test language, paired."""
    num, den = md.num["accuracy"], md.den["accuracy"]
    english: dict[tuple[tuple[str, str], ...], str] = {}
    for vid in md.vids:
        dims = infos[vid].dimensions
        if translation_kind(dims) is None:
            english[_without_languages(dims)] = vid
    deltas: list[TranslationDelta] = []
    for col, vid in enumerate(md.vids):
        dims = infos[vid].dimensions
        kind = translation_kind(dims)
        if kind is None:
            continue
        en_vid = english.get(_without_languages(dims))
        if en_vid is None:
            continue
        en_col = md.col(en_vid)
        for lang, (rs, idx) in per_lang.items():
            n, acc_v, acc_e, diff_boot, _, _ = paired(rs, num[idx], den[idx], col, en_col)
            if n == 0:
                continue
            deltas.append(
                TranslationDelta(
                    model=md.model,
                    variant_id=vid,
                    label=infos[vid].label,
                    english_variant_id=en_vid,
                    translation=kind[0],
                    prompt_language=kind[1],
                    test_language=lang,
                    n_cases=n,
                    accuracy=acc_v,
                    english_accuracy=acc_e,
                    delta=acc_v - acc_e,
                    delta_ci=ci_of(diff_boot, conf),
                    relative=(acc_v - acc_e) / acc_e if acc_e > 0 else math.nan,
                )
            )
    return deltas


def pass_k_stats(
    md: ModelData,
    infos: Mapping[str, VariantInfo],
    per_lang: Mapping[str, tuple[Resampler, np.ndarray]],
    settings: Settings,
) -> list[PassK]:
    num, den = md.num["accuracy"], md.den["accuracy"]
    out: list[PassK] = []
    groups: list[tuple[str, Resampler, np.ndarray]] = [("overall", md.resampler, np.arange(len(md.cases)))]
    if len(per_lang) > 1:
        groups += [(lang, rs, idx) for lang, (rs, idx) in per_lang.items()]
    for col, vid in enumerate(md.vids):
        have = den[:, col] > 0
        if not have.any() or den[have, col].max() < 2:
            continue
        k_max = int(den[have, col].min())
        for lang, rs, idx in groups:
            sub_have = have[idx]
            if not sub_have.any():
                continue
            c = num[idx, col][sub_have].astype(int)
            m = den[idx, col][sub_have].astype(int)
            outcomes = [[True] * int(ci) + [False] * int(mi - ci) for ci, mi in zip(c, m, strict=True)]
            for k in range(1, k_max + 1):
                # Point estimate from matrix.metrics (the project's one pass^k); per-case values
                # from stats for the bootstrap, which needs them case by case.
                per_case = np.zeros(idx.size)
                per_case[sub_have] = stats.pass_hat_k_per_case(c, m, k)
                boot = rs.ratio(per_case, sub_have.astype(float))
                out.append(
                    PassK(
                        md.model,
                        vid,
                        infos[vid].label,
                        lang,
                        k,
                        float(metrics.pass_hat_k(outcomes, k)),
                        ci_of(boot, settings.confidence),
                        int(sub_have.sum()),
                    )
                )
    return out


def language_match_stats(jobs: Sequence[ResultRow], confidence: float) -> list[LanguageMatch]:
    """ITC language match per model and case language, over the answers where it was measured.

    The scorer measures it only on free-text answers (no call), so ``n`` is
    often far below ``answers``; the interval is Wilson over those answers
    (repeats of a case count as separate answers). Empty when no answer was
    free text.
    """
    counts: dict[tuple[str, str], list[int]] = {}
    for j in jobs:
        if j.valid is None or j.error is not None:
            continue
        c = counts.setdefault((j.model, j.case_language), [0, 0, 0])
        c[0] += 1
        if j.language_match is not None:
            c[1] += 1
            c[2] += j.language_match
    if not any(n for _, n, _ in counts.values()):
        return []
    out = []
    for model in sorted({m for m, _ in counts}):
        for lang in language_order(lang for m, lang in counts if m == model):
            answers, n, matched = counts[(model, lang)]
            rate = matched / n if n else math.nan
            ci = stats.wilson_interval(matched, n, confidence)
            out.append(LanguageMatch(model, lang, answers, n, matched, rate, ci))
    return out
