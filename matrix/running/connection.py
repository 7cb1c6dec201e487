"""A run directory's SQLite file, opened safely: its connection, its schema check, its errors and its lock.

What ``store.RunStore`` opens, whichever the kind of run (a single-turn run's ``store.sqlite3``, a
conversation run's ``conversations.sqlite3``; one schema, ``_SCHEMA`` below). A reader opens the file
read-only and writes nothing, not even ``-wal``/``-shm`` files (``_connect_readonly``); the schema version is
checked before anything is written (``_open_checked``), so a foreign, damaged or newer file is left as it was;
every SQLite failure, when the file is opened or later when its rows are read, is a ``StoreError`` naming the
file and what to do (``_guarded``), a full disk a ``StoreFullError``; and one process writes a run directory
at a time (``RunLock``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from promptgrid.errors import StoreError, StoreFullError
from promptgrid.matrix.running.config import RunError

__all__ = ["LOCK_FILE", "RunLock", "disk_full_errors"]

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


# SQLite's primary result codes (sqlite3.h), compared with an error's ``sqlite_errorcode & 0xFF``. The
# sqlite3 module names them only from Python 3.11 (as it sets ``sqlite_errorcode``); promptgrid runs on 3.10.
_SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_NOTADB = 11, 13, 26


LOCK_FILE = "run.lock"
STORE_FILE = "store.sqlite3"
"""A single-turn run's store in its run directory (a conversation run's is ``conversations.sqlite3``)."""

DONE = "done"
"""A step's status when it was answered (``calls.status``)."""

