"""Rows a user may hand to ``report``/``compare`` that used to give wrong numbers or raw bytes: a JSONL export
with duplicated rows, and model names / case ids / errors with control characters (issue 20, Why 12)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from promptgrid.errors import ReportError
from promptgrid.matrix.api import load_results, report
from promptgrid.matrix.cli import main
from promptgrid.matrix.report import aggregate, compare_runs
from promptgrid.matrix.report._figures import render_figures
from promptgrid.matrix.running.results import ResultRow, read_results, write_results

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


@pytest.fixture()
def rows(bfcl_rows: list[ResultRow]) -> list[ResultRow]:
    return [r for r in bfcl_rows if r.case_id in {r.case_id for r in bfcl_rows[:400]}][:600]


def test_a_row_repeated_exactly_is_counted_once(rows: list[ResultRow], tmp_path: Path) -> None:
    """Before: `cat rows.jsonl rows.jsonl > dup.jsonl; promptgrid report dup.jsonl` reported 2 repeats per case
    and twice the jobs."""
    one, dup = tmp_path / "rows.jsonl", tmp_path / "dup.jsonl"
    write_results(rows, one)
    dup.write_text(one.read_text() * 2)
    assert read_results(dup) == read_results(one)
    cells = [(c.model, c.variant_id, c.n, c.correct) for c in aggregate(read_results(one), n_resamples=100).cells]
    assert [(c.model, c.variant_id, c.n, c.correct)
            for c in aggregate(load_results(dup), n_resamples=100).cells] == cells
    assert report(rows + rows).console == report(rows).console  # rows given in Python: the same rule
    flipped = [dataclasses.replace(r, valid=not r.valid) for r in rows]
    assert compare_runs(rows + rows, flipped, n_resamples=100).console == \
        compare_runs(rows, flipped, n_resamples=100).console


def test_two_different_rows_of_one_job_are_refused_naming_both_lines(rows: list[ResultRow], tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "conflict.jsonl"
    write_results(rows, path)
    first = json.loads(path.read_text().splitlines()[4])
    first["valid"] = not first["valid"]
    first["error_code"] = "VALID" if first["valid"] else "WRONG_FUNC_NAME"
    with path.open("a") as f:
        f.write(json.dumps(first) + "\n")
    with pytest.raises(ReportError, match=rf"conflict.jsonl:{len(rows) + 1}: a second row .* first at "
                                          rf".*conflict.jsonl:5\. Keep one"):
        read_results(path)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"conflict.jsonl:{len(rows) + 1}" in err and "Traceback" not in err
    with pytest.raises(ReportError, match=r"row 2: a second row .* first at row 1"):
        report([rows[0], dataclasses.replace(rows[0], valid=not rows[0].valid)])


def _evil(rows: list[ResultRow]) -> list[ResultRow]:
    return [dataclasses.replace(r, model=r.model + "\x1b[2J\x07", case_id=r.case_id + "\x1b[31m\x08",
                                error=(r.error or "") + "\x1b]0;t\x07\r" if r.error else None) for r in rows]


def test_no_raw_control_characters_in_csv_tex_figures_or_compare(rows: list[ResultRow], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ESC and BEL reached results.csv, tables.tex, compare's terminal table titles, compare.md/csv/html
    and, through matplotlib's missing-glyph warnings, stderr."""
    evil = _evil(rows)
    result = report(evil, out=tmp_path / "rep", formats=["csv", "latex", "md", "html", "json"])
    written = [p for p in result.files if p.suffix in (".csv", ".tex", ".md", ".html", ".json", ".svg")]
    assert any(p.suffix == ".csv" for p in written) and any(p.suffix == ".tex" for p in written)
    for p in written:
        assert not RAW.search(p.read_text(encoding="utf-8")), p.name
    csv_text = (tmp_path / "rep" / "results.csv").read_text()
    assert "\\x1b[2J\\x07" in csv_text
    assert "\\textbackslash{}x1b[2J" in (tmp_path / "rep" / "tables.tex").read_text()
    for fig in render_figures(aggregate(evil, n_resamples=100)):
        assert not RAW.search(fig.svg), fig.name
    assert not RAW.search(capsys.readouterr().err)

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_results(evil, a)
    write_results([dataclasses.replace(r, valid=not r.valid) for r in evil], b)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 0
    out, err = capsys.readouterr()
    assert not RAW.search(out) and not RAW.search(err) and "\\x1b[2J" in out
    for p in (tmp_path / "cmp").iterdir():
        assert not RAW.search(p.read_text(encoding="utf-8")), p.name
