"""Running models through conversations: episodes, step by step, stored as they go, resumable.

``arun_episodes`` runs a ``RunConfig`` (the one declaration of the run
options): it takes every (model, variant, conversation, repeat) through its turns
(``episodes._conversation_play.ConversationEpisode``, played through the
``Episode`` protocol: this module answers its steps, ``EpisodeRunner.send``, and
knows nothing of turns or environments), ``concurrency`` episodes at a time
per model (the plan is counted first, ``check_episodes``). The run goes
through the single-turn runner's engine (``runner.Driver``: a lane per model,
its producer walking the planner, its workers, adaptive rounds, the run's
stop); ``EpisodeRunner`` is what that engine's work is for conversations: a
cell is an episode, and a worker plays it to its end.
Every answer is committed to the run directory's ``conversations.sqlite3``
as it arrives (``conversation_store``), keyed by the episode, the step's place and what
was sent (``StepKeys``: a running hash, so a step's key costs what was
appended since the step before); an episode is rebuilt on resume from the
stored answers and the environment's deterministic results, so a run killed
mid-episode and started again sends nothing it already sent and ends with
the same verdicts. Finished episodes are not run again. Every episode is an
independent sample; with ``dedupe_requests`` byte-identical requests share
one answer, and those in flight at once are sent once. An
``EnvironmentFailure`` ends its episode only (stored as failed,
``environment_failure``).

Every step a model is sent goes through the one send path of both runners
(``running/sending.send``: pacing, the adaptive limit on steps in flight, the
timeout, retries and the model's stop) and the single-turn runner's cost cap,
not a copy of them: the model's request and token buckets
(``ratelimit.model_buckets``, ``rpm``/``tpm``: one pair per model, shared by
its episodes; a step takes one request and its ``estimate_tokens`` before each
attempt and gives back the difference once its usage is known), and
``costcap.allows``/``costcap.reached`` over the run directory's recorded spend
(``max_cost``). Once the cap is reached, no new step is sent and no new
episode started; the steps in flight finish (they are paid for). An episode
stopped mid-way is stored unfinished (``valid`` ``None``,
``details["stopped"] == "max_cost"``, its ``error`` saying where), so a later
run, with a higher cap, resumes it from its stored steps; the episodes not
started are not stored (``summary.not_run``); ``summary.stopped`` is
``"max_cost"``.

Which episodes run is the single-turn runner's planner's choice, not a copy
of it (``planning.make_planner``): a cell is (variant, conversation,
repeat). Without a goal it is the whole product, conversation outer,
variant inner, repeat innermost, walked as the workers take the episodes.
With an adaptive goal (``goal`` ``best-worst``, ``distribution`` or
``uniform``, ``budget`` episodes per model planned in ``rounds`` rounds,
seeded by ``seed``) a round's episodes run (``concurrency`` at a time), and
once every one of them has its stored result the planner is told their
outcomes and chooses the next round. A cell's outcome is its episode's
verdict (``valid`` True or False, an environment failure included: it is a
stored, finished, failed episode); an episode that ended in an error
(``valid`` ``None``) is spent with no outcome (``None``, as an unscored
single-turn cell), and is run again by the next run, as in a product run,
whose rounds then see its verdict. An episode the run did not finish (the
cost cap stopped it, its model was stopped, the run was interrupted) leaves
its round unsettled: the model's plan stops there (``summary.planned`` says
where) and the next run replays the rounds from the store (their episodes
are finished: nothing is sent again) and goes on. The decisions depend on
the seed and the stored verdicts only, never on concurrency or timing. The
run records its plan in the store (``meta`` ``plan``: goal, budget, rounds,
seed, models, the variants' and conversations' ids in plan order, repeats),
from which ``conversation_findings`` replays the planner to say what the
goal found (``ConversationRun.adaptive``).

With ``--batch``, new steps go through the models' provider batch APIs in
rounds, the next step of every live episode in one batch per model
(``_batch.BatchRounds``); ``export-batch`` writes such a round to a file
instead (``_api.export_conversation_round``). A failed call is sent again
as the run's ``RetryPolicy`` allows (a retryable error or a timeout; the
wait its backoff gives); one that keeps
failing, or a fatal error, ends its episode with ``error`` set; the episode
is not scored and the next run resumes it. As in a single-turn run (the same
``sending.send``), an error every later call would repeat (an unauthorised key,
an unknown model, a Retry-After still above the cap after one capped wait, no
endpoint left, a server that refused every connection for ``GRACE_S``) stops
the model: its
other episodes are left unfinished, not stored (``summary.halted``,
``summary.not_run``), the other models go on; a model's first call goes alone,
so that costs one request per model, not one per episode.

What a single-turn run guarantees, a conversation run keeps: it takes the run
directory's ``RunLock`` (a second run into it stops at once with a
``RunError``), refuses a directory that holds a single-turn study, redacts
every answer (``Redactor.exact``, text and native envelope) before it is
stored, and on a full disk stops, every task cancelled, with a
``StoreFullError`` that says what was kept; the answers received as the disk
filled go to the spill file (``SpillFile``, as a single-turn run's), which the
next run stores before any episode plays.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

from promptgrid.display import escape_controls
from promptgrid.errors import RunError, StoreFullError
from promptgrid.matrix.clients._base import provider_field
from promptgrid.matrix.clients._envelope import MAX_STORED_ANSWER_CHARS, stored_response
from promptgrid.matrix.datasets._conversations import Conversation
from promptgrid.matrix.episodes._conversation_play import (
    STEP_KEYS,
    ConversationEpisode,
    StateScorer,
    legacy_digest,
    score_episode,
)
from promptgrid.matrix.episodes._environment import Environment
from promptgrid.matrix.episodes._protocols import NotAnswered, StepRequest
from promptgrid.matrix.episodes._steps import EpisodeContext
from promptgrid.matrix.running import costcap
from promptgrid.matrix.running.config import RunConfig
from promptgrid.matrix.running.conversation_batch import BatchRounds, RoundExported
from promptgrid.matrix.running.planning import AdaptivePlanner, Cell, Planner, make_planner
from promptgrid.matrix.running.ratelimit import estimate_tokens
from promptgrid.matrix.running.results import Result
from promptgrid.matrix.running.runner import Driver, Lane
from promptgrid.matrix.running.sending import Sent, Stopped, send
from promptgrid.matrix.running.store import RunStore, conversation_store
from promptgrid.matrix.scoring.state_check import TurnFailureMode
from promptgrid.providers import CallError, RetryPolicy
from promptgrid.records import Step
from promptgrid.redact import Redactor
from promptgrid.variants import CallMode, ToolResults, Variant

__all__ = ["ConversationRunSummary", "arun_episodes", "check_episodes", "conversation_findings",
           "episode_outcome", "episode_variants", "plan_record", "round_outcomes", "settled", "variant_dimensions"]

_DIMENSIONS = ("call_mode", "return_format", "doc_format", "tool_call_tag", "prompt_format", "prompt_style",
               "instruction_language", "description_language", "template")


def variant_dimensions(variant: Variant) -> dict[str, str]:
    """A variant's dimension values as strings (what the conversation report groups and pairs by)."""
    out = {}
    for dim in _DIMENSIONS:
        value = getattr(variant, dim, None)
        if value is not None:
            out[dim] = str(getattr(value, "value", value))
    if variant.call_mode is CallMode.NATIVE:  # native variants have no return format, doc format or tag
        for dim in ("return_format", "doc_format", "tool_call_tag"):
            out.pop(dim, None)
    if variant.tool_results is not ToolResults.AUTO:  # at auto: stored dimensions as before the dimension
        out["tool_results"] = str(variant.tool_results)
    return out


