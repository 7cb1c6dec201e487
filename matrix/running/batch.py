"""A run through provider batch APIs (``promptgrid run --batch``), and storing batch result lines.

Each model's new calls (what an online run would send: not stored, not
unsupported, not already in a live batch) are written as lines of input files
(``batches/<batch id>.jsonl`` in the run directory), split by the provider's
request and size limits, uploaded, and submitted as batches; the run then polls
them and stores every result line as it is collected. Every step is recorded
in the store before the next one starts (``BatchRecord.state``)::

    preparing   batch and its keys recorded, input file written, not known to be uploaded
    uploaded    the provider has the file (its id recorded)
    submitted   the provider has the batch (its id recorded): running
    ended       the provider finished it (completed, failed, expired, cancelled): results not all stored
    collected   every line of it is stored (an answer or a typed error)

A process killed at any point resumes from the store: a ``preparing`` batch
looks for its file at the provider by name before uploading it, an
``uploaded`` one for a batch made from its file before creating one, so a step
done by the provider but never recorded is adopted, not repeated; a
``submitted`` one is polled; an ``ended`` one is collected again, and lines
already stored are left as they are. Keys in a live batch (any state before
``collected``) are never put in another batch and never sent online.

Lines a batch did not answer (expired, cancelled: ``ErrorKind.EXPIRED``), and
lines that failed, are stored as typed errors, like online errors: a re-run
with ``--retry-errors`` sends them again (in a new batch with ``--batch``,
online without). Cost is recorded at the batch price (``BatchBackend.price``).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from promptgrid.errors import RunError
from promptgrid.matrix.clients import BatchBackend, Completion, LineResult, Redactor, stored_response
from promptgrid.matrix.clients._base import provider_field
from promptgrid.providers import CallError, ErrorKind
from promptgrid.records import Case
from promptgrid.safeio import atomic_output, bounded_lines
from promptgrid.variants import Variant

from .ledger import COLLECTED, ENDED, PREPARING, SUBMITTED, UPLOADED, BatchJob, BatchLedger, BatchRecord
from .runner import Lane, Row, Runner, RunSummary, Transport, VerdictRow, _params_json, verdict_row
from .store import DONE, ERROR, CallResult, RunStore, stored_records

__all__ = ["BATCH_DIR", "BatchTransport", "CollectCounts", "collect_batch", "poll_batches", "store_results"]

BATCH_DIR = "batches"
"""Input files are written here, inside the run directory, before they are uploaded."""

#: Result lines committed per transaction while collecting (so a killed collection keeps what it stored).
COLLECT_CHUNK = 500

Scorer = Callable[[str, Variant, Case], Any]


@dataclass
class CollectCounts:
    """What storing a set of result lines did."""

    written: int = 0
    """Calls stored (answers and errors)."""
    answers: int = 0
    errors: int = 0
    kept: int = 0
    """Lines whose key already had an answer: left as they were (a second collection or import)."""
    unknown: int = 0
    """Lines whose ``custom_id`` is not a job of the batch (ignored)."""
    error_kinds: dict[str, int] = field(default_factory=dict)


def store_results(store: RunStore, lines: Iterable[LineResult], jobs: Mapping[str, BatchJob], *,
                  scorer: Scorer, variants: Mapping[int, Variant], cases: Mapping[int, Case],
                  redactor: Redactor | None = None, price: Callable[[int, int], float | None] | None = None,
                  counts: CollectCounts | None = None) -> CollectCounts:
    """Store result lines as calls, with the verdicts of every job each one answers.

    ``jobs`` are the batch's (or export's) jobs by key; ``variants`` and
    ``cases`` map the store's ids to records (``store.stored_records``).
    Committed every ``COLLECT_CHUNK`` lines; a key that already has an answer
    is kept as it is (``RunStore.record_many``), so storing the same lines
    twice changes nothing. ``price(input_tokens, output_tokens)`` gives each
    answer's cost (the batch price).
    """
    counts = counts or CollectCounts()
    redact = redactor or Redactor()
    pending: list[LineResult] = []

    def flush() -> None:
        if not pending:
            return
        rows_of = store.job_rows([key for key, _ in pending])
        entries = []
        for key, outcome in pending:
            job = jobs[key]
            rows = rows_of.get(key, [])
            result = _line_result(outcome, job, redact, price)
            if result.status == DONE:
                verdicts = _verdicts(result.response or "", rows, scorer, variants, cases)
            else:
                verdicts = [(row, None, False, None) for row in rows]
            entries.append((result, verdicts))
        written = store.record_many(entries)
        _tally(counts, entries, written)
        pending.clear()

    seen: set[str] = set()
    for line in lines:
        key = line[0]
        if key not in jobs or key in seen:
            counts.unknown += key not in jobs
            continue
        seen.add(key)
        pending.append(line)
        if len(pending) >= COLLECT_CHUNK:
            flush()
    flush()
    return counts


def _line_result(outcome: Completion | CallError, job: BatchJob, redact: Redactor,
                 price: Callable[[int, int], float | None] | None) -> CallResult:
    """The stored call of one result line: its answer (redacted, the provider's model and finish reason too, a
    native one as its envelope, at the batch price), or its error."""
    if isinstance(outcome, CallError):
        return CallResult(key=job.key, model=job.model, repeat=job.repeat, prompt_sha256=job.prompt_sha256,
                          params=job.params, status=ERROR, attempts=1, error=redact(outcome.message),
                          error_kind=outcome.kind.value)
    c = outcome
    cost = price(c.input_tokens or 0, c.output_tokens or 0) if price and c.input_tokens is not None else None
    return CallResult(key=job.key, model=job.model, repeat=job.repeat, prompt_sha256=job.prompt_sha256,
                      params=job.params, status=DONE,
                      response=stored_response(c, native=bool(job.native), exact=redact.exact),
                      finish_reason=provider_field(c.finish_reason, redact.exact), input_tokens=c.input_tokens,
                      output_tokens=c.output_tokens, cost_usd=cost, attempts=1,
                      raw_model=provider_field(c.model, redact.exact))


def _verdicts(response: str, rows: Sequence[Row], scorer: Scorer, variants: Mapping[int, Variant],
              cases: Mapping[int, Case]) -> list[VerdictRow]:
    """The verdict row of every job an answer answers; a job whose scoring raised gets none (``score`` redoes it)."""
    verdicts = []
    for row in rows:
        try:
            verdicts.append(verdict_row(row, scorer(response, variants[row[1]], cases[row[2]])))
        except Exception:  # noqa: BLE001 - a checker bug must not lose the answer; `score` redoes it
            continue
    return verdicts


def _tally(counts: CollectCounts, entries: Sequence[tuple[CallResult, Any]], written: int) -> None:
    """Add a committed chunk to ``counts``: written and kept lines, answers, errors by kind."""
    counts.written += written
    counts.kept += len(entries) - written
    for result, _ in entries:
        if result.status == DONE:
            counts.answers += 1
        else:
            counts.errors += 1
            kind = result.error_kind or "unknown"
            counts.error_kinds[kind] = counts.error_kinds.get(kind, 0) + 1


def _lines_of(backend: BatchBackend, data: IO[bytes], where: str) -> Iterable[LineResult]:
    """The result lines of a downloaded file, read one at a time within ``safeio``'s line and file bounds (no
    list of every line beside the download; a line over the bound stops the collection with ``InputLimitError``
    and the batch stays ended, collected by the next poll once the bound is raised); a line whose key cannot be
    read is skipped (its job is then one the file did not answer)."""
    for number, raw in enumerate(bounded_lines(data, name=where), start=1):
        if not raw.strip():
            continue
        try:
            yield backend.decode(raw, f"{where}:{number}")
        except CallError:
            continue


def _download_file(store: BatchLedger) -> BinaryIO:
    """An unnamed temporary file in the run directory (its disk holds the run), else in the system's temp dir."""
    try:
        return tempfile.TemporaryFile(dir=store.path.parent, prefix=".batch-download-")
    except OSError:  # a read-only or full run directory: the store's own writes will say so if it matters
        return tempfile.TemporaryFile(prefix="promptgrid-batch-download-")


