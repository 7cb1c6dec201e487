"""Aggregation (rows -> ReportData) against hand-computed fixtures and independent recomputation."""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from typing import Any

import pytest

from promptgrid.matrix.report import ReportError, aggregate, stats
from promptgrid.matrix.running.results import ResultRow
from promptgrid.matrix.scoring import metrics
from promptgrid.variants import Variant, load_grid
from support.rows import make_row, rows_with_accuracy

FAST = {"n_resamples": 400}


def test_accuracy_errors_and_unscored() -> None:
    v = Variant()
    rows = [
        make_row(v, case_id="c1", valid=True),
        make_row(v, case_id="c2", valid=False),
        make_row(v, case_id="c3", error="Timeout"),  # failed call: incorrect, counted as error
        make_row(v, case_id="c4", valid=None),  # unscored: left out
        make_row(v, case_id="c5", valid=True),
    ]
    data = aggregate(rows, **FAST)
    (cell,) = data.cells
    assert (cell.n, cell.correct, cell.errors, cell.unscored) == (4, 2, 1, 1)
    assert cell.accuracy == 0.5
    assert cell.ci == pytest.approx(stats.wilson_interval(2, 4))
    assert cell.ci_method == "wilson"
    # Secondary rates: errors count as 0 as well.
    assert cell.fsa == 0.5 and cell.format_match == 0.5 and cell.format_agnostic_accuracy == 0.5
    assert any("neither a verdict nor an error" in n for n in data.notes)
    assert any("failed call" in n for n in data.notes)


def test_sensitivity_matches_hand_computation(product_variants: list[Variant]) -> None:
    outcomes = {
        product_variants[0]: [1] * 9 + [0] * 1,  # 0.9
        product_variants[1]: [1] * 6 + [0] * 4,  # 0.6
        product_variants[2]: [1] * 8 + [0] * 2,  # 0.8
        product_variants[3]: [1] * 3 + [0] * 7,  # 0.3
    }
    data = aggregate(rows_with_accuracy(outcomes), **FAST)
    (s,) = data.sensitivity
    accs = [0.9, 0.6, 0.8, 0.3]
    assert s.best_variant == product_variants[0].id and s.best_accuracy == pytest.approx(0.9)
    assert s.worst_variant == product_variants[3].id and s.worst_accuracy == pytest.approx(0.3)
    assert s.spread == pytest.approx(0.6)
    assert s.std == pytest.approx(statistics.stdev(accs))  # sample std, as bfcl-eval
    assert s.mean_accuracy == pytest.approx(statistics.mean(accs))
    assert s.spread_ci[0] <= s.spread + 1e-9 <= s.spread_ci[1] + 0.2
    # ProSA by brute force over the 10 cases and 4 variants.
    per_case = []
    for i in range(10):
        vals = [outcomes[v][i] for v in product_variants]
        diffs = [abs(a - b) for j, a in enumerate(vals) for b in vals[j + 1 :]]
        per_case.append(sum(diffs) / len(diffs))
    assert s.instance_sensitivity == pytest.approx(sum(per_case) / 10)


def test_dimension_effects_matched_pairs(product_variants: list[Variant]) -> None:
    py_f, py_t, js_f, js_t = product_variants
    outcomes = {py_f: [1] * 8 + [0] * 2, py_t: [1] * 6 + [0] * 4, js_f: [1] * 5 + [0] * 5, js_t: [1] * 1 + [0] * 9}
    data = aggregate(rows_with_accuracy(outcomes), **FAST)
    eff = {(e.dimension, e.value): e for e in data.effects}
    assert set(d for d, _ in eff) == {"return_format", "tool_call_tag"}
    assert eff[("return_format", "python")].marginal == pytest.approx((0.8 + 0.6) / 2)
    assert eff[("return_format", "json")].marginal == pytest.approx((0.5 + 0.1) / 2)
    assert eff[("return_format", "json")].diff == pytest.approx(((0.5 - 0.8) + (0.1 - 0.6)) / 2)
    assert eff[("return_format", "json")].reference == "python"
    assert eff[("tool_call_tag", "True")].diff == pytest.approx(((0.6 - 0.8) + (0.1 - 0.5)) / 2)
    assert eff[("tool_call_tag", "True")].n_pairs == 2
    lo, hi = eff[("return_format", "json")].diff_ci
    assert lo <= eff[("return_format", "json")].diff <= hi