#: The one schema of a run directory's store, whichever its kind (``store.RunStore``): a single-turn job and
#: a conversation's episode are each a row of ``jobs``, a model call (a step) a row of ``calls``.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS models (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL);
CREATE TABLE IF NOT EXISTS variants (id INTEGER PRIMARY KEY, variant_id TEXT UNIQUE NOT NULL,
    label TEXT NOT NULL, dimensions TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cases (id INTEGER PRIMARY KEY, case_id TEXT UNIQUE NOT NULL,
    language TEXT, category TEXT, grp TEXT, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, repeat INTEGER NOT NULL, prompt_sha256 TEXT NOT NULL,
    params TEXT NOT NULL, status TEXT NOT NULL, response TEXT, finish_reason TEXT,
    input_tokens INTEGER, output_tokens INTEGER, cost_usd REAL, latency_s REAL, attempts INTEGER,
    error TEXT, error_kind TEXT, raw_model TEXT, finished_at REAL, endpoint TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobs (
    model INTEGER NOT NULL, variant INTEGER NOT NULL, "case" INTEGER NOT NULL, repeat INTEGER NOT NULL,
    key TEXT NOT NULL, verdict TEXT, valid INTEGER, error_code TEXT,
    PRIMARY KEY (model, variant, "case", repeat)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_by_key ON jobs (key);
"""


class RunLock:
    """Exclusive lock on a run directory for the life of one writing process."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        import fcntl

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if _is_full(exc):
                raise _full_error(self.path.parent, exc) from None
            raise RunError(f"cannot write in run directory {self.path.parent} ({exc.strerror}): a run or re-score "
                           "writes its store there. Reading it (report, export, compare) works as it is; to run "
                           "into it, copy it to a writable place and give that as --run-dir.") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RunError(
                f"run directory {self.path.parent} is in use by {holder}. Wait for it to finish, or "
                "give this run another --run-dir. (Results are shared through the store: re-run the "
                "same command afterwards and finished calls are not sent again.)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"promptgrid pid {os.getpid()}".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _chunks(items: Sequence[Any], n: int = 500) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def _is_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk or quota is full (SQLite's SQLITE_FULL, or ENOSPC/EDQUOT from a write)."""
    if isinstance(exc, sqlite3.Error):
        return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == _SQLITE_FULL or "disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS


def _full_error(where: Path, exc: BaseException) -> StoreFullError:
    return StoreFullError(f"disk full at {where} ({exc}). Free space and re-run the same command to resume: "
                          "answers already stored or spilled are not sent again.")


def _store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """The one-line error for a SQLite failure on the store at ``path``."""
    if _is_full(exc):
        return _full_error(path.parent, exc)
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or type(exc) is sqlite3.DatabaseError:
        return StoreError(f"{path} is corrupt or truncated ({exc}). Restore it from a backup or copy of the run "
                          "directory, or move it aside and run again into a new --run-dir.")
    return StoreError(f"cannot use {path} ({exc}). Check that the file and its directory are readable "
                      "(writable too for promptgrid run and score) and that the disk is healthy.")


@contextlib.contextmanager
def disk_full_errors(run_dir: Path) -> Iterator[None]:
    """Turn a full disk (``OSError`` ENOSPC/EDQUOT, SQLite's ``database or disk is full``) met while
    writing the run directory (lock, ``run.json``, store) into a ``StoreFullError`` naming it."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        if _is_full(exc):
            raise _full_error(Path(run_dir), exc) from None
        raise


_F = TypeVar("_F", bound=Callable[..., Any])


def _guarded(method: _F) -> _F:
    """Make a store method raise ``StoreError`` instead of ``sqlite3.Error``.

    A damaged file can open fine and fail only when a page is read, so every
    method that reads or writes is wrapped, not just the constructor.
    """
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc) from None
    return wrapper  # type: ignore[return-value]


def _guarded_iter(method: _F) -> _F:
    """``_guarded`` for a generator method: the rows are read while it is iterated."""
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        try:
            yield from method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise _store_error(self.path, exc) from None
    return wrapper  # type: ignore[return-value]


def _connect_readonly(path: Path) -> tuple[sqlite3.Connection, Path | None]:
    """Open the store for reading only: no lock, nothing written, no file created beside it.

    ``mode=ro`` alone is not enough: SQLite then creates ``-wal``/``-shm``
    files beside a WAL database (and fails when the directory is read-only).
    A store with no ``-wal`` file has every commit in the main file and no
    writer (a writer keeps its ``-wal`` until it closes), so it is opened
    ``immutable=1``, which reads the file alone. A store with a ``-wal``
    (a run in progress, or one that was killed) is opened ``mode=ro`` so the
    commits still in the WAL are read too; that needs its ``-shm`` file, or a
    writable directory to create it in. An archive that has neither (a
    killed run's directory copied without ``-shm``, then made read-only) is
    read from a private copy of the store and its WAL in a temporary
    directory, returned second so the caller removes it on close.
    """
    wal = path.with_name(path.name + "-wal")
    query = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, isolation_level=None, timeout=30.0)
        db.execute("PRAGMA query_only=1")
        if wal.exists():  # opening is lazy: read once, so a -shm that cannot be created shows here
            try:
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.Error:
                db.close()
                raise
        return db, None
    except sqlite3.Error as exc:
        if not wal.exists():
            raise _store_error(path, exc) from None
        first = exc
    copy = Path(tempfile.mkdtemp(prefix="promptgrid-store-"))
    try:
        shutil.copyfile(path, copy / path.name)
        shutil.copyfile(wal, copy / wal.name)
        db = sqlite3.connect(f"{(copy / path.name).as_uri()}?mode=ro", uri=True, isolation_level=None,
                             timeout=30.0)
    except (OSError, sqlite3.Error):
        shutil.rmtree(copy, ignore_errors=True)
        raise StoreError(f"cannot open {path} read-only: {first}. A run directory copied while a run was "
                         f"writing it needs its {wal.name} and {path.name}-shm files too.") from None
    try:
        db.execute("PRAGMA query_only=1")
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:  # the copy opens where the original could not: what is left is damage
        db.close()
        shutil.rmtree(copy, ignore_errors=True)
        raise _store_error(path, exc) from None
    return db, copy


def _open_checked(db: sqlite3.Connection, path: Path, *, create: bool, readonly: bool, version: int, kind: str,
                  not_store: str, required: frozenset[str] = frozenset()) -> set[str]:
    """Set a store's connection up and check its schema; return its tables (none: a new file to make).

    ``RunStore`` calls it for either file. The schema is checked
    before anything is written (the WAL pragmas included), so a foreign,
    damaged or newer file is left as it was; an empty file is checked too
    unless ``create``. ``StoreError`` unless the file's ``meta`` holds
    ``schema_version`` equal to ``version`` and it has the ``required``
    tables: a version that is not ``version`` names the ``kind`` of store
    ("{kind} schema N is newer ..."); a file without the version or the
    tables is ``not_store``, formatted with ``path`` and ``tables`` (its
    first five table names). ``readonly``: nothing is set that writes.
    """
    db.execute("PRAGMA busy_timeout=30000")
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if tables or not create:
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() \
            if "meta" in tables else None
        if row is not None:
            stored = str(row[0])
            if not stored.isdigit() or int(stored) != version:
                newer = stored.isdigit() and int(stored) > version
                raise StoreError(
                    f"{path}: {kind} schema {stored[:20]} is "
                    + (f"newer than this promptgrid reads ({version}); upgrade promptgrid to read it."
                       if newer else f"not the supported {version}; use the promptgrid version that wrote it."))
        if row is None or not required <= tables:
            raise StoreError(not_store.format(path=path, tables=", ".join(sorted(tables)[:5]) or "none"))
    if not readonly:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
    return tables

