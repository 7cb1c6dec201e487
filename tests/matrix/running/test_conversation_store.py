"""The conversation store (``conversations.sqlite3``): a reader opens it read-only and writes nothing; a foreign,
damaged or newer file, a locked store and a full disk are each a ``StoreError`` naming the file, never a sqlite3
traceback, and the file is left as it was."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import RunError, StoreError, StoreFullError
from promptgrid.matrix.api import Run as ConversationRun
from promptgrid.matrix.cli import main
from promptgrid.matrix.conversations import CONVERSATION_STORE, conversation_store
from promptgrid.matrix.running.store import STORE_FILE, RunStore
from promptgrid.matrix.running.store_episodes import StoredStep
from promptgrid.variants import Variant
from support.episodes import run_conversations

DEFAULT_VARIANT = Variant()


def _fill(run_dir: Path) -> None:
    with conversation_store(run_dir, create=True) as store:
        store.set_meta("grid", "g")
        store.add_variants([DEFAULT_VARIANT], {DEFAULT_VARIANT.id: {"call_mode": "prompt"}})
        store.add_step("k1", "m", StoredStep(response="answer", finish_reason="stop", input_tokens=3, output_tokens=4,
                                             cost_usd=0.5, latency_s=0.1))


def _snapshot(run_dir: Path) -> dict[str, str]:
    """Every file of the directory with the hash of its bytes."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run_dir.iterdir())}


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[sqlite3.Connection]]:
    """Every SQLite connection opened during the test (to check that none is left open)."""
    made: list[sqlite3.Connection] = []
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(sqlite3, "connect", connect)
    yield made


def _all_closed(made: list[sqlite3.Connection]) -> bool:
    for db in made:
        try:
            db.execute("SELECT 1")
        except sqlite3.ProgrammingError:
            continue
        return False
    return True


def test_a_reader_opens_an_existing_store_read_only_and_leaves_no_wal_or_shm(tmp_path: Path) -> None:
    _fill(tmp_path)
    before = _snapshot(tmp_path)
    assert list(before) == [CONVERSATION_STORE]
    with conversation_store(tmp_path) as store:
        assert store.readonly
        assert store.meta("grid") == "g"
        assert store.variant_dimensions() == {DEFAULT_VARIANT.id: {"call_mode": "prompt"}}
        assert store.step("k1") == StoredStep(key="k1", model="m", response="answer", finish_reason="stop",
                                              input_tokens=3, output_tokens=4, cost_usd=0.5, latency_s=0.1)
        assert store.step_count() == 1
        assert store.episodes() == []
        assert _snapshot(tmp_path) == before  # while open too: no -wal/-shm beside it
        with pytest.raises(StoreError, match=CONVERSATION_STORE):  # a reader cannot write
            store.set_meta("grid", "other")
    run = ConversationRun(tmp_path)
    assert run.episodes() == [] and run.labels() == {DEFAULT_VARIANT.id: DEFAULT_VARIANT.label}
    assert run.meta()["grid"] == "g"
    assert _snapshot(tmp_path) == before  # nothing written, no -wal/-shm created


def test_a_reader_sees_what_a_writer_still_open_committed(tmp_path: Path) -> None:
    with conversation_store(tmp_path, create=True) as writer:
        writer.add_step("k1", "m", StoredStep(response="answer"))
        assert (tmp_path / f"{CONVERSATION_STORE}-wal").exists()
        with conversation_store(tmp_path) as reader:
            assert reader.step_count() == 1
        writer.add_step("k2", "m", StoredStep(response="again"))
    with conversation_store(tmp_path) as reader:
        assert reader.step_count() == 2


def test_a_missing_store_is_a_run_error_and_nothing_is_created(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="holds no conversation run"):
        conversation_store(tmp_path / "none")
    assert not (tmp_path / "none").exists()
    with pytest.raises(ValueError):
        conversation_store(tmp_path, create=True, readonly=True)


