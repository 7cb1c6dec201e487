"""The first run explains itself: what the table means, --limit on a multilingual dataset, --baseline labels."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.running.store import RunStore


def test_run_ends_with_failure_modes_meaning_and_next_command(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "r"
    assert main(["run", "bfcl_v4", "--dataset", "mini", "--model", "fake/prose", "--limit", "2", "--run-dir",
                 str(run_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    table, _, tail = out.partition("\n\n")
    assert table.splitlines()[-1].startswith("all variants") and "0.0% (0/52)" in table
    assert tail.splitlines() == [
        "fake/prose: top failure modes (share of answers): prose instead of call 100% (52/52).",
        "  Accuracy is about 0 because 100% of answers hold no call in the requested format (most often it answered "
        "in prose instead of calling a function); the model does not follow the output format, so the variants say "
        "little about how the prompt format changes function calling.",
        "  Small sample: n=2 per variant, 95% intervals about 66 pp wide; differences between variants below 47 pp "
        "are not meaningful.",
        f"next: promptgrid report {run_dir}  (intervals, tests against the baseline, effects; add --format html to "
        f"write {run_dir / 'report' / 'report.html'} with examples of each failure)",
    ]


def test_limit_on_mini_runs_distinct_questions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "r"
    assert main(["run", "bfcl_v4", "--dataset", "mini", "--model", "fake/auto", "--limit", "3", "--variant",
                 "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic",
                 "--run-dir", str(run_dir), "--no-progress"]) == 0
    capsys.readouterr()
    with RunStore(run_dir, readonly=True) as store:
        rows = list(store.rows())
    assert len(rows) == 3
    assert len({r.case_group for r in rows}) == 3 and [r.case_language for r in rows] == ["en", "de", "es"]


def test_limit_help_says_how_cases_are_picked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "on a multilingual one (mini, mini:de,ja, mini-mt) N distinct questions (mini-mt: conversation " \
           "templates)" in text


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("run") / "r"
    assert main(["run", "bfcl_v4", "--dataset", "mini:en", "--model", "fake/auto", "--limit", "2", "--run-dir",
                 str(path), "--no-progress"]) == 0
    return path


@pytest.mark.parametrize("given", ["json->json,False", "json->json,False (baseline)",
                                   "ret_fmt=json&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"])
def test_report_baseline_takes_ids_and_displayed_labels(run_dir: Path, tmp_path: Path, given: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(run_dir), "--baseline", given, "--out", str(tmp_path), "--format", "csv"]) == 0
    assert "json->json,False (baseline)" in capsys.readouterr().out
    with (tmp_path / "baseline_tests.csv").open() as f:
        assert {r["baseline_id"] for r in csv.DictReader(f)} == {
            "ret_fmt=json&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"}


def test_report_unknown_baseline_lists_close_matches(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(run_dir), "--baseline", "jsn->json,False"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "not a variant id or label of this run. Close matches: 'json->json,False'" in err
