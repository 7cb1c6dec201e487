"""A conversation episode: its play (``ConversationEpisode``, an ``Episode``) and its judge (``StateScorer``).

``ConversationEpisode.play`` takes a model through a conversation's turns under a variant: at each step it asks
the runner's ``send`` for the model's answer to the transcript so far (``_steps.Transcript``), decodes it in the
variant's form, runs its calls on the episode's environment and gives their results back, until an answer
without calls ends the turn (``_steps`` says what each variant sends). A turn with more steps with calls than
the step limit is force-quit, and so is the conversation; a step the runner cannot answer (``NotAnswered``)
ends the episode there (stopped, unsupported or an error, as ``NotAnswered`` says). What it played is a
``Trajectory``: the decoded steps per turn, each turn's final answer, and the episode's counts.

``StateScorer.score`` judges a trajectory as bfcl-eval does (``scoring.state_check.check_conversation``: each
turn's state and responses against the ground truth's, run once per conversation and shared by its episodes).
``episode_result`` makes the stored ``Result`` of an episode from its trajectory and verdict (or the
environment failure that ended it).

Each step is identified by ``StepKeys``: a running hash of the messages sent so far and the step's request
pieces, and (unless requests are deduplicated) the episode's variant and conversation and the step's place. The
runner keys the step's stored answer by it, so a resumed episode finds every answer it got before, and
``report._transcripts`` finds them again when it rebuilds a transcript.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from promptgrid.matrix.datasets._conversations import Conversation
from promptgrid.matrix.datasets._mini_mt import ascii_results_for
from promptgrid.matrix.episodes._environment import Environment, EnvironmentFailure
from promptgrid.matrix.episodes._protocols import NotAnswered, Send, StepRequest
from promptgrid.matrix.episodes._steps import EpisodeContext, Transcript, decode_answer
from promptgrid.matrix.running.results import Result, turn_record, turns_of
from promptgrid.matrix.scoring.state_check import (
    DecodedStep,
    GroundTruthRun,
    TurnFailureMode,
    check_conversation,
    run_ground_truth,
)
from promptgrid.records import Step
from promptgrid.variants import CallMode, Variant

__all__ = ["STEP_KEYS", "ConversationEpisode", "PlayedStep", "PlayedTurn", "StateScorer", "StepKeys", "Trajectory",
           "episode_result", "legacy_digest", "score_episode"]

FINAL_CHARS = 500
"""Characters of a turn's final answer kept (its language is judged from them)."""


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")


def legacy_digest(messages: Sequence[Mapping[str, Any]], request: Mapping[str, Any] | None) -> str:
    """The step key's digest of the stores written before ``STEP_KEYS`` (the whole transcript hashed at every
    step): only looked up in such a store."""
    return hashlib.sha256(_canonical({"messages": list(messages), "request": request})).hexdigest()


STEP_KEYS = "episode-chain-1"
"""How the steps of a store are keyed (its ``meta`` ``step_keys``): ``StepKeys``. A store without it was written
before, keyed by ``legacy_digest`` of the request alone."""


class StepKeys:
    """The keys of one episode's steps, each made in time linear in what was appended since the step before.

    A running SHA-256 takes every message once, as it is appended (canonical JSON, length-prefixed); a step's
    digest is a copy of it that takes the step's request (native tools, constrained grammar: hashed once per
    distinct request object) and, unless requests are deduplicated, the episode's identity and the step's place
    (variant, conversation, turn, step): an answer is reused only by the step it was got for (the same model,
    parameters and repeat are in ``job_key``). With ``dedupe`` the digest is over the request's bytes alone, so
    byte-identical requests of different conversations or variants share one answer (sound at temperature 0).
    """

    def __init__(self, identity: tuple[str, str] | None) -> None:
        self.identity = identity
        self.running = hashlib.sha256()
        self.fed = 0
        self._request: tuple[Any, bytes] | None = None

    def digest(self, messages: Sequence[Mapping[str, Any]], request: Mapping[str, Any] | None, turn: int,
               step: int) -> str:
        if len(messages) < self.fed:  # the transcript was started again: not done by an episode
            raise ValueError("the transcript lost messages since the last step")
        for message in messages[self.fed:]:
            data = _canonical(message)
            self.running.update(len(data).to_bytes(8, "big") + data)
        self.fed = len(messages)
        if self._request is None or self._request[0] is not request:
            self._request = (request, hashlib.sha256(_canonical(request)).digest())
        h = self.running.copy()
        h.update(b"\x00request" + self._request[1])
        if self.identity is not None:
            h.update(b"\x00episode" + _canonical([*self.identity, turn, step]))
        return h.hexdigest()


