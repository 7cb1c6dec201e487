"""Conversation runs through provider batch APIs (``promptgrid run --batch`` on a conversation dataset): rounds.

A conversation's next step depends on the answer before it, so a batch can
only carry one step of each episode. A *round* is one batch per model (split
by the provider's limits) holding the next request of every live episode:

1. Episodes play as online, from the stored steps, until each needs an
   answer the store does not have. Such an episode parks its environment
   (the worker goes back to its pool; the calls it ran are replayed on a fresh
   one when the answer comes) and waits on the round (``BatchRounds.answer``).
2. When every live episode waits (or has ended), the round's requests are
   written as batch lines, exactly what the online call sends
   (``BatchBackend.encode``), recorded in the store's batch ledger (the
   single-turn run's ``batches`` and ``batch_jobs`` tables, ``BatchLedger``)
   before anything is uploaded, then uploaded, submitted and polled by the
   single-turn run's ``running.batch.advance``.
3. An ended batch is collected: each answer is stored as a step under its
   step key (redacted and cut as an online answer is), a line the batch did
   not answer (failed, expired, unreadable) ends its episode with that error,
   as a step that kept failing online does. The waiting episodes go on, and
   the next round starts when they all wait again.

A run killed mid-round resumes from the ledger (``BatchRounds.resume``): a
recorded batch is found at the provider (its file by name, its batch by its
file) instead of being uploaded or submitted twice, polled to its end and
collected before any episode plays, and the episodes then read its answers
from the store. Results equal an online run's: the same requests, the same
stored steps, scored the same way; cost is recorded at the batch price.

``export-batch`` uses the same rounds in export mode: every episode plays at
once, and the round is kept (``exported``) instead of being sent; the
episodes waiting on it end with ``RoundExported``, left for the next export.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from promptgrid.errors import RunError
from promptgrid.matrix.clients import BatchBackend, Completion
from promptgrid.matrix.running.batch import BATCH_DIR, _download_file, _lines_of, _remove_input, advance
from promptgrid.matrix.running.ledger import COLLECTED, ENDED, PREPARING, BatchJob, BatchRecord
from promptgrid.matrix.running.store import RunStore
from promptgrid.providers import CallError, ErrorKind
from promptgrid.records import Step
from promptgrid.safeio import atomic_output

__all__ = ["BatchRounds", "RoundExported"]


class RoundExported(Exception):
    """Raised in an episode that waits on a round ``export-batch`` wrote to a file instead of sending: the episode
    is left unfinished (not stored); ``import-batch`` stores the answers, and the next export replays it."""


_Price = Callable[[int, int], "float | None"]
"""A batch backend's price of one line (``BatchBackend.price``)."""


@dataclass(frozen=True)
class _Line:
    """One request of a round: a step's key, model and repeat, and the encoded batch line."""

    key: str
    model: str
    repeat: int
    params: str
    native: bool
    data: bytes


