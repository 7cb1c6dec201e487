"""Variant labels in the report: the grid's own labels, generated ones for the rest, shown whole and escaped."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.report import aggregate, compare_runs
from promptgrid.matrix.report._html import html_report
from promptgrid.matrix.report._labels import labels_for
from promptgrid.matrix.report._model import VariantInfo
from promptgrid.variants import Variant, load_grid
from tests.support.rows import make_row

LONG = "a long label of my own that is wider than its card tile, kept whole: " + "x" * 11
HOSTILE = '<img src=x onerror=alert(1)>&"\'</div>'
PLAIN = Variant(return_format="python", doc_format="json")
OTHER = Variant(return_format="json", doc_format="json")
THIRD = Variant(return_format="json", doc_format="xml")


def info(v: Variant, label: str | None = None) -> VariantInfo:
    return VariantInfo(v.id, label or v.dimension_label, v.dimensions())


def rows(labels: dict[Variant, str], model: str = "m") -> list[dict[str, Any]]:
    out = []
    for i, v in enumerate((PLAIN, OTHER, THIRD)):
        for c in range(6):
            row = make_row(v, model=model, case_id=f"c{c}", valid=(c + i) % 3 != 0)
            row["label"] = labels.get(v, v.dimension_label)
            out.append(row)
    return out


def test_stored_runs_without_labels_get_generated_ones() -> None:
    # A run stored before grids had labels holds each variant's dimension label.
    got = labels_for([info(PLAIN), info(OTHER), info(THIRD)])
    assert got == {PLAIN.id: "json->python,False", OTHER.id: "json->json,False", THIRD.id: "xml->json,False"}


def test_generated_labels_show_only_what_varies() -> None:
    a = Variant(template="bfcl_v4")
    b = Variant(template="bfcl_v4_clean", prompt_format="markdown")
    got = labels_for([info(a), info(b)])
    assert got == {a.id: "[bfcl_v4]", b.id: "md [bfcl_v4_clean]"}


def test_call_mode_labels() -> None:
    grid = load_grid("call_modes")
    got = labels_for([info(v) for v in grid])
    assert got[grid.variants[-1].id] == "native" and sum(x.endswith(" constrained") for x in got.values()) == 4
    assert len(set(got.values())) == len(grid)


def test_a_grids_label_wins_and_the_rest_are_generated() -> None:
    got = labels_for([info(PLAIN, "mine"), info(OTHER), info(THIRD)])
    assert got == {PLAIN.id: "mine", OTHER.id: "json->json,False", THIRD.id: "xml->json,False"}


def test_a_given_label_equal_to_a_generated_one_falls_back_to_full_labels() -> None:
    # a's own label is b's generated label: b is shown by its full label, a's label is told apart from it.
    a, b = Variant(return_format="json", tool_call_tag=True), Variant(return_format="json", tool_call_tag=False)
    assert labels_for([info(a), info(b)])[b.id] == "json->json,False"
    got = labels_for([info(a, "json->json,False"), info(b)])
    assert got == {a.id: "json->json,False [json->json,True]", b.id: "json->json,False"}


def test_two_grids_labels_that_meet_in_one_run_are_told_apart() -> None:
    got = labels_for([info(PLAIN, "same"), info(OTHER, "same"), info(THIRD)])
    assert got[PLAIN.id] == "same [json->python,False]" and got[OTHER.id] == "same [json->json,False]"


def test_labels_reach_every_table_figure_and_card() -> None:
    data = aggregate(rows({PLAIN: LONG, OTHER: "JSON"}), n_resamples=100)
    page = html_report(data)
    cards = re.findall(r'<div class="sub label">(.*?)</div>', page)
    assert LONG in cards and "JSON" in cards  # best and worst, whole
    assert page.count(LONG) >= 4  # cards, accuracy and sensitivity tables, baseline tests, detailed results
    assert "text-overflow: ellipsis" not in page and LONG[:40] + "…" not in page
    assert "json-&gt;json,False" not in page.replace("xml-&gt;json,False", "")


def test_hostile_labels_and_variant_names_are_escaped() -> None:
    hostile_rows = rows({PLAIN: HOSTILE, OTHER: "<script>alert(1)</script>"}, model="<b>model</b>")
    for r in hostile_rows:
        r["variant_id"] = r["variant_id"] + "<svg onload=x>"
    data = aggregate(hostile_rows, n_resamples=100)
    page = html_report(data)
    assert "<img" not in page.replace('<img src="data:image/png', "") and "<script" not in page
    assert "<svg" not in page and "<b>model</b>" not in page and "</div>&" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;&amp;&#34;&#39;&lt;/div&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;b&gt;model&lt;/b&gt;" in page


def test_compare_page_escapes_labels_and_names(tmp_path: Path) -> None:
    a = rows({PLAIN: HOSTILE})
    b = [dict(r, valid=not r["valid"]) for r in a]
    result = compare_runs(a, b, tmp_path, n_resamples=100, names=("<i>A</i>", "B\x1b[2J"))
    page = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert "<i>" not in page and "\x1b" not in page and "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "&lt;i&gt;A&lt;/i&gt;" in page and "B\\x1b[2J" in page
    assert page.count("<table>") == len(result.pairs) + 1


def _grid(path: Path, label: str) -> Path:
    path.write_text(
        "name: labelled\ninclude:\n  - product:\n      return_format: [python, json]\n"
        f"  - variants:\n      - {{return_format: json, label: {label!r}}}\n",
        encoding="utf-8",
    )
    return path


def test_a_run_reports_the_grids_labels_and_a_rerun_relabels(tmp_path: Path) -> None:
    grid, run = _grid(tmp_path / "g.yaml", "JSON answers"), tmp_path / "run"
    argv = ["run", str(grid), "--dataset", "mini:en", "--model", "fake/auto", "--limit", "2", "--run-dir", str(run),
            "--no-progress"]
    assert main(argv) == 0
    assert main(["report", str(run), "--out", str(tmp_path / "r1"), "--format", "all"]) == 0
    page = (tmp_path / "r1" / "report.html").read_text(encoding="utf-8")
    assert "JSON answers" in page and "labels the grid gave are shown as written" in page  # heatmap caption
    with open(tmp_path / "r1" / "results.csv", encoding="utf-8", newline="") as f:
        assert {r["label"] for r in csv.DictReader(f)} == {"json->python,False", "JSON answers"}
    _grid(grid, "relabelled")
    assert main(argv) == 0
    assert main(["report", str(run), "--out", str(tmp_path / "r2"), "--format", "html"]) == 0
    page = (tmp_path / "r2" / "report.html").read_text(encoding="utf-8")
    assert "relabelled" in page and "JSON answers" not in page


_CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and Path(p).exists()), None)


@pytest.mark.skipif(_CHROMIUM is None, reason="chromium is not installed")
def test_card_labels_are_not_cut_in_a_browser(tmp_path: Path) -> None:
    """Laid out by Chromium at a narrow width, every card label fits its tile (wrapped, never clipped)."""
    data = aggregate(rows({PLAIN: LONG, OTHER: "python->json,False [bfcl_v4_clean] " + "y" * 30}), n_resamples=100)
    page = html_report(data)
    # The report runs no script; this copy measures the layout and writes the result into the DOM.
    probe = (
        "<script>addEventListener('load', () => { const bad = [...document.querySelectorAll('.stat .label')]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1 || getComputedStyle(e).textOverflow === 'ellipsis'"
        " || getComputedStyle(e).overflow === 'hidden'); document.body.setAttribute('data-cut', bad.length + '/' +"
        " document.querySelectorAll('.stat .label').length); });</script>"
    )
    path = tmp_path / "page.html"
    path.write_text(page.replace("</body>", probe + "</body>"), encoding="utf-8")
    assert _CHROMIUM is not None
    proc = subprocess.run(
        [_CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         "--window-size=700,1200", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-cut="0/2"' in proc.stdout, re.findall(r"data-cut=\"[^\"]*\"", proc.stdout)

