"""Run directories made by the last release still open, read the same and resume without sending anything.

The fixtures in ``tests/fixtures/run_dirs_7a6083a/`` were made with promptgrid at 7a6083a (the release before
the conversation engine took a ``RunConfig``, a turn's verdict became a ``Verdict`` and a batch line a pair):

    promptgrid run call_modes --dataset bfcl:multi_turn_base --model fake/noisy:7 --limit 2 \\
        --variant "json->python,False" --variant native --repeats 2 --temperature 1 --run-dir conversation_run
    promptgrid run bfcl_v4 --dataset mini:en --model fake/noisy:3 --limit 3 --variant "json->python,False" \\
        --run-dir single_run

Each store is kept as SQL text (``sqlite3``'s ``iterdump``: readable in a diff, no binary file in the
repository), the single-turn run's ``run.json`` beside it. ``expected.json`` is what that release read from
them: each episode with its turns, the conversation report (``report --format json``), and each single-turn job
(its verdict and the sha256 of its answer).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

import promptgrid as pg
from promptgrid.matrix.cli import main
from promptgrid.matrix.conversations import conversation_store

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "run_dirs_7a6083a"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
CONVERSATION_COMMAND = ["call_modes", "--dataset", "bfcl:multi_turn_base", "--model", "fake/noisy:7", "--limit", "2",
                        "--variant", "json->python,False", "--variant", "native", "--repeats", "2",
                        "--temperature", "1"]
SINGLE_COMMAND = ["bfcl_v4", "--dataset", "mini:en", "--model", "fake/noisy:3", "--limit", "3",
                  "--variant", "json->python,False"]


def _restore(tmp_path: Path, kind: str) -> Path:
    """The fixture's run directory, rebuilt from its SQL text (and ``run.json``) under ``tmp_path``."""
    run_dir = tmp_path / f"{kind}_run"
    run_dir.mkdir()
    store = "conversations.sqlite3" if kind == "conversation" else "store.sqlite3"
    with sqlite3.connect(run_dir / store) as db:
        db.executescript((FIXTURES / f"{kind}_run.sql").read_text(encoding="utf-8"))
    db.close()
    if kind == "single":
        shutil.copy(FIXTURES / "single_run.json", run_dir / "run.json")
    return run_dir


def _without_latency(value: Any) -> Any:
    """``value`` without its wall-clock fields (``latency``: measured, not read)."""
    if isinstance(value, dict):
        return {k: _without_latency(v) for k, v in value.items() if "latency" not in k}
    if isinstance(value, list):
        return [_without_latency(v) for v in value]
    return value


def _episodes(run: Any) -> list[list[Any]]:
    """The episodes as ``expected.json`` keeps them (the last release's ``TurnResult`` fields per turn)."""
    out = []
    for e in sorted(run.episodes(), key=lambda e: (e.model, e.variant_id, e.conversation_id, e.repeat)):
        turns = [[t.turn, t.valid, None if t.failure_mode is None else t.failure_mode.value,
                  (t.details or {}).get("steps"), t.n_predicted_calls] for t in e.turns]
        verdict = e.details.get("verdict")
        out.append([e.model, e.variant_id, e.conversation_id, e.repeat, e.valid, e.failure_mode, e.steps,
                    e.input_tokens, e.output_tokens, turns, verdict["bfcl_error_type"] if verdict else None])
    return out


def test_a_conversation_run_of_the_last_release_reads_and_reports_the_same(tmp_path: Path) -> None:
    run_dir = _restore(tmp_path, "conversation")
    run = pg.open_run(run_dir)
    assert run.kind == "conversation"
    assert _episodes(run) == EXPECTED["conversation"]
    assert any(turn[1] is False for episode in EXPECTED["conversation"] for turn in episode[9])  # a failed turn
    pg.report(run_dir, tmp_path / "report", formats=["json"])
    written = json.loads((tmp_path / "report" / "conversations.json").read_text(encoding="utf-8"))
    assert _without_latency(written) == _without_latency(EXPECTED["conversation_report"])


def test_a_conversation_run_of_the_last_release_resumes_without_sending_a_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _restore(tmp_path, "conversation")
    with conversation_store(run_dir) as store:
        steps = store.step_count()
    assert main(["run", *CONVERSATION_COMMAND, "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "8 finished (8 already in the store)" in out and "0 steps sent" in out, out
    with conversation_store(run_dir) as store:
        assert store.step_count() == steps
    assert _episodes(pg.open_run(run_dir)) == EXPECTED["conversation"]


def test_a_single_turn_run_of_the_last_release_reads_the_same_and_resumes_without_a_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import hashlib

    run_dir = _restore(tmp_path, "single")

    def jobs() -> list[list[Any]]:
        run = pg.open_run(run_dir)
        assert run.kind == "single"
        return [[r.model, r.variant_id, r.case_id, r.repeat, r.status, r.valid, r.error_code, r.failure_mode,
                 hashlib.sha256((r.response or "").encode()).hexdigest()]
                for r in sorted(run.results(), key=lambda r: (r.model, r.variant_id, r.case_id, r.repeat))]

    def calls() -> list[tuple[Any, ...]]:
        with sqlite3.connect(run_dir / "store.sqlite3") as db:
            rows = db.execute("SELECT key, response, finished_at FROM calls ORDER BY key").fetchall()
        db.close()
        return rows

    assert jobs() == EXPECTED["single"]
    before = calls()
    assert main(["run", *SINGLE_COMMAND, "--run-dir", str(run_dir)]) == 0
    captured = capsys.readouterr()
    assert calls() == before, captured.err[-2000:]  # nothing sent again, nothing rewritten
    assert jobs() == EXPECTED["single"]


def _snapshot(run_dir: Path) -> dict[str, str]:
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run_dir.iterdir())}


