"""Run models x variants x cases x repeats: send each distinct call once, store and score every answer.

``Driver`` is the one engine of every run, whatever its kind: per model a
lane (its client, rate buckets, adaptive limit, a bounded queue, its
planner), a producer that asks the planner for cells and turns them into
the lane's work, workers that play it, adaptive rounds settled from the
store's outcomes, and the run's stop. ``Runner`` (below) is a single shot's
work on it; a conversation's is ``conversation_runner.EpisodeRunner``.

For each model, the producer walks the plan (``planning``) in chunks,
records the jobs in the store, and sorts each job into one of three:

- its call already has a result in the store: nothing is sent (resume, and
  identical prompts across runs);
- its call is in flight in this process: the job waits for that answer
  (identical prompts across variants are sent once);
- otherwise a new call, queued for the model's workers.

``concurrency`` workers per model take calls off a bounded queue, pace them
(requests/tokens per minute), send them with a timeout, retry transient
failures with exponential backoff and full jitter (honouring Retry-After up
to ``retry_after_cap``; the progress line says who is waited for and how
long), and commit each result, with the verdicts of every job it answers, as it
arrives: the results that arrive in one turn of the event loop share one
SQLite transaction, committed before the loop waits for anything else (and
when the run is cancelled or fails). A call that fails for good is a stored
error, never a crashed run. Memory stays flat: the plan is streamed, and
only calls in flight are held.

Stopping: Ctrl-C (SIGINT) or SIGTERM cancels the calls in flight (their jobs
stay pending) and returns; ``max_cost`` stops sending new calls once the run
directory's recorded spend, plus what the calls in flight are expected to
cost, reaches it, and lets those in flight finish (they are paid for).
Either way, running the same command again resumes. A full disk stops the
run like ``max_cost`` (``disk_full``): the answers that arrive after it are
spilled beside the store (``RunStore.spill``) and stored by the next run.

Errors that were final (non-retryable, or retries exhausted) are final: a
re-run does not send them again unless ``retry_errors`` is set
(``--retry-errors``).

Unsupported combinations: before a job with request pieces (``Job.request``:
native tools, a constraint) is sent, its client says whether it can send them
(``ModelClient.unsupported``). If not, the call is stored with status
``unsupported`` (the reason in ``error``, ``error_kind`` ``unsupported``,
no verdict), never sent, and counted apart (``RunSummary.unsupported``); the
rates leave it out. A re-run sends it only if the client can send it now (a
model option changed, e.g. ``constraints``).

A native answer (tool calls) is stored as the JSON envelope of
``promptgrid.matrix.clients.envelope`` (text and raw tool calls), so that
``promptgrid score`` can re-score it offline.

Each call goes through ``sending.send``, the one send path of both runners
(pacing, the adaptive limit, the timeout, retries, and the model's stop). A
model halts (no more calls; its other jobs stay pending, the other models
go on) after an error every later call would repeat: bad or missing
credentials (auth), an unknown model (not found), or a rate limit whose
Retry-After is still above the cap after one wait of the cap (the server
wants more time than the run may wait, so the run ends within about one cap);
when its server refused every connection for ``GRACE_S`` seconds (at least
``REFUSALS`` failures in a row, no answer between: kind ``connection``, the
message naming the endpoint), instead of retrying every job; and when every
endpoint of a model with replicas was dropped (``NoEndpointLeft``: each
404, refused key or dead server is dropped on its own, its calls going to the
others).

Adaptive concurrency (``adaptive.Adaptive``): within the model's
``concurrency`` the number of calls in flight is lowered when answers come
back late (near the timeout, or climbing) or calls time out, and raised again
while they come back quickly; the progress line shows it below the ceiling
(``concurrency 2/8``). A timeout of a call sent beside others (a server busy
with the model's own calls) lowers the limit and is retried without using
up the call's ``max_retries`` (at most ``concurrency`` times per call).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from promptgrid.errors import StoreFullError
from promptgrid.matrix.clients import JobIds, ModelClient, Redactor, stored_response
from promptgrid.matrix.clients._base import provider_field
from promptgrid.matrix.running.config import ModelSpec, RunConfig
from promptgrid.matrix.scoring.verdict import Verdict
from promptgrid.providers import CallError, ErrorKind
from promptgrid.records import Case
from promptgrid.variants import Variant

from . import costcap, signals
from .adaptive import Adaptive
from .plan import Job, JobMaker, Renders
from .planning import CHUNK, Cell, Planner, make_planner
from .progress import Progress
from .ratelimit import estimate_tokens, model_buckets
from .sending import Line, Stopped, beyond_cap, send
from .store import DONE, ERROR, UNSUPPORTED, CallResult, RunStore, VerdictRow

__all__ = ["Driver", "Lane", "RunSummary", "Runner", "Scorer", "Transport", "verdict_row"]

Scorer = Callable[[str, Variant, Case], Any]
Row = tuple[int, int, int, int]

def verdict_row(row: Row, verdict: Any) -> VerdictRow:
    """(row, verdict JSON, valid, error_code) for the store, from a ``Verdict`` (its ``stored`` fields, built once
    per verdict: the scorer's memo returns one verdict for every identical answer) or any object with ``to_dict``."""
    if isinstance(verdict, Verdict):
        return (row, *verdict.stored())
    d = verdict.to_dict()
    return row, json.dumps(d, separators=(",", ":")), bool(d.get("valid")), d.get("error_code")


@dataclass
class RunSummary:
    """What one invocation did."""

    jobs: int = 0
    """Jobs in the plan."""
    sent: int = 0
    """Calls that got a final result in this invocation (answers + final errors)."""
    errors: int = 0
    """Of ``sent``, those that ended in an error."""
    cached: int = 0
    """Jobs answered by a call already in the store."""
    shared: int = 0
    """Jobs answered by an identical call sent in this invocation."""
    attempts: int = 0
    spend: float = 0.0
    """USD spent by this invocation."""
    stopped: str | None = None
    """None (finished), ``interrupted``, ``max_cost`` or ``disk_full`` (the store could not grow)."""
    exec_s: float = 0.0
    """Seconds from the first call sent to the last result committed."""
    wall_s: float = 0.0
    cpu_s: float = 0.0
    """CPU seconds this process used during the run (all threads)."""
    peak_rss_mb: float = 0.0
    """Peak resident memory of this process so far, in MiB."""
    score_failures: int = 0
    """Responses stored unscored because the scorer raised (``promptgrid score`` redoes them)."""
    score_error: str | None = None
    """The first scorer exception, for the message."""
    halted: dict[str, str] = field(default_factory=dict)
    """Models stopped after an error every call would repeat (auth, unknown model, a rate limit longer
    than the cap, a server refusing every connection, no endpoint left): name -> why."""
    concurrency: dict[str, list[int]] = field(default_factory=dict)
    """Per model: [lowest limit on calls in flight, limit at the end, ceiling] (``adaptive.Adaptive``)."""
    congested: int = 0
    """Timeouts of calls sent beside others, retried without using up their ``max_retries``."""
    error_kinds: dict[str, int] = field(default_factory=dict)
    """Of ``errors``, how many of each kind (``ErrorKind`` values: auth, rate_limit, server, ...)."""
    error_examples: dict[str, str] = field(default_factory=dict)
    """The first (redacted) message of each error kind."""
    replayed: int = 0
    """Answers spilled by an earlier run on a full disk, added to the store before this one planned."""
    spilled: int = 0
    """Answers this run could not store (disk full) and appended to the spill file instead."""
    lost: int = 0
    """Answers that neither the store nor the spill file could take (their calls are sent again next run)."""
    store_error: str | None = None
    """Why the store stopped taking results (``stopped == "disk_full"``)."""
    unsupported: int = 0
    """Jobs not sent because their model cannot do their call mode (stored ``unsupported``; new or stored)."""
    unsupported_reasons: dict[str, int] = field(default_factory=dict)
    """Of ``unsupported``, how many jobs per reason."""
    in_batch: int = 0
    """Jobs not sent because their call is in a live provider batch (``--batch``; collected when it ends)."""
    batch: bool = False
    """This invocation sent through batch APIs (``--batch``): ``sent`` counts the lines of the batches it
    collected, ``errors`` those stored as errors."""
    batches: int = 0
    """Provider batches this invocation created (``--batch``)."""
    batch_jobs: int = 0
    """Calls this invocation put in those batches."""
    batch_left: int = 0
    """Jobs not batched because they were fewer than the provider's minimum per batch (left pending: run them
    online, or with more jobs)."""
    batches_live: int = 0
    """Batches of the run directory still running when this invocation ended (``promptgrid status`` collects)."""
    planned: dict[str, str] = field(default_factory=dict)
    """Adaptive runs: models whose planner stopped before its budget, and why (a round waits for a batch or an
    export's results, or the model was stopped)."""

    @property
    def calls_per_s(self) -> float:
        return self.sent / self.exec_s if self.exec_s > 0 else 0.0

    @property
    def all_failed(self) -> bool:
        """Calls were sent and every one ended in an error (nothing was answered)."""
        return self.sent > 0 and self.errors == self.sent

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "calls_per_s": round(self.calls_per_s, 3)}


