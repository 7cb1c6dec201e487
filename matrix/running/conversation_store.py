"""A conversation run's store: ``conversations.sqlite3`` in the run directory.

Two tables. ``steps`` holds every model answer, committed as it arrives,
under the key of the step that got it (``job_key`` over the model, the
generation parameters, the repeat and ``_run._StepKeys``' digest of the
episode's variant and conversation, the step's place and the messages and
request pieces sent): a resumed episode rebuilds its messages from the
stored answers and the environment's (deterministic) results, finds each
step's key here and sends nothing twice. With ``dedupe_requests`` the digest
is the request's alone, so identical requests of different episodes share a
step. ``episodes`` holds each finished (or failed) episode's
``EpisodeResult`` as JSON. ``meta`` keeps the run's description (grid,
dataset, variants with their dimension values) and ``step_keys``, how the
steps are keyed (``_run.STEP_KEYS``; absent in a store written before, whose
steps are keyed by the request alone: the runner then also looks a step up
under that key). The schema is the same either way (version 1), so stores
of either kind open in both releases.

Opened as ``RunStore`` opens ``store.sqlite3`` (``matrix/running/store.py``,
whose helpers it uses): a reader (``ConversationStore(run_dir)``) opens the
file read-only and writes nothing, not even ``-wal``/``-shm`` files; the
schema version is checked before anything is written, so a foreign, damaged
or newer file is left as it was; and every SQLite failure (a corrupt file,
"database is locked", a full disk) is a ``StoreError`` naming the file and
what to do, never a sqlite3 traceback.

A single-turn run's ``store.sqlite3`` is a different file; the two never mix: a run of either kind refuses a
directory that holds the other (``episodes.check_run_dir_kind``, which both runners ask under their run lock).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from promptgrid.errors import RunError, StoreError
from promptgrid.matrix.running.results import EpisodeResult
from promptgrid.matrix.running.store import (
    _BATCH_SCHEMA,
    BatchLedger,
    SpillFile,
    _connect_readonly,
    _guarded,
    _open_checked,
    _store_error,
    spilled,
)
from promptgrid.records import Step

__all__ = ["CONVERSATION_STORE", "ConversationStore", "is_conversation_run", "StoredStep"]

CONVERSATION_STORE = "conversations.sqlite3"


def is_conversation_run(run_dir: str | os.PathLike[str]) -> bool:
    """Whether ``run_dir`` holds a conversation run (its store, and no single-turn run store beside it)."""
    from promptgrid.matrix.running.store import STORE_FILE

    path = Path(run_dir)
    return (path / CONVERSATION_STORE).is_file() and not (path / STORE_FILE).is_file()

_SCHEMA_VERSION = 1
_TABLES = frozenset({"meta", "steps", "episodes"})
_NOT_A_STORE = ("{path} is not a promptgrid conversation store (tables: {tables}). Give a run directory a promptgrid "
                "conversation run wrote, or move the file aside.")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, response TEXT NOT NULL, finish_reason TEXT,
    input_tokens INTEGER, output_tokens INTEGER, cost_usd REAL, latency_s REAL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    model TEXT NOT NULL, variant_id TEXT NOT NULL, conversation_id TEXT NOT NULL, repeat INTEGER NOT NULL,
    valid INTEGER, result TEXT NOT NULL, PRIMARY KEY (model, variant_id, conversation_id, repeat));
"""


StoredStep = Step
_SPILLED = ("response", "finish_reason", "input_tokens", "output_tokens", "cost_usd", "latency_s")
"""What a spilled step keeps (the columns of ``steps``)."""


def _spilled_step(value: Any) -> tuple[str, str, Step] | None:
    """(key, model, step) of one spill line (``ConversationStore.spill``); ``None`` for a line that is not one, or
    whose fields have the wrong types (the file is read back as untrusted: its step is then sent again)."""
    record = value.get("step") if isinstance(value, dict) else None
    if not isinstance(record, dict):
        return None
    key, model, response, finish = (record.get(k) for k in ("key", "model", "response", "finish_reason"))
    numbers = {k: record.get(k) for k in ("input_tokens", "output_tokens", "cost_usd", "latency_s")}
    if not (isinstance(key, str) and isinstance(model, str) and isinstance(response, str)
            and (finish is None or isinstance(finish, str))
            and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in numbers.values())
            and all(numbers[k] is None or isinstance(numbers[k], int) for k in ("input_tokens", "output_tokens"))):
        return None
    return key, model, Step(response=response, finish_reason=finish, input_tokens=numbers["input_tokens"],
                            output_tokens=numbers["output_tokens"], cost_usd=numbers["cost_usd"],
                            latency_s=numbers["latency_s"])
"""A conversation run's stored model answer: the one ``Step`` record (``promptgrid.records``), by its name here
(``response``: text, or the native envelope; a stored step always has one)."""