async def collect_batch(store: RunStore, backend: BatchBackend, batch: BatchRecord, *, scorer: Scorer,
                        variants: Mapping[int, Variant], cases: Mapping[int, Case],
                        redactor: Redactor | None = None) -> CollectCounts:
    """Download an ended batch's output and error files and store every line; mark it ``collected``.

    Jobs of the batch that neither file answers are stored as errors: ``expired``
    when the batch expired or was cancelled (retryable), the batch's own error
    when it failed validation.
    """
    jobs = store.batch_jobs(batch.id)
    counts = CollectCounts()
    detail = json.loads(batch.detail) if batch.detail else {}
    for file_id, what in ((batch.output_file, "output"), (batch.error_file, "errors")):
        if not file_id:
            continue
        # The download goes to a file beside the store (the disk the user chose for the run), never whole into
        # memory, and is read back a line at a time; the file is gone when the block ends, whatever happens.
        with _download_file(store) as data:
            await backend.download(file_id, data)
            data.seek(0)
            store_results(store, _lines_of(backend, data, f"batch {batch.provider_id} {what} file {file_id}"), jobs,
                          scorer=scorer, variants=variants, cases=cases, redactor=redactor, price=backend.price,
                          counts=counts)
    answered = store.lookup(list(jobs))
    missing = [k for k in jobs if k not in answered]
    if missing:
        provider_state = detail.get("provider_state") or "ended"
        if detail.get("state") == "failed":
            kind = ErrorKind.BAD_REQUEST
            message = f"batch {batch.provider_id} failed: {detail.get('errors') or 'no reason given'}"
        elif detail.get("state") == "completed":  # its files hold no readable line for it (an unreadable one)
            kind = ErrorKind.MALFORMED
            message = f"batch {batch.provider_id} completed, but its files hold no readable result line for this call"
        else:
            kind = ErrorKind.EXPIRED
            message = f"batch {batch.provider_id} {provider_state} before answering this line"
        store_results(store, ((k, CallError(kind, message)) for k in missing), jobs, scorer=scorer,
                      variants=variants, cases=cases, redactor=redactor, counts=counts)
    store.update_batch(batch.id, state=COLLECTED)
    return counts


