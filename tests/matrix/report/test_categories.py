"""Accuracy per dataset category (issue 21, Why 6): cells, intervals, tables in every format, a jsonl: run."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import promptgrid as pg
from promptgrid.matrix.report import ReportData, aggregate, stats
from promptgrid.matrix.report._csv import csv_files
from promptgrid.matrix.report._html import html_report
from promptgrid.matrix.report._latex import latex_tables
from promptgrid.matrix.report._markdown import console_table, markdown_report
from promptgrid.matrix.report._summary import summary_points
from promptgrid.variants import ReturnFormat, Variant
from support.rows import make_row

PY = Variant(return_format=ReturnFormat.PYTHON)
JS = Variant(return_format=ReturnFormat.JSON)


def _rows(model: str, outcomes: dict[Variant, dict[str, list[int]]], **extra: Any) -> list[dict[str, Any]]:
    """Rows per variant and category; case i of a category is ``<category>_<i>``."""
    out = []
    for v, by_category in outcomes.items():
        for category, results in by_category.items():
            for i, ok in enumerate(results):
                out.append(make_row(v, model=model, case_id=f"{category}_{i}", valid=bool(ok),
                                    case_category=category, **extra))
    return out


# m: some correct calls; smol: every correct answer on irrelevance (the SmolLM2 finding of the issue).
M = _rows("m", {PY: {"simple": [1, 0, 0, 0], "irrelevance": [1, 1]},
                JS: {"simple": [0, 0, 0, 0], "irrelevance": [1, 0]}})
SMOL = _rows("smol", {PY: {"simple": [0, 0, 0, 0], "irrelevance": [1, 1]},
                      JS: {"simple": [0, 0, 0, 0], "irrelevance": [1, 1]}})


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _cell(data: ReportData, model: str, category: str, variant_id: str = "") -> Any:
    found = [c for c in data.category_cells
             if (c.model, c.category, c.variant_id) == (model, category, variant_id)]
    assert len(found) == 1, (model, category, variant_id)
    return found[0]


def test_counts_and_intervals_per_model_and_per_variant() -> None:
    data = aggregate(M + SMOL, n_resamples=500)
    assert data.categories == ("simple", "irrelevance")  # CATEGORIES order, not the rows' order
    # One job per case: Wilson over jobs, as the accuracy cells.
    c = _cell(data, "m", "simple", PY.id)
    assert (c.n, c.correct, c.n_cases, c.accuracy, c.ci_method) == (4, 1, 4, 0.25, "wilson")
    assert c.ci == stats.wilson_interval(1, 4) and c.label == PY.label
    c = _cell(data, "m", "irrelevance", JS.id)
    assert (c.n, c.correct, c.accuracy, c.ci) == (2, 1, 0.5, stats.wilson_interval(1, 2))
    # All variants: two jobs per case, so a bootstrap over the category's cases.
    c = _cell(data, "m", "simple")
    assert (c.n, c.correct, c.n_cases, c.accuracy, c.ci_method, c.label) == (8, 1, 4, 0.125, "bootstrap",
                                                                            "all variants")
    assert 0 <= c.ci[0] <= 0.125 <= c.ci[1] and c.ci[1] > c.ci[0]
    # A pooled rate of 0 or 1: the bootstrap would collapse to a point; Wilson over cases instead.
    assert _cell(data, "smol", "simple").ci == stats.wilson_interval(0, 4)
    assert _cell(data, "smol", "irrelevance").ci == stats.wilson_interval(2, 2)
    assert _cell(data, "smol", "irrelevance").accuracy == 1.0
    # The same rows in another order give the same numbers.
    assert aggregate(list(reversed(M + SMOL)), n_resamples=500).category_cells == data.category_cells


def test_summary_says_when_every_correct_answer_is_in_one_category() -> None:
    points = dict(summary_points(aggregate(M + SMOL, n_resamples=200)))
    smol = next(p for h, ps in points.items() if h.startswith("smol:") for p in ps if "categor" in p)
    assert smol.startswith("Every correct answer is on irrelevance cases (4 of 4 jobs there")
    m = next(p for h, ps in points.items() if h.startswith("m:") for p in ps if "categor" in p)
    assert m.startswith("By category: simple 12.5 % [") and "irrelevance 75.0 % [" in m


def test_tables_in_every_format() -> None:
    data = aggregate(M + SMOL, n_resamples=200)
    md = markdown_report(data)
    assert "## Categories" in md and "per dataset category, over all variants" in md
    assert "per variant and dataset category" in md
    assert "| smol    | irrelevance |       2 |      4 |         4 |" in md
    console = console_table(data)
    assert "AST accuracy (%) per dataset category" in console and "irrelevance" in console
    html = html_report(data)
    assert 'id="categories-section"' in html and "per variant and dataset category" in html
    assert "per dataset category" in latex_tables(data)
    files = csv_files(data)
    rows = _csv(files["categories.csv"])
    assert [(r["model"], r["category"], r["n"], r["correct"]) for r in rows] == [
        ("m", "simple", "8", "1"), ("m", "irrelevance", "4", "3"),
        ("smol", "simple", "8", "0"), ("smol", "irrelevance", "4", "4")]
    per_variant = _csv(files["category_variants.csv"])
    assert len(per_variant) == 2 * 2 * 2 and {r["variant_id"] for r in per_variant} == {PY.id, JS.id}
    r = next(r for r in per_variant if (r["model"], r["variant_id"], r["category"]) == ("m", PY.id, "simple"))
    assert (float(r["accuracy"]), float(r["ci_low"]), r["ci_method"]) == (0.25, stats.wilson_interval(1, 4)[0],
                                                                          "wilson")
    assert json.loads(json.dumps(data.to_dict()))["categories"] == ["simple", "irrelevance"]


def test_one_category_adds_no_table() -> None:
    data = aggregate(_rows("m", {PY: {"simple": [1, 0]}, JS: {"simple": [0, 0]}}), n_resamples=200)
    assert data.categories == () and data.category_cells == ()
    assert "## Categories" not in markdown_report(data) and "categories.csv" not in csv_files(data)
    assert "categories-section" not in html_report(data) and "dataset category" not in console_table(data)


def test_rows_without_a_category_and_own_categories() -> None:
    rows = _rows("m", {PY: {"zeta": [1], "simple": [0], "alpha": [1]}})
    rows.append(make_row(PY, model="m", case_id="old_0", valid=True, case_category=""))
    data = aggregate(rows, n_resamples=200)
    assert data.categories == ("simple", "alpha", "unknown", "zeta")
    assert math.isclose(_cell(data, "m", "unknown").accuracy, 1.0)


def test_jsonl_categories_reach_the_report(tmp_path: Path) -> None:
    fn = {"name": "weather.get", "description": "Weather of a city.",
          "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    lines = [
        {"id": "w1", "question": "Weather in Oslo?", "function": [fn],
         "ground_truth": [{"weather.get": {"city": ["Oslo"]}}], "category": "simple"},
        {"id": "w2", "question": "Weather in Rome?", "function": [fn],
         "ground_truth": [{"weather.get": {"city": ["Rome"]}}], "category": "simple"},
        {"id": "joke", "question": "Tell me a joke.", "function": [fn], "category": "irrelevance"},
    ]
    path = tmp_path / "kitchen.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    run = pg.run("bfcl_v4", f"jsonl:{path}", models=["fake/prose"], run_dir=tmp_path / "run",
                 variants=["python->python,True"])
    data = pg.report(run).data
    assert data.categories == ("simple", "irrelevance")
    assert [(c.category, c.n, c.correct) for c in data.category_cells if not c.variant_id] == [
        ("simple", 2, 0), ("irrelevance", 1, 1)]
    points = [p for _, ps in summary_points(data) for p in ps]
    assert any(p.startswith("Every correct answer is on irrelevance cases") for p in points)
