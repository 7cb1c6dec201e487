"""What a run directory's store records beside its answers: provider batches, and the answers a full disk spilled.

``BatchLedger`` (tables ``batches`` and ``batch_jobs``) is mixed into both stores, so a batch is recorded,
advanced and resumed by the same code whatever its lines are (a single-turn job's call, a conversation's
step). ``SpillFile`` keeps, on space reserved at the start of a run, the answers a full disk kept out of the
store; ``spilled`` reads them back for the next run, which stores them before it sends anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from promptgrid.errors import StoreFullError
from promptgrid.matrix.running.connection import _guarded

__all__ = ["BatchJob", "BatchLedger", "BatchRecord", "COLLECTED", "ENDED", "EXPORTED", "LIVE_BATCH_STATES",
           "PREPARING", "SPILL_GLOB", "SPILL_RESERVE", "SUBMITTED", "SpillFile", "StoreFile", "UPLOADED",
           "disk_full_stop",
           "spilled"]


class _Spilling(Protocol):
    """A store that spills (``RunStore``, of either kind of run): its file and its spill file."""

    path: Path

    @property
    def spill_path(self) -> Path: ...


SPILL_GLOB = "spill-*.jsonl"


#: Disk claimed at the start of a run for answers a full disk keeps out of the store (a few hundred
#: answers of a few KiB: what is in flight when the disk fills, with room to spare).
SPILL_RESERVE = 2 * 1024 * 1024


# Tables added after schema 1 shipped: created by ``_upgrade`` on every writable open (``IF NOT EXISTS``), so
# a store of any schema-1 promptgrid gains them on its next run; readers of a store without them see none.
_BATCH_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY, model TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,
    provider_id TEXT, input_file TEXT, output_file TEXT, error_file TEXT,
    requests INTEGER NOT NULL, bytes INTEGER NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    detail TEXT
);
CREATE TABLE IF NOT EXISTS batch_jobs (
    batch TEXT NOT NULL, key TEXT NOT NULL, model TEXT NOT NULL, repeat INTEGER NOT NULL,
    prompt_sha256 TEXT NOT NULL, params TEXT NOT NULL, native INTEGER NOT NULL,
    PRIMARY KEY (batch, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batch_jobs_by_key ON batch_jobs (key);
"""


#: Batch states (``BatchRecord.state``): recorded before upload, file uploaded, batch created at the provider,
#: provider finished (results not all stored yet), results stored; ``exported``: written by export-batch.
PREPARING, UPLOADED, SUBMITTED, ENDED, COLLECTED, EXPORTED = (
    "preparing", "uploaded", "submitted", "ended", "collected", "exported")


LIVE_BATCH_STATES = (PREPARING, UPLOADED, SUBMITTED, ENDED)
"""A key in a batch in one of these states is never put in another batch nor sent online."""


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One batch of one model's calls sent to a provider's batch API (or written by export-batch)."""

    id: str
    """Our id (also the uploaded file's name and the batch's metadata), unique in the store."""
    model: str
    kind: str
    """``openai`` (OpenAI-compatible files + batches API), ``bedrock``, ``export``."""
    state: str
    provider_id: str | None
    input_file: str | None
    output_file: str | None
    error_file: str | None
    requests: int
    bytes: int
    created_at: float
    updated_at: float
    detail: str | None
    """JSON: the provider's own state, request counts, errors."""

    @property
    def live(self) -> bool:
        return self.state in LIVE_BATCH_STATES


@dataclass(frozen=True, slots=True)
class BatchJob:
    """What a batch line needs to become a ``CallResult`` when its answer comes back."""

    key: str
    model: str
    repeat: int
    prompt_sha256: str
    params: str
    native: int
    """1 when the call was sent with native tools (its answer is stored as the tool-call envelope)."""


def disk_full_stop(store: _Spilling, *, spilled: int, lost: int) -> StoreFullError:
    """The error a run stopped by a full disk ends with: where, what was kept, and what to do."""
    kept = (f"{spilled} answer(s) the store could not take are kept in {store.spill_path.name} and stored by the "
            "next run" if spilled else "every answer the store took is kept")
    if lost:
        kept += f"; {lost} answer(s) could not be kept anywhere and will be sent again"
    return StoreFullError(f"disk full at {store.path.parent}: the run stopped; {kept}. Free space and re-run the "
                          "same command to resume.")


