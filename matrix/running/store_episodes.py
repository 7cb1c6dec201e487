"""The run store's conversation half: a conversation run's episodes and steps, and its file's migration.

``EpisodeRows`` is mixed into ``store.RunStore`` (the one store class), as ``ledger.BatchLedger`` is: a
conversation run's ``RunStore`` is opened on ``conversations.sqlite3`` in the run directory
(``store.conversation_store``), and these methods read and write its episodes and steps.

One schema for both kinds of run (``store._SCHEMA``, the single-turn
``store.sqlite3``'s): a conversation step is a row of ``calls`` and an
episode a row of ``jobs``.

- ``calls`` holds every model answer, committed as it arrives, under the key
  of the step that got it (``job_key`` over the model, the generation
  parameters, the repeat and ``episodes._conversation_play.StepKeys``' digest of the
  episode's variant and conversation, the step's place and the messages and
  request pieces sent); its ``prompt_sha256`` and ``params`` are empty (the
  key covers both, as ``Step`` says). A resumed episode rebuilds its messages
  from the stored answers and the environment's (deterministic) results,
  finds each step's key here and sends nothing twice. With ``dedupe_requests``
  the digest is the request's alone, so identical requests of different
  episodes share a step.
- ``jobs`` holds each finished (or failed) episode, its ``Result`` as
  JSON (``Result.episode_dict``) in ``verdict`` (``valid`` beside it), under the ids of its model,
  variant (``variants``: id, label, dimension values) and conversation
  (``cases``: id, language, category, and its template as ``grp``; ``data``
  is ``{}``: the dataset is the conversation's record). ``key`` is empty: an
  episode has many steps.
- ``meta`` keeps the run's description (grid, dataset, models, plan, model
  parameters) and ``step_keys``, how the steps are keyed
  (``episodes._conversation_play.STEP_KEYS``; absent in a store written before, whose
  steps are keyed by the request alone: the runner then also looks a step up
  under that key), and ``argument_rule``.

Schema versions (``meta.schema_version``; the file's name says it is a
conversation run, the version which layout it has):

- 1: tables ``steps`` and ``episodes`` (releases up to 7a6083a). Opened for
  writing, such a store is migrated to version 2 in one transaction (nothing
  is lost: a failure leaves it as it was); opened read-only, a private copy is
  migrated and read (one per process and file state, removed at exit), and the
  file is left as it is. An older promptgrid then says the store is newer than
  it reads.
- 2: the run store's tables, above.

Opened by the class that opens ``store.sqlite3`` (``store.RunStore``): a
reader (``conversation_store(run_dir)``) opens the
file read-only and writes nothing, not even ``-wal``/``-shm`` files; the
schema version is checked before anything is written, so a foreign, damaged
or newer file is left as it was; and every SQLite failure (a corrupt file,
"database is locked", a full disk) is a ``StoreError`` naming the file and
what to do, never a sqlite3 traceback.

A single-turn run's ``store.sqlite3`` is a different file; the two never mix: a run of either kind refuses a
directory that holds the other (``episodes.check_run_dir_kind``, which both runners ask under their run lock).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promptgrid.errors import StoreError
from promptgrid.matrix.running.connection import _SCHEMA, DONE, STORE_FILE, _guarded
from promptgrid.matrix.running.results import Result
from promptgrid.records import Step

__all__ = ["CONVERSATION_STORE", "EpisodeRows", "is_conversation_run", "StoredStep"]

CONVERSATION_STORE = "conversations.sqlite3"


def is_conversation_run(run_dir: str | os.PathLike[str]) -> bool:
    """Whether ``run_dir`` holds a conversation run (its store, and no single-turn run store beside it)."""
    path = Path(run_dir)
    return (path / CONVERSATION_STORE).is_file() and not (path / STORE_FILE).is_file()


_SCHEMA_VERSION = 2
_MISSING_EPISODES = ("{run_dir} holds no conversation run (" + CONVERSATION_STORE + " is missing). Start one with: "
                     "promptgrid run GRID --dataset bfcl:multi_turn_base --model ... --run-dir DIR")
_LEGACY_VERSION = 1
_TABLES = frozenset({"meta", "models", "variants", "cases", "calls", "jobs"})
_LEGACY_TABLES = frozenset({"meta", "steps", "episodes"})
_NOT_A_STORE = ("{path} is not a promptgrid conversation store (tables: {tables}). Give a run directory a promptgrid "
                "conversation run wrote, or move the file aside.")
_STEP_COLUMNS = "model, response, finish_reason, input_tokens, output_tokens, cost_usd, latency_s"
_EPISODES = ('SELECT m.name, v.variant_id, c.case_id, j.repeat, j.verdict FROM jobs j JOIN models m ON m.id = j.model '
             'JOIN variants v ON v.id = j.variant JOIN cases c ON c.id = j."case"')


StoredStep = Step
"""A conversation run's stored model answer: the one ``Step`` record (``promptgrid.records``), by its name here
(``response``: text, or the native envelope; a stored step always has one)."""


def _schema_statements() -> list[str]:
    """``store._SCHEMA`` as single statements, to run inside a transaction (``executescript`` would commit it)."""
    return [statement.strip() for statement in _SCHEMA.split(";") if statement.strip()]


def _legacy_tables(db: sqlite3.Connection) -> list[str] | None:
    """The tables of a file whose ``schema_version`` is 1 (sorted), else ``None``. Version 1 with ``steps`` and
    ``episodes`` is a store of the last release, migrated before it is read (``_migrate``)."""
    tables = sorted(name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'"))
    if "meta" not in tables:
        return None
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return tables if row is not None and str(row[0]) == str(_LEGACY_VERSION) else None


def _episode_fields(text: Any) -> tuple[str, str, str]:
    """(language, category, template) of a stored episode's JSON, for its ``cases`` row; empty where it cannot be
    read (the row is kept as it is: reading it later names it as damaged)."""
    from promptgrid.safeio import parse_json_line

    try:
        data = parse_json_line(text) if isinstance(text, str) else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return "", "", ""
    values = (data.get("language"), data.get("category"), data.get("template"))
    return tuple(value if isinstance(value, str) else "" for value in values)  # type: ignore[return-value]


def _migrate(db: sqlite3.Connection) -> None:
    """Version 1 -> 2 in one transaction: ``steps`` rows become ``calls``, ``episodes`` rows ``jobs`` (their JSON
    moved byte for byte), the ``variants``/``labels`` meta rows the ``variants`` table; then the old tables go.
    Any failure rolls it all back, and the file is as it was."""
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in _schema_statements():
            db.execute(statement)
        db.execute("INSERT OR IGNORE INTO calls (key, model, repeat, prompt_sha256, params, status, response, "
                   "finish_reason, input_tokens, output_tokens, cost_usd, latency_s, attempts, error, error_kind, "
                   "raw_model, finished_at, endpoint) SELECT key, model, 0, '', '', ?, response, finish_reason, "
                   "input_tokens, output_tokens, cost_usd, latency_s, NULL, NULL, NULL, NULL, created, NULL "
                   "FROM steps", (DONE,))
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('variants', 'labels')").fetchall())
        dimensions, labels = (_legacy_mapping(meta.get(name)) for name in ("variants", "labels"))
        for vid in {**dimensions, **labels}:
            dims = dimensions.get(vid)
            label = labels.get(vid)
            db.execute("INSERT OR IGNORE INTO variants (variant_id, label, dimensions) VALUES (?, ?, ?)",
                       (vid, label if isinstance(label, str) else "",
                        json.dumps(dims if isinstance(dims, dict) else {}, ensure_ascii=False)))
        ids = _Ids(db)
        for model, vid, cid, repeat, valid, text in db.execute(
                "SELECT model, variant_id, conversation_id, repeat, valid, result FROM episodes ORDER BY rowid"
        ).fetchall():
            db.execute('INSERT OR REPLACE INTO jobs (model, variant, "case", repeat, key, verdict, valid, error_code) '
                       "VALUES (?, ?, ?, ?, '', ?, ?, NULL)",
                       (ids.model(model), ids.variant(vid), ids.case(cid, *_episode_fields(text)), repeat, text, valid))
        db.execute("DELETE FROM meta WHERE key IN ('variants', 'labels')")
        db.execute("DROP TABLE steps")
        db.execute("DROP TABLE episodes")
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(_SCHEMA_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _legacy_mapping(text: Any) -> dict[str, Any]:
    """A version-1 ``variants``/``labels`` meta value (JSON object), or ``{}`` where it is not one."""
    from promptgrid.safeio import parse_json_line

    try:
        value = parse_json_line(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str)} if isinstance(value, dict) else {}


_MIGRATED: dict[tuple[Any, ...], Path] = {}
"""Migrated copies of version-1 stores read by this process, by the file's state (``_file_state``)."""
_MIGRATED_LOCK = threading.Lock()


