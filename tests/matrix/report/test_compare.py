"""compare_runs: paired differences between two runs of the same grid."""

from __future__ import annotations

import pytest

from promptgrid.matrix.report import ReportError, compare_runs, stats
from promptgrid.variants import Variant
from support.rows import rows_with_accuracy

FAST = {"n_resamples": 400}


def test_difference_and_mcnemar_by_hand() -> None:
    v, w = Variant(), Variant(return_format="json")
    a = rows_with_accuracy({v: [1, 1, 1, 0, 0, 1, 1, 1], w: [1, 0, 0, 0, 1, 1, 0, 0]}, model="old")
    b = rows_with_accuracy({v: [1, 1, 1, 1, 1, 1, 1, 1], w: [0, 0, 0, 0, 1, 1, 0, 0]}, model="new")
    result = compare_runs(a, b, **FAST)
    d = {x.variant_id: x for x in result.diffs}
    assert (d[v.id].accuracy_a, d[v.id].accuracy_b, d[v.id].diff) == (0.75, 1.0, 0.25)
    assert (d[v.id].a_better, d[v.id].b_better) == (0, 2)
    assert d[v.id].p_value == pytest.approx(stats.mcnemar_exact(0, 2))  # = 0.5
    assert (d[w.id].a_better, d[w.id].b_better) == (1, 0) and d[w.id].diff == pytest.approx(-0.125)
    assert [x.p_holm for x in result.diffs] == pytest.approx(stats.holm([x.p_value for x in result.diffs]))
    (pair,) = result.pairs
    assert (pair.model_a, pair.model_b, pair.n_variants, pair.n_cases) == ("old", "new", 2, 8)
    assert pair.spread_a == pytest.approx(0.75 - 0.375) and pair.spread_b == pytest.approx(1.0 - 0.25)


def test_same_model_names_are_paired_by_name() -> None:
    v = Variant()
    a = rows_with_accuracy({v: [1, 0, 1]}, model="x") + rows_with_accuracy({v: [0, 0, 1]}, model="y")
    b = rows_with_accuracy({v: [1, 1, 1]}, model="x") + rows_with_accuracy({v: [0, 1, 1]}, model="y")
    result = compare_runs(a, b, **FAST)
    assert {(d.model_a, d.model_b) for d in result.diffs} == {("x", "x"), ("y", "y")}


def test_only_shared_cases_are_compared() -> None:
    v = Variant()
    a = rows_with_accuracy({v: [1, 0, 1, 1]}, model="a")
    b = rows_with_accuracy({v: [1, 1]}, model="b")
    (d,) = compare_runs(a, b, **FAST).diffs
    assert d.n_cases == 2 and d.accuracy_a == 0.5 and d.accuracy_b == 1.0


def test_no_shared_variant_or_case() -> None:
    a = rows_with_accuracy({Variant(): [1, 0]})
    with pytest.raises(ReportError, match="share no variant"):
        compare_runs(a, rows_with_accuracy({Variant(template="massive_one_shot"): [1]}), **FAST)
    with pytest.raises(ReportError, match="no case answered by both"):
        compare_runs(a, rows_with_accuracy({Variant(): [1]}, prefix="other"), **FAST)


def test_writes_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    v = Variant()
    a = rows_with_accuracy({v: [1, 0, 1]}, model="<a>")
    b = rows_with_accuracy({v: [1, 1, 1]}, model="b")
    result = compare_runs(a, b, tmp_path, **FAST)
    assert {p.name for p in result.files} == {"compare.md", "compare.csv", "compare_summary.csv", "compare.html"}
    page = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert "&lt;a&gt;" in page and "<a>" not in page and "<script" not in page
