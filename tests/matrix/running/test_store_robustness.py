"""The store survives damage, read-only archives and a full disk (issue 12 item 5).

- A corrupt, truncated, foreign or newer ``store.sqlite3`` is one line naming
  the file and what to do, exit code 2, in every command that opens a store and
  in the Python API; never a sqlite3 traceback.
- A read-only run directory is readable by ``report``, ``export``,
  ``compare`` and the API, and reading leaves every byte as it was (no lock,
  ``-wal`` or ``-shm`` file created).
- A full disk stops the run with a message; every answer received is stored or
  spilled, the next run stores the spilled ones first and sends none of them
  again, and the final store is what an uninterrupted run gives.
"""

from __future__ import annotations

import asyncio
import errno
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import promptgrid as pg
from promptgrid.errors import RunError, StoreError, StoreFullError
from promptgrid.matrix.api import Run
from promptgrid.matrix.cli import main
from promptgrid.matrix.cli.run import print_run, spill_note
from promptgrid.matrix.clients._fake import FakeClient
from promptgrid.matrix.running.runner import RunSummary
from promptgrid.matrix.running.session import Prepared, RunIdentity, check_run_dir, execute
from promptgrid.matrix.running.store import STORE_FILE, CallResult, RunStore, disk_full_errors
from support.builders import bfcl_variants, numbered_cases
from support.running import child_env, config, prepared, stand_in_score

MODEL = "fake/auto"
FULL = "database or disk is full"


class CountingClient(FakeClient):
    """``fake/auto`` that counts the calls it answers, by prompt."""

    def __init__(self) -> None:
        super().__init__(MODEL)
        self.sent: Counter[str] = Counter()

    async def complete(self, messages: Any, params: Mapping[str, Any]) -> Any:
        self.sent[json.dumps(messages, sort_keys=True)] += 1
        return await super().complete(messages, params)


def run_into(run_dir: Path, client: CountingClient | None = None, *, variants: int = 3, cases: int = 6,
             concurrency: int = 4) -> Any:
    prep = prepared(config(run_dir, model=MODEL, concurrency=concurrency), bfcl_variants(variants),
                    numbered_cases(cases))
    return asyncio.run(execute(prep, scorer=stand_in_score, clients={MODEL: client or CountingClient()}))


def stored(run_dir: Path) -> list[tuple[Any, ...]]:
    """Everything a run stores that does not depend on timing."""
    with RunStore(run_dir, readonly=True) as store:
        return sorted((r.model, r.variant_id, r.case_id, r.repeat, r.key, r.status, r.response, r.valid,
                       r.error_code) for r in store.rows(include_pending=True))


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("base") / "run"
    run_into(run_dir)
    return run_dir


def copy_run(base: Path, to: Path) -> Path:
    shutil.copytree(base, to)
    return to


# --------------------------------------------------------------------------- damaged stores


def _random_bytes(path: Path) -> None:
    path.write_bytes(os.urandom(64 * 1024))


def _cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _text_file(path: Path) -> None:
    path.write_text("not a database\n")


def _empty_file(path: Path) -> None:
    path.write_bytes(b"")


def _foreign_schema(path: Path) -> None:
    path.unlink()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    db.commit()
    db.close()