@dataclass
class _Call:
    """One distinct call in flight, and the jobs (rows) waiting for it."""

    job: Job
    rows: list[tuple[Row, Job]] = field(default_factory=list)


@dataclass(eq=False, kw_only=True)
class Lane(Line):
    """Everything per model: client, queue, ids, and its sending state (``sending.Line``: rate buckets, adaptive
    limit, whether it was stopped)."""

    spec: ModelSpec
    client: ModelClient
    model_id: int
    queue: asyncio.Queue[Any]
    """The work its workers take: a single shot's new call (``_Call``), a conversation's episode; ``None`` ends a
    worker."""
    live: set[str] = field(default_factory=set)
    """Keys in a live provider batch (``RunStore.live_batch_keys``): never sent online, never batched again."""
    planner: Planner | None = None
    """What this model sends next (``planning``): the product, or an adaptive goal's rounds."""
    planned_note: str | None = None
    """Why this model's adaptive round cannot be settled now, as its transport puts it (``RunSummary.planned``)."""
    walked: bool = False
    """Its producer ran (and ended): else the run was stopped before it started, and nothing of its plan was taken."""


class Driver:
    """The one engine every run goes through, whatever its episodes: per model a lane (``Lane``: its client, its
    sending state, a bounded queue, its planner), a producer that asks the planner for cells and turns them into
    work for the lane's queue (``_take``), workers that play the work (``_play``), adaptive rounds settled from the
    store's outcomes (``_settle``), and the run's stop (``stop``: the cost cap, a full disk, Ctrl-C or SIGTERM,
    which cancels what is in flight).

    What a cell becomes is the kind's: ``Runner`` (a single shot) renders it into a job, answers it from the store
    or an identical call in flight when it can and queues a call otherwise; ``EpisodeRunner`` (a conversation,
    ``conversation_runner``) queues the episode, which its worker plays step by step. Both send every call through
    ``sending.send`` (pacing, the adaptive limit, retries, the model's stop) and count spend against one
    ``costcap.Budget``.
    """

    chunk = CHUNK
    """Cells the producer hands to ``_take`` at a time."""

    def __init__(self, config: RunConfig, planners: Mapping[str, Planner], progress: Progress | None = None, *,
                 seed: int | None = None) -> None:
        self.config = config
        self.planners = dict(planners)
        self.total = sum(self.planners[m.name].total for m in config.models)
        self.progress = progress or Progress(self.total, enabled=False)
        self._stop: str | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._lanes: list[Lane] = []
        self.budget = costcap.Budget(config.max_cost)  # the spend the cap reads (``in_flight``: sent, not counted)
        self._rng = random.Random(seed)
        self._retry = config.retry_policy()
        self.halted: dict[str, str] = {}
        """Models stopped after an error every later call would repeat: name -> why (``_note_halt``)."""
        self.on_start: Callable[[Callable[[], None]], None] | None = None
        """Called, from the run's loop, with the run's stop once its lanes are driven (``signals.Stopper``: the
        thread that waits for a run on a worker thread stops it so)."""

    def stop(self, reason: str) -> None:
        """Stop: ``interrupted`` cancels what is in flight; ``max_cost`` and ``disk_full`` let it finish."""
        if self._stop is None or reason == "interrupted":
            self._stop = reason
        if reason == "interrupted":
            for task in self._tasks:
                task.cancel()

    # ------------------------------------------------------------------ the kind's part

    def _workers(self, lane: Lane) -> int:
        """Tasks taking the lane's work off its queue."""
        raise NotImplementedError

    async def _worker(self, lane: Lane) -> None:
        """One of the lane's workers (``_work``, unless a transport takes the queue instead)."""
        await self._work(lane)

    async def _before(self, lanes: Sequence[Lane]) -> None:
        """Runs before the producers start."""

    async def _after(self, lanes: Sequence[Lane]) -> None:
        """Runs after every producer and worker ended, unless one failed."""

    async def _take(self, lane: Lane, cells: Sequence[Cell]) -> list[Any]:
        """Queue the work of ``cells`` (at most ``chunk``) on the lane; returns what ``_round`` reads a round by."""
        raise NotImplementedError

    async def _round(self, lane: Lane, entries: Sequence[Any]) -> tuple[dict[Cell, bool | None], int]:
        """An adaptive round's outcomes once its work is done, and how many of its cells have none."""
        raise NotImplementedError

    def _plan_cut(self, lane: Lane, missing: int | None, size: int) -> None:
        """An adaptive plan stopped before its budget: ``missing`` of its round's ``size`` cells have no outcome
        yet, or (``None``) the run or the model was stopped."""

    def _playable(self, lane: Lane, item: Any) -> bool:
        """Whether a worker plays ``item`` now (not once the run or its model stopped)."""
        return self._stop is None and lane.halted is None

    def _drop(self, lane: Lane, item: Any) -> None:
        """``item`` is not played: the run or its model stopped."""

    async def _play(self, lane: Lane, item: Any) -> None:
        """Play one item of the lane's work to its end."""
        raise NotImplementedError

    def _left(self, lane: Lane, cells: Sequence[Cell]) -> None:
        """The producer ended before its planner was done (the run or the model was stopped, a round could not be
        settled), with ``cells`` of the planner's latest answer not taken."""

    def _disk_full(self, exc: StoreFullError) -> None:
        """The store cannot grow: stop sending (what is in flight still finishes)."""
        self.stop("disk_full")

    # ------------------------------------------------------------------ the engine

    def _affordable(self, client: Any, messages: Sequence[Mapping[str, Any]],
                    request: Mapping[str, Any] | None) -> bool:
        """Whether one more call (of ``messages`` and ``request``, to ``client``) may be sent under the run
        directory's ``max_cost``; once it may not, the run stops (``max_cost``).

        The rule is ``costcap.allows``: spend so far + (calls in flight + this one) x the mean cost per answer
        so far (before the first answer: the list price of this prompt's input tokens, a lower bound; 0 when the
        price is unknown). Recorded spend may therefore pass the limit by at most the calls in flight when it
        is reached (at most ``concurrency``).
        """
        def first_price() -> float | None:
            price = getattr(client, "price", None)
            return price(estimate_tokens(messages, None, request) + 1, 0) if price is not None else None

        if self.budget.allows(first_price):
            return True
        self.stop(costcap.MAX_COST)
        return False

    def _paid(self, cost: float | None, *, answer: bool = True) -> None:
        """Count what a call cost (an error is no answer: ``costcap.Budget.paid``); the run stops once the recorded
        spend reaches ``max_cost``."""
        if self.budget.paid(cost, answer=answer):
            self.stop(costcap.MAX_COST)

    def _note_halt(self, lane: Lane) -> None:
        """Keep why the lane's model was stopped (``halted``), once its sending state says so."""
        if lane.halted is not None and lane.spec.name not in self.halted:
            self.halted[lane.spec.name] = lane.halted

    async def _wait_to_retry(self, model: str, error: CallError, delay: float) -> None:
        """Sleep ``delay``, the backoff before the next try (``providers.retried`` works it out from the policy),
        shown on the progress line."""
        token = self.progress.wait(delay, self._wait_reason(model, error))
        try:
            await asyncio.sleep(delay)
        finally:
            self.progress.end_wait(token)

    def _wait_reason(self, model: str, error: CallError) -> str:
        """What the progress line says a retry waits for."""
        if error.kind is ErrorKind.RATE_LIMIT:
            ra = error.retry_after
            hint = "" if ra is None else (f" (Retry-After {ra:g} s capped)" if beyond_cap(error, self._retry)
                                          else f" (Retry-After {ra:g} s)")
            return f"rate limited by {model}{hint}"
        return f"{error.kind.value} error from {model}, retrying"

    @staticmethod
    def _limits(lanes: Sequence[Lane]) -> dict[str, list[int]]:
        """Per model with an adaptive limit: [lowest limit on calls in flight, limit at the end, ceiling] (the
        summaries' ``concurrency``)."""
        return {lane.spec.name: [lane.limit.lowest, lane.limit.allowed, lane.limit.ceiling]
                for lane in lanes if lane.limit is not None}

    def _open_lane(self, spec: ModelSpec, client: Any, width: int, model_id: int = 0, *,
                   ceiling: int | None = None) -> Lane:
        """The model's lane: its client, store id, a queue of ``2 x width`` (``width``: its workers), rate buckets,
        adaptive limit on the ``ceiling`` calls it may have in flight (default ``width``), and planner."""
        rpm, tpm = model_buckets(spec.rpm, spec.tpm)
        most = width if ceiling is None else ceiling
        return Lane(spec=spec, client=client, model_id=model_id, queue=asyncio.Queue(maxsize=width * 2),
                     rpm=rpm, tpm=tpm, limit=Adaptive(most, spec.timeout) if most > 1 else None,
                     planner=self.planners[spec.name])

    async def _drive(self, lanes: Sequence[Lane]) -> None:
        """Run every lane's producer and workers to their end; Ctrl-C and SIGTERM stop the run cleanly."""
        self._lanes = list(lanes)
        loop = asyncio.get_running_loop()
        interrupt = partial(self.stop, "interrupted")
        installed = signals.install(loop, interrupt)
        # The progress line, redrawn 4 times a second (only when it is shown: a quiet run has no timer of its own).
        ticker = asyncio.create_task(self._tick()) if self.progress.enabled else None
        try:
            await self._before(lanes)
            for lane in lanes:
                self._tasks.append(asyncio.create_task(self._guard(self._produce, lane)))
                for _ in range(self._workers(lane)):
                    self._tasks.append(asyncio.create_task(self._guard(self._worker, lane)))
            if self.on_start is not None:
                self.on_start(interrupt)
            if self._stop == "interrupted":  # stopped before its tasks were there to cancel (``Stopper``, started)
                interrupt()
            results = await asyncio.gather(*self._tasks, return_exceptions=True)
            for lane in lanes:
                if not lane.walked:  # cancelled before it started
                    self._left(lane, ())
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                    raise r
            await self._after(lanes)
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
            signals.restore(loop, installed)
            self.progress.close()

    async def _guard(self, role: Callable[[Lane], Awaitable[None]], lane: Lane) -> None:
        """Run a lane's producer or worker; if it fails unexpectedly (a bug, a full disk), stop all the others.

        Without this, workers that died would leave their producer blocked on a full queue forever. (The coroutine
        is made here, not by the caller: a task cancelled before it starts then leaves none never awaited.)
        """
        try:
            await role(lane)
        except asyncio.CancelledError:
            raise
        except StoreFullError as exc:  # the producer could not record jobs: the workers finish what is in flight
            self._disk_full(exc)
        except BaseException:
            if self._stop != "interrupted":
                self._stop = "interrupted"
                for task in self._tasks:
                    if task is not asyncio.current_task():
                        task.cancel()
            raise

    async def _tick(self) -> None:
        while True:
            limits = [(lane.spec.name, lane.limit.describe()) for lane in self._lanes
                      if lane.limit is not None]
            shown = [f"{d} {name}" if len(limits) > 1 else d for name, d in limits if d]
            self.progress.concurrency = ", ".join(shown) or None
            self.progress.tick()
            await asyncio.sleep(0.25)

    async def _produce(self, lane: Lane) -> None:
        """Ask the model's planner for cells until it is done, and hand them to ``_take`` ``chunk`` at a time.

        An adaptive planner answers ``[]`` at the end of a round: the round is settled (``_settle``: its work is
        done, its outcomes are in the store) and the planner decides the next round.
        """
        planner = lane.planner
        assert planner is not None
        entries: list[Any] = []  # adaptive: this round's, read by ``_round`` when it is settled
        cells: Sequence[Cell] = ()
        taken = [0]  # of ``cells``, how many were handed to ``_take``
        planned = False  # the planner said it is done
        missing: int | None = None  # of the round that could not be settled, the cells without an outcome
        try:
            while self._stop is None and lane.halted is None:
                got, taken[0] = planner.next(), 0
                if got is None:
                    planned = True
                    break
                cells = got
                if cells:
                    await self._walk(lane, cells, taken, entries)
                    continue
                missing = await self._settle(lane, entries)
                if missing != 0:
                    break
                entries = []
            if planner.adaptive and not planned:
                self._plan_cut(lane, missing, len(entries))
        finally:
            lane.walked = True
            if not planned:
                self._left(lane, cells[taken[0]:])
            if self._stop != "interrupted":
                for _ in range(self._workers(lane)):
                    await lane.queue.put(None)

    async def _walk(self, lane: Lane, cells: Sequence[Cell], taken: list[int], entries: list[Any]) -> None:
        """Hand ``cells`` to ``_take``, ``chunk`` at a time, while the run and the model go on (``taken[0]``: how many
        so far); an adaptive round's entries are collected in ``entries``."""
        adaptive = lane.planner is not None and lane.planner.adaptive
        while taken[0] < len(cells) and self._stop is None and lane.halted is None:
            got = await self._take(lane, cells[taken[0]:taken[0] + self.chunk])
            taken[0] += self.chunk
            if adaptive:
                entries.extend(got)

    async def _settle(self, lane: Lane, entries: Sequence[Any]) -> int | None:
        """Wait for an adaptive round's outcomes and tell the planner (0); else how many of its cells have none (the
        transport cannot have them now: a batch still running, an export file waiting for ``import-batch``), or
        ``None`` when the run or the model stopped meanwhile."""
        planner = lane.planner
        assert planner is not None
        found, missing = await self._round(lane, entries)
        if self._stop is not None or lane.halted is not None:
            return None
        if missing:
            return missing
        planner.observe(found)
        return 0

    async def _work(self, lane: Lane) -> None:
        while True:
            item = await lane.queue.get()
            if item is None:
                return
            if not self._playable(lane, item):
                self._drop(lane, item)
                continue
            await self._play(lane, item)


