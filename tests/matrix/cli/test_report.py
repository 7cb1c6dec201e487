"""`promptgrid report` and `promptgrid compare` through the CLI entry point."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.report import synthetic_rows
from promptgrid.matrix.running.results import write_results
from support.rows import make_row, write_jsonl


@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = synthetic_rows(models=("acme/m-1",), n_cases=20, seed=1)
    path = tmp_path_factory.mktemp("a") / "run_a.jsonl"
    write_results(rows, path)
    return path


@pytest.fixture(scope="module")
def run_b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = synthetic_rows(models=("acme/m-2",), n_cases=20, seed=2)
    path = tmp_path_factory.mktemp("b") / "run_b.jsonl"
    write_results(rows, path)
    return path


def test_report_prints_table_without_writing(run_a: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(run_a)]) == 0
    out, err = capsys.readouterr()
    assert "acme/m-1" in out and "json->python,False (baseline)" in out and "spread" in out
    assert not (run_a.parent / "report").exists() and "wrote" not in err


def test_report_writes_requested_format(run_a: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(run_a), "--out", str(tmp_path), "--format", "csv"]) == 0
    assert (tmp_path / "results.csv").exists() and not (tmp_path / "report.html").exists()
    with (tmp_path / "results.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 26
    assert "wrote" in capsys.readouterr().err


def test_report_baseline_option(run_a: Path, tmp_path: Path) -> None:
    vid = "ret_fmt=json&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"
    assert main(["report", str(run_a), "--baseline", vid, "--out", str(tmp_path), "--format", "csv"]) == 0
    with (tmp_path / "baseline_tests.csv").open() as f:
        assert {r["baseline_id"] for r in csv.DictReader(f)} == {vid}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "{tmp}/nope"], "does not exist"),
        (["report", "{tmp}"], "has no store.sqlite3"),
        (["report", "{a}", "--baseline", "ret_fmt=pyton"], "is not a variant id or label of this run"),
    ],
)
def test_report_user_errors(
    argv: list[str], message: str, tmp_path: Path, run_a: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [a.format(tmp=tmp_path, a=run_a) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_compare_two_runs(run_a: Path, run_b: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(run_a), str(run_b), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "acme/m-1" in out and "acme/m-2" in out and "Diff pp" in out
    for name in ("compare.md", "compare.csv", "compare_summary.csv", "compare.html"):
        assert (tmp_path / name).exists()
    with (tmp_path / "compare.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 26 and {r["model_a"] for r in rows} == {"acme/m-1"}


def test_compare_without_shared_variants(
    run_a: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from promptgrid.variants import Variant

    other = tmp_path / "other.jsonl"
    write_jsonl(other, [make_row(Variant(template="massive_one_shot"), case_id="case_000")])
    assert main(["compare", str(run_a), str(other)]) == 2
    assert "share no variant" in capsys.readouterr().err


@pytest.mark.slow
def test_report_command_does_not_import_matplotlib_for_the_table(run_a: Path) -> None:
    code = (
        "import sys; from promptgrid.matrix.cli import main; "
        f"assert main(['report', {str(run_a)!r}]) == 0; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.slow
def test_report_of_a_real_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """End to end: a run on the fake model, stored by the runner, reported from its run directory."""
    pytest.importorskip("promptgrid.matrix.running.store")
    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "bfcl_v4",
                "--dataset",
                "mini",
                "--model",
                "fake/auto",
                "--limit",
                "2",
                "--run-dir",
                str(run_dir),
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["report", str(run_dir), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert "fake/auto" in out
    with (run_dir / "report" / "results.csv").open() as f:
        rows: list[dict[str, Any]] = list(csv.DictReader(f))
    assert len(rows) == 26 and all(int(r["n"]) == 2 for r in rows)