class SpillFile:
    """Answers a full store could not take, kept as JSON lines in ``spill-<pid>.jsonl`` beside it until the next run
    adds them to its store (``RunStore.spill``: a single-turn call with its jobs' verdicts, or an episode's step).

    ``reserve`` claims disk for them at the start of a run, while there is space: a disk that fills during a run is
    full for this file too, so the answers that arrive after it would have nowhere to go. The reservation is the
    file written full of spaces (real blocks, not a sparse file; at most a tenth of the free space) and one
    newline: a blank line that ``spilled`` skips. ``write`` then overwrites it from the start and only grows the
    file past it; ``close`` deletes it when nothing was written. Best effort: on a disk already too full to
    reserve, ``write`` appends as it can.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._at = 0  # where the next line goes
        self.written = False

    @property
    def path(self) -> Path:
        """This process's spill file (it exists once ``reserve`` or ``write`` made it)."""
        return self.directory / f"spill-{os.getpid()}.jsonl"

    def reserve(self, size: int = SPILL_RESERVE) -> None:
        """Claim ``size`` bytes of disk for ``write`` now (the class docstring)."""
        if self._fd is not None:
            return
        try:  # never more than a tenth of the free space: the reservation must not fill the disk itself
            st = os.statvfs(self.directory)
            size = min(size, st.f_bavail * st.f_frsize // 10)
        except OSError:
            pass
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if size > 0:
                view = memoryview(b" " * (size - 1) + b"\n")
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        self._fd, self._at, self.written = fd, 0, False

    def write(self, record: Mapping[str, Any]) -> None:
        """Write ``record`` as one JSON line, on disk (fsynced: only used once the disk is full). Lines go over the
        reserved space, then past it. Raises ``OSError`` when even this fails; whatever of the line was written is
        blanked out (or cut off), so the lines written before stay readable."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._at = os.lseek(self._fd, 0, os.SEEK_END)
        fd, start = self._fd, self._at
        line = json.dumps(record, separators=(",", ":")).encode() + b"\n"
        size = os.fstat(fd).st_size
        try:
            offset = start
            view = memoryview(line)
            while view:
                offset += (n := os.pwrite(fd, view, offset))
                view = view[n:]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                if start >= size:
                    os.ftruncate(fd, start)
                else:  # blank out the partial line inside the reservation
                    os.pwrite(fd, b" " * min(len(line), size - start), start)
            raise
        self._at, self.written = start + len(line), True

    def close(self) -> None:
        """Close the file; delete it when nothing was written (the reservation only)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            if not self.written:
                with contextlib.suppress(OSError):
                    self.path.unlink()


def spilled(directory: Path) -> Iterator[tuple[Path, list[Any]]]:
    """Every spill file in ``directory`` (earlier runs', ``SpillFile``) and the JSON values of its lines; a line that
    cannot be read (cut short when the disk filled) is left out. The caller deletes a file once it has stored it."""
    from promptgrid.safeio import read_json_lines

    for path in sorted(directory.glob(SPILL_GLOB)):
        with open(path, "rb") as f:
            values = [line.value for line in read_json_lines(f) if line.error is None]
        yield path, values


class BatchLedger:
    """The batch records of a run directory's store: tables ``batches`` and ``batch_jobs`` (``_BATCH_SCHEMA``),
    what every step of a provider batch is recorded in before and after it happens (``running/batch.py``).

    One ledger for both kinds of run: ``RunStore`` (a job's key) and the conversation store (a step's key) mix
    it in, so a batch is recorded, advanced and resumed by the same code whatever its lines are. A class that
    mixes it in has ``db`` (a connection in autocommit mode), ``path`` and ``_tables`` (``None`` until
    ``_has_table`` reads them; set back to ``None`` after a schema change).
    """

    db: sqlite3.Connection
    path: Path
    _tables: set[str] | None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any failure (a full disk leaves no transaction open)."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def _has_table(self, name: str) -> bool:
        """Whether the store has table ``name`` (a read-only store of an older version may lack the batch tables)."""
        if self._tables is None:
            self._tables = {n for (n,) in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return name in self._tables

    @_guarded
    def add_batch(self, batch: BatchRecord, lines: Sequence[BatchJob]) -> None:
        """Record a batch and its jobs in one transaction, before anything is uploaded.

        Written first so that a process killed while uploading finds the batch
        (and its keys) on resume and never puts those keys in a second batch.
        """
        with self._transaction():
            self.db.execute("INSERT INTO batches VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                batch.id, batch.model, batch.kind, batch.state, batch.provider_id, batch.input_file,
                batch.output_file, batch.error_file, batch.requests, batch.bytes, batch.created_at,
                batch.updated_at, batch.detail))
            self.db.executemany("INSERT INTO batch_jobs VALUES (?,?,?,?,?,?,?)",
                                [(batch.id, j.key, j.model, j.repeat, j.prompt_sha256, j.params, j.native)
                                 for j in lines])

    @_guarded
    def update_batch(self, batch_id: str, **fields: Any) -> BatchRecord:
        """Set fields of a stored batch (state, provider_id, files, detail), committed at once; returns it."""
        allowed = {"state", "provider_id", "input_file", "output_file", "error_file", "detail"}
        if not fields.keys() <= allowed:
            raise ValueError(f"cannot update batch fields {sorted(fields.keys() - allowed)}")
        sets = ", ".join(f"{k}=?" for k in fields)
        with self._transaction():
            self.db.execute(f"UPDATE batches SET {sets}, updated_at=? WHERE id=?",
                            (*fields.values(), time.time(), batch_id))
        found = self.batches(batch_id=batch_id)
        if not found:
            raise KeyError(batch_id)
        return found[0]

    @_guarded
    def drop_batch(self, batch_id: str) -> None:
        """Forget a batch the provider never received (``preparing``): its keys may be batched or sent again."""
        with self._transaction():
            state = self.db.execute("SELECT state FROM batches WHERE id=?", (batch_id,)).fetchone()
            if state is None or state[0] != PREPARING:
                raise ValueError(f"batch {batch_id} is not preparing: the provider may have it")
            self.db.execute("DELETE FROM batch_jobs WHERE batch=?", (batch_id,))
            self.db.execute("DELETE FROM batches WHERE id=?", (batch_id,))

    @_guarded
    def batches(self, *, model: str | None = None, batch_id: str | None = None) -> list[BatchRecord]:
        """The recorded batches (of ``model``, or the one ``batch_id``), oldest first."""
        if not self._has_table("batches"):
            return []
        where, args = [], []
        if model is not None:
            where.append("model=?")
            args.append(model)
        if batch_id is not None:
            where.append("id=?")
            args.append(batch_id)
        sql = "SELECT * FROM batches" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY created_at, id"
        return [BatchRecord(*row) for row in self.db.execute(sql, args)]

    @_guarded
    def batch_jobs(self, batch_id: str) -> dict[str, BatchJob]:
        """The jobs of one batch by key (what its result lines must join back to)."""
        if not self._has_table("batch_jobs"):
            return {}
        return {row[0]: BatchJob(*row) for row in self.db.execute(
            "SELECT key, model, repeat, prompt_sha256, params, native FROM batch_jobs WHERE batch=?", (batch_id,))}

    @_guarded
    def live_batch_keys(self, model: str) -> set[str]:
        """Keys of ``model`` that are in a live batch (recorded, uploaded, running or not yet collected)."""
        if not self._has_table("batches"):
            return set()
        marks = ",".join("?" * len(LIVE_BATCH_STATES))
        return {k for (k,) in self.db.execute(
            f"SELECT bj.key FROM batch_jobs bj JOIN batches b ON b.id = bj.batch WHERE b.model=? "
            f"AND b.kind != 'export' AND b.state IN ({marks})", (model, *LIVE_BATCH_STATES))}


_S = TypeVar("_S", bound="StoreFile")


class StoreFile(BatchLedger):
    """What the store of a run directory (``RunStore``, of either kind) holds open and closes together: its
    SQLite connection, a reader's private copy of the file (``connection._connect_readonly``; removed on close),
    and its spill file (``SpillFile``)."""

    _copy: Path | None
    _spill: SpillFile

    def close(self) -> None:
        self._spill.close()
        self.db.close()
        if self._copy is not None:
            shutil.rmtree(self._copy, ignore_errors=True)
            self._copy = None

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