async def _upload(store: BatchLedger, backend: BatchBackend, batch: BatchRecord, run_dir: Path) -> str:
    """Upload a preparing batch's input file; returns the provider's file id. A refusal that retrying cannot
    change drops the batch (its keys are free again) and its file."""
    path = run_dir / BATCH_DIR / f"{batch.id}.jsonl"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RunError(f"batch {batch.id}: its input file {path} is gone ({exc.strerror}) and the provider "
                       "has no upload of it. Remove the run directory's batch record by running with "
                       "a new --run-dir, or restore the file.") from None
    try:
        return await backend.upload(batch.id, data)
    except CallError as exc:
        if not exc.retryable:  # refused outright (too few lines, too big): free its keys, keep nothing
            store.drop_batch(batch.id)
            _remove_input(run_dir, batch.id)
        raise


async def advance(store: BatchLedger, backend: BatchBackend, batch: BatchRecord, run_dir: Path) -> BatchRecord:
    """Take a batch one step further (upload, submit, poll); returns it as recorded afterwards. ``store``: any
    store with the batch ledger (a single-turn run's or a conversation run's)."""
    if batch.state == PREPARING:
        file_id = await backend.find_upload(batch.id)
        if file_id is None:
            file_id = await _upload(store, backend, batch, run_dir)
        return store.update_batch(batch.id, state=UPLOADED, input_file=file_id)
    if batch.state == UPLOADED:
        assert batch.input_file is not None
        provider_id = await backend.find_submitted(batch.input_file, batch.id)
        if provider_id is None:
            provider_id = await backend.submit(batch.input_file, batch.id)
        return store.update_batch(batch.id, state=SUBMITTED, provider_id=provider_id)
    if batch.state == SUBMITTED:
        assert batch.provider_id is not None
        status = await backend.status(batch.provider_id)
        if status.state == "running":
            if batch.detail != status.to_detail():
                return store.update_batch(batch.id, detail=status.to_detail())
            return batch
        return store.update_batch(batch.id, state=ENDED, output_file=status.output_file,
                                  error_file=status.error_file, detail=status.to_detail())
    return batch