def _newer_schema(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value='7' WHERE key='schema_version'")
    db.commit()
    db.close()


DAMAGE = {
    "random bytes": (_random_bytes, "is corrupt or truncated"),
    "cut in half": (_cut_in_half, "is corrupt or truncated"),
    "text file": (_text_file, "is corrupt or truncated"),
    "empty file": (_empty_file, "is not a promptgrid run store"),
    "foreign schema": (_foreign_schema, "is not a promptgrid run store (a SQLite file without its schema version; "
                                        "tables: photos)"),
    "newer schema": (_newer_schema, "store schema 7 is newer than this promptgrid reads (1); upgrade promptgrid"),
}


@pytest.fixture(params=list(DAMAGE), ids=list(DAMAGE))
def damaged(request: pytest.FixtureRequest, base_run: Path, tmp_path: Path) -> tuple[Path, str, str]:
    damage, expected = DAMAGE[request.param]
    run_dir = copy_run(base_run, tmp_path / "damaged")
    damage(run_dir / STORE_FILE)
    return run_dir, expected, request.param


def _commands(run_dir: Path, other: Path, out: Path) -> dict[str, list[str]]:
    resume = ["run", "bfcl_v4", "--dataset", "mini", "--model", MODEL, "--limit", "1", "--variant",
              "python->python,True", "--run-dir", str(run_dir), "--no-progress"]
    return {
        "report": ["report", str(run_dir)],
        "export": ["export", str(run_dir)],
        "export --output": ["export", str(run_dir), "--output", str(out)],
        "compare": ["compare", str(other), str(run_dir)],
        "run (resume)": resume,
        "run --dry-run": [*resume, "--dry-run"],
        "score": ["score", str(run_dir)],
    }


@pytest.mark.parametrize("command", ["report", "export", "export --output", "compare", "run (resume)",
                                     "run --dry-run", "score"])
def test_damaged_store_is_one_line_exit_2(command: str, damaged: tuple[Path, str, str], base_run: Path,
                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, expected, kind = damaged
    before = (run_dir / STORE_FILE).read_bytes()
    code = main(_commands(run_dir, base_run, tmp_path / "out.jsonl")[command])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("promptgrid: error: ") and str(run_dir / STORE_FILE) in lines[0]
    assert expected in lines[0]
    assert "Traceback" not in err and "sqlite3." not in err
    if "newer" not in expected:
        assert "move" in lines[0] or "restore" in lines[0].lower()  # says what to do
    assert (run_dir / STORE_FILE).read_bytes() == before  # not "repaired" or extended by the failed command
    assert not (tmp_path / "out.jsonl").exists()  # no half export either


def test_damaged_store_in_the_api(damaged: tuple[Path, str, str]) -> None:
    run_dir, expected, _ = damaged
    for call in (pg.open_run, pg.load_results, lambda p: pg.report(p)):
        with pytest.raises(StoreError, match="store.sqlite3") as info:
            call(run_dir)
        assert expected in str(info.value) and "\n" not in str(info.value)
        assert isinstance(info.value, RunError) and info.value.exit_code == 2


def test_damage_found_only_when_rows_are_read(base_run: Path, tmp_path: Path) -> None:
    """A store that opens fine but whose pages are damaged fails where its rows are read, still typed."""
    run_dir = copy_run(base_run, tmp_path / "run")
    path = run_dir / STORE_FILE
    with sqlite3.connect(path) as db:
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name='calls'").fetchone()[0]
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    data[start:start + page_size] = b"\xff" * page_size
    path.write_bytes(bytes(data))
    run = pg.open_run(run_dir)  # the schema page is intact: opening works
    with pytest.raises(StoreError, match="is corrupt or truncated"):
        run.results()
    with pytest.raises(StoreError, match="is corrupt or truncated"):
        run.counts()


def _damage_table(run_dir: Path, table: str) -> None:
    """Overwrite every page at the root of ``table`` and its indexes: the store still opens (schema intact)."""
    path = run_dir / STORE_FILE
    with sqlite3.connect(path) as db:
        roots = [r for (r,) in db.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name=?", (table,))]
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    for root in roots:
        data[(root - 1) * page_size:root * page_size] = b"\xff" * page_size
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("table", ["variants", "cases"])
def test_damage_first_read_by_check_run_dir(table: str, base_run: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The run-directory check is the first to read the variant and case ids: their damage is a StoreError."""
    run_dir = copy_run(base_run, tmp_path / "run")
    _damage_table(run_dir, table)
    variants, cases = bfcl_variants(3), numbered_cases(6)
    identity = RunIdentity("bfcl_v4", frozenset(v.id for v in variants), "standin", frozenset(c.id for c in cases))
    prep = prepared(config(run_dir, model=MODEL), variants, cases)
    prep = Prepared(prep.config, prep.grid_name, prep.variants, prep.cases, prep.renderer, identity)
    with pytest.raises(StoreError, match="is corrupt or truncated") as info:
        check_run_dir(prep)
    assert str(run_dir / STORE_FILE) in str(info.value)
    before = (run_dir / STORE_FILE).read_bytes()
    for command in ("run (resume)", "run --dry-run"):
        assert main(_commands(run_dir, base_run, tmp_path / "out.jsonl")[command]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "is corrupt or truncated" in err, err
        assert "Traceback" not in err and "sqlite3." not in err
    assert (run_dir / STORE_FILE).read_bytes() == before


def test_damaged_jobs_when_counting_and_rescoring(base_run: Path, tmp_path: Path) -> None:
    """The pending count at the end of a run and the re-score's old verdicts read the jobs through guarded
    methods."""
    run_dir = copy_run(base_run, tmp_path / "run")
    _damage_table(run_dir, "jobs")
    with RunStore(run_dir) as store:
        with pytest.raises(StoreError, match="is corrupt or truncated"):
            store.answered([MODEL], [v.id for v in bfcl_variants(3)], [c.id for c in numbered_cases(6)], 1)
        with pytest.raises(StoreError, match="is corrupt or truncated"):
            store.validity()


def test_answered_counts_the_plan_only(base_run: Path, tmp_path: Path) -> None:
    with RunStore(copy_run(base_run, tmp_path / "run")) as store:
        ids = [v.id for v in bfcl_variants(3)], [c.id for c in numbered_cases(6)]
        assert store.answered([MODEL], *ids, 1) == 18
        assert store.answered([MODEL], *ids, 2) == 18  # a repeat not run: nothing more answered
        assert store.answered([MODEL, "fake/other"], ids[0][:1], ids[1], 1) == 6
        assert store.answered(["fake/other"], *ids, 1) == 0
        assert store.stored_ids() == (set(ids[0]), set(ids[1]))


# --------------------------------------------------------------------------- the empty file of a killed run


def test_empty_store_of_a_run_killed_while_creating_it_is_a_new_store(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A 0-byte store.sqlite3 with nothing else (no -wal content, no run.json) is created over, not refused."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / STORE_FILE).write_bytes(b"")
    (run_dir / "run.lock").write_text("promptgrid pid 1")
    (run_dir / f"{STORE_FILE}-wal").write_bytes(b"")
    argv = _commands(run_dir, run_dir, tmp_path / "out.jsonl")["run (resume)"]
    assert main([*argv, "--dry-run"]) == 0, capsys.readouterr().err
    assert "1 calls to send" in capsys.readouterr().out and (run_dir / STORE_FILE).read_bytes() == b""
    assert main(argv) == 0, capsys.readouterr().err
    assert "1 calls sent" in capsys.readouterr().err
    assert pg.open_run(run_dir).counts()["done"] == 1


@pytest.mark.parametrize("append", [False, True], ids=["run", "run --append"])
def test_empty_store_beside_a_run_record_is_refused(append: bool, base_run: Path, tmp_path: Path) -> None:
    """An empty store beside run.json lost its results: refused, also with --append, and left as it is."""
    run_dir = copy_run(base_run, tmp_path / "run")
    (run_dir / STORE_FILE).write_bytes(b"")
    with pytest.raises(StoreError, match="is not a promptgrid run store"):
        pg.run("bfcl_v4", "mini", models=[MODEL], limit=1, variants=["python->python,True"], run_dir=run_dir,
               append=append)
    assert (run_dir / STORE_FILE).read_bytes() == b""


# --------------------------------------------------------------------------- read-only run directories


def _snapshot(run_dir: Path) -> dict[str, bytes | None]:
    """Every file's bytes; the ``-shm`` only by name: it is SQLite's shared-memory index of the WAL, where
    readers of a WAL store mark what they read (rebuilt from the WAL when absent or unwritable)."""
    return {str(p.relative_to(run_dir)): None if p.name.endswith("-shm") else p.read_bytes()
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


def _leave_wal(run_dir: Path) -> None:
    """Commit one row and die without closing, as a killed run does: the store keeps its -wal and -shm."""
    code = (f"import os, sqlite3; db = sqlite3.connect({str(run_dir / STORE_FILE)!r}, isolation_level=None); "
            "db.execute(\"INSERT OR REPLACE INTO meta VALUES ('note', 'left in the WAL')\"); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert (run_dir / f"{STORE_FILE}-wal").exists()


def _read_everything(run_dir: Path, other: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["report", str(run_dir)], ["export", str(run_dir)], ["compare", str(run_dir), str(other)]):
        assert main(argv) == 0, capsys.readouterr().err
    run = pg.open_run(run_dir)
    assert len(run.results()) == 18 and run.accuracy() and run.counts()["jobs"] == 18
    assert run.config["grid_name"] == "bfcl_v4" and run.spend() == 0
    assert len(pg.load_results(run_dir)) == 18
    assert pg.report(run_dir).console
    capsys.readouterr()


@pytest.mark.parametrize("killed_writer", [False, True], ids=["closed store", "store with -wal (killed run)"])
def test_reading_changes_no_byte(killed_writer: bool, base_run: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = copy_run(base_run, tmp_path / "archive")
    if killed_writer:
        _leave_wal(run_dir)
    before = _snapshot(run_dir)
    _read_everything(run_dir, base_run, capsys)
    assert _snapshot(run_dir) == before  # same files, same bytes: nothing created, nothing written


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod a-w; see the setpriv test below")
@pytest.mark.parametrize("killed_writer", [False, True], ids=["closed store", "store with -wal (killed run)"])
def test_chmod_read_only_run_directory(killed_writer: bool, base_run: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = copy_run(base_run, tmp_path / "archive")
    if killed_writer:
        _leave_wal(run_dir)
    paths = [run_dir, *run_dir.rglob("*")]
    for p in paths:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        _read_everything(run_dir, base_run, capsys)
        code = main(["score", str(run_dir)])
        err = capsys.readouterr().err
        assert code == 2 and "cannot write in run directory" in err and len(err.strip().splitlines()) == 1
    finally:
        for p in paths:
            p.chmod(p.stat().st_mode | 0o200)


_SETPRIV = shutil.which("setpriv")


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or _SETPRIV is None,
                    reason="as root, setpriv drops the capability that writes through chmod a-w")
@pytest.mark.parametrize("killed_writer", [False, True, "no-shm"],
                         ids=["closed store", "store with -wal (killed run)", "-wal copied without -shm"])
def test_chmod_read_only_run_directory_as_root_without_capabilities(killed_writer: bool | str, base_run: Path,
                                                                    tmp_path: Path) -> None:
    run_dir = copy_run(base_run, tmp_path / "archive")
    if killed_writer:
        _leave_wal(run_dir)
    if killed_writer == "no-shm":  # read from a private copy: the directory cannot hold a new -shm
        (run_dir / f"{STORE_FILE}-shm").unlink()
    paths = [run_dir, *run_dir.rglob("*")]
    for p in paths:
        p.chmod(p.stat().st_mode & ~0o222)
    no_caps = [_SETPRIV, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--",
               sys.executable, "-m", "promptgrid.matrix.cli"]
    env = child_env(LITELLM_LOCAL_MODEL_COST_MAP="True")
    try:
        assert subprocess.run([*no_caps[:-3], "touch", str(run_dir / "x")], capture_output=True).returncode != 0
        for argv in (["export", str(run_dir)], ["report", str(run_dir)]):
            done = subprocess.run([*no_caps, *argv], capture_output=True, text=True, env=env, timeout=120)
            assert done.returncode == 0, done.stderr
            assert done.stdout
        done = subprocess.run([*no_caps, "score", str(run_dir)], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 2 and "cannot write in run directory" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    finally:
        for p in paths:
            p.chmod(p.stat().st_mode | 0o200)


# --------------------------------------------------------------------------- full disk


def fill_disk_after(monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    """The store takes ``writes`` results, then SQLite says the disk is full (as it does on ENOSPC): a transaction
    that would hold more fails whole (the runner commits the results of one turn of its loop together)."""
    original = RunStore._insert_result

    def insert(self: RunStore, result: CallResult, verdicts: Any) -> None:
        if self.db.execute("SELECT count(*) FROM calls").fetchone()[0] >= writes:  # this transaction's rows too
            raise sqlite3.OperationalError(FULL)
        original(self, result, verdicts)

    monkeypatch.setattr(RunStore, "_insert_result", insert)


def spill_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("spill-*.jsonl"))


def test_full_disk_spills_then_resume_replays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    first = CountingClient()
    with monkeypatch.context() as m:
        fill_disk_after(m, 5)
        with pytest.raises(StoreFullError) as info:
            run_into(run_dir, first)
    message = str(info.value)
    print(f"\nfull disk: {message}")
    assert "\n" not in message and message.startswith(f"disk full at {run_dir}: the run stopped")
    assert "Free space and re-run the same command to resume" in message
    [spill] = spill_files(run_dir)
    assert spill.name in message
    # The spilled lines, then what is left of the space reserved at the start (one blank line).
    spilled = [json.loads(line) for line in spill.read_text().splitlines() if line.strip()]
    sent_first = sum(first.sent.values())
    assert len(spilled) == sent_first - 5 > 0  # every answer past the full disk is kept: none lost
    assert f"{len(spilled)} answer(s) the store could not take" in message
    assert {s["call"]["status"] for s in spilled} == {"done"} and all(s["verdicts"] for s in spilled)
    assert len(stored_calls(run_dir)) == 5
    assert sent_first < 18  # it stopped sending

    second = CountingClient()
    summary = run_into(run_dir, second)
    assert summary.replayed == len(spilled) and summary.stopped is None
    out, err = io.StringIO(), io.StringIO()
    assert print_run(Run(run_dir, summary=summary), out, err) == 0
    assert f"\n{len(spilled)} answer(s) an earlier run spilled on a full disk were stored first (not sent again)." \
        in err.getvalue()
    assert spill_files(run_dir) == []
    assert summary.sent == sum(second.sent.values()) == 18 - sent_first
    assert not (set(first.sent) & set(second.sent))  # nothing stored or spilled is sent again
    assert max((first.sent + second.sent).values()) == 1

    run_into(tmp_path / "uninterrupted")
    assert stored(run_dir) == stored(tmp_path / "uninterrupted")


def stored_calls(run_dir: Path) -> list[str]:
    with RunStore(run_dir, readonly=True) as store:
        return [k for (k,) in store.db.execute("SELECT key FROM calls")]


def test_spill_that_fails_too_counts_the_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    first = CountingClient()

    def no_space(self: RunStore, result: CallResult, verdicts: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        fill_disk_after(m, 3)
        m.setattr(RunStore, "spill", no_space)
        with pytest.raises(StoreFullError, match=r"every answer the store took is kept; \d+ answer\(s\) could not be "
                                                 "kept anywhere and will be sent again") as info:
            run_into(run_dir, first)
    lost = sum(first.sent.values()) - 3
    assert f"; {lost} answer(s) could not be kept" in str(info.value)
    second = CountingClient()
    run_into(run_dir, second)
    assert sum(second.sent.values()) == 18 - 3  # the lost ones are sent again, the stored ones are not
    assert len(stored_calls(run_dir)) == 18


def test_real_sqlite_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's own SQLITE_FULL (a page limit stands in for the disk), not a stand-in exception."""
    original = RunStore.add_jobs

    def capped(self: RunStore, rows: Any) -> None:
        original(self, rows)  # the plan's jobs fit; a few pages more, then the results do not
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        self.db.execute(f"PRAGMA max_page_count={pages + 3}")

    run_dir = tmp_path / "run"
    first = CountingClient()
    with monkeypatch.context() as m:
        m.setattr(RunStore, "add_jobs", capped)
        with pytest.raises(StoreFullError, match="disk full at"):
            run_into(run_dir, first, variants=10, cases=20)
    assert spill_files(run_dir)
    second = CountingClient()
    summary = run_into(run_dir, second, variants=10, cases=20)
    assert summary.replayed > 0 and not spill_files(run_dir)
    assert not (set(first.sent) & set(second.sent))
    assert len(stored_calls(run_dir)) == 200


def test_full_disk_before_any_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(self: RunStore, rows: Any) -> None:
        raise StoreFullError(f"disk full at {tmp_path}")

    client = CountingClient()
    with monkeypatch.context() as m:
        m.setattr(RunStore, "add_jobs", full)
        with pytest.raises(StoreFullError, match="every answer the store took is kept"):
            run_into(tmp_path / "run", client)
    assert not client.sent and not spill_files(tmp_path / "run")


@pytest.mark.slow  # the real scorer's one-time loads
def test_full_disk_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "bfcl_v4", "--dataset", "mini", "--model", MODEL, "--limit", "2", "--variant",
            "python->python,True", "--variant", "json->python,True", "--run-dir", str(tmp_path), "--no-progress"]
    with monkeypatch.context() as m:
        fill_disk_after(m, 1)
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    [line] = [x for x in err.splitlines() if x.startswith("promptgrid: error:")]
    assert f"disk full at {tmp_path}" in line and "re-run the same command" in line
    assert main(argv) == 0
    assert not spill_files(tmp_path)
    assert pg.open_run(tmp_path).counts()["pending"] == 0


def test_spill_note_names_what_went_around_the_store() -> None:
    assert spill_note(RunSummary(sent=3)) == ""
    note = spill_note(RunSummary(sent=3, replayed=2, spilled=4, lost=1))
    assert note == ("2 answer(s) an earlier run spilled on a full disk were stored first (not sent again); "
                    "4 answer(s) the full store could not take are kept in spill-*.jsonl and stored by the next "
                    "run; 1 answer(s) could not be kept anywhere and will be sent again.")


def test_replay_skips_a_cut_line(tmp_path: Path, base_run: Path) -> None:
    run_dir = copy_run(base_run, tmp_path / "run")
    with RunStore(run_dir, readonly=True) as store:
        row = store.db.execute("SELECT * FROM calls LIMIT 1").fetchone()
    call = dict(zip(("key", "model", "repeat", "prompt_sha256", "params", "status", "response", "finish_reason",
                     "input_tokens", "output_tokens", "cost_usd", "latency_s", "attempts", "error", "error_kind",
                     "raw_model"), row, strict=False))  # the columns a spilled line must have; later ones are optional
    call["response"] = "replayed answer"
    good = json.dumps({"call": call, "verdicts": []})
    (run_dir / "spill-1.jsonl").write_text(good + "\n" + good[: len(good) // 2])
    with RunStore(run_dir) as store:
        assert store.replay_spills() == 1
        assert store.call(call["key"])["response"] == "replayed answer"
    assert not spill_files(run_dir)


def test_replay_skips_a_line_whose_fields_have_the_wrong_types(tmp_path: Path, base_run: Path) -> None:
    """A spill file is read back as untrusted: a call whose fields do not have ``Step``'s types (a number for the
    answer, a bool for a token count, a field ``Step`` lacks) or whose verdicts are not a verdict row's is skipped
    (its call is sent again), and a verdict that was not scored (``valid`` None) stays unscored."""
    run_dir = copy_run(base_run, tmp_path / "run")
    with RunStore(run_dir, readonly=True) as store:
        names = [d[0] for d in store.db.execute("SELECT * FROM calls LIMIT 1").description]
        row = store.db.execute("SELECT * FROM calls LIMIT 1").fetchone()
        job = store.db.execute('SELECT model, variant, "case", repeat FROM jobs WHERE key = ?', (row[0],)).fetchone()
    call = {name: value for name, value in zip(names, row, strict=True) if name != "finished_at"}
    lines = [{"call": {**call, "response": 5}, "verdicts": []},
             {"call": {**call, "input_tokens": True}, "verdicts": []},
             {"call": {**call, "unknown": 1}, "verdicts": []},
             {"call": call, "verdicts": [[list(job), {"not": "text"}, True, None]]},
             {"call": {**call, "response": "kept"}, "verdicts": [[list(job), None, None, None]]}]
    (run_dir / "spill-1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with RunStore(run_dir) as store:
        assert store.replay_spills() == 1
        assert store.call(call["key"])["response"] == "kept"
        assert store.validity()[tuple(job)] is None


def test_disk_full_errors_names_the_run_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreFullError, match=f"disk full at {tmp_path}"):
        with disk_full_errors(tmp_path):
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run.json"))
    with pytest.raises(PermissionError):  # anything else is not turned into a full disk
        with disk_full_errors(tmp_path):
            raise PermissionError(errno.EACCES, "Permission denied")


def test_spill_space_is_reserved_before_the_disk_fills(tmp_path: Path) -> None:
    """A disk full for the store is full for a new spill file too: the space is claimed at the start."""
    from promptgrid.matrix.running.store import SPILL_RESERVE

    run_dir = tmp_path / "run"
    with RunStore(run_dir, create=True) as store:
        store.reserve_spill()
        path = store.spill_path
        assert path.stat().st_size == SPILL_RESERVE
        assert path.stat().st_blocks * 512 >= SPILL_RESERVE  # real blocks, not a sparse file
        results = [CallResult(key=f"k{i}", model="m", repeat=0, prompt_sha256="p", params="{}", status="done",
                              response="x" * 1000) for i in range(20)]
        for result in results:
            store.spill(result, [])
        assert path.stat().st_size == SPILL_RESERVE  # written over the reservation: no new block needed
    assert path.exists()  # kept: it holds answers
    with RunStore(run_dir) as store:
        assert store.replay_spills() == 20
        assert sorted(k for (k,) in store.db.execute("SELECT key FROM calls")) == sorted(r.key for r in results)
    assert not path.exists()
    with RunStore(run_dir) as store:  # a run that spilled nothing leaves no file behind
        store.reserve_spill()
        assert store.spill_path.exists()
    assert list(run_dir.glob("spill-*.jsonl")) == []