@pytest.mark.parametrize("create", [False, True])
def test_a_newer_schema_is_refused_and_left_as_it_was(tmp_path: Path, create: bool,
                                                       connections: list[sqlite3.Connection]) -> None:
    _fill(tmp_path)
    db = sqlite3.connect(tmp_path / CONVERSATION_STORE)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    before = _snapshot(tmp_path)
    with pytest.raises(StoreError, match=r"schema 99 is newer than this promptgrid reads \(2\); upgrade") as info:
        conversation_store(tmp_path, create=create)
    assert str(tmp_path / CONVERSATION_STORE) in str(info.value)
    assert _all_closed(connections)
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("create", [False, True])
def test_a_foreign_sqlite_file_is_refused_and_left_as_it_was(tmp_path: Path, create: bool,
                                                              connections: list[sqlite3.Connection]) -> None:
    db = sqlite3.connect(tmp_path / CONVERSATION_STORE)
    db.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); CREATE TABLE calls (key TEXT); "
                     "INSERT INTO meta VALUES ('schema_version', '1');")  # a run store's tables, not ours
    db.close()
    before = _snapshot(tmp_path)
    with pytest.raises(StoreError, match="is not a promptgrid conversation store"):
        conversation_store(tmp_path, create=create)
    assert _all_closed(connections)
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize(("script", "message"), [
    ("INSERT INTO meta VALUES ('schema_version', '0');",
     ": conversation store schema 0 is not the supported 2; use the promptgrid version that wrote it."),
    ("INSERT INTO meta VALUES ('schema_version', 'x');",
     ": conversation store schema x is not the supported 2; use the promptgrid version that wrote it."),
    ("", " is not a promptgrid conversation store (tables: meta). Give a run directory a promptgrid conversation "
         "run wrote, or move the file aside."),
])
def test_the_schema_errors_name_the_conversation_store(tmp_path: Path, script: str, message: str) -> None:
    """The exact texts of the schema check it shares with ``RunStore`` (which has its own wording)."""
    db = sqlite3.connect(tmp_path / CONVERSATION_STORE)
    db.executescript(f"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); {script}")
    db.close()
    for create in (False, True):
        with pytest.raises(StoreError) as info:
            conversation_store(tmp_path, create=create)
        assert str(info.value) == f"{tmp_path / CONVERSATION_STORE}{message}"


@pytest.mark.parametrize("create", [False, True])
def test_a_file_that_is_not_sqlite_is_refused_and_left_as_it_was(tmp_path: Path, create: bool,
                                                                  connections: list[sqlite3.Connection]) -> None:
    (tmp_path / CONVERSATION_STORE).write_bytes(b"not a database, but someone's notes\n" * 200)
    before = _snapshot(tmp_path)
    with pytest.raises(StoreError, match="is corrupt or truncated"):
        conversation_store(tmp_path, create=create)
    assert _all_closed(connections)
    assert _snapshot(tmp_path) == before


def test_cli_status_of_a_damaged_store_is_one_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / CONVERSATION_STORE).write_bytes(b"\0garbage" * 512)
    before = _snapshot(tmp_path)
    assert main(["status", str(tmp_path), "--no-poll"]) == 2
    err = capsys.readouterr().err
    assert "is corrupt or truncated" in err and "Traceback" not in err
    assert _snapshot(tmp_path) == before


def test_a_locked_store_and_a_full_disk_are_store_errors(tmp_path: Path) -> None:
    _fill(tmp_path)
    with conversation_store(tmp_path, create=True) as store:
        store.db.execute("PRAGMA busy_timeout=0")  # fail at once instead of after 30 s
        other = sqlite3.connect(tmp_path / CONVERSATION_STORE, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreError, match="database is locked"):
            store.add_step("k2", "m", StoredStep(response="answer"))
        other.execute("ROLLBACK")
        other.close()
        store.add_step("k2", "m", StoredStep(response="answer"))

        pages = store.db.execute("PRAGMA page_count").fetchone()[0]
        store.db.execute(f"PRAGMA max_page_count={pages}")  # the database cannot grow: a full disk
        with pytest.raises(StoreFullError, match="disk full"):
            for i in range(200):
                store.add_step(f"big{i}", "m", StoredStep(response="x" * 10_000))
    with conversation_store(tmp_path) as store:
        assert store.step("k1") is not None and store.step("k2") is not None  # nothing lost


