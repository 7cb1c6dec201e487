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
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from promptgrid.errors import TranslationError
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

    def __init__(self, path: str | Path | None = None, *, readonly: bool = False) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self.readonly = readonly
        self._conn: sqlite3.Connection | None = None

    # -- connection -------------------------------------------------------
    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if self.readonly:
            if not self.path.is_file():
                return None
            uri = f"file:{self.path}?mode=ro"
            try:
                self._conn = sqlite3.connect(uri, uri=True)
            except sqlite3.Error as exc:
                raise TranslationError(f"cannot open translation store {self.path}: {exc}") from exc
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) > SCHEMA_VERSION:
                raise TranslationError(
                    f"translation store {self.path} was written by a newer promptgrid "
                    f"(schema {row[0]}); upgrade promptgrid or use another --store"
                )
            conn.commit()
        except (OSError, sqlite3.Error) as exc:
            raise TranslationError(
                f"cannot open translation store {self.path}: {exc}. Pass another path with --store"
            ) from exc
        self._conn = conn
        return conn

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
            for row in conn.execute(query).fetchall():
                item = _row(row)
                if wanted is None or item.target in wanted:
                    yield item

    def __len__(self) -> int:
        conn = self._connect()
        if conn is None:
            return 0
        return int(conn.execute("SELECT (SELECT COUNT(*) FROM translations) + "
                                "(SELECT COUNT(*) FROM overrides)").fetchone()[0])


def _row(row: tuple[Any, ...]) -> StoredTranslation:
    source, target, backend, text, created_at, ok, problems, details, kind, keys = row
    return StoredTranslation(source, target, backend, text, created_at, bool(ok), tuple(json.loads(problems)),
                             json.loads(details), kind, tuple(json.loads(keys)))
