"""Call modes in the report: unsupported jobs, call mode as a dimension, format tax, parse share, failures per mode."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pytest

from promptgrid.matrix.report import aggregate
from promptgrid.matrix.report._csv import csv_files
from promptgrid.matrix.report._digest import digest, explain
from promptgrid.matrix.report._html import html_report
from promptgrid.matrix.report._latex import latex_tables
from promptgrid.matrix.report._markdown import console_table, markdown_report
from promptgrid.variants import CallMode, ReturnFormat, Variant
from support.rows import make_row, rows_with_accuracy

PY = Variant(return_format=ReturnFormat.PYTHON)
JS = Variant(return_format=ReturnFormat.JSON)
C_PY = Variant(return_format=ReturnFormat.PYTHON, call_mode=CallMode.CONSTRAINED)
C_JS = Variant(return_format=ReturnFormat.JSON, call_mode=CallMode.CONSTRAINED)
NATIVE = Variant(call_mode=CallMode.NATIVE)
REASON = "local/smollm2-135m: native tool calling is not supported by the local client"


def _unsupported(variant: Variant, case_id: str) -> dict[str, Any]:
    return make_row(variant, case_id=case_id, valid=None, status="unsupported", error=REASON,
                    error_kind="unsupported", response=None, error_code=None, failure_mode=None)


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _modes_rows() -> list[dict[str, Any]]:
    # prompt python 2/4, prompt json 0/4, constrained 4/4 in both formats, native 3/4
    return rows_with_accuracy({
        PY: [1, 1, 0, 0], JS: [0, 0, 0, 0], C_PY: [1, 1, 1, 1], C_JS: [1, 1, 1, 1], NATIVE: [1, 1, 1, 0],
    })


def test_unsupported_jobs_are_listed_and_in_no_count() -> None:
    rows = rows_with_accuracy({PY: [1, 0, 1, 0]}) + [_unsupported(NATIVE, f"c{i:03d}") for i in range(4)]
    data = aggregate(rows, n_resamples=200)
    cell = data.cell("m", PY.id)
    assert cell is not None and (cell.errors, cell.unscored, cell.n) == (0, 0, 4)
    assert data.cell("m", NATIVE.id) is None  # no accuracy for a variant never sent
    assert [(u.variant_id, u.call_mode, u.count, u.reason) for u in data.unsupported] == [
        (NATIVE.id, "native", 4, REASON)]
    notes = " ".join(data.notes)
    assert "neither a verdict" not in notes and "failed call" not in notes and "unsupported" in notes
    assert data.costs[0].calls == 4 and data.costs[0].errors == 0  # never sent: no calls
    md = markdown_report(data)
    assert "## Unsupported jobs" in md and REASON in md and "8 jobs (4 unsupported, not sent)" in md
    assert REASON in console_table(data)
    assert "Unsupported jobs" in html_report(data) and "Unsupported jobs" in latex_tables(data)
    files = csv_files(data)
    assert _csv(files["unsupported.csv"]) == [{"model": "m", "variant_id": NATIVE.id, "label": NATIVE.label,
                                               "call_mode": "native", "count": "4", "reason": REASON}]
    assert {r["errors"] for r in _csv(files["results.csv"])} == {"0"}
    assert all(d.scored == 4 and d.errors == 0 for d in digest(rows))


def test_call_mode_is_a_dimension_with_prompt_as_reference() -> None:
    data = aggregate(_modes_rows(), n_resamples=200)
    eff = {e.value: e for e in data.effects if e.dimension == "call_mode"}
    assert set(eff) == {"prompt", "native", "constrained"}
    assert all(e.reference == "prompt" for e in eff.values())
    assert eff["constrained"].n_pairs == 2 and eff["constrained"].diff == pytest.approx(0.75)
    assert eff["native"].n_pairs == 1 and eff["native"].diff == pytest.approx(0.25)  # only python is its partner
    assert "| Call mode" in markdown_report(data)


def test_format_tax_pairs_constrained_by_format_and_native_with_the_prompt_mean() -> None:
    data = aggregate(_modes_rows(), n_resamples=500)
    tax = {t.call_mode: t for t in data.format_tax}
    assert list(tax) == ["native", "constrained"]
    c, n = tax["constrained"], tax["native"]
    assert (c.n_pairs, c.n_cases, c.reference) == (2, 4, "prompt, same format")
    assert (c.accuracy, c.prompt_accuracy, c.diff) == pytest.approx((1.0, 0.25, 0.75))
    assert (c.better, c.worse) == (4, 0) and c.diff_ci[0] > 0
    assert (n.n_pairs, n.reference) == (1, "prompt, mean over formats")
    assert (n.accuracy, n.prompt_accuracy, n.diff) == pytest.approx((0.75, 0.25, 0.5))
    assert (n.better, n.worse) == (3, 0)
    assert n.p_value == pytest.approx(0.25) and n.p_holm >= n.p_value
    files = csv_files(data)
    rows = _csv(files["format_tax.csv"])
    assert [r["call_mode"] for r in rows] == ["native", "constrained"] and float(rows[1]["diff"]) == 0.75
    md = markdown_report(data)
    assert "## Call modes" in md and "format tax" in md and "Format tax:" in md  # table and methods text
    assert "format tax" in latex_tables(data) and "Call modes" in html_report(data)
    assert "constrained - prompt +75.0" in console_table(data)


def test_parse_share_per_call_mode_and_format() -> None:
    rows = [
        make_row(PY, case_id="c0", valid=False, failure_mode="prose_instead_of_call"),
        make_row(PY, case_id="c1", valid=False, failure_mode="wrong_value"),
        make_row(C_PY, case_id="c0", valid=True),
        make_row(C_PY, case_id="c1", error="timeout", status="error"),
        make_row(NATIVE, case_id="c0", valid=False, failure_mode="bad_tool_arguments"),
        make_row(NATIVE, case_id="c1", valid=False, failure_mode="hallucinated_function"),
    ]
    data = aggregate(rows, n_resamples=200)
    got = [(p.call_mode, p.return_format, p.n, p.parsed, p.correct) for p in data.parse_shares]
    assert got == [("prompt", "python", 2, 1, 0), ("native", "-", 2, 1, 0), ("constrained", "python", 2, 1, 1)]
    share = _csv(csv_files(data)["parse_share.csv"])
    assert share[0]["parse_share"] == "0.5" and share[2]["accuracy"] == "0.5"
    assert "Answers that parse as calls" in markdown_report(data)
    modes = {(f.call_mode, f.mode): f.count for f in data.mode_failures}
    assert modes == {("prompt", "prose_instead_of_call"): 1, ("prompt", "wrong_value"): 1,
                     ("native", "bad_tool_arguments"): 1, ("native", "hallucinated_function"): 1,
                     ("constrained", "call_error"): 1}
    assert "failure modes per call mode" in markdown_report(data)
    assert "failure_modes_by_call_mode.csv" in csv_files(data)


def test_prompt_only_run_shows_no_call_mode_section_and_keeps_its_csv_columns() -> None:
    data = aggregate(rows_with_accuracy({PY: [1, 0, 1], JS: [0, 0, 1]}), n_resamples=200)
    assert not (data.format_tax or data.parse_shares or data.mode_failures or data.unsupported)
    assert all(e.dimension != "call_mode" for e in data.effects)
    md = markdown_report(data)
    assert "Call mode" not in md and "## Unsupported" not in md
    files = csv_files(data)
    assert "call_mode" not in files["results.csv"].splitlines()[0]
    assert not {"format_tax.csv", "parse_share.csv", "unsupported.csv"} & set(files)
    assert all(d.parse_by_mode == () for d in digest(rows_with_accuracy({PY: [1, 0], JS: [0, 1]})))


def test_results_csv_names_prompt_where_the_variant_omits_call_mode() -> None:
    rows = _csv(csv_files(aggregate(_modes_rows(), n_resamples=200))["results.csv"])
    assert {r["variant_id"]: r["call_mode"] for r in rows} == {
        PY.id: "prompt", JS.id: "prompt", C_PY.id: "constrained", C_JS.id: "constrained", NATIVE.id: "native"}


def test_digest_states_the_parse_share_per_call_mode(tmp_path: Any) -> None:
    rows = _modes_rows() + [make_row(PY, case_id="c009", valid=False, failure_mode="prose_instead_of_call")]
    (d,) = digest(rows)
    assert d.parse_by_mode == (("prompt", 8, 9), ("native", 4, 4), ("constrained", 8, 8))
    text = explain(rows, tmp_path)
    assert "Answers that parse as calls, per call mode: prompt 89% (8/9), native 100% (4/4), " \
           "constrained 100% (8/8)." in text
    assert not math.isnan(d.accuracy)


def test_no_prompt_partner_gives_no_format_tax_but_parse_shares() -> None:
    data = aggregate(rows_with_accuracy({C_PY: [1, 0], NATIVE: [0, 1]}), n_resamples=200)
    assert data.format_tax == () and [p.call_mode for p in data.parse_shares] == ["native", "constrained"]
    assert "(format tax)" not in markdown_report(data) and "Answers that parse as calls" in markdown_report(data)
    assert set(data.to_dict()) >= {"unsupported", "format_tax", "parse_shares", "mode_failures"}