@dataclass(frozen=True)
class PlayedStep:
    """One step as it was played: its index in the turn, the answer, the calls it decoded to (or its
    ``DecodeFailure``), their results, and whether it ended the turn."""

    index: int
    answer: Step
    decoded: Any
    outcomes: tuple[Any, ...]
    ends_turn: bool


@dataclass(frozen=True)
class PlayedTurn:
    """One turn as it was played: the messages that opened it (turn 0: the whole first prompt) and its steps."""

    index: int
    messages: tuple[Mapping[str, Any], ...]
    steps: tuple[PlayedStep, ...]


@dataclass
class Trajectory:
    """What one episode played: its decoded steps per turn, each turn's final answer, and its counts so far."""

    model: str
    variant: Variant
    conversation: Conversation
    repeat: int
    transcript: Transcript
    known: list[str]
    """The names of the functions the conversation offers by its last turn (``decode_answer``)."""
    keys: StepKeys
    turns: list[list[DecodedStep]] = field(default_factory=list)
    """Per turn reached, its decoded steps (what the check judges)."""
    final_answers: list[str | None] = field(default_factory=list)
    """Per turn, the text of the answer that ended it (None: none did)."""
    turn: int = 0
    step: int = 0
    steps: int = 0
    sent: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    latency: float = 0.0
    slowest: float = 0.0
    """The longest environment step (wall seconds), for the bounds reported in details."""
    error: str | None = None
    """Why the episode ended at a step the runner did not answer (``NotAnswered``: its call failed for good, the
    model cannot be sent it, or the run stopped)."""
    stopped: str | None = None
    """Why the run stopped this episode mid-way (``costcap.MAX_COST``)."""
    error_kind: str | None = None
    """The ``ErrorKind`` value of the call that failed for good (``NotAnswered.error_kind``)."""
    unsupported: str | None = None
    """Why the model cannot be sent the step (``NotAnswered.unsupported``)."""
    usage: Any = None
    """The environment's usage once it was closed (``None``: it could not report one)."""
    failure: tuple[EnvironmentFailure, int | None, int | None] | None = None
    """The environment failure that ended the episode, with the turn and step it happened at."""
    played: list[PlayedTurn] | None = None
    """Each turn played to its end (or to the step that was not answered), as ``PlayedTurn``: kept where the
    trajectory is made with ``played=[]`` (a transcript rebuilt from the store), ``None`` otherwise (a run keeps
    only what the check judges)."""

    def count(self, answer: Step, now: bool) -> None:
        """Add a step's answer (``now``: sent by this run) to the episode's counts, tokens, cost and latency."""
        self.steps += 1
        self.sent += now
        self.input_tokens += answer.input_tokens or 0
        self.output_tokens += answer.output_tokens or 0
        self.cost = None if self.cost is None or answer.cost_usd is None else self.cost + answer.cost_usd
        self.latency += answer.latency_s or 0.0


