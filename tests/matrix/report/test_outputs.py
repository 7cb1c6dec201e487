"""build_report's files: results.csv recomputed from the JSONL export, formats, escaping, determinism."""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from promptgrid.matrix.report import ReportError, build_report
from promptgrid.matrix.report._csv import RESULTS_COLUMNS
from promptgrid.matrix.report._latex import latex_escape
from promptgrid.matrix.running.results import ResultRow, read_results
from promptgrid.variants import Variant
from support.rows import rows_with_accuracy

XSS = "<script>alert('pwned')</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory, bfcl_rows: list[ResultRow]) -> Path:
    """The synthetic run exported as JSONL, with unscored jobs and hostile text mixed in."""
    rows = [r.to_dict() for r in bfcl_rows]
    for r in rows[5:9]:
        r.update(valid=None, error=None, error_code=None, failure_mode=None)  # not scored yet
    rows[20].update(valid=False, error=None, failure_mode="wrong_format", response=XSS)
    rows[21].update(model="<b>evil</b> & co", valid=False, error=None, failure_mode="wrong_format")
    path = tmp_path_factory.mktemp("export") / "run.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, export: Path) -> SimpleNamespace:
    out = tmp_path_factory.mktemp("report")
    result = build_report(read_results(export), out, baseline=None, formats={"all"})
    return SimpleNamespace(out=out, result=result)


def test_results_csv_recomputed_from_the_export(export: Path, report: SimpleNamespace) -> None:
    # Independent recomputation: plain Python over the JSONL lines, no promptgrid code.
    tally: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    with export.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            t = tally[(r["model"], r["variant_id"])]
            failed_call = r["error"] is not None
            if r["valid"] is None and not failed_call:
                t["unscored"] += 1
                continue
            t["n"] += 1
            t["correct"] += int(r["valid"] is True and not failed_call)
            t["errors"] += int(failed_call)
            t["fsa"] += int(bool(r["function_selection_correct"]) and not failed_call)
            t["fa"] += int(bool(r["format_agnostic_valid"]) and not failed_call)
    with (report.out / "results.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert set(RESULTS_COLUMNS) <= set(rows[0])
    assert {(r["model"], r["variant_id"]) for r in rows} == set(tally)
    assert sum(t["errors"] for t in tally.values()) > 0 and sum(t["unscored"] for t in tally.values()) == 4
    for r in rows:
        t = tally[(r["model"], r["variant_id"])]
        assert int(r["n"]) == t["n"]
        assert int(r["correct"]) == t["correct"]
        assert int(r["errors"]) == t["errors"]
        assert int(r["unscored"]) == t["unscored"]
        assert float(r["accuracy"]) == t["correct"] / t["n"]  # exact: written with full precision
        assert float(r["fsa"]) == t["fsa"] / t["n"]
        assert float(r["format_agnostic_accuracy"]) == t["fa"] / t["n"]
        assert 0 <= float(r["ci_low"]) <= float(r["accuracy"]) <= float(r["ci_high"]) <= 1
        assert r["label"] and r["ci_method"] in ("wilson", "bootstrap")


def test_all_formats_written(report: SimpleNamespace) -> None:
    names = {p.relative_to(report.out).as_posix() for p in report.result.files}
    for expected in (
        "report.md",
        "report.html",
        "tables.tex",
        "report.json",
        "results.csv",
        "sensitivity.csv",
        "dimension_effects.csv",
        "baseline_tests.csv",
        "failure_modes.csv",
        "cost.csv",
        "figures/heatmap.png",
        "figures/heatmap.svg",
        "figures/dimension_effects.png",
    ):
        assert expected in names
    assert all(p.exists() and p.stat().st_size > 0 for p in report.result.files)


def test_html_is_self_contained_and_escaped(report: SimpleNamespace) -> None:
    page = (report.out / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")  # only as escaped text
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in page  # Jinja2's autoescape spelling of '
    assert "&lt;b&gt;evil&lt;/b&gt; &amp; co" in page and "<b>evil</b>" not in page
    # Nothing fetched from anywhere: no external src/href, no @import, no url(http...).
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    assert page.count('<img src="data:image/png;base64,') >= 3
    assert page.count("<table>") >= 5
    for heading in (
        "Summary",
        "Accuracy",
        "Sensitivity",
        "Dimension effects",
        "Failure modes",
        "Cost and latency",
        "Methods",
    ):
        assert f">{heading}</h2>" in page


def test_markdown_links_figures_and_has_tables(report: SimpleNamespace) -> None:
    md = (report.out / "report.md").read_text(encoding="utf-8")
    assert "![AST accuracy per model and variant](figures/heatmap.png)" in md
    assert "| Variant" in md and "json->python,False (baseline)" in md
    assert "## Methods" in md and "(c/M)^k" in md


def test_latex_is_escaped_booktabs(report: SimpleNamespace) -> None:
    tex = (report.out / "tables.tex").read_text(encoding="utf-8")
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert r"json$\rightarrow$python,False" in tex
    assert r"\textless{}b\textgreater{}evil\textless{}/b\textgreater{} \& co" in tex
    body = re.sub(r"\\[a-zA-Z]+|\\.", "", tex)  # drop commands and escaped characters
    assert "&" not in body.replace(" & ", "")  # every & left is a column separator
    assert tex.count("{") - tex.count(r"\{") == tex.count("}") - tex.count(r"\}")
    assert tex.count(r"\begin{table}") == tex.count(r"\end{table}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a_b & 50% #1 $x", r"a\_b \& 50\% \#1 \$x"),
        ("json->python,False", r"json$\rightarrow$python,False"),
        ("{x} ~ ^ \\", r"\{x\} \textasciitilde{} \textasciicircum{} \textbackslash{}"),
        ("α = 0.05 –", r"$\alpha$ = 0.05 --"),
    ],
)
def test_latex_escape(text: str, expected: str) -> None:
    assert latex_escape(text) == expected