def _tables(path: Path) -> tuple[set[str], str]:
    with sqlite3.connect(path) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    db.close()
    return tables, version


def test_a_conversation_store_of_the_last_release_is_read_unchanged_and_migrated_by_the_next_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its store (schema 1: ``steps``, ``episodes``) is read through a migrated private copy, the file left byte for
    byte as it was; the next run migrates it in place to the run store's tables (schema 2: ``calls``, ``jobs``)
    and loses nothing: every step and episode reads the same, and nothing is sent."""
    run_dir = _restore(tmp_path, "conversation")
    store = run_dir / "conversations.sqlite3"
    with sqlite3.connect(store) as db:
        steps = sorted(db.execute("SELECT key, response, cost_usd FROM steps"))
    db.close()
    before = _snapshot(run_dir)
    copies = set(Path(tempfile.gettempdir()).glob("promptgrid-store-*"))
    assert _tables(store) == ({"meta", "steps", "episodes", "batches", "batch_jobs"}, "1")
    assert _episodes(pg.open_run(run_dir)) == EXPECTED["conversation"]
    for command in (["status", str(run_dir), "--no-poll"], ["export", str(run_dir), "--output", str(tmp_path / "x")],
                    ["report", str(run_dir), "--format", "md", "--out", str(tmp_path / "report")]):
        assert main(command) == 0, command
    assert _snapshot(run_dir) == before  # readers write nothing, not even a -wal
    # Every read of this process used one migrated copy (a report opens the store once per read), kept until exit.
    assert len(set(Path(tempfile.gettempdir()).glob("promptgrid-store-*")) - copies) == 1
    assert main(["run", *CONVERSATION_COMMAND, "--run-dir", str(run_dir)]) == 0
    assert "0 steps sent" in capsys.readouterr().out
    tables, version = _tables(store)
    assert version == "2" and {"calls", "jobs", "models", "variants", "cases"} <= tables
    assert not tables & {"steps", "episodes"}
    with sqlite3.connect(store) as db:
        assert sorted(db.execute("SELECT key, response, cost_usd FROM calls")) == steps
        assert db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == len(EXPECTED["conversation"])
    db.close()
    assert _episodes(pg.open_run(run_dir)) == EXPECTED["conversation"]
    pg.report(run_dir, tmp_path / "again", formats=["json"])
    written = json.loads((tmp_path / "again" / "conversations.json").read_text(encoding="utf-8"))
    assert _without_latency(written) == _without_latency(EXPECTED["conversation_report"])


def test_a_damaged_store_of_the_last_release_is_named_and_not_migrated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _restore(tmp_path, "conversation")
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        db.execute("UPDATE episodes SET result = '{not json' WHERE rowid = 3")
    db.close()
    before = _snapshot(run_dir)
    assert main(["run", *CONVERSATION_COMMAND, "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "conversations.sqlite3: episode row 3 is damaged" in err and "Traceback" not in err, err
    after = _snapshot(run_dir)
    assert after.pop("run.lock", None) is not None  # the run's lock: the store is as it was
    assert after == before


def test_a_migration_that_fails_part_way_leaves_the_last_release_store_as_it_was(tmp_path: Path) -> None:
    """The migration is one transaction: a disk that fills while the rows are copied (the file may not grow) rolls
    it all back, and the store keeps its schema-1 tables and rows, readable as before."""
    from promptgrid.matrix.running.store_episodes import _migrate

    run_dir = _restore(tmp_path, "conversation")
    store = run_dir / "conversations.sqlite3"
    before = _snapshot(run_dir)
    db = sqlite3.connect(store, isolation_level=None)
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    # The disk fills part-way: room for the new tables, not for the rows copied into them.
    db.execute(f"PRAGMA max_page_count={pages + 12}")
    with pytest.raises(sqlite3.Error, match="full"):
        _migrate(db)
    assert not db.in_transaction
    db.close()
    assert _snapshot(run_dir) == before
    assert _tables(store) == ({"meta", "steps", "episodes", "batches", "batch_jobs"}, "1")
    assert _episodes(pg.open_run(run_dir)) == EXPECTED["conversation"]


def test_a_reader_of_the_last_release_store_removes_its_migrated_copy_when_it_exits(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    run_dir = _restore(tmp_path, "conversation")
    temp = tmp_path / "temp"
    temp.mkdir()
    done = subprocess.run([sys.executable, "-m", "promptgrid.matrix.cli", "report", str(run_dir), "--format", "json",
                           "--out", str(tmp_path / "report")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TMPDIR": str(temp), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "report" / "conversations.json").is_file()
    assert list(temp.iterdir()) == []  # the migrated copy went with the process
    assert _tables(run_dir / "conversations.sqlite3")[1] == "1"


@pytest.mark.parametrize("command", ["report", "run"])
def test_a_damaged_meta_row_of_the_last_release_store_is_named_by_readers_and_writers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """A schema-1 ``variants`` row nested past the parser's bound: a reader names it as a writer does (the migration
    does not drop it silently), and the file is left as it was."""
    run_dir = _restore(tmp_path, "conversation")
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'variants'", ("[" * 100_000 + "]" * 100_000,))
    db.close()
    before = _snapshot(run_dir)
    args = ["report", str(run_dir), "--out", str(tmp_path / "report")] if command == "report" else \
        ["run", *CONVERSATION_COMMAND, "--run-dir", str(run_dir)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "conversations.sqlite3: the meta row 'variants' is damaged (nested more than" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    after = _snapshot(run_dir)
    after.pop("run.lock", None)
    assert after == before