class ConversationEpisode:
    """The ``Episode`` of a conversation (the module's docstring). ``renderer`` renders the first turn;
    ``step_limit`` force-quits a turn; ``make_env`` builds an episode's environment (``Environment``; tests give a
    fake) with ``env_options`` (its bounds) and the strict argument rule when ``strict_arguments``; ``dedupe``
    keys steps by their request alone (``StepKeys``)."""

    def __init__(self, renderer: Any, *, step_limit: int, make_env: Callable[..., Any] = Environment,
                 env_options: Mapping[str, Any] | None = None, strict_arguments: bool = False,
                 dedupe: bool = False, inline: bool = False) -> None:
        self.renderer, self.step_limit, self.make_env = renderer, step_limit, make_env
        self.env_options, self.strict_arguments, self.dedupe = dict(env_options or {}), strict_arguments, dedupe
        # The environment's calls run on a worker thread, so a run's other episodes go on meanwhile; ``inline``
        # runs them on the loop's own thread, for a loop that plays one episode at a time and nothing else (a
        # transcript rebuilt from the store, which has no use for a thread hop per step).
        self.inline = inline

    def trajectory(self, model: str, variant: Variant, conversation: Conversation, repeat: int) -> Trajectory:
        """An episode not played yet."""
        return Trajectory(model, variant, conversation, repeat, Transcript(conversation, variant, self.renderer),
                          [str(doc.get("name")) for doc in conversation.functions_at(len(conversation.turns))],
                          StepKeys(None if self.dedupe else (variant.id, conversation.id)))

    async def run(self, model: str, variant: Variant, conversation: Conversation, repeat: int,
                  send: Send) -> Trajectory:
        """Play one episode on an environment of its own, made here and closed at the end (its usage kept in the
        trajectory); an ``EnvironmentFailure`` ends the episode (``Trajectory.failure``), not the run."""
        walk = self.trajectory(model, variant, conversation, repeat)
        env: Any = None
        try:
            env = await asyncio.to_thread(self.make_env, list(conversation.involved_classes),
                                          conversation.initial_config, long_context=conversation.long_context,
                                          **{**self.env_options,
                                             "ascii_results": ascii_results_for(variant, conversation),
                                             # only when on: a make_env of a test's need not know the keyword
                                             **({"strict_arguments": True} if self.strict_arguments else {})})
            await self.play(conversation, variant, send, env, walk=walk)
        except EnvironmentFailure as exc:  # this episode's environment cannot go on: it ends here, the run goes on
            walk.failure = (exc, walk.turn, walk.step)
        finally:
            if env is not None:
                walk.usage = await asyncio.to_thread(_usage_and_close, env)
        return walk

    async def play(self, case: Conversation, variant: Variant, send: Send, env: Any, *, repeat: int = 0,
                   walk: Trajectory | None = None,
                   between_turns: Callable[[Trajectory], str | None] | None = None) -> Trajectory:
        """Take the episode through its turns, until one ends unfinished (``NotAnswered``) or is force-quit at the
        step limit (``Episode.play``). ``walk``: the trajectory to play into (a new one of model ``""``).
        ``between_turns``: asked after each turn that ended; a reason it gives ends the episode there, as
        ``walk.error`` (a transcript rebuild stops where the rebuilt turn differs from the stored verdict)."""
        walk = walk if walk is not None else self.trajectory("", variant, case, repeat)
        for turn in range(len(case.turns)):
            walk.turn = turn
            before = len(walk.transcript.messages) if turn else 0  # turn 0 starts the messages afresh
            walk.transcript.open_turn(turn)
            turn_steps: list[DecodedStep] = []
            played: list[PlayedStep] | None = None
            if walk.played is not None:
                opened = tuple(dict(m) for m in walk.transcript.messages[before:])
                played = []
            force_quit = await self._steps(walk, env, send, turn_steps, played)
            walk.turns.append(turn_steps)
            if walk.played is not None and played is not None:
                walk.played.append(PlayedTurn(turn, opened, tuple(played)))
            if len(walk.final_answers) < len(walk.turns):
                walk.final_answers.append(None)
            if walk.error is not None or force_quit:
                break
            if between_turns is not None:
                walk.error = between_turns(walk)
                if walk.error is not None:
                    break
        return walk

    async def _steps(self, walk: Trajectory, env: Any, send: Send, turn_steps: list[DecodedStep],
                     played: list[PlayedStep] | None) -> bool:
        """The steps of the turn under way, appended to ``turn_steps`` (and, as played, to ``played``); whether
        the turn was force-quit (more steps with calls than the step limit). A step not answered ends it with
        ``walk.error`` set."""
        turn, transcript, variant = walk.turn, walk.transcript, walk.variant
        walk.step = 0

        async def park() -> None:  # asked for only while a provider batch round carries the step
            await asyncio.to_thread(env.park)

        while True:
            context = EpisodeContext(walk.conversation, variant, turn, walk.step, transcript.request, walk.repeat)
            digest = walk.keys.digest(transcript.messages, transcript.request, turn, walk.step)
            try:
                answer, now = await send(StepRequest(transcript.messages, transcript.request, digest, context, park))
            except NotAnswered as exc:
                walk.error, walk.stopped = exc.message, exc.stopped
                walk.error_kind, walk.unsupported = exc.error_kind, exc.unsupported
                return False
            walk.count(answer, now)
            text = answer.response or ""  # a stored step always has its answer
            transcript.add_answer(text, turn, walk.step)
            step, ended = decode_answer(variant, text, transcript.request, transcript.functions, walk.known)
            turn_steps.append(step)
            if ended:
                if played is not None:
                    played.append(PlayedStep(walk.step, answer, step, (), True))
                walk.final_answers.append(_answer_text(text, variant)[:FINAL_CHARS])
                return False
            began = time.perf_counter()
            calls = list(step)  # type: ignore[arg-type]
            outcomes = env.run(calls) if self.inline else await asyncio.to_thread(env.run, calls)
            walk.slowest = max(walk.slowest, time.perf_counter() - began)
            transcript.add_results(outcomes, turn, walk.step)
            if played is not None:
                played.append(PlayedStep(walk.step, answer, step, tuple(outcomes), False))
            walk.step += 1  # the steps of this turn with calls so far
            if walk.step > self.step_limit:
                return True