def test_dimension_effect_uses_only_variants_where_it_varies(bfcl_rows: list[ResultRow]) -> None:
    data = aggregate(bfcl_rows, **FAST)
    eff = {(e.model, e.dimension, e.value): e for e in data.effects}
    model = data.models[0]
    # Markdown exists only for the default variant: its effect is the one matched pair.
    md = eff[(model, "prompt_format", "markdown")]
    assert md.n_pairs == 1 and md.n_variants == 1
    base = data.cell(model, load_grid("bfcl_v4").base.id)
    md_id = Variant(prompt_format="markdown").id
    assert md.diff == pytest.approx(data.cell(model, md_id).accuracy - base.accuracy)
    # Return format is averaged over the 24-variant product only (6 variants per value).
    assert eff[(model, "return_format", "python")].n_variants == 6


@pytest.mark.slow
def test_baseline_default_and_tests_match_statsmodels(bfcl_rows: list[ResultRow]) -> None:
    contingency = pytest.importorskip("statsmodels.stats.contingency_tables")
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    data = aggregate(bfcl_rows, **FAST)
    assert data.baseline == "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"
    model = data.models[1]
    tests = [t for t in data.baseline_tests if t.model == model]
    assert len(tests) == 25
    # Recompute the discordant pairs from the rows, independently of the report code.
    correct: dict[tuple[str, str], bool] = {}
    for r in bfcl_rows:
        if r.model == model:
            correct[(r.variant_id, r.case_id)] = r.valid is True and r.error is None
    cases = sorted({c for _, c in correct})
    pvals = []
    for t in tests:
        b = sum(correct[(t.variant_id, c)] and not correct[(data.baseline, c)] for c in cases)
        c_ = sum(not correct[(t.variant_id, c)] and correct[(data.baseline, c)] for c in cases)
        both = sum(correct[(t.variant_id, c)] and correct[(data.baseline, c)] for c in cases)
        assert (t.better, t.worse) == (b, c_)
        ref = contingency.mcnemar([[both, b], [c_, len(cases) - both - b - c_]], exact=True).pvalue
        assert t.p_value == pytest.approx(ref)
        pvals.append(ref)
    assert [t.p_holm for t in tests] == pytest.approx(list(multitest.multipletests(pvals, method="holm")[1]))
    assert all(t.significant == (t.p_holm < 0.05) for t in tests)


def test_explicit_baseline_and_unknown_baseline(bfcl_rows: list[ResultRow]) -> None:
    vid = Variant(return_format="json").id
    data = aggregate(bfcl_rows, baseline=vid, **FAST)
    assert data.baseline == vid and all(t.baseline_id == vid for t in data.baseline_tests)
    with pytest.raises(ReportError, match="not a variant id or label of this run. Close matches: "):
        aggregate(bfcl_rows, baseline=vid.replace("json", "jsn"), **FAST)


def test_baseline_accepts_the_labels_the_report_and_run_table_show(bfcl_rows: list[ResultRow]) -> None:
    vid = Variant(return_format="json").id
    full = Variant(return_format="json").label
    short = "json->json,False"  # what the report's accuracy table shows for it
    for given in (short, full, f"{short} (baseline)", "  JSON->json,false "):
        assert aggregate(bfcl_rows, baseline=given, **FAST).baseline == vid, given
    with pytest.raises(ReportError) as info:
        aggregate(bfcl_rows, baseline="json->jsn,False", **FAST)
    message = str(info.value)
    assert "\n" not in message and "'json->json,False'" in message and "results.csv" in message


def test_translation_grid_baseline_is_english_only(language_rows: list[ResultRow]) -> None:
    data = aggregate(language_rows, **FAST)
    base = data.variant(data.baseline)
    assert base.dimensions["instruction_language"] == "en" and base.dimensions["description_language"] == "en"


def test_variant_order_follows_the_grid(bfcl_rows: list[ResultRow]) -> None:
    shuffled = list(bfcl_rows)
    random.Random(0).shuffle(shuffled)
    data = aggregate(shuffled, **FAST)
    assert [v.id for v in data.variants] == [v.id for v in load_grid("bfcl_v4").variants]
    # Row order does not change a single number.
    assert data.to_dict() == aggregate(bfcl_rows, **FAST).to_dict()


