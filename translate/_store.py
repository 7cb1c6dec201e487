"""The translation store: every translation made, kept so it is paid for once.

A SQLite file (WAL), by default ``$XDG_CACHE_HOME/promptgrid/translations.sqlite3``
(``~/.cache/promptgrid/...`` when XDG_CACHE_HOME is unset), or a path the user
names with ``--store``.

Key of a machine translation: ``(sha256(source), target, backend)``. Only what
changes the output is in the key: the source text, the target language and
the backend id (``amazon``, ``amazon:formal``, ``llm:openai/gpt-4o``,
``catalog``). Not in the key, because they do not change the text: the AWS
region, retries, batch sizes, timeouts.

Value: the text, the backend, when it was made, and the result of the checks
(``ok``, problem codes, details). A translation that failed its checks is kept,
flagged, so it is not paid for again, and it is never used for rendering.

Manual overrides (``set_override``, or a user catalog imported with
``promptgrid translate --backend catalog:FILE``) live in their own table, one
per (source, target); they win over everything. Precedence when rendering:
override > reviewed shipped catalog > machine translation from this store.

A file is a translation store when it has the ``meta`` table with a
``schema_version`` and the ``translations`` and ``overrides`` tables with their
columns (the run store, ``matrix/running/store.py``, is recognised the same
way, by its ``meta`` table and schema version). Anything else, a file that is
not SQLite, a truncated one, or another program's database, is refused with
``TranslationStoreError`` before anything is written to it: ``--store`` never
adds tables to a foreign database. An empty file (or a new path) becomes a
store when it is opened for writing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from promptgrid.errors import TranslationError, TranslationStoreError
from promptgrid.languages import lookup_languages

__all__ = ["OVERRIDE_BACKEND", "StoredTranslation", "TranslationStore", "default_store_path", "source_hash"]

SCHEMA_VERSION = 1
#: The ``backend`` value reported for manual overrides.
OVERRIDE_BACKEND = "override"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS translations (
    source_sha256 TEXT NOT NULL,
    target TEXT NOT NULL,
    backend TEXT NOT NULL,
    source TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    ok INTEGER NOT NULL,
    problems TEXT NOT NULL,
    details TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT '',
    keys TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (source_sha256, target, backend)
);
CREATE TABLE IF NOT EXISTS overrides (
    source_sha256 TEXT NOT NULL,
    target TEXT NOT NULL,
    source TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    ok INTEGER NOT NULL,
    problems TEXT NOT NULL,
    details TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT '',
    keys TEXT NOT NULL DEFAULT '[]',
    origin TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (source_sha256, target)
);
"""

#: The columns each table of a store has (what the queries below read and write).
_COLUMNS = {
    "meta": {"key", "value"},
    "translations": {"source_sha256", "target", "backend", "source", "text", "created_at", "ok", "problems",
                     "details", "kind", "keys"},
    "overrides": {"source_sha256", "target", "source", "text", "created_at", "ok", "problems", "details", "kind",
                  "keys", "origin"},
}
# SQLite's primary result codes (sqlite3.h), compared with an error's ``sqlite_errorcode & 0xFF``. The
# sqlite3 module names them only from Python 3.11 (as it sets ``sqlite_errorcode``); promptgrid runs on 3.10.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_FIX = "Give --store a file that promptgrid translate wrote, or a new path; move this file aside"


