"""The findings in plain words (summary) and how each number was computed (methods)."""

from __future__ import annotations

import math
from typing import Any

from ._adaptive import common_sentence, headline
from ._digest import MIN_N, SampleNote, sample_note
from ._format import ci_pct, ci_pp, pct, pp, with_ci
from ._labels import DIMENSION_TITLES, short_label
from ._model import ReportData, Sensitivity

__all__ = ["adaptive_of", "measured_share", "methods_points", "sample_notes", "summary_points"]


def adaptive_of(data: ReportData, model: str) -> dict[str, Any] | None:
    """What the adaptive run found for ``model`` (``AdaptiveResult.to_dict()``), or None (a run of the product)."""
    return next((dict(r) for r in data.adaptive if r.get("model") == model), None)


def measured_share(data: ReportData, model: str) -> str:
    """``358 of the 520 scored cells that ran are correct (68.8 %)``: the model's pooled measured accuracy."""
    cells = [c for c in data.cells if c.model == model]
    n, ok = sum(c.n for c in cells), sum(c.correct for c in cells)
    return f"{ok:,} of the {n:,} scored cells that ran are correct ({pct(ok / n)} %)" if n else "no scored cell"


def sample_notes(data: ReportData) -> dict[str, SampleNote]:
    """Per model whose sample is too small to compare its variants: the note (n, interval width, detectable gap)."""
    out = {}
    for model in data.models:
        cells = [c for c in data.cells if c.model == model and c.n]
        note = sample_note([c.n for c in cells], [c.ci[1] - c.ci[0] for c in cells], [c.accuracy for c in cells])
        if note is not None:
            out[model] = note
    return out


def _effect_sentence(data: ReportData, model: str, dimension: str) -> str | None:
    es = [e for e in data.effects if e.model == model and e.dimension == dimension and e.value != e.reference]
    es = [e for e in es if not math.isnan(e.diff)]
    if not es:
        return None
    e = max(es, key=lambda x: abs(x.diff))
    title = DIMENSION_TITLES.get(dimension, dimension)
    lo, hi = e.diff_ci
    pairs = f"{e.n_pairs} matched pair{'s' if e.n_pairs != 1 else ''}"
    if not (math.isnan(lo) or math.isnan(hi)) and (hi < 0 or lo > 0):
        word = "lower" if e.diff < 0 else "higher"
        return (
            f"{title}: {e.value} scores {pct(abs(e.diff))} pp {word} than {e.reference} "
            f"[{ci_pp(e.diff_ci)[1:-1]} pp; {pairs}]."
        )
    return (
        f"{title}: no clear effect; the largest difference, {e.value} vs {e.reference}, is {pp(e.diff)} pp "
        f"[{ci_pp(e.diff_ci)[1:-1]}] and its interval includes 0 ({pairs})."
    )


def _pct_ci(x: float, ci: tuple[float, float]) -> str:
    return f"{pct(x)} % {ci_pct(ci)}".strip()


def _model_sentence(data: ReportData, s: Sensitivity) -> str:
    found = adaptive_of(data, s.model)
    if found is not None:  # the goal's estimate leads; the measured numbers over different case sets do not
        return f"{s.model}: {headline(found)} Measured: {measured_share(data, s.model)}."
    conf = round(100 * data.settings.confidence)
    return (
        f"{s.model}: mean AST accuracy {_pct_ci(s.mean_accuracy, s.mean_ci)} over {s.n_variants} variants and "
        f"{s.n_cases} cases ({conf}% CI). Best variant {short_label(data, s.best_variant)} at "
        f"{_pct_ci(s.best_accuracy, s.best_ci)}, worst {short_label(data, s.worst_variant)} at "
        f"{_pct_ci(s.worst_accuracy, s.worst_ci)}. Spread (best - worst) "
        f"{pct(s.spread)} pp {ci_pct(s.spread_ci)}, of which about {pct(s.spread_bias)} pp is "
        f"expected from sampling noise alone; std across variants {pct(s.std)} pp."
    )