def episode_variants(variants: Sequence[Variant]) -> dict[str, dict[str, str]]:
    return {v.id: variant_dimensions(v) for v in variants}


@dataclass
class ConversationRunSummary:
    """What a conversation run did: episodes run (and resumed from the store), steps sent and read back, errors."""

    run_dir: str
    episodes: int = 0
    finished: int = 0
    skipped: int = 0
    """Episodes already finished in the store (not run again)."""
    valid: int = 0
    errors: int = 0
    """Of ``finished``, episodes a step's call ended for good (an error retries could not fix): counted as failed,
    as a single-turn call's error; the same command sends them again only with ``retry_errors``."""
    errors_stored: int = 0
    """Of ``errors``, episodes read back from the store (``skipped``), not played again by this run."""
    unsupported: int = 0
    """Episodes whose model cannot be sent a step's request pieces (nothing sent): stored as ``unsupported``, out of
    the rates; each run checks them again."""
    steps_sent: int = 0
    """Steps this run sent and got an answer to (stored)."""
    steps_failed: int = 0
    """Steps this run sent whose call failed for good (retries could not fix it): its episode ended in an error."""
    attempts: int = 0
    """Requests the steps this run sent took (``steps_sent + steps_failed``, retries included)."""
    steps_stored: int = 0
    """Steps read back from the store instead of sent (a resumed or shared prefix)."""
    environment_failures: int = 0
    """Of ``finished``, episodes ended by an ``EnvironmentFailure`` (stored as failed, not run again)."""
    spilled: int = 0
    """Answers this run received as the disk filled, kept in the spill file instead of the store (stored by the
    next run, not sent again)."""
    replayed: int = 0
    """Answers an earlier run spilled on a full disk, stored by this one before any episode played."""
    wall_s: float = 0.0
    stopped: str | None = None
    """None (finished), ``"max_cost"`` (the cost cap was reached), ``"disk_full"``, ``"interrupted"`` (Ctrl-C or
    SIGTERM: the episodes under way were left unfinished, the summary returned), or the note of a run cancelled by
    its caller."""
    spend: float = 0.0
    """USD the steps sent by this run cost (unknown prices count 0)."""
    max_cost: float | None = None
    """The run directory's cost cap in USD (``--max-cost``), ``None`` without one."""
    unfinished: int = 0
    """Episodes stopped mid-way by the cost cap: stored unfinished (``valid`` ``None``), resumed by the next run.
    Not counted in ``errors``. Episodes a store written before errors were results kept with an error and no
    verdict are resumed too."""
    halted: dict[str, str] = field(default_factory=dict)
    """Models stopped after an error every later call would repeat (an unauthorised key, an unknown model, a
    Retry-After above the cap after one capped wait), model -> why; their other episodes were not run."""
    not_run: int = 0
    """Episodes not started (not stored, run by the next run) because their model or the run was stopped (a
    model halted by an error every call would repeat, or the cost cap). With an adaptive goal, those of the
    round under way (the later rounds are not chosen yet)."""
    goal: str | None = None
    """The adaptive goal the episodes were planned by (``best-worst``, ``distribution``, ``uniform``); ``None``:
    every episode of the product. ``episodes`` is then the episodes planned, at most ``budget`` per model."""
    planned: dict[str, str] = field(default_factory=dict)
    """Adaptive goals: models whose plan stopped before its budget, model -> why (a round whose episodes the run
    did not finish); the same command goes on from there."""
    batch_rounds: int = 0
    """``--batch``: rounds sent (each carries the next step of every live episode)."""
    waiting: int = 0
    """``export-batch``: episodes left waiting on the exported round (``import-batch``, then export again)."""
    batches: int = 0
    """``--batch``: provider batches created (a round's steps of one model, split by the provider's limits)."""
    concurrency: dict[str, list[int]] = field(default_factory=dict)
    """Per model: [lowest limit on steps in flight, limit at the end, ceiling] (``adaptive.Adaptive``, as a
    single-turn run's ``RunSummary.concurrency``)."""
    congested: int = 0
    """Timeouts of steps sent beside others of the same model, sent again without using up their retries."""
    results: list[Result] = field(default_factory=list, repr=False)


class _ModelStopped(Exception):
    """Raised in an episode whose model was stopped (``EpisodeRunner.halted``): the episode is left unfinished."""


class _Unsupported(Exception):  # noqa: N818 - an outcome: the model cannot be sent the step's request pieces
    """Why the model cannot be sent a step (its client's ``unsupported``): nothing is sent."""


class _RunStopped(Exception):
    """Raised where an episode would send a step once the run was stopped (``Driver.stop``: the cost cap):
    the episode is stored unfinished."""


