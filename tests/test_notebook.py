"""The notebook path (issue 21, Why 6): ``Run.to_pandas()``, short reprs, and README's "In a notebook" block."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import promptgrid as pg
from promptgrid.matrix.api import FRAME_EXTRA_COLUMNS, results_frame
from promptgrid.matrix.report import ReportResult
from promptgrid.matrix.running.results import ResultRow
from promptgrid.records import Case
from support.rows import make_row

ROOT = Path(__file__).resolve().parents[1]
# A simple and an irrelevance case, so that both categories and both kinds of "parsed" occur.
CASES = ["simple_weather_01-en", "irrelevance_poem_01-en"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> pg.Run:
    run_dir = tmp_path_factory.mktemp("nb") / "run"
    return pg.run("call_modes", "mini:en", models=["fake/auto", "fake/prose"], run_dir=run_dir, cases=CASES)


def test_to_pandas_is_the_rows_plus_category_call_mode_parsed(run: pg.Run) -> None:
    pd = pytest.importorskip("pandas")
    rows = run.results()
    df = run.to_pandas()
    plain = pd.DataFrame([r.to_dict() for r in rows])
    assert len(df) == len(rows) == 2 * 9 * 2
    assert list(df.columns) == list(plain.columns) + list(FRAME_EXTRA_COLUMNS)
    for column in plain.columns:
        if column != "dimensions":
            assert df[column].equals(plain[column]), column
    # call_mode always in the dimensions (stored rows leave it out at its default) and as a column
    assert any("call_mode" not in r.dimensions for r in rows)
    assert all("call_mode" in d for d in df["dimensions"])
    assert (df["call_mode"] == [d["call_mode"] for d in df["dimensions"]]).all()
    assert set(df["call_mode"]) == {"prompt", "native", "constrained"}
    omitted = [i for i, r in enumerate(rows) if "call_mode" not in r.dimensions]
    assert set(df["call_mode"].iloc[omitted]) == {"prompt"} and len(omitted) == 2 * 2 * 4  # 4 prompt variants
    for d, plain_d in zip(df["dimensions"], plain["dimensions"], strict=True):
        assert {k: v for k, v in d.items() if k != "call_mode" or "call_mode" in plain_d} == plain_d
    assert (df["category"] == df["case_category"]).all()
    assert set(df["category"]) == {"simple", "irrelevance"}
    # parsed: fake/auto writes a well-formed (wrong) call everywhere; fake/prose writes prose, which is a
    # correct answer (and so parsed) only where no call is expected.
    assert str(df["parsed"].dtype) == "boolean"
    auto, prose = df[df["model"] == "fake/auto"], df[df["model"] == "fake/prose"]
    assert auto["parsed"].all() and not auto["valid"].any()
    assert prose.groupby("category")["parsed"].all().to_dict() == {"irrelevance": True, "simple": False}
    assert not prose[prose["category"] == "simple"]["parsed"].any()


def test_parsed_is_the_reports_parse_share(run: pg.Run) -> None:
    pytest.importorskip("pandas")
    df = run.to_pandas()
    shares = pg.report(run).data.parse_shares
    assert shares
    for s in shares:
        fmt = df["dimensions"].map(lambda d: str(d.get("return_format")) if d["call_mode"] != "native" else "-")
        sel = df[(df["model"] == s.model) & (df["call_mode"] == s.call_mode) & (fmt == s.return_format)]
        assert len(sel) == s.n and sel["parsed"].mean() == pytest.approx(s.parse_share), s


def test_unscored_rows_have_no_parsed_value_and_an_empty_run_has_the_columns() -> None:
    pytest.importorskip("pandas")
    pending = ResultRow.from_dict(make_row(valid=None, status="pending", response=None, error_code=None))
    done = ResultRow.from_dict(make_row(valid=True))
    df = results_frame([pending, done])
    assert df["parsed"].isna().tolist() == [True, False] and bool(df["parsed"].iloc[1]) is True
    empty = results_frame([])
    assert len(empty) == 0 and list(empty.columns)[-3:] == list(FRAME_EXTRA_COLUMNS)
    assert "schema_version" in empty.columns and "case_category" in empty.columns


def test_to_pandas_without_pandas_names_the_install(run: pg.Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(pg.MissingDependencyError, match=r"pip install pandas") as info:
        run.to_pandas()
    assert "to_pandas" in str(info.value) and info.value.exit_code == 2


def test_short_one_line_reprs_with_equality_unchanged(run: pg.Run, tmp_path: Path) -> None:
    grid = pg.load_grid("bfcl_v4")
    case = pg.load_dataset("mini:en")[0]
    report = pg.report(run)
    written = pg.report(run, out=tmp_path / "rep", formats=["md", "csv"])
    assert repr(grid) == "Grid('bfcl_v4', 26 variants, source='<builtin>/bfcl_v4.yaml')"
    assert repr(case) == ("Case('simple_weather_01-en', category='simple', language='en', functions=1, "
                          "expected_calls=1)")
    assert repr(report) == "ReportResult(2 models x 9 variants x 2 cases, 36 jobs; no files written)"
    assert repr(written) == (f"ReportResult(2 models x 9 variants x 2 cases, 36 jobs; {len(written.files)} files "
                             f"in {str(tmp_path / 'rep')!r})")
    assert repr(report.data) == ("ReportData(2 models x 9 variants x 2 cases, 36 jobs; "
                                 "models ['fake/auto', 'fake/prose'])")
    assert len(repr(run)) < 200 and "\n" not in repr(run)
    # dataclass equality is what it was: by value for Grid and ReportResult, by identity for Case
    assert grid == pg.load_grid("bfcl_v4") and grid != dataclasses.replace(grid, name="other")
    assert ReportResult(report.data, (), "x") == ReportResult(report.data, (), "x")
    assert ReportResult(report.data, (), "x") != ReportResult(report.data, (), "y")
    assert Case.__eq__ is object.__eq__ and case != pg.load_dataset("mini:en")[0]


def _notebook_block() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^### In a notebook\b.*?```python\n(.*?)```", text, flags=re.S | re.M)
    assert m, "README.md's Python API section must have an 'In a notebook' subsection with a python block"
    return m.group(1)


def test_readme_notebook_block_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    # The block's bare expressions are what a notebook shows: print them here to check what they show.
    shown = re.sub(r"^(cats\[.*)$", r"print(\1.to_string())", _notebook_block(), flags=re.M)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONWARNINGS": "error"}
    proc = subprocess.run([sys.executable, "-c", shown], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"fake/prose\s+irrelevance\s+130\s+130\s+1\.0", proc.stdout), proc.stdout
    assert re.search(r"fake/prose\s+simple\s+390\s+0\s+0\.0", proc.stdout), proc.stdout