def test_languages_table2_and_fig4(language_rows: list[ResultRow]) -> None:
    data = aggregate(language_rows, **FAST)
    assert data.languages == ("en", "de", "hi", "ja")
    # Per-language accuracy recomputed from rows.
    tally: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in language_rows:
        if r.valid is None and r.error is None:
            continue
        t = tally[(r.model, r.variant_id, r.case_language)]
        t[0] += r.valid is True and r.error is None
        t[1] += 1
    for c in data.language_cells:
        k, n = tally[(c.model, c.variant_id, c.language)]
        assert (c.correct, c.n) == (k, n) and c.accuracy == k / n
    for s in data.language_summaries:
        accs = {
            c.language: c.accuracy for c in data.language_cells if (c.model, c.variant_id) == (s.model, s.variant_id)
        }
        assert s.macro == pytest.approx(statistics.mean(accs.values()))
        assert s.best_accuracy == max(accs.values()) and accs[s.best_language] == s.best_accuracy
        assert s.worst_accuracy == min(accs.values()) and accs[s.worst_language] == s.worst_accuracy
        assert s.gap == pytest.approx(s.best_accuracy - s.worst_accuracy)
        assert s.std == pytest.approx(statistics.stdev(accs.values()))
    by = {(c.model, c.variant_id, c.language): c.accuracy for c in data.language_cells}
    kinds = {d.translation for d in data.translation}
    assert kinds == {"partial", "full"}
    for d in data.translation:
        assert d.prompt_language == "query"
        assert d.delta == pytest.approx(
            by[(d.model, d.variant_id, d.test_language)] - by[(d.model, d.english_variant_id, d.test_language)]
        )
        assert d.delta_ci[0] <= d.delta + 1e-12 and d.delta <= d.delta_ci[1] + 1e-12


def test_pass_k_matches_metrics(language_rows: list[ResultRow]) -> None:
    data = aggregate(language_rows, **FAST)
    assert {p.k for p in data.pass_k} == {1, 2, 3}
    outcomes: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    lang: dict[str, str] = {}
    for r in language_rows:
        outcomes[(r.model, r.variant_id, r.case_id)].append(r.valid is True and r.error is None)
        lang[r.case_id] = r.case_language
    for p in data.pass_k:
        runs = [
            o
            for (m, v, c), o in outcomes.items()
            if m == p.model and v == p.variant_id and (p.language == "overall" or lang[c] == p.language)
        ]
        assert p.value == pytest.approx(metrics.pass_hat_k(runs, p.k))
        assert p.n_cases == len(runs)
    # k = 1 is the accuracy.
    for p in (x for x in data.pass_k if x.k == 1 and x.language == "overall"):
        assert p.value == pytest.approx(data.cell(p.model, p.variant_id).accuracy)


def test_failure_counts_add_up(bfcl_rows: list[ResultRow]) -> None:
    data = aggregate(bfcl_rows, **FAST)
    for c in data.cells:
        failed = sum(f.count for f in data.failure_counts if (f.model, f.variant_id) == (c.model, c.variant_id))
        assert failed == c.n - c.correct
        calls = sum(
            f.count
            for f in data.failure_counts
            if (f.model, f.variant_id, f.mode) == (c.model, c.variant_id, "call_error")
        )
        assert calls == c.errors
    modes = {e.mode for e in data.failure_examples}
    assert modes == {f.mode for f in data.failure_counts}
    assert all(len(e.text) <= 410 for e in data.failure_examples)
    # Examples come from both models where both fail in that mode.
    wrong = [e for e in data.failure_examples if e.mode == "wrong_function"]
    assert len({e.model for e in wrong}) == 2


def test_cost_counts_each_call_once() -> None:
    a, b = Variant(), Variant(prompt_format="markdown")
    rows = [
        make_row(a, case_id="c1", key="k1", cost_usd=0.5, output_tokens=10, latency_s=1.0),
        make_row(b, case_id="c1", key="k1", cost_usd=0.5, output_tokens=10, latency_s=1.0),  # same call
        make_row(b, case_id="c2", key="k2", cost_usd=0.25, output_tokens=30, latency_s=1.0),
    ]
    data = aggregate(rows, **FAST)
    (cost,) = data.costs
    assert cost.calls == 2 and cost.cost_usd == pytest.approx(0.75) and cost.output_tokens == 40
    assert cost.output_tokens_per_s == pytest.approx(20.0)
    assert cost.latency_p50 == pytest.approx(1.0)


def test_repeats_use_cluster_bootstrap(language_rows: list[ResultRow]) -> None:
    data = aggregate(language_rows, **FAST)
    assert data.max_repeats == 3
    assert all(c.ci_method == "bootstrap" and c.repeats == 3 for c in data.cells)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"model": None}, "row 1: field 'model' is missing"),
        ({"case_id": ""}, "field 'case_id' is missing"),
        ({"valid": "maybe"}, "field 'valid' must be true, false or null"),
        ({"dimensions": [1]}, "field 'dimensions' must be an object"),
        ({"status": "lost"}, "field 'status' is 'lost'"),
    ],
)
def test_bad_rows_name_row_and_field(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ReportError, match=message.replace("(", r"\(")):
        aggregate([make_row(**bad)], **FAST)