def summary_points(data: ReportData) -> list[tuple[str, list[str]]]:
    """Per model: a headline sentence and supporting points, each with its interval."""
    out = []
    notes = sample_notes(data)
    for s in data.sensitivity:
        points = ["S" + notes[s.model].sentence()[1:]] if s.model in notes else []  # "small sample: ..."
        found = adaptive_of(data, s.model)
        if found is not None:
            points.insert(0, common_sentence(found))
        tests = [t for t in data.baseline_tests if t.model == s.model]
        if tests:
            sig = [t for t in tests if t.significant]
            base = short_label(data, data.baseline) if data.baseline else ""
            line = (
                f"{len(sig)} of {len(tests)} variants differ from the baseline {base} after Holm correction "
                f"(exact McNemar, α = {data.settings.alpha:g})"
            )
            if sig:
                worst = sorted(sig, key=lambda t: t.diff)[:3]
                line += "; largest: " + "; ".join(
                    f"{short_label(data, t.variant_id)} {with_ci(t.diff, t.diff_ci, signed=True)} pp" for t in worst
                )
            points.append(line + ".")
        dims = list(dict.fromkeys(e.dimension for e in data.effects if e.model == s.model))
        for d in dims:
            sentence = _effect_sentence(data, s.model, d)
            if sentence:
                points.append(sentence)
        ls = [x for x in data.language_summaries if x.model == s.model]
        if ls:
            x = next((y for y in ls if y.variant_id == data.baseline), ls[0])
            points.append(
                f"Languages ({short_label(data, x.variant_id)}): macro average {_pct_ci(x.macro, x.macro_ci)} over "
                f"{x.n_languages} languages; best {x.best_language} {pct(x.best_accuracy)} %, worst {x.worst_language} "
                f"{pct(x.worst_accuracy)} %, "
                f"gap {pct(x.gap)} pp {ci_pct(x.gap_ci)}."
            )
        sentence = _category_sentence(data, s.model)
        if sentence:
            points.append(sentence)
        out.append((_model_sentence(data, s), points))
    return out


def _category_sentence(data: ReportData, model: str) -> str | None:
    """Accuracy per dataset category over all variants, saying so when every correct answer is in one category."""
    cs = [c for c in data.category_cells if c.model == model and not c.variant_id]
    if len(cs) < 2:
        return None
    listed = "; ".join(f"{c.category} {_pct_ci(c.accuracy, c.ci)}" for c in cs)
    scoring = [c for c in cs if c.correct]
    if len(scoring) == 1:
        c = scoring[0]
        return (f"Every correct answer is on {c.category} cases ({c.correct:,} of {c.n:,} jobs there; "
                f"0 correct in the other categories). By category: {listed}.")
    return f"By category: {listed}."