def _file_state(path: Path) -> tuple[Any, ...]:
    """What says a store file (and its ``-wal``) is unchanged: path, size and modification time of each."""
    state: list[Any] = [str(path.resolve())]
    for file in (path, path.with_name(path.name + "-wal")):
        try:
            stat = file.stat()
        except OSError:
            state.append(None)
        else:
            state.append((stat.st_size, stat.st_mtime_ns))
    return tuple(state)


def _migrated_copy(path: Path, source: sqlite3.Connection) -> Path:
    """A migrated copy of the version-1 store at ``path`` (read through ``source``), made once per process and file
    state, in a temporary directory removed when the process exits. A file changed since (a run migrated it, or
    wrote to it) gets a fresh copy."""
    state = _file_state(path)
    with _MIGRATED_LOCK:
        known = _MIGRATED.get(state)
        if known is not None and known.is_file():
            return known
        folder = Path(tempfile.mkdtemp(prefix="promptgrid-store-"))
        copy = folder / path.name
        try:
            target = sqlite3.connect(copy, isolation_level=None)
            try:
                source.backup(target)
                _migrate(target)
            finally:
                target.close()
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if not _MIGRATED:
            atexit.register(_remove_migrated)
        _MIGRATED[state] = copy
        return copy


def _remove_migrated() -> None:
    """Remove the migrated copies this process made (at exit)."""
    with _MIGRATED_LOCK:
        for copy in _MIGRATED.values():
            shutil.rmtree(copy.parent, ignore_errors=True)
        _MIGRATED.clear()