async def poll_batches(store: RunStore, backends: Mapping[str, BatchBackend], run_dir: Path, *, scorer: Scorer,
                       variants: Mapping[int, Variant], cases: Mapping[int, Case], redactor: Redactor | None = None,
                       wait: bool = False, poll_s: float = 30.0, models: Iterable[str] | None = None,
                       on_progress: Callable[[list[BatchRecord]], None] | None = None,
                       on_error: Callable[[BatchRecord, CallError], None] | None = None) -> CollectCounts:
    """Advance every live batch of ``models`` (all with a backend) as far as it goes now; with ``wait``, until
    all are collected, polling every ``poll_s`` seconds. Returns what was collected.

    A batch API call that fails raises its ``CallError``; with ``on_error``, it is handed to ``on_error``
    with its batch instead, that batch is left as recorded (polled again by the next call) and the others
    go on."""
    total = CollectCounts()
    names = set(models) if models is not None else set(backends)
    failed: set[str] = set()
    while True:
        live = [b for b in store.batches() if b.live and b.kind != "export" and b.model in names
                and b.id not in failed]
        for batch in live:
            backend = backends[batch.model]
            try:
                before = None
                while batch.live and batch.state != before and batch.state != ENDED:
                    before = batch.state
                    batch = await advance(store, backend, batch, run_dir)
                if batch.state == ENDED:
                    counts = await collect_batch(store, backend, batch, scorer=scorer, variants=variants,
                                                 cases=cases, redactor=redactor)
                    _merge(total, counts)
                    _remove_input(run_dir, batch.id)
            except CallError as exc:
                if on_error is None:
                    raise
                failed.add(batch.id)
                on_error(batch, exc)
        if on_progress is not None:
            on_progress(store.batches())
        still = [b for b in store.batches() if b.live and b.kind != "export" and b.model in names
                 and b.id not in failed]
        if not wait or not still:
            return total
        await asyncio.sleep(poll_s)


def _merge(total: CollectCounts, counts: CollectCounts) -> None:
    for name in ("written", "answers", "errors", "kept", "unknown"):
        setattr(total, name, getattr(total, name) + getattr(counts, name))
    for kind, n in counts.error_kinds.items():
        total.error_kinds[kind] = total.error_kinds.get(kind, 0) + n


def _remove_input(run_dir: Path, batch_id: str) -> None:
    """A collected batch's input file is not needed any more (its results are stored)."""
    try:
        (run_dir / BATCH_DIR / f"{batch_id}.jsonl").unlink()
    except OSError:
        pass