class EpisodeRunner(Driver):
    """One conversation run on the runner's engine (``Driver``: a lane per model, its producer walking the model's
    planner, ``concurrency`` workers each playing one episode at a time, adaptive rounds, the run's stop): the
    episode and scorer it plays and judges with, the steps in flight, the cost cap's budget, and the counters.

    A cell becomes an episode on the model's queue, unless the store has it finished (``Result.kept``: counted as
    skipped, its result kept); a worker plays it (``play_episode``), answering its steps (``send``) from the store
    or by sending them through the lane, and stores its result."""

    chunk = 1  # an episode is queued as its cell is taken: a stopped producer counts exactly what it did not take

    def __init__(self, config: RunConfig, store: RunStore, episode: ConversationEpisode, scorer: StateScorer, *,
                 variants: Sequence[Variant], conversations: Sequence[Conversation], clients: Mapping[str, Any],
                 widths: Mapping[str, int], planners: Mapping[str, Planner], redact: Callable[[str], str],
                 summary: ConversationRunSummary, on_sent: Callable[[int], None] | None = None,
                 legacy_keys: bool = False, max_answer_chars: int = MAX_STORED_ANSWER_CHARS,
                 log: Any = None, retry_errors: bool = False) -> None:
        super().__init__(config, planners)
        self.store = store
        self.variants, self.conversations = variants, conversations
        self.clients = dict(clients)
        self.params = {spec.name: dict(spec.params) for spec in config.models}
        self.widths = dict(widths)  # episodes of a model played at once (its workers)
        self.rounds: BatchRounds | None = None  # --batch: new steps wait for a round's provider batch
        # The run directory's cost cap (``costcap``; ``in_flight``: steps past the cost check, not answered yet).
        self.budget.before = store.spend() if config.max_cost is not None else 0.0
        if self.budget.reached():
            self._stop = costcap.MAX_COST
        self.max_answer_chars = max_answer_chars  # most characters of an answer stored (and sent back)
        self.legacy_keys = legacy_keys  # a store written before STEP_KEYS: a miss also looks up the old key
        self.timeouts = {spec.name: float(spec.timeout) for spec in config.models}  # seconds per step's call
        self.redact = redact  # errors are stored and printed: no key or URL credential in them
        # Answers too, by exact value only (a pattern could eat answer text), before they are stored, so the
        # transcript is built from the same redacted text in the first run and on resume.
        self.redact_answer: Callable[[str], str] = getattr(redact, "exact", redact)
        self.lost_answers = 0  # answers received that a full disk did not take (sent again by the next run)
        self.lost_episodes = 0  # finished episodes a full disk did not take (scored again from their steps)
        self.full: StoreFullError | None = None  # why the store stopped taking results
        self.summary = summary
        # What an episode is and how it is judged (``episodes._conversation_play``: an ``Episode`` and a
        # ``Scorer``): this plays each one and answers its steps (``send``), knowing nothing of turns or
        # environments.
        self.episode, self.scorer = episode, scorer
        self.in_flight: dict[str, asyncio.Future[Step]] = {}
        self.on_sent = on_sent
        self.log = log  # the run's progress stream: a line per episode, and for every slow step (SLOW_STEP_S)
        # What the store settles for good (``Result.kept``, as a single-turn call's result).
        self.finished = {(r.model, r.variant_id, r.conversation_id, r.repeat): r
                         for r in store.episodes(models=list(self.params)) if r.kept(retry_errors)}
        self._lane: dict[str, Lane] = {}
        self._open: dict[str, int] = {}  # per model: episodes queued or under way (an adaptive round waits for 0)
        self._idle: dict[str, asyncio.Event] = {}

    async def play_episode(self, client: Any, model: str, params: Mapping[str, Any], variant: Variant,
                           conversation: Conversation, repeat: int) -> Result:
        """One episode played from its first step (stored steps are read back), and scored. With ``--batch`` the
        episode counts as live for the rounds from here to its end (a round goes when every live episode waits)."""
        from promptgrid.matrix.running.plan import repeat_params

        send = partial(self.send, client, model, repeat_params(params, repeat), repeat)
        if self.rounds is not None:
            self.rounds.started()
        try:
            walk = await self.episode.run(model, variant, conversation, repeat, send)
        finally:
            if self.rounds is not None:
                self.rounds.ended()
        return await score_episode(self.scorer, walk)

    async def send(self, client: Any, model: str, params: Mapping[str, Any], repeat: int,
                   asked: StepRequest) -> tuple[Step, bool]:
        """An episode's ``Send``: ``answer``, with what ends the episode early said as ``NotAnswered`` (a call
        retries could not fix, a request the model cannot be sent, a run stopped before the step was sent)."""
        context = asked.context
        try:
            return await self.answer(client, model, params, repeat, asked)
        except _Unsupported as exc:
            raise NotAnswered(f"turn {context.turn}, step {context.step}: unsupported: {exc}",
                              unsupported=str(exc)) from None
        except CallError as exc:
            raise NotAnswered(self.redact(f"turn {context.turn}, step {context.step}: {exc}"),
                              error_kind=exc.kind.value) from None
        except _RunStopped as exc:
            raise NotAnswered(f"turn {context.turn}, step {context.step}: not sent, the run stopped: "
                              f"{_stop_note(exc)}; the next run resumes this episode from its stored steps",
                              stopped=str(exc)) from None

    async def answer(self, client: Any, model: str, params: Mapping[str, Any], repeat: int,
                     asked: StepRequest) -> tuple[Step, bool]:
        """The stored answer for this step, or a new one (sent, then committed; with ``--batch``, from the round
        that carries it, the episode's environment ``park``-ed while it waits). Second value: sent now."""
        from promptgrid.matrix.running.plan import job_key

        key = job_key(model, params, asked.digest, repeat)
        stored = self.store.step(key)
        if stored is None and self.legacy_keys:
            stored = self.store.step(job_key(model, params, legacy_digest(asked.messages, asked.request), repeat))
        if stored is not None:
            self.summary.steps_stored += 1
            return stored, False
        context = asked.context
        if self.rounds is not None:
            return await self._batch_answer(client, model, params, asked, context, repeat, key, asked.park)
        pending = self.in_flight.get(key)
        if pending is not None:
            self.summary.steps_stored += 1
            return await asyncio.shield(pending), False
        self._check_budget(client, asked)
        future: asyncio.Future[Step] = asyncio.get_running_loop().create_future()
        self.in_flight[key] = future
        self.budget.in_flight += 1
        try:
            try:
                step = await self._send(client, model, params, asked, context)
            finally:
                self.budget.in_flight -= 1
            try:
                self.store.add_step(key, model, step)
            except StoreFullError:
                try:  # kept beside the store, on the space reserved for it: the next run stores it, unsent
                    self.store.spill(dataclasses.replace(step, key=key, model=model))
                    self.summary.spilled += 1
                except OSError:
                    self.lost_answers += 1
                raise
            self.summary.steps_sent += 1
            self._spent(step.cost_usd)
            future.set_result(step)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a waiter re-raises it; none is not an error
            raise
        finally:
            del self.in_flight[key]
        if self.on_sent is not None:
            self.on_sent(self.summary.steps_sent)  # the step is committed: a hook that kills here loses nothing
        if self.log is not None and (step.latency_s or 0.0) >= SLOW_STEP_S:
            # A slow model (a local one on a small machine: seconds a step) is seen to move between episodes.
            self._step_line(model, context, f"answered in {step.latency_s:.1f} s ({self.summary.steps_sent} steps "
                                            "sent so far)")
        return step, True

    async def _batch_answer(self, client: Any, model: str, params: Mapping[str, Any], asked: StepRequest,
                            context: EpisodeContext, repeat: int, key: str,
                            park: Callable[[], Awaitable[None]] | None) -> tuple[Step, bool]:
        """A new step's answer from the batch round that carries it (``_batch.BatchRounds``): the cost cap is
        checked as before an online step; the round stores the answer. Second value: this episode's line (a key
        shared by several episodes is one line, sent and paid once)."""
        assert self.rounds is not None
        self._check_budget(client, asked)
        if park is not None:
            await park()
        self.budget.in_flight += 1
        try:
            step, mine = await self.rounds.answer(key, model, asked.messages, params, asked.request,
                                                  native=context.variant.call_mode is CallMode.NATIVE, repeat=repeat)
        finally:
            self.budget.in_flight -= 1
        if not mine:
            self.summary.steps_stored += 1
            return step, False
        self.summary.steps_sent += 1
        self._spent(step.cost_usd)
        return step, True

    def batch_step(self, completion: Any, native: bool, price: Callable[[int, int], float | None]) -> Step:
        """``line_step`` with this run's redaction and answer bound."""
        return line_step(completion, native, price, self.redact_answer, self.max_answer_chars)

    def _check_budget(self, client: Any, asked: StepRequest) -> None:
        """``_RunStopped`` when the run was stopped, or when a new step could take the run directory's spend past
        the cap (``costcap.allows``, the single-turn runner's rule; the run stops then)."""
        if self._stop is None:
            self._affordable(client, asked.messages, asked.request)
        if self._stop is not None:
            raise _RunStopped(self._stop)

    def _spent(self, cost: float | None) -> None:
        """Count a sent step's answer and cost; the run stops once the recorded spend reaches the cap
        (``costcap.Budget.paid``)."""
        if cost:
            self.summary.spend += cost
        self._paid(cost)

    async def _send(self, client: Any, model: str, params: Mapping[str, Any], asked: StepRequest,
                    context: EpisodeContext) -> Step:
        kwargs: dict[str, Any] = {}
        if asked.request is not None:
            why = client.unsupported(asked.request) if hasattr(client, "unsupported") else None
            if why:
                raise _Unsupported(why)
            kwargs["request"] = asked.request
        if getattr(client, "takes_episode", False):
            kwargs["episode"] = context
        # A model's first call goes alone (``sending.send``): a bad key or an unknown model costs one request.
        sent = await self._attempts(client, model, params, asked, kwargs)
        completion, exact = sent.completion, self.redact_answer
        native = context.variant.call_mode is CallMode.NATIVE
        # What a single-turn call's row keeps too (``runner._answered``): the attempts it took, the model name the
        # provider reported and the endpoint that answered.
        return Step(model=model, response=stored_response(completion, native=native, exact=exact,
                                                          max_chars=self.max_answer_chars),
                    finish_reason=provider_field(completion.finish_reason, exact), input_tokens=completion.input_tokens,
                    output_tokens=completion.output_tokens, cost_usd=completion.cost_usd, latency_s=sent.latency,
                    attempts=sent.attempts, raw_model=provider_field(getattr(completion, "model", None), exact),
                    endpoint=getattr(completion, "endpoint", None))

    async def _attempts(self, client: Any, model: str, params: Mapping[str, Any], asked: StepRequest,
                        kwargs: Mapping[str, Any]) -> Sent:
        """How one step's call ended (its completion, latency and attempts), sent by the one send path
        (``sending.send``, as a single-turn call: paced, within the model's adaptive limit, retried as the run's
        policy allows; an error every later call would repeat stops the model). Raises the error retries could not
        fix; ``_ModelStopped`` when the model was stopped before or while this step waited; ``_RunStopped`` once
        the run is stopping (the step is not sent again)."""
        line = self._lane[model]
        try:
            sent = await send(line, lambda: client.complete(list(asked.messages), params, **kwargs),
                              timeout=self.timeouts.get(model, 600.0), retry=self._retry,
                              est_tokens=estimate_tokens(asked.messages, params.get("max_tokens"), asked.request),
                              stopping=self._stopping, redact=self.redact,
                              wait=partial(self._step_waits, model, asked.context), rand=self._rng.random)
        except Stopped as stopped:
            self.summary.congested += stopped.congested
            self.summary.attempts += stopped.attempts
            self._note_halt(line)
            if self._stop is not None:
                raise _RunStopped(self._stop) from None
            raise _ModelStopped(model) from None
        self.summary.congested += sent.congested
        self.summary.attempts += sent.attempts
        self._note_halt(line)
        if sent.error is not None:
            self.summary.steps_failed += 1
            raise sent.error
        return sent

    def _stopping(self) -> bool:
        return self._stop is not None

    async def _step_waits(self, model: str, context: EpisodeContext, error: CallError, delay: float) -> None:
        """Wait before a step's next try (``Driver._wait_to_retry``); a wait of ``RETRY_LINE_S`` or more gets its own
        progress line, naming the step and why, so that a run waiting on a rate limit is seen to wait."""
        if self.log is not None and delay >= RETRY_LINE_S:
            self._step_line(model, context, f"{self._wait_reason(model, error)}: next try in {delay:.1f} s")
        await self._wait_to_retry(model, error, delay)

    def _step_line(self, model: str, context: EpisodeContext, what: str) -> None:
        """One progress line about a step: the model, variant, conversation, turn and step, then ``what``."""
        print(f"  {model} | {_one_line(context.variant.label)} | {_one_line(context.conversation.id)} | turn "
              f"{context.turn}, step {context.step}: {what}", file=self.log, flush=True)

    # ------------------------------------------------------------------ on the runner's engine

    async def drive(self, started: float) -> None:
        """Drive every model's plan (``Driver``), count what was left, set how the run stopped, tally the summary
        and close the clients, whatever happened. A full disk raises the ``StoreFullError`` that says what was
        kept; a run cancelled by its caller (``pg.arun``'s task) goes on being cancelled."""
        summary = self.summary
        lanes = []
        for spec in self.config.models:
            width = self.widths[spec.name]
            # export-batch plays every episode at once (parked; nothing is sent): its steps' limit stays concurrency.
            lane = self._lane[spec.name] = self._open_lane(spec, self.clients[spec.name], width,
                                                           ceiling=spec.concurrency)
            self._open[spec.name], self._idle[spec.name] = 0, asyncio.Event()
            lanes.append(lane)
        try:
            await self._drive(lanes)
            for lane in lanes:  # what the workers had not taken when the run was interrupted
                while not lane.queue.empty():
                    summary.not_run += lane.queue.get_nowait() is not None
            if self.full is not None:
                summary.stopped = "disk_full"
                raise _disk_full_stop(summary, self) from None
            if self._stop is not None:
                summary.stopped = self._stop
        except (asyncio.CancelledError, KeyboardInterrupt):
            summary.stopped = "interrupted: every answer received is stored; run the same command to resume"
            raise
        finally:
            summary.concurrency = self._limits(lanes)
            summary.wall_s = time.perf_counter() - started
            _tally(summary)
            for client in self.clients.values():
                aclose = getattr(client, "aclose", None)
                if aclose is not None:
                    await aclose()

    def _workers(self, lane: Lane) -> int:
        return self.widths[lane.spec.name]

    async def _take(self, lane: Lane, cells: Sequence[Cell]) -> list[Cell]:
        """Queue each cell's episode, unless the store has it finished (counted as skipped, its result kept)."""
        model = lane.spec.name
        for cell in cells:
            episode = self._unfinished(model, cell)
            if episode is not None:
                await lane.queue.put(episode)
                self._open[model] += 1
        return list(cells)

    def _unfinished(self, model: str, cell: Cell) -> tuple[Variant, Conversation, int] | None:
        """The episode of ``cell``; ``None`` when the store has it finished (counted as skipped, its result kept)."""
        v, c, repeat = cell
        variant, conversation = self.variants[v], self.conversations[c]
        done = self.finished.pop((model, variant.id, conversation.id, repeat), None)
        if done is None:
            return variant, conversation, repeat
        self.summary.skipped += 1
        self.summary.errors_stored += done.status == "error"
        self.summary.results.append(done)
        return None

    async def _round(self, lane: Lane, entries: Sequence[Cell]) -> tuple[dict[Cell, bool | None], int]:
        """Once the round's episodes were played (or dropped: the run or the model stopped), their outcomes from the
        store (``round_outcomes``); none while one of them is not ``settled``."""
        model = lane.spec.name
        while self._open[model]:
            self._idle[model].clear()
            await self._idle[model].wait()
        found = round_outcomes(self.store, model, self.variants, self.conversations, entries)
        return ({}, len(entries)) if found is None else (found, 0)

    def _plan_cut(self, lane: Lane, missing: int | None, size: int) -> None:
        model, planner = lane.spec.name, lane.planner
        assert isinstance(planner, AdaptivePlanner)
        self.summary.planned[model] = (
            f"stopped after {planner.rounds_done} of its {len(planner.sizes)} rounds ("
            f"{'its model' if lane.halted is not None else 'the run'} was stopped); the same command replays "
            "the finished rounds from the store and goes on")

    def _drop(self, lane: Lane, item: Any) -> None:
        """Not started (not stored: the next run runs it): the run or its model was stopped."""
        self.summary.not_run += 1
        self._ended(lane.spec.name)

    def _left(self, lane: Lane, cells: Sequence[Cell]) -> None:
        """The cells the producer did not take, and with the whole product the rest of it: not started (the
        finished ones skipped, as when taken)."""
        model, planner = lane.spec.name, lane.planner
        assert planner is not None
        rest: Iterable[Cell] = cells if planner.adaptive else chain(cells, *iter(planner.next, None))
        for cell in rest:
            self.summary.not_run += self._unfinished(model, cell) is not None

    async def _play(self, lane: Lane, item: tuple[Variant, Conversation, int]) -> None:
        try:
            await self.one(lane, *item)
        except RoundExported:  # export-batch wrote its step: left unfinished, replayed by the next export
            self.summary.waiting += 1
        except _ModelStopped:  # left unfinished, not stored: the next run resumes it
            self.summary.not_run += 1
        finally:
            self._ended(lane.spec.name)

    def _ended(self, model: str) -> None:
        self._open[model] -= 1
        if not self._open[model]:
            self._idle[model].set()

    def _disk_full(self, exc: StoreFullError) -> None:
        """The store cannot grow: every episode under way is cancelled (``drive`` then raises what was kept)."""
        if self.full is None:
            self.full = exc
        self._stop = "interrupted"
        for task in self._tasks:
            if task is not asyncio.current_task():
                task.cancel()

    async def one(self, lane: Lane, variant: Variant, conversation: Conversation, repeat: int) -> None:
        """Run one episode, store its result, and print its progress line."""
        model = lane.spec.name
        result = await self.play_episode(lane.client, model, self.params[model], variant, conversation, repeat)
        try:
            self.store.add_episode(result)
        except StoreFullError:
            self.lost_episodes += 1
            raise
        self.summary.results.append(result)
        if self.log is not None:
            print(f"[{len(self.summary.results)}/{self.summary.episodes}] {model} | {_one_line(variant.label)} | "
                  f"{_one_line(conversation.id)} | repeat {repeat}: {_episode_verdict(result)}; {result.steps} steps "
                  f"({result.sent} sent)", file=self.log, flush=True)