class StateScorer:
    """The ``Scorer`` of conversations: bfcl-eval's state and response check of each turn
    (``check_conversation``) against the ground truth's run, made once per conversation (thread-safe: episodes
    are scored on worker threads) and shared by its episodes, its ``EnvironmentFailure`` included."""

    def __init__(self, *, step_limit: int, make_env: Callable[..., Any] = Environment,
                 strict_arguments: bool = False) -> None:
        self.step_limit, self.make_env, self.strict_arguments = step_limit, make_env, strict_arguments
        self._lock = threading.Lock()
        self._truths: dict[str, tuple[threading.Lock, list[Any]]] = {}  # id -> (its lock, [run] or [error])

    def truth(self, conversation: Conversation) -> GroundTruthRun:
        """The ground truth's run of ``conversation`` (run the first time it is asked for)."""
        with self._lock:
            lock, memo = self._truths.setdefault(conversation.id, (threading.Lock(), []))
        with lock:
            if not memo:
                try:
                    memo.append(run_ground_truth(conversation, make_env=self.make_env,
                                                 strict_arguments=self.strict_arguments))
                except EnvironmentFailure as exc:
                    memo.append(exc)
        if isinstance(memo[0], EnvironmentFailure):
            raise memo[0]
        return memo[0]

    def score(self, trajectory: Trajectory | Sequence[Sequence[DecodedStep]], case: Conversation) -> Any:
        """The episode's ``Verdict`` (its turn verdicts in ``turns``); ``EnvironmentFailure`` when an environment
        fails while scoring. ``trajectory``: a played episode's, or its decoded steps per turn (``score-file``
        reads them from a file of answers)."""
        turns = trajectory.turns if isinstance(trajectory, Trajectory) else trajectory
        return check_conversation(case, turns, ground_truth=self.truth(case), step_limit=self.step_limit,
                                  make_env=self.make_env, strict_arguments=self.strict_arguments)


async def score_episode(scorer: StateScorer, walk: Trajectory) -> Result:
    """The stored result of a played episode: unfinished, an environment failure, or its verdict (scored here, on
    a worker thread; an environment failure while scoring is one too)."""
    verdict = None
    failure = walk.failure
    if failure is None and walk.error is None:
        try:
            verdict = await asyncio.to_thread(scorer.score, walk, walk.conversation)
        except EnvironmentFailure as exc:
            failure = (exc, exc.turn, None)
    return episode_result(walk, verdict, failure)


