"""Reports say what the rows alone do not: jobs left pending by the last run, and case sets that differ.

Pending jobs come from a run directory's ``run.json`` (``PendingJobs``); the
case-set notes from the rows (models, or one model's variants, scored on
different cases are not comparable).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import promptgrid as pg
from promptgrid.matrix.cli import main
from promptgrid.matrix.report import PendingJobs, aggregate, build_report
from promptgrid.variants import Variant
from support.rows import make_row, rows_with_accuracy

FAST = {"n_resamples": 400}
ONE = ["python->python,True"]


@pytest.fixture
def stopped_run(tmp_path: Path) -> Path:
    """A run whose last invocation stopped at --max-cost with 1 of its 3 jobs pending."""
    run_dir = tmp_path / "r"
    pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=run_dir, variants=ONE, limit=2)
    from promptgrid.matrix.running.store import RunStore

    with RunStore(run_dir) as store:  # pretend the first calls were paid for
        store.db.execute("UPDATE calls SET cost_usd = 1.0")
    run = pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=run_dir, variants=ONE, limit=3, max_cost=0.5)
    assert run.summary is not None and run.summary.stopped == "max_cost"
    return run_dir


PENDING = "1 of 3 jobs pending (stopped at --max-cost)"


def test_pending_jobs_are_recorded_and_reported_in_every_format(stopped_run: Path, tmp_path: Path) -> None:
    last = json.loads((stopped_run / "run.json").read_text())["invocations"][-1]
    assert (last["jobs"], last["pending"]) == (3, 1)
    result = pg.report(stopped_run, tmp_path / "out", formats=["md", "html", "json"])
    assert result.data.pending == PendingJobs(3, 1, last["started"], "max_cost")
    assert result.data.notes[0].startswith(PENDING) and "re-run the same command to finish" in result.data.notes[0]
    assert PENDING in result.console
    assert PENDING in (tmp_path / "out" / "report.md").read_text()
    assert PENDING in (tmp_path / "out" / "report.html").read_text()
    assert json.loads((tmp_path / "out" / "report.json").read_text())["pending"]["pending"] == 1
    assert pg.report(pg.open_run(stopped_run)).data.pending == result.data.pending


def test_report_cli_prints_pending_jobs(stopped_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(stopped_run)]) == 0
    assert f"note: {PENDING}" in capsys.readouterr().out


def test_a_finished_run_has_nothing_pending_and_an_export_cannot_tell(stopped_run: Path, tmp_path: Path) -> None:
    export = tmp_path / "rows.jsonl"
    assert main(["export", str(stopped_run), "--output", str(export)]) == 0
    assert pg.report(export).data.pending is None  # rows alone do not know the plan
    pg.run("bfcl_v4", "mini:en", models=["fake/auto"], run_dir=stopped_run, variants=ONE, limit=3)
    data = pg.report(stopped_run).data
    assert data.pending is None and not any("pending" in n for n in data.notes)


def test_an_invocation_that_did_not_finish_is_reported(stopped_run: Path) -> None:
    path = stopped_run / "run.json"
    record = json.loads(path.read_text())
    record["invocations"][-1].update(finished=None, pending=None)  # as a killed run leaves it
    path.write_text(json.dumps(record))
    data = pg.report(stopped_run).data
    assert data.pending is not None and data.pending.pending is None
    assert "has not finished: it is still running or was killed" in data.notes[0]


def test_models_with_different_case_sets_are_noted_with_the_common_count() -> None:
    rows = [make_row(model="a", case_id=f"c{i}") for i in range(4)]
    rows += [make_row(model="b", case_id=f"c{i}") for i in range(2, 5)]
    notes = aggregate(rows, **FAST).notes
    note = next(n for n in notes if "different case sets" in n)
    assert "(a 4, b 3 cases)" in note and "not comparable" in note and "2 cases are common to all models" in note
    same = [make_row(model=m, case_id=f"c{i}") for m in "ab" for i in range(3)]
    assert not any("case sets" in n for n in aggregate(same, **FAST).notes)


def test_variants_with_different_case_sets_are_noted_with_the_common_count(product_variants: list[Variant]) -> None:
    rows = rows_with_accuracy({product_variants[0]: [1, 0, 1, 1], product_variants[1]: [1, 1]})
    note = next(n for n in aggregate(rows, **FAST).notes if "incomplete variants" in n)
    assert "ran different case sets" in note and "not comparable" in note and "(2 cases are common" in note


def test_build_report_takes_pending_for_rows(tmp_path: Path) -> None:
    rows = [make_row(case_id=f"c{i}") for i in range(3)]
    pending = PendingJobs(planned=5, pending=2, started="2026-01-01T00:00:00+00:00", stopped="interrupted")
    result = build_report(rows, tmp_path, baseline=None, formats={"md"}, **FAST)
    assert result.data.pending is None
    result = build_report(rows, tmp_path, baseline=None, formats={"md"}, pending=pending, **FAST)
    assert "2 of 5 jobs pending (interrupted)" in (tmp_path / "report.md").read_text()