class _Ids:
    """The ids of models, variants and conversations (``cases``) in ``jobs``, made when first asked for."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self._models: dict[str, int] = {}
        self._variants: dict[str, int] = {}
        self._cases: dict[str, int] = {}

    def model(self, name: str) -> int:
        if name not in self._models:
            self.db.execute("INSERT OR IGNORE INTO models (name) VALUES (?)", (name,))
            self._models[name] = self.db.execute("SELECT id FROM models WHERE name = ?", (name,)).fetchone()[0]
        return self._models[name]

    def variant(self, variant_id: str) -> int:
        if variant_id not in self._variants:
            self.db.execute("INSERT OR IGNORE INTO variants (variant_id, label, dimensions) VALUES (?, '', '{}')",
                            (variant_id,))
            self._variants[variant_id] = self.db.execute("SELECT id FROM variants WHERE variant_id = ?",
                                                         (variant_id,)).fetchone()[0]
        return self._variants[variant_id]

    def case(self, conversation_id: str, language: str, category: str, template: str) -> int:
        if conversation_id not in self._cases:
            self.db.execute("INSERT INTO cases (case_id, language, category, grp, data) VALUES (?, ?, ?, ?, '{}') "
                            "ON CONFLICT(case_id) DO UPDATE SET language=excluded.language, "
                            "category=excluded.category, grp=excluded.grp",
                            (conversation_id, language, category, template))
            self._cases[conversation_id] = self.db.execute("SELECT id FROM cases WHERE case_id = ?",
                                                           (conversation_id,)).fetchone()[0]
        return self._cases[conversation_id]


class EpisodeRows:
    """A conversation run's episodes (rows of ``jobs``) and steps (rows of ``calls``), the version-1 migration of
    its file, and the run's ``meta`` rows: mixed into ``store.RunStore``, which opens the file (``_open``) and
    calls ``_migrate_legacy`` first when it is ``conversations.sqlite3``.

    A class that mixes it in has ``db``, ``path``, ``readonly``, ``_transaction`` (``ledger.BatchLedger``),
    ``_hashes`` (``None`` until ``step`` reads the stored keys) and ``_episode_ids`` (``None`` until
    ``add_episode`` makes ids).
    """

    db: sqlite3.Connection
    path: Path
    readonly: bool
    _hashes: set[int] | None
    _episode_ids: _Ids | None

    _copy: Path | None

    if TYPE_CHECKING:  # ``ledger.BatchLedger``'s, which the class that mixes this in has
        def _transaction(self) -> contextlib.AbstractContextManager[None]: ...

    def _migrate_legacy(self) -> None:
        """Migrate a version-1 conversation store (in place for a writer, a private copy for a reader); a file of
        any other version is left to the schema check."""
        legacy = _legacy_tables(self.db)
        if legacy is not None and not _LEGACY_TABLES <= set(legacy):  # say what it is not, not "use version 1"
            raise StoreError(_NOT_A_STORE.format(path=self.path, tables=", ".join(legacy[:5])))
        if legacy is None:
            return
        if self.readonly:
            self._verify_legacy(episodes=False)  # the migration reads the variants and labels rows: named here
            self._read_migrated()
            return
        self._verify_legacy()  # a damaged version-1 store is named and left as it is, not migrated
        _migrate(self.db)
        # Give back the dropped tables' pages (a 16 MB store of 26,370 steps: 40 MB after the migration, 23 MB
        # after this). Optional: on a full disk the store is migrated and whole without it.
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("VACUUM")

    def _verify_legacy(self, *, episodes: bool = True) -> None:
        """Decode every meta row of a version-1 store, and with ``episodes`` every episode row (``verify``, on its
        tables; a reader's episodes are decoded, and a damaged one named, as it reads them)."""
        for key, text in self.db.execute("SELECT key, value FROM meta"):
            self._decoded(text, f"the meta row {key!r}")
        if episodes:
            for rowid, text in self.db.execute("SELECT rowid, result FROM episodes"):
                self._episode_from(text, f"episode row {rowid}")

    def _read_migrated(self) -> None:
        """A reader of a version-1 store reads a migrated copy; the file itself is left as it is. The copy is made
        once per process and file state (``_migrated_copy``): a report opens the store once per read."""
        copy = _migrated_copy(self.path, self.db)
        target = sqlite3.connect(f"{copy.as_uri()}?mode=ro&immutable=1", uri=True, isolation_level=None,
                                 timeout=30.0, check_same_thread=False)
        target.execute("PRAGMA query_only=1")
        self.db.close()
        if self._copy is not None:
            shutil.rmtree(self._copy, ignore_errors=True)
            self._copy = None
        self.db = target

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
        """Decode every meta, variant and episode row (a damaged one is a ``StoreError`` naming it): a run calls this
        before it writes anything, so a damaged store is left exactly as it was."""
        for key, text in self.db.execute("SELECT key, value FROM meta"):
            self._decoded(text, f"the meta row {key!r}")
        self.variant_dimensions()
        for model, vid, cid, repeat, text in self.db.execute(_EPISODES):
            self._episode_from(text, _episode_row(model, vid, cid, repeat))

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

    def _episode_from(self, text: Any, where: str) -> Result:
        data = self._decoded(text, where)
        try:
            return Result.from_episode(data)
        except (TypeError, ValueError, AttributeError) as exc:
            raise StoreError(f"{self.path}: {where} does not hold an episode this promptgrid reads ({exc}): damaged, "
                             "or written by a newer promptgrid. The file was left as it is; use the promptgrid that "
                             "wrote it, or another --run-dir.") from None

    @_guarded
    def variant_dimensions(self) -> dict[str, dict[str, str]]:
        """Each recorded variant's dimension values by variant id, in the order they were first recorded."""
        out = {}
        for vid, text in self.db.execute("SELECT variant_id, dimensions FROM variants ORDER BY id"):
            value = self._decoded(text, f"the variant row {vid[:80]!r}")
            if not isinstance(value, dict):
                raise StoreError(f"{self.path}: the variant row {vid[:80]!r} is damaged (its dimensions are not an "
                                 "object). The file was left as it is; restore it from a copy, or give another "
                                 "--run-dir.")
            out[vid] = value
        return out

    @_guarded
    def labels(self) -> dict[str, str]:
        """Each recorded variant's label (BFCL figure notation), by variant id; a variant recorded without one is left
        out."""
        return {vid: label for vid, label in self.db.execute("SELECT variant_id, label FROM variants ORDER BY id")
                if isinstance(label, str) and label}

    # ----------------------------------------------------------------- steps

    @_guarded
    def step(self, key: str) -> Step | None:
        if not self.readonly and hash(key) not in self._step_hashes():
            return None  # never stored: no query (the runner asks for every step it plays, mostly new ones)
        row = self.db.execute(f"SELECT {_STEP_COLUMNS} FROM calls WHERE key = ?", (key,)).fetchone()
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
            self._hashes = {hash(key) for (key,) in self.db.execute("SELECT key FROM calls")}
        return self._hashes

    @_guarded
    def add_step(self, key: str, model: str, step: Step) -> None:
        """Commit one answer now (a killed run keeps every answer it got)."""
        self.db.execute("INSERT OR IGNORE INTO calls (key, model, repeat, prompt_sha256, params, status, response, "
                        "finish_reason, input_tokens, output_tokens, cost_usd, latency_s, attempts, error, "
                        "error_kind, raw_model, finished_at, endpoint) "
                        "VALUES (?, ?, ?, '', '', ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?)",
                        (key, model, step.repeat, DONE, step.response, step.finish_reason, step.input_tokens,
                         step.output_tokens, step.cost_usd, step.latency_s, step.attempts, step.raw_model,
                         time.time(), step.endpoint))
        if self._hashes is not None:
            self._hashes.add(hash(key))

    @_guarded
    def step_count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    @_guarded
    def episode_count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])

    # -------------------------------------------------------------- episodes

    @_guarded
    def episode(self, model: str, variant_id: str, conversation_id: str, repeat: int) -> Result | None:
        row = self.db.execute(f"{_EPISODES} WHERE m.name = ? AND v.variant_id = ? AND c.case_id = ? AND j.repeat = ?",
                              (model, variant_id, conversation_id, repeat)).fetchone()
        return None if row is None else self._episode_from(row[4], _episode_row(*row[:4]))

    @_guarded
    def add_episode(self, result: Result) -> None:
        """Store a finished (or failed) episode, replacing what its cell held: the episode row and the ids it needs,
        in one transaction (or the caller's)."""
        text = json.dumps(result.episode_dict(), ensure_ascii=False, default=str)
        if self.db.in_transaction:  # the caller's: the ids it makes are asked for afresh (it may yet roll back)
            self._insert_episode(_Ids(self.db), result, text)
            return
        ids = self._episode_ids = self._episode_ids or _Ids(self.db)
        try:
            with self._transaction():
                self._insert_episode(ids, result, text)
        except BaseException:
            self._episode_ids = None  # an id made in the transaction that rolled back is not in the file
            raise

    def _insert_episode(self, ids: _Ids, result: Result, text: str) -> None:
        self.db.execute('INSERT OR REPLACE INTO jobs (model, variant, "case", repeat, key, verdict, valid, error_code) '
                        "VALUES (?, ?, ?, ?, '', ?, ?, NULL)",
                        (ids.model(result.model), ids.variant(result.variant_id),
                         ids.case(result.conversation_id, result.language, result.category, result.template),
                         result.repeat, text, None if result.valid is None else int(result.valid)))

    @_guarded
    def episodes(self, *, models: Iterable[str] | None = None) -> list[Result]:
        """Every stored episode, in (model, variant, conversation, repeat) order."""
        wanted = None if models is None else set(models)
        out = []
        for model, vid, cid, repeat, text in self.db.execute(
                f"{_EPISODES} ORDER BY m.name, v.variant_id, c.case_id, j.repeat"):
            if wanted is None or model in wanted:
                out.append(self._episode_from(text, _episode_row(model, vid, cid, repeat)))
        return out


def _episode_row(model: Any, variant_id: Any, conversation_id: Any, repeat: Any) -> str:
    """How a message names a stored episode's row (each name cut to 80 characters: a stored name may be anything)."""
    names = ", ".join(repr(str(name)[:80]) for name in (model, variant_id, conversation_id))
    return f"the episode row of ({names}, repeat {repeat!r})"
