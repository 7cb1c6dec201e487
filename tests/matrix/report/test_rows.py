"""The report reads ResultRow: from a run's store and from its JSONL export alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptgrid.matrix.api import load_results
from promptgrid.matrix.cli import main
from promptgrid.matrix.report import build_report, compare_runs
from promptgrid.matrix.report._markdown import markdown_report
from promptgrid.matrix.running.results import ResultRow
from promptgrid.variants import Variant

FAST = {"n_resamples": 200}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real run (free-text answers from fake/prose, calls from fake/auto; en and de) and its export."""
    run_dir = tmp_path_factory.mktemp("run")
    variants = [f"--variant={Variant(return_format=f).id}" for f in ("python", "json", "verbose_xml")]
    assert main(["run", "bfcl_v4", "--dataset", "mini:en,de", "--limit", "6", *variants, "--model", "fake/auto",
                 "--model", "fake/prose", "--run-dir", str(run_dir), "--no-progress"]) == 0
    export = run_dir.parent / "run.jsonl"
    assert main(["export", str(run_dir), "--jsonl", "--output", str(export)]) == 0
    return run_dir, export


def test_load_results_reads_store_and_export_alike(run: tuple[Path, Path]) -> None:
    from_store, from_export = load_results(run[0]), load_results(run[1])
    assert all(isinstance(r, ResultRow) for r in from_store)
    assert from_store == from_export and len(from_store) == 2 * 3 * 6


def test_report_over_export_equals_report_over_store(run: tuple[Path, Path], tmp_path: Path) -> None:
    formats = {"csv", "latex", "json"}
    a = build_report(load_results(run[0]), tmp_path / "a", baseline=None, formats=formats, **FAST)
    b = build_report(load_results(run[1]), tmp_path / "b", baseline=None, formats=formats, **FAST)
    assert a.data == b.data and a.console == b.console
    for path in a.files:
        rel = path.relative_to(tmp_path / "a")
        assert path.read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    # Dicts in the export's layout give the same report too.
    c = build_report([r.to_dict() for r in load_results(run[0])], None, baseline=None, formats=set(), **FAST)
    assert c.data == a.data


def test_language_match_reported_for_free_text_answers(run: tuple[Path, Path], tmp_path: Path) -> None:
    rows = load_results(run[0])
    result = build_report(rows, tmp_path, baseline=None, formats={"csv"}, **FAST)
    lm = {(x.model, x.language): x for x in result.data.language_match}
    assert set(lm) == {(m, lang) for m in ("fake/auto", "fake/prose") for lang in ("en", "de")}
    for (model, lang), x in lm.items():
        measured = [r for r in rows if r.model == model and r.case_language == lang and r.language_match is not None]
        assert x.n == len(measured) and x.matched == sum(r.language_match for r in measured)
    assert lm[("fake/prose", "en")].n > 0
    md = markdown_report(result.data)
    assert "### Language match of free-text answers (ITC LM)" in md
    assert (tmp_path / "language_match.csv").exists()


def test_compare_accepts_result_rows(run: tuple[Path, Path]) -> None:
    rows = load_results(run[0])
    result = compare_runs(rows, load_results(run[1]), None, n_resamples=200)
    assert result.diffs and all(d.diff == 0 for d in result.diffs)