def _stop_note(exc: _RunStopped) -> str:
    if str(exc) == costcap.MAX_COST:
        return "the run directory's spend reached --max-cost"
    return str(exc)


def check_episodes(models: int, variants: int, conversations: int, repeats: int, *,
                   max_jobs: int | None = None) -> int:
    """The number of episodes of a conversation plan (models x variants x conversations x repeats), or a
    ``RunError`` naming the numbers and the cap when it is over ``max_jobs`` (``--max-jobs``; default
    ``MAX_JOBS``). Arithmetic only: nothing is built."""
    from promptgrid.matrix.running.plan import MAX_JOBS

    cap = MAX_JOBS if max_jobs is None else max_jobs
    episodes = models * variants * conversations * repeats
    if episodes > cap:
        shown = " x ".join(f"{n:,} {what}{'' if n == 1 else 's'}" for n, what in (
            (models, "model"), (variants, "variant"), (conversations, "conversation"), (repeats, "repeat")))
        raise RunError(f"the plan is {shown} = {episodes:,} episodes, over the cap of {cap:,} (--max-jobs counts "
                       "the episodes of a conversation dataset). Use fewer repeats, conversations (--limit, --case) "
                       "or variants, or raise the cap (--max-jobs N; max_jobs: N in a run config).")
    return episodes