class Transport:
    """How a runner's new calls leave: online (this class), provider batches (``batch.BatchTransport``), an export
    file (``exchange.ExportTransport``). What to send is the planners' business; the runner composes the two.

    ``work`` takes calls off a model's queue (``workers`` tasks per model); ``settle`` waits until the calls of
    ``keys`` have results (an adaptive round) and says whether they do; ``before``/``after`` run around the whole
    plan; ``finish`` completes the summary.
    """

    def workers(self, runner: Runner, lane: Lane) -> int:
        """Tasks taking the model's calls off its queue: ``concurrency`` per endpoint (``ModelSpec.in_flight``)."""
        return lane.spec.in_flight

    async def before(self, runner: Runner, lanes: Sequence[Lane]) -> None:
        """Runs before the producers start."""

    async def work(self, runner: Runner, lane: Lane) -> None:
        await runner._work(lane)

    async def settle(self, runner: Runner, lane: Lane, keys: set[str]) -> bool:
        """Wait until none of ``keys`` is in flight; False when the run or the model was stopped meanwhile."""
        while any(k in runner._inflight for k in keys):
            if runner._stop is not None or lane.halted is not None:
                return False
            await asyncio.sleep(0.005)
        return runner._stop is None and lane.halted is None

    async def after(self, runner: Runner, lanes: Sequence[Lane]) -> None:
        """Runs after every call of the plan has a result."""

    def finish(self, runner: Runner, summary: RunSummary) -> None:
        """Complete the summary (a batch run counts the lines it collected)."""