class _Builder:
    """The input file being filled for one model (flushed at the provider's limits)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.jobs: list[BatchJob] = []
        self.size = 0
        self.rows = 0
        """Job rows the lines answer (identical prompts of several variants share a line)."""


class _RoundEnd:
    """Put on a model's queue at the end of an adaptive round: the writer flushes its batch, then sets ``done``."""

    def __init__(self) -> None:
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class BatchTransport(Transport):
    """New calls go into provider batches instead of online calls (``Runner(..., transport=BatchTransport(...))``).

    The plan, the cache, deduplication and ``unsupported`` are the runner's
    (its producer); one batch writer per model takes the new calls, and after
    the plan is walked the run polls and collects (``wait``) or returns with
    the batches submitted (``promptgrid status`` or the same command collects
    them later). An adaptive round is one batch per model: the round settles
    when its batch is collected (with ``wait``; without, the run returns and
    the next run, after collecting, plans the next round).
    """

    def __init__(self, *, backends: Mapping[str, BatchBackend], run_dir: Path, wait: bool = True,
                 poll_s: float = 30.0) -> None:
        self.backends = dict(backends)
        self.wait = wait
        self.poll_s = poll_s
        self.run_dir = Path(run_dir)
        self.collected = CollectCounts()

    def workers(self, runner: Runner, lane: Lane) -> int:
        return 1

    async def before(self, runner: Runner, lanes: Sequence[Lane]) -> None:
        # What a killed run left: carry its batches as far as they go before planning new ones.
        await self._poll(runner, wait=False)

    async def after(self, runner: Runner, lanes: Sequence[Lane]) -> None:
        if runner._stop is None:
            await self._poll(runner, wait=self.wait)

    async def settle(self, runner: Runner, lane: Lane, keys: set[str]) -> bool:
        """Flush the round's batch, then poll until it is collected (``wait``); False when it is still running."""
        marker = _RoundEnd()
        await lane.queue.put(marker)  # the writer knows the marker
        await marker.done
        if runner._stop is not None or lane.halted is not None:
            return False
        if keys & runner.store.live_batch_keys(lane.spec.name):
            if not self.wait:
                lane.planned_note = ("this round's batch is submitted (--no-wait); once it is collected "
                                     "(promptgrid status RUN_DIR, or the same command), run the same command again "
                                     "to plan the next round")
                return False
            await self._poll(runner, wait=True, models=[lane.spec.name])
        lane.live = runner.store.live_batch_keys(lane.spec.name)
        return runner._stop is None and not (keys & lane.live)

    def finish(self, runner: Runner, summary: RunSummary) -> None:
        summary.batch = True
        summary.batches_live = sum(1 for b in runner.store.batches() if b.live and b.kind != "export")
        # Lines of batches it collected, including lines a killed collection had stored already (``kept``):
        # the batch's answers, so a resumed collection of mostly answers is not "every call failed".
        summary.sent = self.collected.written + self.collected.kept
        summary.errors = self.collected.errors
        summary.error_kinds = dict(self.collected.error_kinds)

    async def _poll(self, runner: Runner, *, wait: bool, models: Sequence[str] | None = None) -> None:
        """Advance and collect this run's models' live batches (until none is left, with ``wait``)."""
        store = runner.store
        if not store.batches():
            return
        variants, cases = stored_records(store)
        backends = self.backends if models is None else {m: self.backends[m] for m in models}
        polling = asyncio.ensure_future(poll_batches(
            store, backends, self.run_dir, scorer=runner.scorer, variants=variants, cases=cases,
            redactor=runner.redact, wait=wait, poll_s=self.poll_s, models=backends,
            on_progress=lambda batches: self._batch_progress(runner, batches)))
        runner._tasks.append(polling)  # Ctrl-C cancels it like the calls of an online run
        try:
            _merge(self.collected, await polling)
        except asyncio.CancelledError:
            runner._stop = "interrupted"
        except CallError as exc:
            runner.summary.halted["batch API"] = (
                f"{exc.kind.value}: {runner.redact(exc.message)}. Batches are kept: run the same command again, "
                "or promptgrid status RUN_DIR, to go on collecting.")
        finally:
            runner._tasks.remove(polling)

    def _batch_progress(self, runner: Runner, batches: list[BatchRecord]) -> None:
        live = [b for b in batches if b.live and b.kind != "export"]
        runner.progress.note = f"{len(live)} batch(es) running, polled every {self.poll_s:g} s" if live else None
        runner.progress.tick(force=True)

    async def work(self, runner: Runner, lane: Lane) -> None:
        """Take the new calls off the queue into input files; flush at the limits, at a round's end and at the end."""
        backend = self.backends[lane.spec.name]
        builder = _Builder()
        while True:
            call = await lane.queue.get()
            if call is None:
                break
            if isinstance(call, _RoundEnd):
                if builder.lines and runner._stop != "interrupted":
                    builder = await self._flush_or_leave(runner, lane, backend, builder)
                call.done.set_result(None)
                continue
            if runner._stop is not None:
                runner._inflight.pop(call.job.key, None)
                continue
            try:
                line = backend.encode(call.job.key, call.job.messages, call.job.params,
                                      getattr(call.job, "request", None))
            except CallError as exc:  # a request this batch API cannot carry: that job's error, like online
                runner._finish(call, CallResult(
                    key=call.job.key, model=call.job.model, repeat=call.job.repeat,
                    prompt_sha256=call.job.prompt_sha256, params=_params_json(call.job.params), status=ERROR,
                    attempts=0, error=runner.redact(exc.message), error_kind=exc.kind.value))
                continue
            if builder.lines and (len(builder.lines) + 1 > backend.max_requests
                                  or builder.size + len(line) > backend.max_bytes):
                await self._flush(runner, lane, backend, builder)
                builder = _Builder()
            builder.lines.append(line)
            builder.size += len(line)
            builder.rows += len(call.rows)
            job = call.job
            request = getattr(job, "request", None)
            builder.jobs.append(BatchJob(job.key, job.model, job.repeat, job.prompt_sha256, _params_json(job.params),
                                         int(request is not None and request.get("call_mode") == "native")))
        if builder.lines and runner._stop != "interrupted":
            await self._flush_or_leave(runner, lane, backend, builder)

    async def _flush_or_leave(self, runner: Runner, lane: Lane, backend: BatchBackend, builder: _Builder) -> _Builder:
        """Flush ``builder``, or leave its jobs pending when they are fewer than the provider takes per batch."""
        min_requests: int = getattr(backend, "min_requests", 1)  # only some providers have a minimum
        if len(builder.lines) < min_requests:
            # Fewer than the provider takes per batch (Bedrock: 100): never padded; left pending.
            for job in builder.jobs:
                runner._inflight.pop(job.key, None)
            runner.summary.batch_left += builder.rows
            runner.progress.done += builder.rows
            lane.planned_note = (f"this round has {len(builder.lines)} new calls, fewer than the "
                                 f"{min_requests} the batch API takes per batch: give a larger --budget or "
                                 "fewer --rounds")
        else:
            await self._flush(runner, lane, backend, builder)
        return _Builder()

    async def _flush(self, runner: Runner, lane: Lane, backend: BatchBackend, builder: _Builder) -> None:
        """Record one batch and its keys, write its input file, then upload and submit it."""
        batch_id = f"pg-{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:10]}"
        directory = self.run_dir / BATCH_DIR
        directory.mkdir(exist_ok=True)
        with atomic_output(directory / f"{batch_id}.jsonl", binary=True, fsync=True) as f:  # whole or absent
            f.writelines(builder.lines)
        now = time.time()
        record = BatchRecord(batch_id, lane.spec.name, backend.kind, PREPARING, None, None, None, None,
                             len(builder.lines), builder.size, now, now, None)
        runner.store.add_batch(record, builder.jobs)
        for job in builder.jobs:
            runner._inflight.pop(job.key, None)
            lane.live.add(job.key)
        runner.summary.batches += 1
        runner.summary.batch_jobs += len(builder.jobs)
        runner.progress.done += builder.rows
        if lane.halted is not None:
            return  # recorded: the next run uploads it
        before = None
        try:
            while record.state not in (SUBMITTED, before):
                before = record.state
                record = await advance(runner.store, backend, record, self.run_dir)
        except CallError as exc:
            self._batch_failed(runner, lane, exc)

    def _batch_failed(self, runner: Runner, lane: Lane, exc: CallError) -> None:
        """A batch API call failed: this model makes no more batches now; what is recorded resumes next run."""
        message = f"batch API of {lane.spec.name}: {exc.kind.value}: {runner.redact(exc.message)}. "
        if exc.kind is ErrorKind.NOT_FOUND:
            message += ("This server has no files/batches API (a plain `vllm serve` has none): run the model online "
                        "(without --batch), or write its requests with promptgrid export-batch for `vllm run-batch`. ")
        message += ("The batches recorded so far are kept; run the same command again (or promptgrid status "
                    "RUN_DIR) to go on.")
        lane.halted = message
        runner.summary.halted[lane.spec.name] = message