def _step_keys(store: RunStore) -> bool:
    """Whether ``store`` was written before ``STEP_KEYS`` (its steps keyed by the request alone): then a step not
    found under its key is also looked up under the old one, so such a run resumes without sending again. A new
    store (no step yet) is marked as keyed by ``STEP_KEYS``."""
    keys = store.meta("step_keys")
    if keys is None and store.step_count() == 0:
        store.set_meta("step_keys", STEP_KEYS)
        return False
    return keys != STEP_KEYS


SLOW_STEP_S = 2.0
"""A step whose answer took at least this long gets its own progress line (besides the line per episode)."""
RETRY_LINE_S = 1.0
"""A wait before a step's next try of at least this long gets its own progress line (a single-turn run's progress
line shows a wait of a second or more at once, too)."""


def _check_argument_rule(store: RunStore, strict_arguments: bool) -> None:
    """A run directory is scored under one argument rule: its finished episodes are reused on resume, so a run
    under the other rule would mix verdicts of both. The rule is recorded by the first run; a store without it
    that holds episodes was written before the rule was an option, under the strict rule (one with steps only
    has no verdict to mix: a step's answer is reused only where the transcript up to it is the same)."""
    wanted = "strict" if strict_arguments else "bfcl"
    recorded = store.meta("argument_rule")
    if recorded is None:
        recorded = wanted if store.episode_count() == 0 else "strict"
        store.set_meta("argument_rule", recorded)
    if recorded != wanted:
        flag = "with --strict-arguments" if recorded == "strict" else "without --strict-arguments"
        raise RunError(f"{store.run_dir} was scored under the {recorded} argument rule; its episodes would be reused "
                       f"under the {wanted} rule. Run it {flag}, or give another --run-dir.")


def _check_options(batch: bool, goal: str | None, budget: int | None = None, rounds: int | None = None) -> None:
    """``RunError`` for what a conversation run cannot do: an adaptive goal's options that do not go together (a
    goal without a budget, a budget or rounds without a goal: the single-turn run's rule,
    ``session._adaptive_problem``). An unknown goal or a bad budget is refused by ``planning.make_planner``.
    ``batch`` is taken (rounds: ``_batch``); it stays a parameter for the callers that pass it."""
    from promptgrid.matrix.running.session import _adaptive_problem

    problem = _adaptive_problem(goal, budget, rounds)
    if problem:
        raise RunError(problem)