def test_no_rows() -> None:
    with pytest.raises(ReportError, match="no rows"):
        aggregate([], **FAST)


def test_loose_values_are_rejected() -> None:
    # Rows are ResultRow: a dict in the export's layout is read with its types (the store yields real
    # booleans, so SQLite's 0/1 never reach the report); a 1 for true is a mistake worth naming.
    with pytest.raises(ReportError, match="row 2: field 'valid' must be true, false or null, got 1"):
        aggregate([make_row(case_id="a"), make_row(case_id="b", valid=1)], **FAST)
    with pytest.raises(ReportError, match="field 'format_match' must be true, false or null, got 0"):
        aggregate([make_row(case_id="a", format_match=0)], **FAST)


def test_result_rows_and_dicts_give_the_same_report(product_variants: list[Variant]) -> None:
    rows = [make_row(v, case_id=f"c{i}", valid=(i + k) % 3 > 0) for k, v in enumerate(product_variants)
            for i in range(8)]
    typed = [ResultRow.from_dict(r) for r in rows]
    assert aggregate(typed, **FAST).to_dict() == aggregate(rows, **FAST).to_dict()


def test_language_match_per_language_and_model() -> None:
    prose = {"response": "Es tut mir leid.", "format_match": None}
    rows = [
        make_row(case_id="a", language="de", valid=False, response_language="de", language_match=True, **prose),
        make_row(case_id="b", language="de", valid=False, response_language="en", language_match=False, **prose),
        make_row(case_id="c", language="de", valid=True),  # holds a call: not measured
        make_row(case_id="d", language="de", error="timeout"),  # failed call: not an answer
        make_row(case_id="e", language="en", valid=False, response_language="en", language_match=True, **prose),
        make_row(case_id="f", language="en", valid=None),  # unscored
    ]
    data = aggregate(rows, **FAST)
    got = {(x.model, x.language): (x.answers, x.n, x.matched, x.rate) for x in data.language_match}
    assert got == {("m", "en"): (1, 1, 1, 1.0), ("m", "de"): (3, 2, 1, 0.5)}
    assert [x.language for x in data.language_match] == ["en", "de"]
    de = next(x for x in data.language_match if x.language == "de")
    assert de.ci == stats.wilson_interval(1, 2)


def test_no_language_match_without_free_text() -> None:
    assert aggregate([make_row(case_id=f"c{i}", valid=i % 2 == 0) for i in range(4)], **FAST).language_match == ()


def test_incomplete_variants_are_noted(product_variants: list[Variant]) -> None:
    rows = rows_with_accuracy({product_variants[0]: [1, 0, 1, 1], product_variants[1]: [1, 1]})
    data = aggregate(rows, **FAST)
    assert any("incomplete variants" in n for n in data.notes)
    (t,) = data.baseline_tests
    assert t.n_cases == 2  # paired on the shared cases only


def test_single_variant_report() -> None:
    data = aggregate([make_row(case_id=f"c{i}", valid=i % 2 == 0) for i in range(6)], **FAST)
    (s,) = data.sensitivity
    assert s.spread == 0 and s.std == 0 and math.isnan(s.instance_sensitivity)
    assert data.baseline_tests == () and data.effects == ()


def test_all_correct_with_repeats_keeps_a_real_interval() -> None:
    # 5 cases x 3 repeats, all correct: the bootstrap would say [1, 1]; Wilson over the 5 cases does not.
    rows = [make_row(case_id=f"c{i}", repeat=r, valid=True) for i in range(5) for r in range(3)]
    (cell,) = aggregate(rows, **FAST).cells
    assert cell.accuracy == 1.0 and cell.repeats == 3
    assert cell.ci == pytest.approx(stats.wilson_interval(5, 5))
    assert cell.ci[0] < 0.6


def test_ties_name_different_best_and_worst(product_variants: list[Variant]) -> None:
    data = aggregate(rows_with_accuracy({v: [1, 0, 1] for v in product_variants}), **FAST)
    (s,) = data.sensitivity
    order = [v.id for v in data.variants]  # grid order (bfcl_v4: tag True before False)
    assert s.spread == 0 and s.best_variant == order[0] and s.worst_variant == order[-1]