class Runner(Driver):
    """Executes one ``RunConfig`` of single shots against a ``RunStore`` (``Driver``: its lanes, producers, workers
    and stop).

    ``clients`` maps model names to ``ModelClient``s; ``scorer`` is
    ``promptgrid.matrix.scoring.score`` (injectable for tests). What each model
    sends comes from its planner (``planners``, default ``planning.make_planner``
    from the config's goal), how it is sent from ``transport`` (default online).
    """

    _turn: list[tuple[_Call, CallResult, list[VerdictRow]]] | None = None
    """Results of this turn of the event loop waiting for their one transaction (``_finish_soon``)."""

    def __init__(self, config: RunConfig, *, variants: Sequence[Variant], cases: Sequence[Case],
                 renderer: Renders, clients: Mapping[str, ModelClient], store: RunStore,
                 scorer: Scorer, progress: Progress | None = None, redactor: Redactor | None = None,
                 retry_errors: bool = False, seed: int | None = None, transport: Transport | None = None,
                 planners: Mapping[str, Planner] | None = None) -> None:
        self.variants = list(variants)
        self.cases = list(cases)
        super().__init__(config, planners if planners is not None else {
            m.name: make_planner(m.name, len(self.variants), len(self.cases), config.repeats, goal=config.goal,
                                 budget=config.budget, rounds=config.rounds, seed=config.plan_seed)
            for m in config.models}, progress, seed=seed)
        self.renderer = renderer
        self.clients = dict(clients)
        self.store = store
        self.scorer = scorer
        self.redact = redactor or Redactor()
        self.retry_errors = retry_errors
        self.transport = transport or Transport()
        self.summary = RunSummary(jobs=self.total, halted=self.halted)
        self._inflight: dict[str, _Call] = {}
        self._retried: set[str] = set()
        self._makers: dict[str, JobMaker] = {}
        self._first_send: float | None = None
        self._last_done: float | None = None

    # ------------------------------------------------------------------ public

    async def run(self) -> RunSummary:
        t0 = time.monotonic()
        cpu0 = time.process_time()
        store = self.store
        self.summary.replayed = store.replay_spills()
        store.reserve_spill()  # room for the answers a disk that fills mid-run keeps out of the store
        model_ids = store.add_models(m.name for m in self.config.models)
        self._variant_ids = store.add_variants(self.variants)
        self._case_ids = store.add_cases(self.cases)
        self.budget.before = store.spend()
        if self.budget.reached():
            self._stop = costcap.MAX_COST
        # One lane per model, ``concurrency`` calls per endpoint in flight (``ModelSpec.in_flight``).
        lanes = [self._open_lane(spec, self.clients[spec.name], spec.in_flight, model_ids[spec.name])
                 for spec in self.config.models]
        await self._drive(lanes)
        self._complete_summary(lanes, t0, cpu0)
        return self.summary

    def _complete_summary(self, lanes: Sequence[Lane], t0: float, cpu0: float) -> None:
        """Fill in the summary once the run ended: why it stopped, spend, times, concurrency, CPU and memory."""
        if self._stop == "interrupted":
            self.summary.stopped = "interrupted"
        elif self._stop in ("max_cost", "disk_full"):
            self.summary.stopped = self._stop
        self.summary.spend = round(self.store.spend() - self.budget.before, 10)
        if self._first_send is not None and self._last_done is not None:
            self.summary.exec_s = self._last_done - self._first_send
        self.summary.wall_s = time.monotonic() - t0
        self.summary.concurrency.update(self._limits(lanes))
        self.summary.cpu_s = time.process_time() - cpu0
        self.summary.peak_rss_mb = _peak_rss_mb()
        self.transport.finish(self, self.summary)

    # ------------------------------------------------------------------ the driver's hooks

    def _workers(self, lane: Lane) -> int:
        return self.transport.workers(self, lane)

    async def _worker(self, lane: Lane) -> None:
        await self.transport.work(self, lane)

    async def _before(self, lanes: Sequence[Lane]) -> None:
        await self.transport.before(self, lanes)
        for lane in lanes:
            lane.live = self.store.live_batch_keys(lane.spec.name)

    async def _after(self, lanes: Sequence[Lane]) -> None:
        await self.transport.after(self, lanes)

    async def _take(self, lane: Lane, cells: Sequence[Cell]) -> list[tuple[Row, Cell, str]]:
        """Render ``cells`` into jobs, record them, and sort them (``_queue``); an adaptive round's (row, cell, key)
        for ``_round``."""
        make = self._makers.get(lane.spec.name)
        if make is None:
            make = self._makers[lane.spec.name] = JobMaker(lane.spec.name, lane.spec.params, self.variants,
                                                           self.cases, self.renderer)
        chunk = make(cells)
        rows = [(lane.model_id, self._variant_ids[j.variant_id], self._case_ids[j.case.id], j.repeat) for j in chunk]
        await self._queue(lane, chunk, rows)
        assert lane.planner is not None
        if not lane.planner.adaptive:
            return []
        return list(zip(rows, cells, [j.key for j in chunk], strict=True))

    async def _round(self, lane: Lane, entries: Sequence[tuple[Row, Cell, str]]) -> tuple[dict[Cell, bool | None],
                                                                                          int]:
        """The round's calls answered (online), its batch collected (``--batch``) or written (``export-batch``):
        the outcomes of its jobs the store has."""
        settled = await self.transport.settle(self, lane, {key for _row, _cell, key in entries})
        if not settled:
            return {}, len(entries)
        found = self.store.outcomes([row for row, _cell, _key in entries])
        return ({cell: found[row] for row, cell, _key in entries if row in found},
                sum(1 for row, _cell, _key in entries if row not in found))

    def _plan_cut(self, lane: Lane, missing: int | None, size: int) -> None:
        if missing is None:
            return  # the run or the model was stopped: the summary says so
        assert lane.planner is not None
        done = getattr(lane.planner, "rounds_done", 0)
        self.summary.planned[lane.spec.name] = lane.planned_note or (
            f"round {done + 1} waits for {missing} of its {size} results; run the same command again once they "
            "are stored to plan the next round")

    def _playable(self, lane: Lane, item: Any) -> bool:
        return self._stop is None and lane.halted is None and self._budget_allows(lane, item)

    def _drop(self, lane: Lane, item: Any) -> None:
        self._inflight.pop(item.job.key, None)

    async def _play(self, lane: Lane, item: Any) -> None:
        await self._send(lane, item)

    # ------------------------------------------------------------------ producer

    def _score(self, row: Row, job: Job, response: str) -> VerdictRow | None:
        """The job's verdict row; None when the scorer failed (the job stays unscored)."""
        try:
            return verdict_row(row, self.scorer(response, job.variant, job.case))
        except Exception as exc:  # noqa: BLE001 - a checker bug must not lose the answer; `score` redoes it
            self.summary.score_failures += 1
            if self.summary.score_error is None:
                self.summary.score_error = f"{type(exc).__name__}: {exc}"
            return None

    async def _queue(self, lane: Lane, chunk: Sequence[Job], rows: Sequence[Row]) -> None:
        """Sort one chunk of jobs: stored, shared with a call in flight, unsupported, or a new call for the queue."""
        store = self.store
        store.add_jobs([(*row, j.key) for row, j in zip(rows, chunk, strict=True)])
        status = store.lookup(list({j.key for j in chunk if j.key not in self._inflight}))
        scored = store.scored([k for k in status]) if status else set()
        new: list[_Call] = []
        late: list[VerdictRow | None] = []
        refused: dict[str, tuple[str, list[Row], Job]] = {}  # key -> (reason, rows, job): never sent
        # No await in this loop: classification and registration in flight are atomic
        # with respect to the workers, so a key is never sent twice.
        for row, job in zip(rows, chunk, strict=True):
            call = self._inflight.get(job.key)
            if call is not None:
                call.rows.append((row, job))
                self.summary.shared += 1
                continue
            st = status.get(job.key)
            if st is None and job.key in lane.live:  # a provider batch has it: collected, not sent
                self.summary.in_batch += 1
                self.progress.done += 1
                continue
            reason = self._unsupported(lane, job)
            if reason is not None and (st is None or st == UNSUPPORTED):
                self._count_unsupported(reason)
                if st is None:
                    refused.setdefault(job.key, (reason, [], job))[1].append(row)
                continue
            resend = ((st == ERROR and self.retry_errors and job.key not in self._retried)
                      or st == UNSUPPORTED)  # the model can send it now
            if st is not None and not resend:
                self.summary.cached += 1
                self.progress.cached += 1
                self.progress.done += 1
                if row not in scored:
                    late.append(self._score_stored(row, job, st))
                continue
            if resend:
                self._retried.add(job.key)
            call = _Call(job, [(row, job)])
            self._inflight[job.key] = call
            new.append(call)
        if late:
            store.set_verdicts([v for v in late if v is not None])
        self._record_refused(refused)
        await self._enqueue(lane, new)

    def _record_refused(self, refused: Mapping[str, tuple[str, list[Row], Job]]) -> None:
        """Store each call its model cannot be sent as ``unsupported`` (the reason as its error), its jobs unscored."""
        for key, (reason, refused_rows, job) in refused.items():
            self.store.record(CallResult(key=key, model=job.model, repeat=job.repeat,
                                         prompt_sha256=job.prompt_sha256, params=_params_json(job.params),
                                         status=UNSUPPORTED, attempts=0, error=reason, error_kind=UNSUPPORTED),
                              [(row, None, None, None) for row in refused_rows])

    async def _enqueue(self, lane: Lane, new: Sequence[_Call]) -> None:
        """Put new calls on the model's queue; once the run stops, drop the rest from the calls in flight."""
        for call in new:
            if self._stop is not None:
                self._inflight.pop(call.job.key, None)
                continue
            await lane.queue.put(call)

    def _unsupported(self, lane: Lane, job: Job) -> str | None:
        """Why ``lane``'s model cannot be sent ``job``'s request pieces; None when it can (or there are none)."""
        request = getattr(job, "request", None)
        return None if request is None else lane.client.unsupported(request)

    def _count_unsupported(self, reason: str) -> None:
        self.summary.unsupported += 1
        self.summary.unsupported_reasons[reason] = self.summary.unsupported_reasons.get(reason, 0) + 1
        self.progress.done += 1

    def _score_stored(self, row: Row, job: Job, status: str) -> VerdictRow | None:
        """Verdict for a job whose call was answered before (another variant, an earlier run)."""
        if status != DONE:
            return row, None, False, None
        stored = self.store.call(job.key)
        return self._score(row, job, (stored or {}).get("response") or "")

    # ------------------------------------------------------------------ workers

    def _budget_allows(self, lane: Lane, call: _Call) -> bool:
        """False (and stop) when this call could take the run directory's spend past ``max_cost``
        (``Driver._affordable``)."""
        return self._affordable(lane.client, call.job.messages, getattr(call.job, "request", None))

    async def _send(self, lane: Lane, call: _Call) -> None:
        """Send one call until it has a final result (an answer, or an error retries cannot fix) and finish it
        (``sending.send``, the one send path); it is left pending, with no result, when the run or its model
        stops first."""
        job, spec = call.job, lane.spec
        request = getattr(job, "request", None)
        native = request is not None and request.get("call_mode") == "native"
        params = dict(job.params)
        params["timeout"] = spec.timeout
        est_tokens = estimate_tokens(job.messages, params.get("max_tokens"), request)
        attempts = 0
        self.budget.in_flight += 1
        reserved = True
        if self._first_send is None:
            self._first_send = time.monotonic()
        try:
            try:
                sent = await send(lane, lambda: self._complete(lane, job, params, request), timeout=spec.timeout,
                                  retry=self._retry, est_tokens=est_tokens, stopping=self._stopping,
                                  redact=self.redact, wait=partial(self._wait_to_retry, job.model),
                                  rand=self._rng.random)
            except Stopped as stopped:
                attempts = stopped.attempts
                self.summary.congested += stopped.congested
                self._inflight.pop(job.key, None)
                return
            finally:
                self._note_halt(lane)
            attempts = sent.attempts
            self.summary.congested += sent.congested
            result = (self._failed(job, sent.error, sent.latency, attempts) if sent.error is not None
                      else self._answered(job, sent.completion, native, sent.latency, attempts))
            self.budget.in_flight -= 1  # its cost is counted as spent from here on (``_count``), no longer projected
            reserved = False
            await self._finish_soon(call, result)
        except BaseException:
            self._inflight.pop(job.key, None)
            raise
        finally:
            if reserved:
                self.budget.in_flight -= 1
            self.summary.attempts += attempts

    def _stopping(self) -> bool:
        return self._stop is not None

    @staticmethod
    def _complete(lane: Lane, job: Job, params: dict[str, Any], request: Mapping[str, Any] | None) -> Any:
        """The client's ``complete`` awaitable for one try (with the request pieces, and job ids for clients that
        answer by (variant, case): replay, PATH)."""
        if getattr(lane.client, "takes_job_ids", False):
            return lane.client.complete(job.messages, params, request=request,  # type: ignore[call-arg]
                                        job=JobIds(job.variant_id, job.case.id, job.repeat, job.variant, job.case))
        return (lane.client.complete(job.messages, params) if request is None
                else lane.client.complete(job.messages, params, request=request))

    def _answered(self, job: Job, completion: Any, native: bool, latency: float, attempts: int) -> CallResult:
        """The stored result of an answer (redacted, the provider's model and finish reason too; a native answer as
        its envelope; at most ``MAX_STORED_ANSWER_CHARS``: ``clients.stored_response``; ``sending.send`` has given
        the unused estimated tokens back to the model's tokens-per-minute bucket)."""
        return CallResult(
            key=job.key, model=job.model, repeat=job.repeat, prompt_sha256=job.prompt_sha256,
            params=_params_json(job.params), status=DONE,
            response=stored_response(completion, native=native, exact=self.redact.exact),
            finish_reason=provider_field(completion.finish_reason, self.redact.exact),
            input_tokens=completion.input_tokens, output_tokens=completion.output_tokens,
            cost_usd=completion.cost_usd, latency_s=round(latency, 6), attempts=attempts,
            raw_model=provider_field(completion.model, self.redact.exact), endpoint=completion.endpoint)

    def _failed(self, job: Job, error: CallError, latency: float, attempts: int) -> CallResult:
        """The stored result of an error for good (``sending.send`` has stopped the model when every later call
        would repeat it)."""
        return CallResult(
            key=job.key, model=job.model, repeat=job.repeat, prompt_sha256=job.prompt_sha256,
            params=_params_json(job.params), status=ERROR, latency_s=round(latency, 6),
            attempts=attempts, error=self.redact(error.message), error_kind=error.kind.value,
            endpoint=error.endpoint)

    def _finish(self, call: _Call, result: CallResult) -> None:
        """Score every job of the call and commit it all in one transaction."""
        entry = self._scored(call, result)
        self._commit([entry])
        self._count(call, result)

    async def _finish_soon(self, call: _Call, result: CallResult) -> None:
        """``_finish`` for an answer of this turn of the event loop: scored and counted now, committed with the
        other results of the same turn in one transaction. The first of them waits one turn (the loop runs what
        is ready, without waiting for I/O), then commits them all; cancelled meanwhile, it commits them first.
        Its call stays in flight until committed, so no one sends it again or takes it for stored."""
        entry = self._scored(call, result)
        self._count(call, result)
        turn = self._turn
        if turn is not None:
            turn.append(entry)
            return
        turn = self._turn = [entry]
        try:
            await asyncio.sleep(0)
        finally:
            self._turn = None
            self._commit(turn)

    def _scored(self, call: _Call, result: CallResult) -> tuple[_Call, CallResult, list[VerdictRow]]:
        """The call, its result and the verdict row of every job it answers (for an error: no verdict)."""
        if result.status != DONE:
            return call, result, [(row, None, False, None) for row, _ in call.rows]
        text = result.response or ""
        verdicts: list[VerdictRow] = []
        for row, job in call.rows:
            v = self._score(row, job, text)
            if v is not None:
                verdicts.append(v)
        return call, result, verdicts

    def _commit(self, entries: Sequence[tuple[_Call, CallResult, list[VerdictRow]]]) -> None:
        """Store results and their verdicts in one transaction; their calls are then no longer in flight.

        A full disk stops the run (``_disk_full``); several results are then tried one at a time (a smaller
        transaction may still fit), and what does not fit is spilled beside the store."""
        try:
            self.store.record_all([(result, verdicts) for _call, result, verdicts in entries])
        except StoreFullError as exc:
            self._disk_full(exc)
            if len(entries) == 1:
                self._spill(entries[0][1], entries[0][2])
            else:
                for _call, result, verdicts in entries:
                    try:
                        self.store.record(result, verdicts)
                    except StoreFullError:
                        self._spill(result, verdicts)
        for call, _result, _verdicts in entries:
            self._inflight.pop(call.job.key, None)
        self._last_done = time.monotonic()

    def _spill(self, result: CallResult, verdicts: list[VerdictRow]) -> None:
        """Keep a result the full store could not take in the spill file (``RunStore.spill``), or count it lost."""
        try:
            self.store.spill(result, verdicts)
            self.summary.spilled += 1
        except OSError:
            self.summary.lost += 1

    def _count(self, call: _Call, result: CallResult) -> None:
        """Count a final result (summary, progress line, spend; ``max_cost`` stops the run once it is reached)."""
        s, p = self.summary, self.progress
        s.sent += 1
        p.calls += 1
        p.done += len(call.rows)
        if result.status == ERROR:
            s.errors += 1
            p.errors += len(call.rows)
            kind = result.error_kind or ErrorKind.UNKNOWN.value
            s.error_kinds[kind] = s.error_kinds.get(kind, 0) + 1
            s.error_examples.setdefault(kind, result.error or "")
        if result.cost_usd:
            p.spend += result.cost_usd
        self._paid(result.cost_usd, answer=result.status != ERROR)

    def _disk_full(self, exc: StoreFullError) -> None:
        """Stop sending (calls in flight still finish, and are spilled): the store cannot grow."""
        if self.summary.store_error is None:
            self.summary.store_error = str(exc)
        self.stop("disk_full")


def _peak_rss_mb() -> float:
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return 0.0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024, 1)


def _params_json(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"), default=str)