async def arun_episodes(
    config: RunConfig,
    variants: Sequence[Variant],
    conversations: Sequence[Conversation],
    *,
    clients: Mapping[str, Any] | None = None,
    renderer: Any = None,
    progress: Any = None,
    redactor: Redactor | None = None,
    batch: bool = False,
    batch_backends: Mapping[str, Any] | None = None,
    batch_poll_s: float = 30.0,
    export_round: list[Any] | None = None,
    make_env: Callable[..., Any] | None = None,
    env_options: Mapping[str, Any] | None = None,
    on_sent: Callable[[int], None] | None = None,
    max_answer_chars: int = MAX_STORED_ANSWER_CHARS,
    on_start: Callable[[Callable[[], None]], None] | None = None,
    retry_errors: bool = False,
) -> ConversationRunSummary:
    """Run every (model, variant, conversation, repeat) episode of ``config`` not finished in its run directory.

    The run options are ``config``'s, the one declaration every run reads (``RunConfig``, ``RunOptions``):
    its models (each ``ModelSpec``'s ``params``, ``concurrency`` -- episodes at a time --, ``timeout`` per
    step, ``rpm``/``tpm``), ``run_dir``, ``repeats``, ``retry_policy()``, ``max_steps``, ``max_jobs``,
    ``dedupe_requests``, ``strict_arguments``, ``max_cost`` and the adaptive ``goal``/``budget``/``rounds``/
    ``plan_seed``; its ``grid`` and ``dataset`` (where given) are kept in the store. ``variants`` and
    ``conversations`` are what the grid and dataset selected. The keyword arguments are the wiring, not
    options: ``clients`` maps a model string to its client (made with ``make_conversation_client`` when
    absent); ``renderer`` renders the first turn (``make_renderer(variants)`` when absent).
    ``env_options``: ``Environment`` bounds (``time_limit_s``, ``memory_limit_mb``, ...).
    ``max_answer_chars``: most characters of one step's answer stored and sent back (``MAX_STORED_ANSWER_CHARS``,
    the parsers' input bound; ``_steps.stored_answer``). Raises ``RunError`` for what cannot be run (an
    unknown goal, a goal without a budget, no models or variants, bad repeats or concurrency) before anything
    is sent. ``on_sent`` is called after each step sent and committed to the store, with the number sent so
    far (the resume tests kill the process there). The clients are closed at the end. ``progress``: a text
    stream that gets one line per finished episode (``None``: quiet; control characters in it are escaped).
    ``redactor``: what removes secrets from the errors stored and printed (the clients' own, ideally;
    default: a new ``Redactor``, which reads the environment).

    Each episode is an independent sample: a stored answer is reused only by the step of the same (model,
    parameters, variant, conversation, repeat) it was got for, at the same place (turn, step) after the same
    messages. ``dedupe_requests``: byte-identical requests share one answer whatever their episode (the request
    is the key; only sound at temperature 0). ``max_jobs``: the most episodes the plan may have (models x
    variants x conversations x repeats), checked before anything is built. ``strict_arguments``: the strict
    argument rule for the episodes' environments, the ground truth's and the check's. ``make_env``: what
    builds an episode's environment (``Environment``; tests give a fake); an ``EnvironmentFailure`` it raises
    (building it, running calls, reporting its state when scoring) ends that episode only, stored as failed
    (``failure_mode`` ``environment_failure``, ``details["environment_failure"]`` naming where and why); the
    run goes on and a later run does not run it again.

    ``rpm``/``tpm``: every attempt of every step of the model's episodes waits for the model's buckets
    (``ratelimit.model_buckets``, as a single-turn run). ``max_cost``: USD for the whole run directory (its
    stored steps' cost included): once reached, no new step is sent and no episode started (``costcap``, the
    single-turn rule); an episode stopped mid-way is stored unfinished (``valid`` ``None``,
    ``details["stopped"] == "max_cost"``) and resumed by the next run; ``summary.stopped == "max_cost"``.

    ``batch``: new steps go in provider batches, one round at a time (``_batch.BatchRounds``: the next step of
    every live episode, one batch per model), polled every ``batch_poll_s`` seconds; ``batch_backends``: each
    model's ``BatchBackend`` (default: its client's, ``make_batch_backend``; a model without a batch API is
    refused). A round holds at most ``concurrency`` episodes of a model: raise it for fewer, larger batches.
    Batches a killed run left are collected first. ``export_round`` (``export-batch``; with ``batch``): the
    round is not sent but appended to this list (its lines), every episode taking part at once; the episodes
    waiting on it are left unfinished (``summary.waiting``).

    Ctrl-C and SIGTERM stop the run (``running/signals.py``, as a single-turn run): the episodes under way are left
    unfinished and the summary is returned with ``stopped`` ``"interrupted"``. ``on_start`` is called, from the run's
    loop, with the same stop once the episodes are driven (``signals.Stopper``: the thread that waits for a run on a
    worker thread stops it so).

    An episode ends as a single-turn job would in the same case (``Result.status``): a step's call that
    failed for good makes it an ``error``, stored and counted as failed, played again only with
    ``retry_errors`` (its stored steps read back, the failed one sent again); a step its model cannot be sent
    makes it ``unsupported`` (out of the rates, checked again by every run).
    """
    models = [spec.name for spec in config.models]
    run_dir, repeats, goal, budget, rounds, seed = (config.run_dir, config.repeats, config.goal, config.budget,
                                                    config.rounds, config.plan_seed)
    max_cost, step_limit = config.max_cost, config.max_steps
    _check_arguments(config, variants, conversations)
    if batch and batch_backends is None:
        _check_batch_models(models, clients or {})
    planners = {model: make_planner(model, len(variants), len(conversations), repeats, goal=goal, budget=budget,
                                    rounds=rounds, seed=seed) for model in models}
    gate_sizes = {spec.name: spec.concurrency for spec in config.models}
    if min(gate_sizes.values()) < 1 or step_limit < 1:
        raise RunError("repeats, concurrency and the step limit must be at least 1.")
    if renderer is None:
        from promptgrid.matrix.running.session import make_renderer

        renderer = make_renderer(variants)
    summary = ConversationRunSummary(str(run_dir))
    describe: dict[str, Any] = {key: value for key, value in (("grid", config.grid), ("dataset", config.dataset))
                                if value}
    if describe:
        describe["models"] = models
    started = time.perf_counter()
    with _run_dir_lock(run_dir), conversation_store(run_dir, create=True) as store:
        _prepare_store(store, variants, config.strict_arguments, describe)
        summary.replayed = store.replay_spills()  # answers a full disk kept out of an earlier run's store
        store.reserve_spill()  # room for the answers a disk that fills mid-run keeps out of the store
        made = _made_clients(models, clients)  # made once the directory is this run's (a refused run makes none)
        make_env = make_env or Environment
        episode = ConversationEpisode(renderer, step_limit=step_limit, make_env=make_env, env_options=env_options,
                                      strict_arguments=config.strict_arguments, dedupe=config.dedupe_requests)
        scorer = StateScorer(step_limit=step_limit, make_env=make_env, strict_arguments=config.strict_arguments)
        runner = EpisodeRunner(config, store, episode, scorer, variants=variants, conversations=conversations,
                               clients=made, widths=gate_sizes, planners=planners,
                               redact=redactor if redactor is not None else Redactor(), summary=summary,
                               on_sent=on_sent, legacy_keys=_step_keys(store), max_answer_chars=max_answer_chars,
                               log=progress, retry_errors=retry_errors)
        runner.on_start = on_start
        if batch:
            backends = batch_backends if batch_backends is not None else _batch_backends(made, runner._retry)
            runner.rounds = BatchRounds(store, backends, Path(run_dir), to_step=runner.batch_step,
                                        redact=runner.redact, poll_s=batch_poll_s, progress=progress)
            await runner.rounds.resume()
            if export_round is not None:
                runner.rounds.export = True  # one round: every episode at once (parked while they wait: no process)
                runner.widths = {m: max(1, planners[m].total) for m in models}
        _record_params(store, runner.params)
        store.set_meta("step_limit", step_limit)  # what re-scoring from the store judges force-quit turns by
        store.set_meta("plan", plan_record(goal, budget, rounds, seed, models, variants, conversations, repeats))
        summary.episodes = sum(planner.total for planner in planners.values())
        summary.goal = goal
        summary.halted = runner.halted
        summary.max_cost = max_cost
        try:
            await runner.drive(started)
            if export_round is not None and runner.rounds is not None:
                export_round.extend(runner.rounds.exported or ())
        finally:
            if runner.rounds is not None:
                summary.batch_rounds, summary.batches = runner.rounds.rounds, runner.rounds.batches
    return summary


