"""The store of a run directory, of either kind: one SQLite file, one class, each result committed as it arrives.

Split by concern: ``connection`` opens the file (read-only readers, the schema and its check, one
``StoreError`` per SQLite failure, the run directory's lock); ``ledger`` records provider batches and spills
the answers a full disk keeps out; ``store_episodes`` holds a conversation run's episodes and steps (the same
tables, in ``conversations.sqlite3``) and its file's migration; this module holds the one class,
``RunStore``, a single-turn run's jobs, and the queries its readers ask. The names of the first two are
re-exported here.

Layout (``store.sqlite3``, schema ``SCHEMA_VERSION``)::

    calls     one row per model call, by job key: response or final error,
              tokens, latency, cost, attempts (the cache: never paid twice)
    jobs      one row per (model, variant, case, repeat): the key of the call
              that answers it, and its verdict (many jobs may share a call)
    models, variants, cases   what the ids mean (cases in full, so re-scoring
              needs neither the dataset nor the grid)

Durability: WAL with ``synchronous=NORMAL``. A result is committed as it
arrives (``record``; the runner commits the results that arrive in one turn
of its event loop in one transaction, ``record_all``); at COMMIT the WAL
frames are written to the OS, so a killed process (SIGKILL, OOM, Ctrl-C)
loses nothing that was committed. Only an OS
crash or power loss can drop the last transactions before the next
checkpoint's fsync; FULL would fsync every result, costing more than the
calls it protects on a busy run, for a failure the resumed run repairs by
sending those few calls again.

Concurrency: one writer per run directory, enforced by ``RunLock`` (an
``fcntl`` lock on ``run.lock``, released by the kernel when the process dies,
so a killed run never leaves a stale lock). A second ``promptgrid run`` on the
same directory stops at once with a message instead of racing the first;
readers (``export``, ``report``) need no lock (WAL readers see the last
commit).

Damage and a full disk: any SQLite failure, when the store is opened or
later when its rows are read (a truncated file often fails only there), is a
``StoreError`` naming the file and what to do, never a sqlite3 traceback. A
full disk while a result is committed is a ``StoreFullError``; the runner
then appends the answer to ``spill-<pid>.jsonl`` beside the store (``spill``)
and stops, and the next run in the directory adds the spilled answers to the
store before it plans anything (``replay_spills``), so no answered call is
sent again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from promptgrid.errors import RunError, StoreError
from promptgrid.matrix.running.results import ResultRow
from promptgrid.records import Case, Step
from promptgrid.variants import Variant

from .connection import (
    _SCHEMA,
    DONE,
    LOCK_FILE,
    STORE_FILE,
    RunLock,
    _chunks,
    _connect_readonly,
    _guarded,
    _guarded_iter,
    _open_checked,
    _store_error,
    disk_full_errors,
)
from .ledger import (
    _BATCH_SCHEMA,
    COLLECTED,
    ENDED,
    EXPORTED,
    LIVE_BATCH_STATES,
    PREPARING,
    SPILL_GLOB,
    SPILL_RESERVE,
    SUBMITTED,
    UPLOADED,
    BatchJob,
    BatchLedger,
    BatchRecord,
    SpillFile,
    StoreFile,
    disk_full_stop,
    spilled,
)
from .store_episodes import (
    _MISSING_EPISODES,
    _NOT_A_STORE,
    _TABLES,
    CONVERSATION_STORE,
    EpisodeRows,
    _Ids,
)
from .store_episodes import _SCHEMA_VERSION as _EPISODES_VERSION

__all__ = ["BatchJob", "BatchRecord", "CallResult", "LIVE_BATCH_STATES", "RunLock", "RunStore", "SCHEMA_VERSION",
           "MAX_ERROR_CHARS", "SPILL_GLOB", "STORE_FILE", "bounded_error", "case_from_dict",
           "case_to_dict", "SpillFile", "stored_records", "disk_full_errors", "disk_full_stop",
           "spilled",
           # The batch states and the lock file, re-exported from ``ledger`` and ``connection`` with the rest.
           "COLLECTED", "ENDED", "EXPORTED", "LOCK_FILE", "PREPARING", "SPILL_RESERVE", "SUBMITTED", "UPLOADED",
           "BatchLedger"]

SCHEMA_VERSION = 1
RUN_JSON = "run.json"
"""The run's record beside its store: every invocation's config, grid and dataset (``session``)."""
#: The longest error text stored for a call, in characters. A provider's error (its code and message: a
#: batch line, a server's 400 body) is cut there, with the number of characters left out appended, so a
#: provider that answers with a 100 KB error code cannot fill the store, the report or the terminal.
MAX_ERROR_CHARS = 2000



VerdictRow = tuple[tuple[int, int, int, int], str | None, bool | None, str | None]
"""A job row (model, variant, case, repeat ids), its verdict JSON, valid (None: no verdict), error code."""

ERROR = "error"
UNSUPPORTED = "unsupported"
"""A call never sent: its model cannot do its call mode (the reason in ``error``; no verdict, out of the rates)."""
_NO_VERDICT: Mapping[str, Any] = {}  # a failed or pending call has none: the verdict fields keep their defaults
_NO_DETAILS: Mapping[str, Any] = {}  # a job has no episode details (shared by every row: read, never mutated)


CallResult = Step
"""A single-turn run's stored call: the one ``Step`` record (``promptgrid.records``), by its name here."""