class ConversationStore(BatchLedger):
    """``conversations.sqlite3`` of a run directory.

    ``create=True`` (the runner) opens it for writing, making it when it is
    missing; without it (readers: ``ConversationRun``, ``promptgrid status``)
    the store must exist and is opened read-only (``readonly``: ``not create``
    unless given; ``readonly=False`` writes to an existing store).
    """

    def __init__(self, run_dir: str | os.PathLike[str], *, create: bool = False,
                 readonly: bool | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / CONVERSATION_STORE
        self.readonly = not create if readonly is None else readonly
        if create and self.readonly:
            raise ValueError("a conversation store cannot be created read-only")
        if not self.path.is_file() and not create:
            raise RunError(f"{self.run_dir} holds no conversation run ({CONVERSATION_STORE} is missing). Start one "
                           "with: promptgrid run GRID --dataset bfcl:multi_turn_base --model ... --run-dir DIR")
        self._copy: Path | None = None  # a read-only store's private copy (see _connect_readonly)
        self._spill = SpillFile(self.run_dir)  # answers a full disk keeps out of the store (``spill``)
        self._hashes: set[int] | None = None  # the writer's stored step keys, by hash (``_step_hashes``)
        self._tables: set[str] | None = None  # BatchLedger's table names, read when first needed
        if self.readonly:
            self.db, self._copy = _connect_readonly(self.path)
        else:
            try:
                self.run_dir.mkdir(parents=True, exist_ok=True)
                self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0, check_same_thread=False)
            except OSError as exc:
                raise StoreError(f"cannot create {self.run_dir} ({exc}). Check that its parent is writable and the "
                                 "disk has room.") from None
            except sqlite3.Error as exc:
                raise _store_error(self.path, exc) from None
        try:
            self._open(create=create)
        except BaseException:
            self.close()
            raise

    @_guarded
    def _open(self, *, create: bool) -> None:
        """Check that the file is a conversation store this version reads (making it if asked and empty)."""
        tables = _open_checked(self.db, self.path, create=create, readonly=self.readonly, version=_SCHEMA_VERSION,
                               kind="conversation store", not_store=_NOT_A_STORE, required=_TABLES)
        if not self.readonly and not tables:  # the tables and the version in one transaction: no half store
            self.db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} INSERT OR IGNORE INTO meta VALUES "
                                  f"('schema_version', '{_SCHEMA_VERSION}'); COMMIT;")
        if not self.readonly:
            # The batch ledger's tables (``--batch``), added to a store of any earlier release as it is opened for
            # writing: additive, so that release still reads the store; a reader of a store without them sees
            # no batches.
            self.db.executescript(_BATCH_SCHEMA)
            self._tables = None

    def close(self) -> None:
        self._spill.close()
        self.db.close()
        if self._copy is not None:
            shutil.rmtree(self._copy, ignore_errors=True)
            self._copy = None

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ meta

    @_guarded
    def set_meta(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value, ensure_ascii=False)))

    @_guarded
    def meta(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else self._decoded(row[0], f"the meta row {key!r}")

    @_guarded
    def verify(self) -> None:
        """Decode every meta and episode row (a damaged one is a ``StoreError`` naming it): a run calls this
        before it writes anything, so a damaged store is left exactly as it was."""
        for key, text in self.db.execute("SELECT key, value FROM meta"):
            self._decoded(text, f"the meta row {key!r}")
        for rowid, text in self.db.execute("SELECT rowid, result FROM episodes"):
            self._episode_from(text, f"episode row {rowid}")

    def _decoded(self, text: Any, what: str) -> Any:
        """A stored JSON text, parsed within ``safeio``'s bounds (depth, number size, finite numbers); a damaged
        one is a ``StoreError`` naming the file and the row, and the file is left as it is."""
        from promptgrid.safeio import parse_json_line

        try:
            if not isinstance(text, str):
                raise ValueError(f"it holds {type(text).__name__}, not JSON text")
            return parse_json_line(text)
        except ValueError as exc:
            raise StoreError(f"{self.path}: {what} is damaged ({exc}). The file was left as it is; restore it from "
                             "a copy, or give another --run-dir.") from None

    def _episode_from(self, text: Any, where: str) -> EpisodeResult:
        data = self._decoded(text, where)
        try:
            return EpisodeResult.from_dict(data)
        except (TypeError, ValueError, AttributeError) as exc:
            raise StoreError(f"{self.path}: {where} does not hold an episode this promptgrid reads ({exc}): damaged, "
                             "or written by a newer promptgrid. The file was left as it is; use the promptgrid that "
                             "wrote it, or another --run-dir.") from None

    @_guarded
    def add_variants(self, variants: Mapping[str, Mapping[str, str]]) -> None:
        """Record variant ids with their dimension values (kept from earlier runs into the same directory)."""
        known = dict(self.meta("variants", {}))
        known.update({vid: dict(dims) for vid, dims in variants.items()})
        self.set_meta("variants", known)

    @_guarded
    def variants(self) -> dict[str, dict[str, str]]:
        return dict(self.meta("variants", {}))

    # ----------------------------------------------------------------- steps

    @_guarded
    def step(self, key: str) -> Step | None:
        if not self.readonly and hash(key) not in self._step_hashes():
            return None  # never stored: no query (the runner asks for every step it plays, mostly new ones)
        row = self.db.execute("SELECT model, response, finish_reason, input_tokens, output_tokens, cost_usd, "
                              "latency_s FROM steps WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        model, response, finish_reason, input_tokens, output_tokens, cost_usd, latency_s = row
        return Step(key=key, model=model, response=response, finish_reason=finish_reason, input_tokens=input_tokens,
                    output_tokens=output_tokens, cost_usd=cost_usd, latency_s=latency_s)

    def _step_hashes(self) -> set[int]:
        """The ``hash`` of every stored step key, read once by the writer (the only one: ``run.lock``) and kept up
        to date by ``add_step``; a hash that is absent means the key is absent, a present one is looked up (hash
        collisions cost a query, never a wrong answer). 8 bytes and a set slot per step, not the key."""
        if self._hashes is None:
            self._hashes = {hash(key) for (key,) in self.db.execute("SELECT key FROM steps")}
        return self._hashes

    @property
    def spill_path(self) -> Path:
        """This process's spill file (``spill-<pid>.jsonl`` beside the store)."""
        return self._spill.path

    def reserve_spill(self) -> None:
        """Claim disk for the answers a disk that fills mid-run keeps out of the store (``SpillFile.reserve``)."""
        self._spill.reserve()

    def spill(self, key: str, model: str, step: Step) -> None:
        """Keep an answer ``add_step`` could not commit (a full disk) in the spill file, on disk: the next run stores
        it (``replay_spills``) instead of sending its step again. Raises ``OSError`` when even this fails."""
        self._spill.write({"step": {"key": key, "model": model, **{name: getattr(step, name) for name in _SPILLED}}})

    @_guarded
    def replay_spills(self) -> int:
        """Store the answers earlier runs spilled (``spill``), then delete their files; returns how many. Called by
        a run before any episode plays, so a spilled answer is never sent again; a line that cannot be read (cut
        short when the disk filled) is skipped, and its step is sent again. On a disk still full this raises
        ``StoreFullError`` and keeps the files for the next try."""
        replayed = 0
        for path, values in spilled(self.run_dir):
            steps = [step for step in map(_spilled_step, values) if step is not None]
            with self._transaction():
                for key, model, step in steps:
                    self.add_step(key, model, step)
            path.unlink()
            replayed += len(steps)
        return replayed

    @_guarded
    def add_step(self, key: str, model: str, step: Step) -> None:
        """Commit one answer now (a killed run keeps every answer it got)."""
        self.db.execute("INSERT OR IGNORE INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (key, model, step.response, step.finish_reason, step.input_tokens, step.output_tokens,
                         step.cost_usd, step.latency_s, time.time()))
        if self._hashes is not None:
            self._hashes.add(hash(key))

    @_guarded
    def spend(self) -> float:
        """USD recorded for every answer stored in the run directory (unknown prices count 0; a step shared by
        several episodes was paid once and counts once): what ``--max-cost`` caps."""
        return float(self.db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM steps").fetchone()[0])

    @_guarded
    def step_count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM steps").fetchone()[0])

    @_guarded
    def episode_count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])

    # -------------------------------------------------------------- episodes

    @_guarded
    def episode(self, model: str, variant_id: str, conversation_id: str, repeat: int) -> EpisodeResult | None:
        row = self.db.execute("SELECT result FROM episodes WHERE model = ? AND variant_id = ? AND conversation_id = ? "
                              "AND repeat = ?", (model, variant_id, conversation_id, repeat)).fetchone()
        return None if row is None else self._episode_from(
            row[0], f"the episode row of ({model}, {variant_id}, {conversation_id}, repeat {repeat})")

    @_guarded
    def add_episode(self, result: EpisodeResult) -> None:
        self.db.execute("INSERT OR REPLACE INTO episodes VALUES (?, ?, ?, ?, ?, ?)",
                        (result.model, result.variant_id, result.conversation_id, result.repeat,
                         None if result.valid is None else int(result.valid),
                         json.dumps(result.to_dict(), ensure_ascii=False, default=str)))

    @_guarded
    def episodes(self, *, models: Iterable[str] | None = None) -> list[EpisodeResult]:
        """Every stored episode, in (model, variant, conversation, repeat) order."""
        wanted = None if models is None else set(models)
        out = []
        for rowid, text in self.db.execute("SELECT rowid, result FROM episodes ORDER BY model, variant_id, "
                                           "conversation_id, repeat"):
            result = self._episode_from(text, f"episode row {rowid}")
            if wanted is None or result.model in wanted:
                out.append(result)
        return out