def _run_of_one_episode(run_dir: Path) -> None:
    from promptgrid.matrix.conversations import load_conversations
    from promptgrid.variants import load_grid

    variant = load_grid("call_modes").select(["json->python,False"])
    run_conversations(variant, load_conversations("bfcl:multi_turn_base", limit=1), models=["fake/ground-truth"],
                      run_dir=run_dir)


VARIANT = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style="  # its first 80 characters
ROW = f"the episode row of ('fake/ground-truth', {VARIANT!r}, 'multi_turn_base_0', repeat 0)"
"""How the messages name the one episode's row (its model, variant and conversation, each cut to 80 characters)."""


@pytest.mark.parametrize(("table", "value", "fragment"), [
    ("episodes", "{not json", ROW + " is damaged (not valid JSON"),
    ("episodes", "EXTRA", ROW + " does not hold an episode this promptgrid reads"),
    ("episodes", "[" * 100_000 + "]" * 100_000, ROW + " is damaged (nested more than"),
    ("episodes", "NUMBER", ROW + " is damaged"),
    ("episodes", "WRONG_TYPE", ROW + " does not hold an episode this promptgrid reads (valid is str)"),
    # The turns are rebuilt from the turn records and the stored verdict together (``results.turns_of``).
    ("episodes", "TURNS_WITHOUT_VERDICT", "the turns do not match the stored verdict's"),
    ("episodes", "TURN_MODE", ROW + " does not hold an episode this promptgrid reads"),
    ("episodes", "TURN_FIELD", "a turn has unknown fields ('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')"),
    ("variants", "[" * 100_000 + "]" * 100_000, f"the variant row {VARIANT!r} is damaged (nested more than"),
])
def test_a_damaged_row_is_one_line_naming_file_and_row_for_every_reader(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, value: str, fragment: str) -> None:
    import json

    run_dir = tmp_path / "run"
    _run_of_one_episode(run_dir)
    with sqlite3.connect(run_dir / CONVERSATION_STORE) as db:
        stored = json.loads(db.execute("SELECT verdict FROM jobs").fetchone()[0])
        text = {"EXTRA": json.dumps({**stored, "added_by_a_newer_version": 1}),
                "NUMBER": json.dumps(stored).replace('"steps": ', '"steps": ' + "9" * 5000 + ", \"x\": ", 1),
                "WRONG_TYPE": json.dumps({**stored, "valid": "yes"}),
                "TURNS_WITHOUT_VERDICT": json.dumps({**stored, "details": {}}),
                "TURN_MODE": json.dumps({**stored, "turns": [{**stored["turns"][0], "failure_mode": "\x1b[31m"},
                                                            *stored["turns"][1:]]}),
                "TURN_FIELD": json.dumps({**stored, "turns": [{**stored["turns"][0], "x" * 10_000: 1},
                                                             *stored["turns"][1:]]})}.get(value, value)
        if table == "episodes":
            db.execute("UPDATE jobs SET verdict = ?", (text,))
        else:
            db.execute("UPDATE variants SET dimensions = ?", (text,))
    db.close()
    before = _snapshot(run_dir)
    commands = [["report", str(run_dir)], ["export", str(run_dir), "--output", "-"], ["status", str(run_dir)],
                ["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--limit", "1", "--model",
                 "fake/ground-truth", "--variant", "json->python,False", "--run-dir", str(run_dir)]]
    for command in commands if table == "episodes" else commands[:1]:  # the report reads the variants' values
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert fragment in err and str(run_dir / CONVERSATION_STORE) in err, (command, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    after = _snapshot(run_dir)
    assert after == before, (sorted(set(after.items()) ^ set(before.items())))


def test_spilled_steps_are_stored_by_the_next_run_and_a_cut_or_foreign_line_is_skipped(tmp_path: Path) -> None:
    """``RunStore.spill`` keeps an answer a full disk kept out of the store; ``replay_spills`` stores it
    (the next run does so before any episode plays) and removes the file. A line cut short when the disk filled,
    one that is not a step, one whose fields have the wrong types, or one that is not UTF-8 JSON is skipped: its
    step is sent again."""
    with conversation_store(tmp_path, create=True) as store:
        store.reserve_spill()
        reservation = store.spill_path
        assert reservation.exists() and reservation.stat().st_size > 0  # the space is claimed up front
        store.spill(StoredStep(key="k1", model="m", response="first", input_tokens=3, output_tokens=2, cost_usd=0.5))
    assert reservation.exists()  # written to: kept for the next run
    with reservation.open("ab") as f:  # a line an earlier release wrote, then hostile ones
        f.write(b'{"step": {"key": "k2", "model": "m", "response": "second"}}\n'
                b'{"step": {"key": "k3", "model": "m", "respo\n{"call": {"key": "single-turn"}}\n'
                b'{"step": {"key": "k4", "model": "m", "response": "x", "cost_usd": "1e9"}}\n'
                b'{"step": {"key": "k5", "model": "m", "response": "x", "input_tokens": true}}\n'
                b'\xff\xfe not utf-8\n[[[[[[[[[[]]]]]]]]]]\n'
                # a call a conversation store has no place for: a failed one, an answer without its text, verdicts
                b'{"call": {"key": "k6", "model": "m", "status": "error", "error": "x"}, "verdicts": []}\n'
                b'{"call": {"key": "k7", "model": "m", "response": null}, "verdicts": []}\n'
                b'{"call": {"key": "k8", "model": "m", "response": "x"},'
                b' "verdicts": [[[1, 1, 1, 0], null, null, null]]}\n')
    with conversation_store(tmp_path, create=True) as store:
        assert store.replay_spills() == 2
        assert store.step("k1") is not None and store.step("k1").response == "first"  # type: ignore[union-attr]
        assert store.step("k2") is not None
        # cut, fields of the wrong type, or no place in this store
        assert all(store.step(key) is None for key in ("k3", "k4", "k5", "k6", "k7", "k8"))
        assert store.spend() == 0.5
    assert not list(tmp_path.glob("spill-*.jsonl"))
    with conversation_store(tmp_path, create=True) as store:  # a reservation nothing was written to is removed
        store.reserve_spill()
    assert not list(tmp_path.glob("spill-*.jsonl"))


@pytest.mark.parametrize("readonly", [True, False])
def test_a_store_under_the_other_kinds_name_is_named_as_such_and_left_as_it_is(tmp_path: Path, readonly: bool) -> None:
    """Both kinds have the same tables and differ in their schema version, so a store renamed or copied to the
    other kind's file name is said to be that (it read as "schema 2 is newer than this promptgrid reads"), and
    the file is left as it is."""
    with RunStore(tmp_path / "single", create=True):
        pass
    _fill(tmp_path / "conversation")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "conversation" / CONVERSATION_STORE, tmp_path / "a" / STORE_FILE)
    shutil.copy(tmp_path / "single" / STORE_FILE, tmp_path / "b" / CONVERSATION_STORE)
    before = {name: _snapshot(tmp_path / name) for name in ("a", "b")}
    with pytest.raises(StoreError, match=f"holds a conversation run's store .* under the name {STORE_FILE}"):
        RunStore(tmp_path / "a", readonly=readonly)
    with pytest.raises(StoreError, match=f"holds a single-turn run's store .* under the name {CONVERSATION_STORE}"):
        conversation_store(tmp_path / "b", readonly=readonly)
    assert {name: _snapshot(tmp_path / name) for name in ("a", "b")} == before