def line_step(completion: Any, native: bool, price: Callable[[int, int], float | None] | None,
              exact: Callable[[str], str], max_chars: int = MAX_STORED_ANSWER_CHARS) -> Step:
    """A batch line's answer as the step an online answer would store: redacted (``exact``), cut to ``max_chars``,
    the tool calls' envelope for a ``native`` variant; its cost the answer's own, else ``price`` of its tokens
    (the batch price; ``None``: unknown, as for an imported file)."""
    cost = completion.cost_usd
    if cost is None and price is not None and completion.input_tokens is not None \
            and completion.output_tokens is not None:
        cost = price(completion.input_tokens, completion.output_tokens)
    return Step(response=stored_response(completion, native=native, exact=exact, max_chars=max_chars),
                finish_reason=provider_field(completion.finish_reason, exact), input_tokens=completion.input_tokens,
                output_tokens=completion.output_tokens, cost_usd=cost, latency_s=0.0,
                raw_model=provider_field(getattr(completion, "model", None), exact))


def _check_batch_models(models: Sequence[str], clients: Mapping[str, Any]) -> None:
    """``RunError`` before anything is written when a model has no batch API (``_batch_backends``' rule: a
    ``LiteLLMClient`` of a provider with one; a model without a given client, by its provider prefix)."""
    from promptgrid.matrix.clients import batch_kind
    from promptgrid.matrix.clients._litellm import LiteLLMClient

    missing = [model for model in models
               if not (isinstance(clients[model], LiteLLMClient) and batch_kind(clients[model].name) is not None
                       if model in clients else batch_kind(model) is not None)]
    if missing:
        raise RunError(_no_batch_api(missing))


def _no_batch_api(models: Sequence[str]) -> str:
    return (f"--batch: no batch API for {', '.join(models)}. Batches go through OpenAI-compatible files + batches "
            "endpoints (openai/, azure/, hosted_vllm/ models, e.g. vLLM with --api-base) and Bedrock batch inference "
            "(bedrock/ models). Run these models online (without --batch).")


def _batch_backends(clients: Mapping[str, Any], retry: RetryPolicy) -> dict[str, Any]:
    """Each model's batch backend (its client's provider batch API); ``RunError`` naming the models without one."""
    from promptgrid.matrix.clients import make_batch_backend
    from promptgrid.matrix.clients._litellm import LiteLLMClient

    out: dict[str, Any] = {}
    for model, client in clients.items():
        backend = make_batch_backend(client, retry=retry) if isinstance(client, LiteLLMClient) else None
        if backend is not None:
            out[model] = backend
    missing = [model for model in clients if model not in out]
    if missing:
        raise RunError(_no_batch_api(missing))
    return out


def _check_arguments(config: RunConfig, variants: Sequence[Variant], conversations: Sequence[Conversation]) -> None:
    """``RunError`` for a config whose episodes cannot be run, in this order: the adaptive options
    (``_check_options``), the cost cap, the rates, the models, variants and conversations, the repeats, the plan's
    size (``check_episodes``), the seed."""
    _check_options(False, config.goal, config.budget, config.rounds)
    max_cost = config.max_cost
    if max_cost is not None and not (isinstance(max_cost, (int, float)) and max_cost > 0):
        raise RunError(f"max_cost must be a positive number of USD, got {max_cost!r}.")
    for name in ("rpm", "tpm"):
        bad = {spec.name: getattr(spec, name) for spec in config.models
               if getattr(spec, name) is not None
               and not (isinstance(getattr(spec, name), (int, float)) and getattr(spec, name) > 0)}
        if bad:
            raise RunError(f"{name} must be a positive number per model, got {bad!r}.")
    if not config.models:
        raise RunError("no models: name at least one (--model).")
    if not variants or not conversations:
        raise RunError("nothing to run: the grid selects no variants or the dataset no conversations.")
    if config.repeats < 1:
        raise RunError("repeats, concurrency and the step limit must be at least 1.")
    check_episodes(len(config.models), len(variants), len(conversations), config.repeats, max_jobs=config.max_jobs)
    seed = config.plan_seed
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise RunError(f"seed must be a whole number (the planner's seed: --seed), got {seed!r}.")


def _prepare_store(store: RunStore, variants: Sequence[Variant], strict_arguments: bool,
                   describe: Mapping[str, Any] | None) -> None:
    """Check the run's store (its rows, its argument rule) and record the run's variants, labels and ``describe``."""
    store.verify()  # a damaged row stops the run before anything is written
    _check_argument_rule(store, strict_arguments)
    store.add_variants(variants, episode_variants(variants))
    if describe:
        for key, value in describe.items():
            store.set_meta(key, value)


def _record_params(store: RunStore, per_model: Mapping[str, Mapping[str, Any]]) -> None:
    """Each model's generation parameters in the store's meta (``model_params``), so that a transcript rebuilt from
    the store later finds the step keys they went into; parameters that are not plain JSON are left out."""
    recorded = dict(store.meta("model_params", {}) or {})
    for model, params in per_model.items():
        try:
            recorded[model] = json.loads(json.dumps(dict(params), allow_nan=False))
        except (TypeError, ValueError):
            recorded.pop(model, None)
    store.set_meta("model_params", recorded)