class BatchRounds:
    """The rounds of one conversation run: what waits, when a round goes, and its batches' lifecycle.

    ``backends``: each model's ``BatchBackend``. ``to_step(completion, native, price)``: a line's
    ``Completion`` as the ``Step`` an online step would store (redacted, cut; ``native``: the answer is
    the tool-call envelope), priced by ``price`` (the backend's batch price) where the answer has no cost.
    ``progress``: a line per round and per batch."""

    def __init__(self, store: RunStore, backends: Mapping[str, BatchBackend], run_dir: Path, *,
                 to_step: Callable[[Any, bool, _Price], Step], redact: Callable[[str], str],
                 poll_s: float = 30.0, progress: TextIO | None = None) -> None:
        self.store, self.backends, self.run_dir = store, dict(backends), Path(run_dir)
        self.to_step, self.redact, self.poll_s, self.progress = to_step, redact, float(poll_s), progress
        self.pending: dict[str, _Line] = {}
        """The next round's requests, by step key."""
        self.futures: dict[str, asyncio.Future[Step]] = {}
        """The answer each waiting step key will get (a key shared by several episodes: one line, one answer)."""
        self.failed: dict[str, CallError] = {}
        """Step keys whose line got no answer in this run: the episode that asks again ends with this error."""
        self.live = 0  # episodes between their start and their end
        self.waiting = 0  # of those, the ones waiting on a round's answer
        self.rounds = 0
        self.batches = 0
        self.lines = 0
        self._flushing: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self.export = False
        """``export-batch``: the first round is kept in ``exported`` instead of being sent, and every episode that
        waits on it ends with ``RoundExported``."""
        self.exported: list[_Line] | None = None

    # ----------------------------------------------------------------- episodes

    def started(self) -> None:
        self.live += 1

    def ended(self) -> None:
        self.live -= 1
        self._maybe_go()

    async def answer(self, key: str, model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any],
                     request: Mapping[str, Any] | None, *, native: bool, repeat: int) -> tuple[Step, bool]:
        """The answer to this step, from the round that carries it, and whether this call made its line (a key
        several episodes ask for is one line); raises the line's ``CallError`` when the batch did not answer
        it."""
        if self._failure is not None:
            raise self._failure
        if self.exported is not None:
            raise RoundExported(key)
        if key in self.failed:
            raise self.failed[key]
        future = self.futures.get(key)
        mine = future is None
        if future is None:
            backend = self.backends[model]
            body_params = {k: v for k, v in params.items() if k != "timeout"}
            future = self.futures[key] = asyncio.get_running_loop().create_future()
            self.pending[key] = _Line(key, model, repeat, json.dumps(body_params, sort_keys=True, default=str), native,
                                      backend.encode(key, list(messages), body_params, request))
        self.waiting += 1
        self._maybe_go()
        try:
            return await asyncio.shield(future), mine
        finally:
            self.waiting -= 1

    def _maybe_go(self) -> None:
        """Start the round once every live episode waits. Looked at after the event loop's turn, so that a worker
        whose episode just ended has taken its next one (which then joins this round) first."""
        if self.pending and self._flushing is None and self.waiting >= self.live:
            asyncio.get_running_loop().call_soon(self._go)

    def _go(self) -> None:
        if self.export and self.pending and self.waiting >= self.live and self.exported is None:
            self.exported = list(self.pending.values())
            self.pending = {}
            for key in [line.key for line in self.exported]:
                future = self.futures.pop(key, None)
                if future is not None and not future.done():
                    future.set_exception(RoundExported(key))
            return
        if self.pending and self._flushing is None and self.waiting >= self.live:
            lines, self.pending = self.pending, {}
            self._flushing = asyncio.ensure_future(self._round(lines))
            self._flushing.add_done_callback(self._round_done)

    def _round_done(self, task: asyncio.Task[None]) -> None:
        self._flushing = None
        if not task.cancelled() and task.exception() is not None and self._failure is None:
            self._failure = task.exception()
        self._maybe_go()

    # ----------------------------------------------------------------- a round

    async def _round(self, lines: Mapping[str, _Line]) -> None:
        """One round: each model's lines in batches, submitted, polled, collected; every waiting step answered.
        A failure (a batch API error that retries could not fix, a full disk) is given to the round's steps."""
        self.rounds += 1
        by_model: dict[str, list[_Line]] = {}
        for line in lines.values():
            by_model.setdefault(line.model, []).append(line)
        try:
            records = [record for model, group in by_model.items() for record in self._record(model, group)]
            self._say(f"batch round {self.rounds}: {len(lines)} step(s) in {len(records)} batch(es) "
                      f"({', '.join(f'{m}: {len(g)}' for m, g in by_model.items())}); polling every {self.poll_s:g} s")
            await asyncio.gather(*(self._finish(record) for record in records))
        except BaseException as exc:
            for key in lines:
                future = self.futures.pop(key, None)
                if future is not None and not future.done():
                    future.set_exception(exc)
            if isinstance(exc, CallError):
                self.failed.update({key: exc for key in lines})
                return
            raise
        for key in lines:  # every line was collected: an answer stored, or an error in ``failed``
            future = self.futures.pop(key, None)
            if future is not None and not future.done():
                future.set_exception(self.failed.get(key) or CallError(
                    ErrorKind.MALFORMED, "the batch's files hold no result line for this step"))

    def _record(self, model: str, lines: Sequence[_Line]) -> list[BatchRecord]:
        """The model's lines as batches within its provider's limits, each written and recorded (``preparing``)
        before anything is uploaded."""
        backend = self.backends[model]
        records: list[BatchRecord] = []
        chunk: list[_Line] = []
        size = 0
        for line in lines:
            if chunk and (len(chunk) >= backend.max_requests or size + len(line.data) > backend.max_bytes):
                records.append(self._write(model, backend, chunk))
                chunk, size = [], 0
            chunk.append(line)
            size += len(line.data)
        if chunk:
            records.append(self._write(model, backend, chunk))
        return records

    def _write(self, model: str, backend: BatchBackend, lines: Sequence[_Line]) -> BatchRecord:
        batch_id = f"pg-conv-{uuid.uuid4().hex[:16]}"
        folder = self.run_dir / BATCH_DIR
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunError(f"cannot write the batch input in {folder} ({exc.strerror}).") from None
        with atomic_output(folder / f"{batch_id}.jsonl", binary=True, fsync=True) as out:
            for line in lines:
                out.write(line.data)
        now = time.time()
        record = BatchRecord(batch_id, model, backend.kind, PREPARING, None, None, None, None, len(lines),
                             sum(len(line.data) for line in lines), now, now, None)
        self.store.add_batch(record, [BatchJob(line.key, model, line.repeat, line.key, line.params, int(line.native))
                                      for line in lines])
        self.batches += 1
        self.lines += len(lines)
        return record

    async def _finish(self, batch: BatchRecord) -> None:
        """Advance a recorded batch to its end (polling every ``poll_s``) and collect it."""
        backend = self.backends[batch.model]
        while batch.state not in (ENDED, COLLECTED):
            before = batch.state
            batch = await advance(self.store, backend, batch, self.run_dir)
            if batch.state == before:
                await asyncio.sleep(self.poll_s)
        if batch.state == ENDED:
            await self._collect(backend, batch)

    async def _collect(self, backend: BatchBackend, batch: BatchRecord) -> None:
        """Store every answer of an ended batch as its step; a line it did not answer goes to ``failed``."""
        jobs = self.store.batch_jobs(batch.id)
        detail = json.loads(batch.detail) if batch.detail else {}
        got: dict[str, Completion | CallError] = {}
        for file_id, what in ((batch.output_file, "output"), (batch.error_file, "errors")):
            if not file_id:
                continue
            with _download_file(self.store) as data:
                await backend.download(file_id, data)
                data.seek(0)
                for key, outcome in _lines_of(backend, data, f"batch {batch.provider_id} {what} file {file_id}"):
                    if key in jobs and key not in got:
                        got[key] = outcome
        answered = 0
        for key, job in jobs.items():
            found = got.get(key)
            if found is not None and not isinstance(found, CallError):
                stored = self.store.step(key)  # stored already: a collection that a killed run began
                if stored is None:
                    stored = self.to_step(found, bool(job.native), backend.price)
                    self.store.add_step(key, job.model, stored)
                answered += 1
                future = self.futures.pop(key, None)
                if future is not None and not future.done():
                    future.set_result(stored)
                continue
            error = found if found is not None else _unanswered(batch, detail)
            self.failed[key] = CallError(error.kind, self.redact(error.message), status=error.status)
        self.store.update_batch(batch.id, state=COLLECTED)
        _remove_input(self.run_dir, batch.id)
        self._say(f"batch {batch.provider_id} of {batch.model}: {answered} of {len(jobs)} step(s) answered")

    async def resume(self) -> int:
        """Finish the batches a killed run left in the ledger (their answers stored as steps), before any episode
        plays; returns how many. Their unanswered lines are sent again by this run, as an online step that ended
        in an error is."""
        live = [batch for batch in self.store.batches() if batch.live and batch.kind != "export"]
        missing = sorted({batch.model for batch in live} - set(self.backends))
        if missing:
            raise RunError(f"{self.run_dir} has live batches of {', '.join(missing)}, which this run does not "
                           "name: add the model (--model) to collect them.")
        if live:
            self._say(f"collecting {len(live)} batch(es) a previous run left in {self.run_dir}")
        await asyncio.gather(*(self._finish(batch) for batch in live))
        self.failed.clear()
        return len(live)

    def _say(self, text: str) -> None:
        if self.progress is not None:
            print(text, file=self.progress, flush=True)


def _unanswered(batch: BatchRecord, detail: Mapping[str, Any]) -> CallError:
    """Why a batch's files hold no answer for a line (as a single-turn batch says it)."""
    if detail.get("state") == "failed":
        return CallError(ErrorKind.BAD_REQUEST,
                         f"batch {batch.provider_id} failed: {detail.get('errors') or 'no reason given'}")
    if detail.get("state") == "completed":
        return CallError(ErrorKind.MALFORMED, f"batch {batch.provider_id} completed, but its files hold no readable "
                                              "result line for this step")
    return CallError(ErrorKind.EXPIRED, f"batch {batch.provider_id} {detail.get('provider_state') or 'ended'} before "
                                        "answering this step")