def _store_error(path: Path, exc: BaseException) -> TranslationStoreError:
    """The one-line error for a SQLite (or stored value) failure on the translation store at ``path``."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or type(exc) is sqlite3.DatabaseError \
            or isinstance(exc, _BadRow):
        return TranslationStoreError(f"translation store {path} is corrupt, truncated or not a SQLite file "
                                     f"({str(exc)[:200]}). {_FIX}.")
    if isinstance(exc, sqlite3.OperationalError) and ("no such" in str(exc) or "has no column" in str(exc)):
        return TranslationStoreError(f"translation store {path} is not a promptgrid translation store "
                                     f"({str(exc)[:200]}). {_FIX}.")
    return TranslationStoreError(f"cannot use translation store {path} ({str(exc)[:200]}). Check that the file "
                                 "and its directory are readable (writable for promptgrid translate) and that the "
                                 "disk has space, or pass another path with --store.")


_F = TypeVar("_F")


class _BadRow(Exception):
    """A stored row whose JSON columns do not decode (the file was damaged or written by something else)."""


def _guarded(method: _F) -> _F:
    """Make a ``TranslationStore`` method raise ``TranslationStoreError`` instead of ``sqlite3.Error``.

    A damaged file can open fine and fail only when a page is read, so every
    method that reads or writes is wrapped, not just the connection.
    """
    @functools.wraps(method)  # type: ignore[arg-type]
    def wrapper(self: TranslationStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)  # type: ignore[operator]
        except (sqlite3.Error, _BadRow) as exc:
            raise _store_error(self.path, exc) from None
    return wrapper  # type: ignore[return-value]


def _check_schema(conn: sqlite3.Connection, path: Path) -> bool:
    """Whether the file has tables; raise unless they are a translation store's, of a schema this version reads.

    Only reads: a foreign or damaged file is left exactly as it was.
    """
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return False
    wrong = [t for t, cols in _COLUMNS.items()
             if t not in tables or not cols <= {row[1] for row in conn.execute(f"PRAGMA table_info({t})")}]
    version = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() \
        if "meta" not in wrong else None
    if wrong or version is None:
        found = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise TranslationStoreError(
            f"{path} is not a promptgrid translation store (a SQLite file without "
            + (f"promptgrid's table(s) {', '.join(wrong)}, or with other columns" if wrong
               else "its schema version")
            + f"; tables: {found}). {_FIX}.")
    stored = str(version[0])
    if not stored.isdigit() or int(stored) > SCHEMA_VERSION:
        raise TranslationStoreError(
            f"translation store {path} has schema {stored[:20]!r}, "
            + ("written by a newer promptgrid; upgrade promptgrid or use another --store."
               if stored.isdigit() else f"not the supported {SCHEMA_VERSION}. {_FIX}."))
    return True


def source_hash(source: str) -> str:
    """sha256 of the exact source text (UTF-8)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def default_store_path() -> Path:
    """``$XDG_CACHE_HOME/promptgrid/translations.sqlite3``, else ``~/.cache/promptgrid/...``."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "promptgrid" / "translations.sqlite3"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class StoredTranslation:
    """One row of the store (a machine translation or an override)."""

    source: str
    target: str
    backend: str
    text: str
    created_at: str
    ok: bool
    problems: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    kind: str = ""
    keys: tuple[str, ...] = ()

    @property
    def is_override(self) -> bool:
        return self.backend == OVERRIDE_BACKEND


class TranslationStore:
    """Read and write translations in one SQLite file.

    ``readonly=True`` never creates the file: a missing store is simply
    empty (rendering must not write to the user's cache).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, readonly: bool = False) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self.readonly = readonly
        self._conn: sqlite3.Connection | None = None

    # -- connection -------------------------------------------------------
    def _connect(self) -> sqlite3.Connection | None:
        """The connection, opened and checked on first use; ``None`` for a read-only store that is
        missing or empty (nothing stored yet)."""
        if self._conn is not None:
            return self._conn
        if self.readonly and not self.path.is_file():
            return None
        conn: sqlite3.Connection | None = None
        try:
            conn = self._open()
            if not self._prepare(conn):
                conn.close()
                return None
        except TranslationStoreError:
            if conn is not None:
                conn.close()
            raise
        except (OSError, sqlite3.Error) as exc:
            if conn is not None:
                conn.close()
            raise self._open_error(exc) from None
        self._conn = conn
        return conn

    def _open(self) -> sqlite3.Connection:
        """A new connection to the file: read-only, or read-write with its folder created."""
        if self.readonly:
            return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(self.path)

    def _prepare(self, conn: sqlite3.Connection) -> bool:
        """Check the schema (and create it in a new writable store); ``False`` for a read-only store without one."""
        if self.readonly:
            return _check_schema(conn, self.path)
        # Checked before anything is written: a foreign or damaged file is left as it was.
        if not _check_schema(conn, self.path):
            conn.executescript(_SCHEMA)
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.commit()
        conn.execute("PRAGMA journal_mode=WAL")
        return True

    def _open_error(self, exc: OSError | sqlite3.Error) -> TranslationStoreError:
        """The error to raise when opening the store failed with ``exc``."""
        if isinstance(exc, OSError):
            return TranslationStoreError(f"cannot open translation store {self.path}: "
                                         f"{exc.strerror or exc}. Pass another path with --store.")
        return _store_error(self.path, exc)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> TranslationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self) -> sqlite3.Connection:
        if self.readonly:
            raise TranslationError(f"translation store {self.path} is open read-only")
        conn = self._connect()
        assert conn is not None
        return conn

    # -- machine translations ----------------------------------------------
    @_guarded
    def get(self, source: str, target: str, backend: str) -> StoredTranslation | None:
        """The stored translation for exactly this (source, target, backend), ok or not."""
        conn = self._connect()
        if conn is None:
            return None
        row = conn.execute(
            "SELECT source, target, backend, text, created_at, ok, problems, details, kind, keys "
            "FROM translations WHERE source_sha256=? AND target=? AND backend=?",
            (source_hash(source), target, backend),
        ).fetchone()
        return _row(row) if row else None

    @_guarded
    def put(self, source: str, target: str, backend: str, text: str, *, ok: bool,
            problems: Iterable[str] = (), details: Mapping[str, Any] | None = None,
            kind: str = "", keys: Iterable[str] = ()) -> StoredTranslation:
        """Record a machine translation with its check result (replaces an earlier one)."""
        conn = self._write()
        item = StoredTranslation(source, target, backend, text, _now(), ok, tuple(str(p) for p in problems),
                                 dict(details or {}), kind, tuple(dict.fromkeys(keys)))
        with conn:
            conn.execute(
                "INSERT OR REPLACE INTO translations VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (source_hash(source), target, backend, source, text, item.created_at, int(ok),
                 json.dumps(list(item.problems)), json.dumps(item.details, ensure_ascii=False, default=str),
                 kind, json.dumps(list(item.keys), ensure_ascii=False)),
            )
        return item

    @_guarded
    def add_keys(self, source: str, target: str, backend: str, keys: Iterable[str]) -> None:
        """Remember more unit keys that use this translation (for reports)."""
        found = self.get(source, target, backend)
        if found is None:
            return
        merged = list(dict.fromkeys((*found.keys, *keys)))
        if merged != list(found.keys):
            with self._write() as conn:
                conn.execute("UPDATE translations SET keys=? WHERE source_sha256=? AND target=? AND backend=?",
                             (json.dumps(merged, ensure_ascii=False), source_hash(source), target, backend))

    @_guarded
    def lookup(self, source: str, target: str) -> str | None:
        """The newest translation of ``source`` that passed its checks, any backend; override first."""
        conn = self._connect()
        if conn is None:
            return None
        for code in lookup_languages(target):
            row = conn.execute(
                "SELECT text FROM overrides WHERE source_sha256=? AND target=? AND ok=1",
                (source_hash(source), code),
            ).fetchone()
            if row:
                return str(row[0])
        for code in lookup_languages(target):
            row = conn.execute(
                "SELECT text FROM translations WHERE source_sha256=? AND target=? AND ok=1 "
                "ORDER BY created_at DESC, backend LIMIT 1",
                (source_hash(source), code),
            ).fetchone()
            if row:
                return str(row[0])
        return None

    # -- overrides -----------------------------------------------------------
    @_guarded
    def set_override(self, source: str, target: str, text: str, *, ok: bool = True,
                     problems: Iterable[str] = (), details: Mapping[str, Any] | None = None,
                     kind: str = "", keys: Iterable[str] = (), origin: str = "") -> StoredTranslation:
        """A manual translation of ``source``; it wins over catalogs and machine translations."""
        conn = self._write()
        item = StoredTranslation(source, target, OVERRIDE_BACKEND, text, _now(), ok,
                                 tuple(str(p) for p in problems), dict(details or {}), kind,
                                 tuple(dict.fromkeys(keys)))
        with conn:
            conn.execute(
                "INSERT OR REPLACE INTO overrides VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (source_hash(source), target, source, text, item.created_at, int(ok),
                 json.dumps(list(item.problems)), json.dumps(item.details, ensure_ascii=False, default=str),
                 kind, json.dumps(list(item.keys), ensure_ascii=False), origin),
            )
        return item

    @_guarded
    def get_override(self, source: str, target: str) -> StoredTranslation | None:
        conn = self._connect()
        if conn is None:
            return None
        row = conn.execute(
            "SELECT source, target, 'override', text, created_at, ok, problems, details, kind, keys "
            "FROM overrides WHERE source_sha256=? AND target=?",
            (source_hash(source), target),
        ).fetchone()
        return _row(row) if row else None

    @_guarded
    def remove_override(self, source: str, target: str) -> bool:
        with self._write() as conn:
            cur = conn.execute("DELETE FROM overrides WHERE source_sha256=? AND target=?",
                               (source_hash(source), target))
        return cur.rowcount > 0

    # -- listing ---------------------------------------------------------------
    def rows(self, languages: Iterable[str] | None = None) -> Iterator[StoredTranslation]:
        """Every override, then every machine translation (optionally of some languages only)."""
        conn = self._connect()
        if conn is None:
            return
        wanted = set(languages) if languages else None
        queries = (
            "SELECT source, target, 'override', text, created_at, ok, problems, details, kind, keys "
            "FROM overrides ORDER BY target, created_at",
            "SELECT source, target, backend, text, created_at, ok, problems, details, kind, keys "
            "FROM translations ORDER BY target, backend, created_at",
        )
        for query in queries:
            try:
                items = [_row(row) for row in conn.execute(query).fetchall()]
            except (sqlite3.Error, _BadRow) as exc:  # read while iterated: not under @_guarded
                raise _store_error(self.path, exc) from None
            yield from (item for item in items if wanted is None or item.target in wanted)

    @_guarded
    def __len__(self) -> int:
        conn = self._connect()
        if conn is None:
            return 0
        return int(conn.execute("SELECT (SELECT COUNT(*) FROM translations) + "
                                "(SELECT COUNT(*) FROM overrides)").fetchone()[0])


def _row(row: tuple[Any, ...]) -> StoredTranslation:
    source, target, backend, text, created_at, ok, problems, details, kind, keys = row
    try:
        return StoredTranslation(source, target, backend, text, created_at, bool(ok), tuple(json.loads(problems)),
                                 dict(json.loads(details)), kind, tuple(json.loads(keys)))
    except (TypeError, ValueError, RecursionError) as exc:
        raise _BadRow(f"a stored row does not decode: {type(exc).__name__}") from None