def case_to_dict(case: Case) -> dict[str, Any]:
    return {"id": case.id, "category": case.category, "turns": [dict(t) for t in case.turns],
            "functions": list(case.functions), "ground_truth": list(case.ground_truth),
            "language": case.language, "group": case.group, "source": case.source, "extra": dict(case.extra)}


def stored_records(store: RunStore) -> tuple[dict[int, Variant], dict[int, Case]]:
    """The store's variants and cases by their ids (what re-scoring and batch collection score with)."""
    variants = {i: Variant(**dims) for i, (_vid, _label, dims) in store.variants().items()}
    cases = {i: case_from_dict(json.loads(row[4])) for i, row in store.cases().items()}
    return variants, cases


def case_from_dict(d: Mapping[str, Any]) -> Case:
    return Case(id=d["id"], category=d["category"], turns=tuple(d["turns"]), functions=tuple(d["functions"]),
                ground_truth=tuple(d["ground_truth"]), language=d.get("language", "en"),
                group=d.get("group", ""), source=d.get("source", ""), extra=d.get("extra") or {})


def conversation_store(run_dir: str | os.PathLike[str], *, create: bool = False,
                       readonly: bool | None = None) -> RunStore:
    """The ``RunStore`` of a conversation run's directory (``conversations.sqlite3``).

    ``create=True`` (the runner) opens it for writing, making it when it is missing; without it (readers:
    ``ConversationRun``, ``promptgrid status``) the store must exist and is opened read-only (``readonly``:
    ``not create`` unless given; ``readonly=False`` writes to an existing store).
    """
    return RunStore(Path(run_dir) / CONVERSATION_STORE, create=create,
                    readonly=not create if readonly is None else readonly)