def episode_result(walk: Trajectory, verdict: Any,
                   failure: tuple[EnvironmentFailure, int | None, int | None] | None = None) -> Result:
    """The ``Result`` of a played episode: unfinished or in error (``walk.error``), ended by ``failure``, or
    judged by ``verdict``."""
    conversation = walk.conversation
    base: dict[str, Any] = dict(model=walk.model, variant_id=walk.variant.id, conversation_id=conversation.id,
                                category=conversation.category, repeat=walk.repeat, steps=walk.steps,
                                sent=walk.sent, input_tokens=walk.input_tokens, output_tokens=walk.output_tokens,
                                cost_usd=walk.cost, latency_s=walk.latency, language=conversation.language,
                                template=conversation.template or conversation.id)
    usage = walk.usage
    env_usage = {} if usage is None else {
        "starts": usage.starts, "calls_run": usage.calls_run, "peak_memory_mb": usage.peak_memory_mb,
        "slowest_step_s": round(walk.slowest, 4)}
    if failure is None and walk.error is not None:
        # As a single-turn job ends in the same case (``NotAnswered``): stopped, pending; unsupported, out of the
        # rates; a call failed for good, an error counted as failed (``valid`` False, no turn verdicts).
        if walk.stopped:
            return Result.episode(valid=None, error=walk.error,
                                  details={"environment": env_usage, "stopped": walk.stopped}, **base)
        if walk.unsupported is not None:
            return Result.episode(valid=None, error=walk.error,
                                  details={"environment": env_usage, "unsupported": walk.unsupported}, **base)
        return Result.episode(valid=False, error=walk.error,
                              details={"environment": env_usage, "error_kind": walk.error_kind or "unknown",
                                       "final_answers": walk.final_answers}, **base)
    if failure is not None:
        return _environment_failure(base, *failure, variant=walk.variant, env_usage=env_usage,
                                    final_answers=walk.final_answers)
    # The verdict as the store keeps it (JSON), and the turns as a stored episode gives them back: a run's
    # results and the same episodes read from the store are equal.
    stored = json.loads(json.dumps({"id": conversation.id, **verdict.to_dict()}, ensure_ascii=False))
    turns = turns_of([turn_record(t) for t in verdict.turns], stored)
    mode = verdict.failure_mode
    return Result.episode(valid=verdict.valid, failure_mode=None if mode is None else mode.value, turns=turns,
                          details={"verdict": stored, "environment": env_usage, "final_answers": walk.final_answers},
                          **base)


def _usage_and_close(env: Any) -> Any:
    """Close an episode's environment; its usage (``None`` when it cannot report one). Run on a worker thread:
    asking the worker for its peak memory waits on its answer, which the event loop must not."""
    try:
        usage = env.usage()
    except EnvironmentFailure:
        usage = None
    env.close()
    return usage


def _environment_failure(base: Mapping[str, Any], exc: EnvironmentFailure, turn: int | None, step: int | None, *,
                         variant: Variant, env_usage: Mapping[str, Any], final_answers: Sequence[str | None],
                         ) -> Result:
    """The stored result of an episode whose environment failed: finished, not valid, ``failure_mode``
    ``environment_failure``, its details naming where (turn and step, or the scoring) and why. Its turns are not
    scored (``turns`` is empty); a later run does not run it again."""
    where = ("while scoring" if turn is None else f"while scoring turn {turn}" if step is None
             else f"at turn {turn}, step {step}")
    reason = getattr(exc, "reason", "worker_failed")
    detail = (f"the environment of conversation {base['conversation_id']} failed for variant {variant.label} "
              f"({variant.id}), model {base['model']}, {where}: {exc} ({reason})")
    return Result.episode(
        valid=False, failure_mode=TurnFailureMode.ENVIRONMENT_FAILURE.value, **base,
        details={"environment_failure": {"reason": reason, "turn": turn, "step": step, "detail": detail},
                 "environment": dict(env_usage), "final_answers": list(final_answers)})


def _answer_text(stored: str, variant: Variant) -> str:
    """The natural-language text of a stored answer: a native envelope's content, else the text itself."""
    if variant.call_mode is CallMode.NATIVE:
        from promptgrid.matrix.clients import read_envelope

        env = read_envelope(stored)
        return (env[0] or "") if env is not None else stored
    return stored