def methods_points(data: ReportData) -> list[str]:
    """How every number was computed, in words (the report's methods section)."""
    st = data.settings
    conf = round(100 * st.confidence)
    test = (
        "mid-p McNemar test (2·P[X < k] + P[X = k])"
        if st.mid_p
        else "exact McNemar test (two-sided binomial on the discordant pairs)"
    )
    return [
        "Unit of analysis: the test case. Accuracy = correct / scored jobs; a failed call (error) counts as "
        "incorrect in every rate and is also counted in 'errors'; jobs with neither a verdict nor an error are "
        "left out, and so are unsupported jobs (never sent: the model cannot do the variant's call mode), which "
        "are listed on their own.",
        f"Intervals are {conf}%. A single proportion whose cases were each asked once: Wilson score interval. "
        f"Everything else: percentile bootstrap with {st.n_resamples:,} resamples of cases (seed {st.seed}); a case's "
        "repeats stay together (cluster bootstrap) and one set of resamples is shared by all variants of a model, "
        "so comparisons between variants stay paired. A clustered rate of exactly 0 % or 100 % would give a "
        "zero-width bootstrap interval; there the Wilson interval over cases (one trial per case) is used.",
        "Spread = best - worst variant accuracy (bfcl-eval's accuracy_max_delta). The maximum minus the minimum of "
        "noisy estimates is biased upwards: even identical variants spread apart by sampling noise. The report shows "
        "the bootstrap estimate of that bias; the interval re-picks the best and worst variant in each resample and "
        "is indicative rather than exact for such an extreme statistic.",
        "Std across variants: sample standard deviation (n - 1), the same as bfcl-eval's accuracy_std "
        "(statistics.stdev in eval_runner.py).",
        "Instance sensitivity (ProSA): for each case, the mean absolute difference of its correctness (mean over "
        "repeats) between every pair of variants; averaged over cases.",
        f"Baseline comparisons: {test} on the cases both variants were run on; with repeats, the per-case mean "
        f"correctness is compared (a sign test, identical to McNemar for one repeat). Holm step-down adjustment over "
        f"the variants of each model; significant means adjusted p < {st.alpha:g}.",
        "Dimension effects: among the variants that have a partner differing only in that dimension, the mean "
        "accuracy of each value (marginal) and the mean difference to the reference value over matched pairs.",
        "Languages: macro average = mean of per-language accuracies (MASSIVE-Agents); gap = best - worst language and "
        "std (n - 1) across languages (Ticket-Bench); intervals resample cases within each language. Changes versus "
        "the English-only prompt are differences in percentage points on the same cases (relative changes in "
        "translation.csv). Language match (ITC LM): the share of free-text answers (no function call) written in "
        "the language of the case's query, identified with langid; answers that hold a call are not measured, so "
        "its n is often small. Wilson interval over answers.",
        "pass^k = mean over cases of (c/M)^k with c correct out of M repeats, as Ticket-Bench defines it (not the "
        "unbiased C(c,k)/C(M,k)).",
        f"Small sample: flagged for a model when a variant has fewer than {MIN_N} scored jobs, or when the spread "
        "(best - worst) is below the smallest meaningful difference, taken as the median interval width / √2 "
        "(two independent intervals of that width, combined).",
    ] + _category_methods(data) + _call_mode_methods(data)


def _category_methods(data: ReportData) -> list[str]:
    """The methods point on dataset categories, only for a run whose cases have more than one."""
    if not data.category_cells:
        return []
    return [
        "Categories: accuracy on the cases of each dataset category (the case's category: simple, multiple, "
        "parallel, parallel_multiple, irrelevance), per model over all its variants and per variant; intervals as "
        "for the accuracy cells, the bootstrap resampling the category's own cases.",
    ]


def _call_mode_methods(data: ReportData) -> list[str]:
    """The methods points on call modes, only for a run that has other call modes than prompt."""
    if not (data.format_tax or data.parse_shares):
        return []
    return [
        "Call modes: prompt (functions and answer format in the prompt), native (the provider's tool calling) and "
        "constrained (decoding forced into the return format by a schema or grammar); every answer is scored by the "
        "same checker. In the dimension effects, prompt is the reference call mode.",
        "Format tax: accuracy(mode) - accuracy(prompt) per model on the cases both sides have. A constrained "
        "variant is paired with the prompt variant that differs only in its call mode (same return format, doc "
        "format, tag, template and languages), and the differences are averaged over formats. A native variant has "
        "no return format, so it is compared with the mean accuracy of the prompt variants that differ from it only "
        "in call mode, return format, doc format and tag (the prompt mode's average over formats, not its best "
        "format). Interval: paired bootstrap over cases; test: two-sided sign test (exact McNemar for one repeat "
        "and one pair) on each case's mean difference, Holm-adjusted over the modes of a model.",
        "Parse as calls: the share of scored answers that are well-formed calls, right or wrong - not a failed "
        "call and not failed for a format-level reason (no call, prose, another format, missing or unexpected tag, "
        "unclosed tag or bracket, bad escaping, code fence, text around the call, wrong XML type names, malformed "
        "call, native tool arguments that are not a JSON object); correct answers count as parsed, including a "
        "correct 'no call' on an irrelevance case. Wilson intervals over jobs.",
    ]