def _made_clients(models: Sequence[str], clients: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's client per model: those given, and ``make_conversation_client``'s for the others."""
    made = dict(clients or {})
    for model in models:
        if model not in made:
            made[model] = make_conversation_client(model)
    return made


def _episode_verdict(result: Result) -> str:
    """How an episode ended, for its progress line."""
    status = result.status
    if status == "pending":
        return f"unfinished ({result.details.get('stopped')}: resumed by the next run)"
    if status == "unsupported":
        return "unsupported (not sent, left out of the accuracy): " + _one_line((result.error or "")[:120])
    if status == "error":
        return "error (counted as failed): " + _one_line((result.error or "")[:120])
    if result.failure_mode == TurnFailureMode.ENVIRONMENT_FAILURE.value:
        why = result.details.get("environment_failure", {})
        where = ("while scoring" if why.get("turn") is None else f"turn {why.get('turn')}"
                 + (" (scoring)" if why.get("step") is None else f", step {why.get('step')}"))
        return f"failed (environment_failure: {_one_line(str(why.get('reason')))}, {where})"
    return "valid" if result.valid else f"failed ({result.failure_mode})"


def _tally(summary: ConversationRunSummary) -> None:
    """Count the summary's results: unfinished (stopped mid-way), unsupported, finished (errors and environment
    failures among them), valid."""
    for result in summary.results:
        status = result.status
        if status == "pending":
            summary.unfinished += 1
        elif status == "unsupported":
            summary.unsupported += 1
        else:
            summary.finished += 1
            summary.valid += bool(result.valid)
            summary.errors += status == "error"
            summary.environment_failures += result.failure_mode == TurnFailureMode.ENVIRONMENT_FAILURE.value


def episode_outcome(result: Result) -> bool | None:
    """A settled episode's outcome for the planner, as a single-turn job's: its verdict (``valid``; an environment
    failure and an error are failed episodes); ``None`` (spent, no outcome) for an unsupported one."""
    return result.valid


def settled(result: Result | None) -> bool:
    """Whether a stored episode is a result its round can be settled with: stored, and not ``pending`` (left
    unfinished by the run, which the next run resumes)."""
    return result is not None and result.status != "pending"


def round_outcomes(store: RunStore, model: str, variants: Sequence[Variant],
                   conversations: Sequence[Conversation], cells: Sequence[Cell]) -> dict[Cell, bool | None] | None:
    """The outcomes of a round's cells, read from the store (``episode_outcome``); ``None`` when one of its
    episodes is not ``settled`` (the round waits for the next run)."""
    out: dict[Cell, bool | None] = {}
    for cell in cells:
        v, c, repeat = cell
        result = store.episode(model, variants[v].id, conversations[c].id, repeat)
        if result is None or not settled(result):
            return None
        out[cell] = episode_outcome(result)
    return out


def plan_record(goal: str | None, budget: int | None, rounds: int | None, seed: int, models: Sequence[str],
                variants: Sequence[Variant], conversations: Sequence[Conversation], repeats: int) -> dict[str, Any]:
    """What the store keeps of a run's plan (``meta`` ``plan``), for ``conversation_findings``: the goal and its
    budget, rounds and seed, the models, and the variants' and conversations' ids in the order the planner's
    cells index them. A run of the product keeps ``{"goal": None}`` (the findings of an adaptive run before it
    into the same directory are then no longer the latest run's)."""
    if goal is None:
        return {"goal": None}
    return {"goal": goal, "budget": budget, "rounds": rounds, "seed": seed, "models": list(models),
            "variants": [v.id for v in variants], "conversations": [c.id for c in conversations],
            "repeats": repeats}


def conversation_findings(plan: Mapping[str, Any] | None, episodes: Iterable[Result],
                          dimensions: Mapping[str, Mapping[str, str]], labels: Mapping[str, str], *,
                          trace: bool = True) -> dict[str, Any]:
    """What the latest run's adaptive goal found, per model (``findings.AdaptiveResult``, as a single-turn run's
    ``Run.adaptive``): its planner replayed round by round against the stored episodes (``findings.replay``;
    an episode is a result as the runner settles a round with it: ``settled``, ``episode_outcome``). ``{}``
    when the latest run planned the product. ``plan``: the store's ``meta`` ``plan`` (``plan_record``);
    ``dimensions`` and ``labels``: the variants' as the store keeps them."""
    if not plan or not plan.get("goal"):
        return {}
    from promptgrid.matrix.running.findings import replay

    variant_ids = [str(v) for v in plan.get("variants") or ()]
    conversation_ids = [str(c) for c in plan.get("conversations") or ()]
    repeats = int(plan.get("repeats") or 1)
    v_index = {vid: i for i, vid in enumerate(variant_ids)}
    c_index = {cid: i for i, cid in enumerate(conversation_ids)}
    models = [str(m) for m in plan.get("models") or ()]
    outcomes: dict[str, dict[Cell, bool | None]] = {m: {} for m in models}
    for e in episodes:
        if e.model in outcomes and e.variant_id in v_index and e.conversation_id in c_index and e.repeat < repeats \
                and settled(e):
            outcomes[e.model][(v_index[e.variant_id], c_index[e.conversation_id], e.repeat)] = episode_outcome(e)
    variants = [(vid, str(labels.get(vid, vid)), dict(dimensions.get(vid, {}))) for vid in variant_ids]
    return {model: replay(model, str(plan["goal"]), variants, len(conversation_ids), repeats, outcomes[model],
                          budget=int(plan.get("budget") or 1), rounds=plan.get("rounds"),
                          seed=int(plan.get("seed") or 0), trace=trace)
            for model in models}


async def _all(tasks: Sequence[asyncio.Future[None]]) -> None:
    """Wait for every task; when one fails, cancel the others and wait for them (no task left running or
    unretrieved), then raise its error."""
    try:
        await asyncio.gather(*tasks)
    except Exception:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _disk_full_stop(summary: ConversationRunSummary, state: EpisodeRunner) -> StoreFullError:
    """The error a conversation run stopped by a full disk ends with: what was kept, what was not, what to do. An
    answer the store could not take is kept in the spill file (stored by the next run, not sent again), or, when
    even that failed, sent again by the next run."""
    kept = f"the {summary.steps_sent} answer(s) this run stored are kept and not sent again"
    if summary.spilled:
        kept += (f"; {summary.spilled} answer(s) received as the disk filled are kept in "
                 f"{state.store.spill_path.name} and stored by the next run, not sent again")
    if state.lost_answers:
        kept += (f"; {state.lost_answers} answer(s) received as the disk filled could not be stored and will be "
                 "sent again")
    if state.lost_episodes:
        kept += (f"; {state.lost_episodes} finished episode(s) could not be recorded: the next run scores them "
                 "again from their stored answers")
    return StoreFullError(f"disk full at {summary.run_dir}: the conversation run stopped (calls in flight were "
                          f"cancelled); {kept}. Free space and re-run the same command to resume.")


@contextlib.contextmanager
def _run_dir_lock(run_dir: str | os.PathLike[str]) -> Iterator[None]:
    """The run directory's lock (``RunLock``, as a single-turn run takes it): a second run into the directory while
    one writes it stops at once with a ``RunError``, before anything is sent. Under it, a directory that holds a
    single-turn study is refused (its report, status and export would show one kind only)."""
    from promptgrid.matrix.episodes._guard import check_run_dir_kind
    from promptgrid.matrix.running.connection import RunLock, disk_full_errors

    path = Path(run_dir)
    with disk_full_errors(path):
        lock = RunLock(path).acquire()
    try:
        check_run_dir_kind(path, "conversation")
        yield
    finally:
        lock.release()


def _one_line(text: str) -> str:
    """``text`` for the progress line: control characters escaped (a dataset's id or a provider's error cannot
    move the cursor or recolour the terminal), newlines and tabs too (one line per episode)."""
    return escape_controls(text).replace("\n", "\\n").replace("\t", "\\t")


def make_conversation_client(model: str) -> Any:
    """The client of ``model`` for a conversation run: the scripted fakes (``fake/ground-truth``,
    ``fake/hostile``), else ``make_client``."""
    from promptgrid.matrix.clients._scripted import SCRIPTED_MODELS, ScriptedClient

    if model in SCRIPTED_MODELS:
        return ScriptedClient(model)
    from promptgrid.matrix.clients import make_client

    return make_client(model)