def test_language_match_table_in_every_format(report: SimpleNamespace, export: Path) -> None:
    # The synthetic run's free-text answers (no call) carry a language match: reported with n.
    lines = [json.loads(line) for line in export.open(encoding="utf-8")]
    measured = [r for r in lines if r["language_match"] is not None and r["valid"] is not None and not r["error"]]
    assert measured
    title = "Language match of free-text answers (ITC LM)"
    md = (report.out / "report.md").read_text(encoding="utf-8")
    assert "## Languages" in md and f"### {title}" in md and "defined only for answers that hold no" in md
    assert title in (report.out / "report.html").read_text(encoding="utf-8")
    assert "Language match of free-text answers (ITC LM)" in (report.out / "tables.tex").read_text(encoding="utf-8")
    with (report.out / "language_match.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["model", "language", "answers", "n", "matched", "rate", "ci_low", "ci_high"]
    assert sum(int(r["n"]) for r in rows) == len(measured)
    assert sum(int(r["matched"]) for r in rows) == sum(r["language_match"] for r in measured)
    for r in rows:  # a model with no free-text answer in a language: no rate (empty cell)
        assert r["rate"] == "" if r["n"] == "0" else float(r["rate"]) == int(r["matched"]) / int(r["n"])
        assert int(r["n"]) <= int(r["answers"])


def test_json_has_no_nan(report: SimpleNamespace) -> None:
    data = json.loads((report.out / "report.json").read_text(encoding="utf-8"))
    assert data["baseline"] and len(data["cells"]) == 52 + 1  # + the renamed model's one cell


def test_only_requested_formats(tmp_path: Path) -> None:
    rows = rows_with_accuracy({Variant(): [1, 0, 1], Variant(return_format="json"): [1, 1, 0]})
    result = build_report(rows, tmp_path, baseline=None, formats={"csv"}, n_resamples=200)
    assert {p.suffix for p in result.files} == {".csv"}
    assert not (tmp_path / "figures").exists()
    none = build_report(rows, None, baseline=None, formats={"all"}, n_resamples=200)
    assert none.files == () and "acme" not in none.console and "json->python,False" in none.console
    with pytest.raises(ReportError, match="unknown report format 'pdf'"):
        build_report(rows, tmp_path, baseline=None, formats={"pdf"})


def test_report_files_never_replace_a_run_store(tmp_path: Path) -> None:
    from promptgrid.errors import OutputError

    rows = rows_with_accuracy({Variant(): [1, 0, 1]})
    (tmp_path / "store.sqlite3").write_bytes(b"store")
    result = build_report(rows, tmp_path, baseline=None, formats={"csv"}, n_resamples=200)  # beside a store: fine
    assert result.files and not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
    (tmp_path / "results.csv").unlink()
    (tmp_path / "results.csv").symlink_to(tmp_path / "store.sqlite3")  # a link planted onto the store
    with pytest.raises(OutputError, match="is a file of the run directory"):
        build_report(rows, tmp_path, baseline=None, formats={"csv"}, n_resamples=200)
    assert (tmp_path / "store.sqlite3").read_bytes() == b"store"


@pytest.mark.slow
def test_files_are_deterministic(tmp_path: Path, export: Path, report: SimpleNamespace) -> None:
    again = build_report(read_results(export), tmp_path, baseline=None, formats={"all"})
    for path in again.files:
        rel = path.relative_to(tmp_path)
        assert path.read_bytes() == (report.out / rel).read_bytes(), rel


@pytest.mark.slow
def test_figures_are_deterministic_and_undated(tmp_path: Path) -> None:
    rows = rows_with_accuracy({Variant(): [1, 0, 1, 1], Variant(return_format="json"): [1, 1, 0, 0]})
    a = build_report(rows, tmp_path / "a", baseline=None, formats={"figures"}, n_resamples=200)
    b = build_report(rows, tmp_path / "b", baseline=None, formats={"figures"}, n_resamples=200)
    assert [p.name for p in a.files] == [p.name for p in b.files]
    for pa, pb in zip(a.files, b.files, strict=True):
        assert pa.read_bytes() == pb.read_bytes()
    svg = (tmp_path / "a" / "figures" / "heatmap.svg").read_text(encoding="utf-8")
    assert "<dc:date>" not in svg
    assert (tmp_path / "a" / "figures" / "heatmap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_report_that_cannot_be_written_says_to_use_out(tmp_path: Path) -> None:
    """A read-only archived run cannot hold RUN/report: the error says where else it can go."""
    from promptgrid.errors import ReportError
    from promptgrid.matrix.report import build_report
    from support.rows import make_row

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ReportError, match=r"cannot create the report directory .*--out DIR \(out=DIR in Python\)"):
        build_report([make_row(case_id="c1")], blocker / "report", baseline=None, formats={"md"}, n_resamples=200)