def bounded_error(text: str | None, limit: int = MAX_ERROR_CHARS) -> str | None:
    """``text`` cut to ``limit`` characters (``MAX_ERROR_CHARS`` for an error message), saying how much was cut."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters cut]"


_ANNOTATED: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "str | None": (str, type(None)),
                                           "int | None": (int, type(None)), "float | None": (int, float, type(None))}
_STEP_TYPES: dict[str, tuple[type, ...]] = {f.name: _ANNOTATED[str(f.type)] for f in dataclasses.fields(Step)}
"""The types a spilled call's fields must have: ``Step``'s annotations (an int taken for a float). A field of
another annotation fails here, at import, until it is named in ``_ANNOTATED``."""


def _spilled_entry(value: Any, *, episodic: bool) -> tuple[Step, list[VerdictRow]] | None:
    """A spill line's (call, job verdicts) (``RunStore.spill``), or an episode step a conversation store of an
    earlier release spilled (``{"step": ...}``); ``None`` for a line that is neither, whose fields have the wrong
    types, or that does not fit the store (an answer without its text; in a conversation run's store, ``episodic``,
    anything but an answered step without verdicts): its call is then sent again."""
    if not isinstance(value, dict):
        return None
    if "step" in value:  # an earlier release's line: an answered step, checked as a call is
        value = {"call": value["step"], "verdicts": []}
    call, verdicts = value.get("call"), value.get("verdicts")
    if not isinstance(call, dict) or not isinstance(verdicts, list) or set(call) - set(_STEP_TYPES):
        return None
    if not all(isinstance(call.get(name), str) and call[name] for name in ("key", "model")):
        return None  # a call is stored under its key, for its model
    status = call.get("status", DONE)
    if (status == DONE and not isinstance(call.get("response"), str)) or (episodic and (status != DONE or verdicts)):
        return None
    for name, kinds in _STEP_TYPES.items():
        if name in call and (not isinstance(call[name], kinds) or isinstance(call[name], bool)):
            return None
    try:
        rows: list[VerdictRow] = [((int(row[0]), int(row[1]), int(row[2]), int(row[3])), v,
                                   None if ok is None else bool(ok), code) for row, v, ok, code in verdicts]
    except (TypeError, ValueError, IndexError):
        return None
    if not all(isinstance(text, (str, type(None))) for _row, v, _ok, code in rows for text in (v, code)):
        return None
    return Step(**call), rows


def _misnamed(db: sqlite3.Connection, path: Path, *, episodic: bool) -> str | None:
    """Why the file is the other kind's store under this kind's name (a file renamed or copied by hand), or
    ``None``. Both kinds have the same tables; their schema versions differ (a single-turn store's is
    ``SCHEMA_VERSION``, a conversation store's ``_EPISODES_VERSION``), so without this a conversation store named
    ``store.sqlite3`` read as "newer than this promptgrid reads". Nothing is written."""
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not _TABLES <= tables:
        return None
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    other = SCHEMA_VERSION if episodic else _EPISODES_VERSION
    if row is None or str(row[0]) != str(other):
        return None
    kind, name = ("a single-turn run's", STORE_FILE) if episodic else ("a conversation run's", CONVERSATION_STORE)
    return (f"{path} holds {kind} store (schema {other}) under the name {path.name}, but {kind} store is named "
            f"{name}. The file was left as it is; rename it back, or give the run directory it came from.")


_NOT_A_RUN_STORE = ("{path} is not a promptgrid run store (a SQLite file without its schema version; tables: "
                    "{tables}). Give the directory a promptgrid run wrote, or move the file aside.")


class RunStore(StoreFile, EpisodeRows):
    """The store of a run directory, of either kind: one class, one schema (``_SCHEMA``).

    ``path``: the run directory or the file itself. A single-turn run's file
    is ``store.sqlite3`` (the directory's default), a conversation run's
    ``conversations.sqlite3`` (``conversation_store`` opens it): the file's
    name says which kind of run the directory holds (``episodes.check_run_dir_kind``
    keeps the two from mixing) and which schema versions it reads. Split by
    concern: this module holds the class, a single-turn run's jobs and the
    queries its readers ask; ``store_episodes.EpisodeRows`` a conversation
    run's episodes and steps and its file's migration; ``ledger`` the provider
    batches and the spill file; ``connection`` the connection, the schema
    check and the lock.

    ``readonly=True`` opens it for reading only (see ``_connect_readonly``):
    what ``promptgrid.open_run`` uses, also on a read-only copy of a run.
    ``create=True`` makes the file when it is missing.
    """

    def __init__(self, path: str | Path, *, create: bool = False, readonly: bool = False) -> None:
        p = Path(path)
        self.path = p / STORE_FILE if p.suffix != ".sqlite3" else p
        self.run_dir = self.path.parent
        self.episodic = self.path.name == CONVERSATION_STORE
        """A conversation run's file: its episodes are ``EpisodeRows``' (schema version 2, migrated from 1)."""
        self.readonly = readonly
        if create and readonly:
            raise ValueError("a store cannot be created read-only")
        if not self.path.is_file() and not create:
            raise RunError(_MISSING_EPISODES.format(run_dir=self.run_dir) if self.episodic else
                           f"{p} is not a run directory (no {STORE_FILE}). Start one with: promptgrid run ...")
        self._model_ids: dict[str, int] = {}
        self._copy: Path | None = None  # a read-only store's private copy (see _connect_readonly)
        self._spill = SpillFile(self.run_dir)  # answers a full disk keeps out of the store (``spill``)
        self._tables: set[str] | None = None  # table names, read once (``_has_table``)
        self._hashes: set[int] | None = None  # the writer's stored step keys, by hash (``EpisodeRows.step``)
        self._episode_ids: _Ids | None = None  # the writer's model, variant and case ids (``add_episode``)
        if readonly:
            self.db, self._copy = _connect_readonly(self.path)
        else:
            try:
                self.run_dir.mkdir(parents=True, exist_ok=True)
                # Not bound to the opening thread: a transcript plays on a worker thread's event loop.
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
        """Set the connection up and check that the file is a store this version reads (making it, tables and
        version in one transaction, if asked and empty); a conversation store of version 1 is migrated first."""
        misnamed = _misnamed(self.db, self.path, episodic=self.episodic)
        if misnamed is not None:
            raise StoreError(misnamed)
        if self.episodic:
            self._migrate_legacy()
            version, kind, not_store, required = _EPISODES_VERSION, "conversation store", _NOT_A_STORE, _TABLES
        else:
            version, kind, not_store, required = SCHEMA_VERSION, "store", _NOT_A_RUN_STORE, frozenset()
        tables = _open_checked(self.db, self.path, create=create, readonly=self.readonly, version=version, kind=kind,
                               not_store=not_store, required=required)
        if create and not tables:
            self.db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} INSERT OR IGNORE INTO meta VALUES "
                                  f"('schema_version', '{version}'); COMMIT;")
        if not self.readonly:
            self._upgrade()

    def _upgrade(self) -> None:
        """Add what later versions of the schema have (tables, nullable columns) to a store that lacks it.

        Additive only, so an older promptgrid still reads the store (it ignores what it does not know).
        """
        self.db.executescript(_BATCH_SCHEMA)
        if "endpoint" not in self._call_columns():
            self.db.execute("ALTER TABLE calls ADD COLUMN endpoint TEXT")  # appended: INSERT's positions hold
        self._tables = None

    def _call_columns(self) -> set[str]:
        """The columns of ``calls`` (a read-only store of an older version may lack ``endpoint``)."""
        return {row[1] for row in self.db.execute("PRAGMA table_info(calls)")}

    # ------------------------------------------------------------------ metadata

    def _ids(self, table: str, column: str, values: Iterable[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for chunk in _chunks(list(dict.fromkeys(values))):
            marks = ",".join("?" * len(chunk))
            out.update(self.db.execute(f"SELECT {column}, id FROM {table} WHERE {column} IN ({marks})", chunk))
        return out

    @_guarded
    def add_models(self, names: Iterable[str]) -> dict[str, int]:
        names = list(names)
        with self._transaction():
            self.db.executemany("INSERT OR IGNORE INTO models (name) VALUES (?)", [(n,) for n in names])
        ids = self._ids("models", "name", names)
        self._model_ids.update(ids)
        return ids

    @_guarded
    def add_variants(self, variants: Iterable[Variant],
                     dimensions: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, int]:
        """Record the variants (id, label, dimension values: ``dimensions[id]`` where given, else
        ``Variant.dimensions()``) and return their ids. A variant recorded by an earlier run into the same
        directory takes its latest dimension values, and its latest label unless that is empty: a grid relabelled
        (``label:`` in its YAML) and re-run reports the new one."""
        rows = [(v.id, v.label, json.dumps(dict(dimensions[v.id]) if dimensions is not None else v.dimensions(),
                                           ensure_ascii=False)) for v in variants]
        with self._transaction():
            self.db.executemany("INSERT INTO variants (variant_id, label, dimensions) VALUES (?, ?, ?) "
                                "ON CONFLICT(variant_id) DO UPDATE SET dimensions=excluded.dimensions, label="
                                "CASE WHEN excluded.label = '' THEN label ELSE excluded.label END", rows)
        return self._ids("variants", "variant_id", (r[0] for r in rows))

    @_guarded
    def add_cases(self, cases: Iterable[Case]) -> dict[str, int]:
        rows = [(c.id, c.language, c.category, c.group, json.dumps(case_to_dict(c), default=str)) for c in cases]
        with self._transaction():
            # A case whose content changed (dataset fix) replaces the stored one: re-scoring uses the latest.
            self.db.executemany(
                "INSERT INTO cases (case_id, language, category, grp, data) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(case_id) DO UPDATE SET language=excluded.language, category=excluded.category, "
                "grp=excluded.grp, data=excluded.data", rows)
        return self._ids("cases", "case_id", (r[0] for r in rows))

    @_guarded
    def variants(self) -> dict[int, tuple[str, str, dict[str, Any]]]:
        return {i: (vid, label, json.loads(dims))
                for i, vid, label, dims in self.db.execute("SELECT id, variant_id, label, dimensions FROM variants")}

    @_guarded
    def cases(self) -> dict[int, tuple[str, str, str, str, str]]:
        return {row[0]: row[1:]
                for row in self.db.execute("SELECT id, case_id, language, category, grp, data FROM cases")}

    @_guarded
    def stored_ids(self) -> tuple[set[str], set[str]]:
        """The variant ids and the case ids the store holds (what ``session.check_run_dir`` compares)."""
        return ({vid for (vid,) in self.db.execute("SELECT variant_id FROM variants")},
                {cid for (cid,) in self.db.execute("SELECT case_id FROM cases")})

    # ------------------------------------------------------------------ jobs and calls

    @_guarded
    def add_jobs(self, rows: Sequence[tuple[int, int, int, int, str]]) -> None:
        """Upsert (model, variant, case, repeat, key). A row whose key changed loses its verdict."""
        with self._transaction():
            self.db.executemany(
                'INSERT INTO jobs (model, variant, "case", repeat, key) VALUES (?, ?, ?, ?, ?) '
                'ON CONFLICT (model, variant, "case", repeat) DO UPDATE SET key=excluded.key, verdict=NULL, '
                "valid=NULL, error_code=NULL WHERE jobs.key != excluded.key", rows)

    @_guarded
    def lookup(self, keys: Sequence[str]) -> dict[str, str]:
        """Status (done or error) of the calls among ``keys`` that have a result."""
        out: dict[str, str] = {}
        for chunk in _chunks(keys):
            marks = ",".join("?" * len(chunk))
            out.update(self.db.execute(f"SELECT key, status FROM calls WHERE key IN ({marks})", chunk))
        return out

    @_guarded
    def scored(self, keys: Sequence[str]) -> set[tuple[int, int, int, int]]:
        """The (model, variant, case, repeat) rows answered by ``keys`` that already have a verdict."""
        out: set[tuple[int, int, int, int]] = set()
        for chunk in _chunks(keys):
            marks = ",".join("?" * len(chunk))
            out.update(self.db.execute(
                f'SELECT model, variant, "case", repeat FROM jobs WHERE key IN ({marks}) AND valid IS NOT NULL',
                chunk))
        return out

    @_guarded
    def outcomes(self, rows: Sequence[tuple[int, int, int, int]]) -> dict[tuple[int, int, int, int], bool | None]:
        """Of the (model, variant, case, repeat) ``rows``, those whose call has a result (done, error or
        unsupported), with their verdict: True correct, False wrong or failed, None unscored or unsupported."""
        out: dict[tuple[int, int, int, int], bool | None] = {}
        for chunk in _chunks(rows, 200):
            values = ",".join("(?, ?, ?, ?)" * 1 for _ in chunk)
            flat = [x for row in chunk for x in row]
            for m, v, c, r, valid in self.db.execute(
                    'SELECT j.model, j.variant, j."case", j.repeat, j.valid FROM jobs j JOIN calls k ON k.key = j.key '
                    f'WHERE (j.model, j.variant, j."case", j.repeat) IN (VALUES {values})', flat):
                out[(m, v, c, r)] = None if valid is None else bool(valid)
        return out

    @_guarded
    def model_outcomes(self, model: str) -> dict[tuple[str, str, int], bool | None]:
        """(variant id, case id, repeat) -> verdict of every job of ``model`` whose call has a result (as
        ``outcomes``); works on a read-only store."""
        return {(v, c, r): None if valid is None else bool(valid) for v, c, r, valid in self.db.execute(
            'SELECT v.variant_id, k.case_id, j.repeat, j.valid FROM jobs j JOIN models m ON m.id = j.model '
            'JOIN variants v ON v.id = j.variant JOIN cases k ON k.id = j."case" JOIN calls c ON c.key = j.key '
            "WHERE m.name = ?", (model,))}

    @_guarded
    def call(self, key: str) -> dict[str, Any] | None:
        cur = self.db.execute("SELECT * FROM calls WHERE key=?", (key,))
        row = cur.fetchone()
        if row is None:
            return None
        return dict(zip([d[0] for d in cur.description], row, strict=True))

    @_guarded
    def record(self, result: CallResult, verdicts: Sequence[VerdictRow]) -> None:
        """Commit one call's result and the verdicts of the jobs it answers, atomically.

        A full disk raises ``StoreFullError`` (nothing of this call committed): ``spill`` it.
        """
        self._commit_result(result, verdicts)

    @_guarded
    def record_all(self, entries: Sequence[tuple[CallResult, Sequence[VerdictRow]]]) -> None:
        """``record`` for several results in one transaction (all of them or, on a failure, none).

        The runner commits the results that arrive in one turn of its event loop together: one commit
        instead of one per result.
        """
        with self._transaction():
            for result, verdicts in entries:
                self._insert_result(result, verdicts)

    def _commit_result(self, result: CallResult, verdicts: Sequence[VerdictRow]) -> None:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            self._insert_result(result, verdicts)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _insert_result(self, result: CallResult, verdicts: Sequence[VerdictRow]) -> None:
        """Write one call's result and its jobs' verdicts inside the caller's transaction."""
        r = result
        db = self.db
        db.execute(
            "INSERT OR REPLACE INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (r.key, r.model, r.repeat, r.prompt_sha256, r.params, r.status, r.response, r.finish_reason,
             r.input_tokens, r.output_tokens, r.cost_usd, r.latency_s, r.attempts, bounded_error(r.error),
             r.error_kind, r.raw_model, time.time(), r.endpoint))
        if self._hashes is not None:
            self._hashes.add(hash(r.key))
        if verdicts:
            db.executemany(
                'UPDATE jobs SET verdict=?, valid=?, error_code=? WHERE model=? AND variant=? AND "case"=? '
                "AND repeat=?",
                [(v, None if ok is None else int(ok), code, *row) for row, v, ok, code in verdicts])

    @_guarded
    def job_rows(self, keys: Sequence[str]) -> dict[str, list[tuple[int, int, int, int]]]:
        """The (model, variant, case, repeat) rows each of ``keys`` answers."""
        out: dict[str, list[tuple[int, int, int, int]]] = {}
        for chunk in _chunks(keys):
            marks = ",".join("?" * len(chunk))
            for m, v, c, r, key in self.db.execute(
                    f'SELECT model, variant, "case", repeat, key FROM jobs WHERE key IN ({marks})', chunk):
                out.setdefault(key, []).append((m, v, c, r))
        return out

    @_guarded
    def record_many(self, entries: Sequence[tuple[CallResult, Sequence[VerdictRow]]], *,
                    keep_answers: bool = True) -> int:
        """Commit several results in one transaction; returns how many were written.

        With ``keep_answers`` a key that already has an answer (status done)
        is left as it is: collecting a batch's results again (a resumed
        collection, a second import of the same file) changes nothing.
        """
        written = 0
        with self._transaction():
            for result, verdicts in entries:
                if keep_answers:
                    row = self.db.execute("SELECT status FROM calls WHERE key=?", (result.key,)).fetchone()
                    if row is not None and row[0] == DONE:
                        continue
                self._insert_result(result, verdicts)
                written += 1
        return written

    # ------------------------------------------------------------------ full disk: spill and replay

    @property
    def spill_path(self) -> Path:
        """This process's spill file (``spill-<pid>.jsonl`` beside the store; it exists once ``spill`` wrote)."""
        return self._spill.path

    def reserve_spill(self, size: int = SPILL_RESERVE) -> None:
        """Claim ``size`` bytes of disk for ``spill`` now, while there is space (``SpillFile.reserve``)."""
        self._spill.reserve(size)

    def spill(self, result: CallResult, verdicts: Sequence[VerdictRow] = ()) -> None:
        """Write a result that ``record`` (or an episode's ``add_step``: its step, with no job verdicts) could not
        commit to ``spill_path``, as one JSON line, on disk (``SpillFile.write``; raises ``OSError`` when even this
        fails). The next run stores it (``replay_spills``) instead of sending its call again."""
        self._spill.write({"call": dataclasses.asdict(result),
                           "verdicts": [[list(row), v, ok, code] for row, v, ok, code in verdicts]})

    @_guarded
    def replay_spills(self) -> int:
        """Commit the results spilled by earlier runs (``spill``), then delete their files; returns how many.

        Called by a run before it plans anything, so a spilled answer is never
        sent again. A line that cannot be read (cut short when the disk filled,
        or a field of the wrong type: the file is read back as untrusted) is
        skipped: its call is simply sent again. On a disk still full this
        raises ``StoreFullError`` and keeps the files for the next try.
        """
        replayed = 0
        for path, values in spilled(self.run_dir):
            entries = [entry for value in values if (entry := _spilled_entry(value, episodic=self.episodic))]
            with self._transaction():
                for result, verdicts in entries:
                    self._insert_result(result, verdicts)
            path.unlink()
            replayed += len(entries)
        return replayed

    @_guarded
    def set_verdicts(self, verdicts: Sequence[VerdictRow]) -> None:
        if not verdicts:
            return
        with self._transaction():
            self.db.executemany(
                'UPDATE jobs SET verdict=?, valid=?, error_code=? WHERE model=? AND variant=? AND "case"=? '
                "AND repeat=?", [(v, None if ok is None else int(ok), code, *row) for row, v, ok, code in verdicts])

    @_guarded_iter
    def iter_scorable(
        self, *, only_unscored: bool = False, batch: int = 1000
    ) -> Iterator[tuple[tuple[int, int, int, int], str | None, str]]:
        """(job row, response or None, call status) for every job that has a call result."""
        where = " AND j.valid IS NULL" if only_unscored else ""
        cur = self.db.execute(
            'SELECT j.model, j.variant, j."case", j.repeat, c.response, c.status FROM jobs j '
            f"JOIN calls c ON c.key = j.key WHERE 1=1{where}")
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                return
            for m, v, c, r, response, status in rows:
                yield (m, v, c, r), response, status

    # ------------------------------------------------------------------ totals

    @_guarded
    def validity(self) -> dict[tuple[int, int, int, int], int | None]:
        """The stored ``valid`` of every job row (None: unscored), to count what re-scoring changes."""
        return {(m, v, c, r): valid
                for m, v, c, r, valid in self.db.execute('SELECT model, variant, "case", repeat, valid FROM jobs')}

    @_guarded
    def answered(self, models: Iterable[str], variant_ids: Iterable[str], case_ids: Iterable[str],
                 repeats: int) -> int:
        """How many jobs of a plan (these models x variants x cases, repeats ``0..repeats-1``) have a result
        (done or error), whichever run stored it.

        Counted in SQL, as the report counts rows: a run stopped before its producer reached a job
        (``max_cost`` at the start, Ctrl-C) still counts the answers an earlier run stored for it. The plan
        goes into temp tables (one transaction on the temp database only: the store is not locked), so the
        store must be open for writing.
        """
        db = self.db
        plan = {"_plan_models": ("name", models), "_plan_variants": ("variant_id", variant_ids),
                "_plan_cases": ("case_id", case_ids)}
        try:
            db.execute("BEGIN")
            for table, (column, values) in plan.items():
                db.execute(f"CREATE TEMP TABLE {table} ({column} TEXT PRIMARY KEY)")
                db.executemany(f"INSERT OR IGNORE INTO {table} VALUES (?)", ((v,) for v in values))
            db.execute("COMMIT")
            return int(db.execute(
                'SELECT COUNT(*) FROM jobs j JOIN calls c ON c.key = j.key '
                "JOIN models m ON m.id = j.model JOIN _plan_models USING (name) "
                "JOIN variants v ON v.id = j.variant JOIN _plan_variants USING (variant_id) "
                'JOIN cases k ON k.id = j."case" JOIN _plan_cases USING (case_id) '
                "WHERE j.repeat < ?", (repeats,)).fetchone()[0])
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
            for table in plan:
                db.execute(f"DROP TABLE IF EXISTS temp.{table}")

    @_guarded
    def plan_counts(self, models: Iterable[str], variant_ids: Iterable[str], case_ids: Iterable[str],
                    repeats: int) -> dict[str, tuple[int, int]]:
        """Per model of a plan (these models x variants x cases, repeats ``0..repeats-1``): how many of its jobs
        the store holds a row for, and how many of those have a result (done, error or unsupported).

        A plan's jobs are stored as the runner reaches them, so a model stopped early (or a run killed) has
        fewer rows than its plan has jobs: the rest are pending too (``session.plan_status``). The plan goes
        in as JSON arrays (``json_each``), so this works on a read-only store. Models with no row are absent.
        """
        out: dict[str, tuple[int, int]] = {}
        for name, stored, answered in self.db.execute(
                'SELECT m.name, COUNT(*), COUNT(c.key) FROM jobs j JOIN models m ON m.id = j.model '
                "JOIN variants v ON v.id = j.variant JOIN cases k ON k.id = j.\"case\" "
                "LEFT JOIN calls c ON c.key = j.key "
                "WHERE m.name IN (SELECT value FROM json_each(?)) "
                "AND v.variant_id IN (SELECT value FROM json_each(?)) "
                "AND k.case_id IN (SELECT value FROM json_each(?)) AND j.repeat < ? GROUP BY m.name",
                (json.dumps(list(models)), json.dumps(list(variant_ids)), json.dumps(list(case_ids)), repeats)):
            out[name] = (stored, answered)
        return out

    @_guarded
    def spend(self) -> float:
        """USD recorded for all calls of the run directory (unknown prices count 0)."""
        return float(self.db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM calls").fetchone()[0])

    @_guarded
    def counts(self) -> dict[str, int]:
        jobs, done, errors, pending, unsupported = self.db.execute(
            "SELECT COUNT(*), SUM(c.status='done'), SUM(c.status='error'), SUM(c.status IS NULL), "
            "SUM(c.status='unsupported') FROM jobs j LEFT JOIN calls c ON c.key = j.key").fetchone()
        calls, call_errors, retryable = self.db.execute(
            "SELECT COUNT(*), SUM(status='error'), SUM(status='error' AND error_kind IN "
            "('rate_limit','server','timeout','connection','malformed','expired')) FROM calls").fetchone()
        return {"jobs": jobs or 0, "done": done or 0, "errors": errors or 0, "pending": pending or 0,
                "unsupported": unsupported or 0, "calls": calls or 0, "call_errors": call_errors or 0,
                "transient_errors": retryable or 0}

    @_guarded
    def model_counts(self) -> list[tuple[str, int, int, int, int, int]]:
        """(model, jobs, done, errors, pending, unsupported) per model, in store order."""
        return [(name, jobs or 0, done or 0, errors or 0, pending or 0, unsupported or 0)
                for name, jobs, done, errors, pending, unsupported in self.db.execute(
                    "SELECT m.name, COUNT(*), SUM(c.status='done'), SUM(c.status='error'), SUM(c.status IS NULL), "
                    "SUM(c.status='unsupported') FROM jobs j JOIN models m ON m.id = j.model "
                    "LEFT JOIN calls c ON c.key = j.key GROUP BY j.model ORDER BY j.model")]

    @_guarded
    def tally(self) -> list[tuple[str, str, str, int, int, int]]:
        """(model, variant_id, label, answered, valid, errors) per model x variant, in store order.

        ``answered`` counts jobs whose call has a result (done or error); pending
        and unsupported jobs are left out. Counted in SQL, so it costs the same for any run size
        (the end-of-run table; intervals are the report's, ``Run.accuracy()``).
        """
        return list(self.db.execute(
            "SELECT m.name, v.variant_id, v.label, COALESCE(SUM(c.status != 'unsupported'), 0), "
            "COALESCE(SUM(j.valid = 1), 0), "
            "COALESCE(SUM(c.status = 'error'), 0) FROM jobs j JOIN calls c ON c.key = j.key "
            "JOIN models m ON m.id = j.model JOIN variants v ON v.id = j.variant "
            "GROUP BY j.model, j.variant ORDER BY j.model, j.variant"))

    @_guarded
    def mean_cost(self, model: str) -> float | None:
        row = self.db.execute("SELECT AVG(cost_usd), AVG(output_tokens) FROM calls WHERE model=? AND status='done'",
                              (model,)).fetchone()
        return None if row[0] is None else float(row[0])

    # ------------------------------------------------------------------ export

    @_guarded_iter
    def rows(self, *, include_pending: bool = False) -> Iterator[ResultRow]:
        """One ``ResultRow`` per (model, variant, case, repeat) with a result (all of them with
        ``include_pending``), ordered by model, case, variant and repeat.

        Built straight from the SQL row and the stored verdict JSON. ``valid`` and
        ``error_code`` come from their own columns (what re-scoring updates).
        """
        variants = self.variants()
        cases = {i: row[:4] for i, row in self.cases().items()}
        models = {i: n for i, n in self.db.execute("SELECT id, name FROM models")}
        params_of: dict[str, Any] = {}  # one parsed dict per distinct params string (shared by its rows)
        make = ResultRow._make
        loads = json.loads
        join = "LEFT JOIN" if include_pending else "JOIN"
        endpoint = "c.endpoint" if "endpoint" in self._call_columns() else "NULL"  # an older read-only store
        cur = self.db.execute(
            'SELECT j.model, j.variant, j."case", j.repeat, j.key, j.verdict, j.valid, j.error_code, '
            "c.status, c.response, c.error, c.error_kind, c.latency_s, c.input_tokens, c.output_tokens, "
            f"c.cost_usd, c.attempts, c.finish_reason, c.raw_model, {endpoint}, c.params "
            f'FROM jobs j {join} calls c ON c.key = j.key ORDER BY j.model, j."case", j.variant, j.repeat')
        while True:
            batch = cur.fetchmany(500)
            if not batch:
                return
            for (m, v, c, rep, key, verdict, valid, code, status, response, error, kind, latency, tin, tout,
                 cost, attempts, finish, raw_model, answered_by, params) in batch:
                vid, label, dims = variants[v]
                case_id, lang, category, group = cases[c]
                d = loads(verdict) if verdict else _NO_VERDICT
                if params is None:
                    p = None
                elif (p := params_of.get(params)) is None:
                    p = params_of[params] = loads(params)
                # Keys in ResultRow's field order (``_make`` fills the row's __dict__ as given).
                yield make({
                    "model": models[m], "variant_id": vid, "case_id": case_id, "repeat": rep, "key": key,
                    "status": status or "pending", "response": response, "error": error, "error_kind": kind,
                    "valid": None if valid is None else bool(valid), "error_code": code,
                    "bfcl_error_type": d.get("bfcl_error_type"), "failure_mode": d.get("failure_mode"),
                    "format_agnostic_valid": d.get("format_agnostic_valid"),
                    "detected_format": d.get("detected_format"), "format_match": d.get("format_match"),
                    "function_selection_correct": d.get("function_selection_correct"),
                    "tool_tp": d.get("tool_tp", 0), "tool_fp": d.get("tool_fp", 0), "tool_fn": d.get("tool_fn", 0),
                    "arg_tp": d.get("arg_tp", 0), "arg_fp": d.get("arg_fp", 0), "arg_fn": d.get("arg_fn", 0),
                    "n_expected_calls": d.get("n_expected_calls", 0),
                    "n_predicted_calls": d.get("n_predicted_calls", 0), "message": d.get("message", ""),
                    "response_language": d.get("response_language"), "language_match": d.get("language_match"),
                    "latency_s": latency, "input_tokens": tin, "output_tokens": tout, "cost_usd": cost,
                    "attempts": attempts, "finish_reason": finish, "raw_model": raw_model,
                    "endpoint": answered_by, "params": p,
                    "dimensions": dims, "label": label, "case_language": lang, "case_category": category,
                    "case_group": group, "turns": (), "steps": 0, "sent": 0, "details": _NO_DETAILS,
                })
