"""Transcripts of stored episodes: what the model was sent and answered, step by step, rebuilt from the store.

The store keeps every answer under the key of the step that got it, not per
episode (``conversation_store``): an episode's transcript is rebuilt by
playing it again with the run's own loop
(``episodes._conversation_play.ConversationEpisode.play``), through a
``send`` that reads each step's stored answer instead of sending it. The
first turn is rendered by the variant's template; at each step the key is
computed from the messages so far (``StepKeys``, as the run keyed it,
whether or not it deduplicated requests, or the key of a store written
before them) and the stored answer is read, decoded in the variant's form,
and its calls run on a fresh environment, whose results are deterministic,
for the results the model was given. Nothing is sent to any model. From a
notebook (an event loop already running) the episodes are played on a worker
thread's loop (``session.run_sync``).

Each turn also carries its stored verdict (``TurnVerdict.to_dict``: valid or
the failure mode, the state differences, missing and extra calls). The
rebuilt steps and calls are checked against the verdict's counts; where they
differ, or a step's answer is not in the store, the transcript says so in its
``note`` and stops there.

What a rebuild needs that the store may not name: the generation parameters
of a model (a step's key covers them; the store does not record them, so
``model_params`` must give the ones the run was given, ``{}`` by default),
the dataset (the store's ``dataset``, unless ``conversations`` are given) and
the grid's templates (the store's ``grid``; the variants are otherwise made
from their dimension values). What cannot be had is a ``note``, never an
exception: a report with transcripts is still written.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgrid.errors import PromptgridError, ReportError, closest
from promptgrid.matrix.datasets._conversations import Conversation
from promptgrid.matrix.episodes._conversation_play import PlayedStep, PlayedTurn
from promptgrid.matrix.episodes._protocols import NotAnswered, StepRequest
from promptgrid.matrix.running.results import Result
from promptgrid.matrix.running.store import RunStore, conversation_store
from promptgrid.matrix.scoring.state_check import MAXIMUM_STEP_LIMIT, DecodeFailure
from promptgrid.records import Step
from promptgrid.variants import CallMode, Variant

__all__ = ["MAX_TRANSCRIPTS", "EpisodeTranscript", "StoredReplay", "TranscriptCall", "TranscriptStep",
           "TranscriptTurn", "choose_episodes", "episode_transcripts"]

MAX_TRANSCRIPTS = 12
"""Transcripts a report shows by default (``choose_episodes``)."""

_AT_BOUND = "at the bound"
"""Why a rebuild's ``send`` answers no further step of a turn: the run went no further (its stored verdict's
steps, or bfcl-eval's step limit)."""
_NO_LIMIT = 10**9
"""The replayed episode's own step limit: none (its ``send`` stops each turn where the run stopped it)."""


@dataclass(frozen=True)
class TranscriptCall:
    """One decoded call of a step and what it gave: ``output`` is the text the model got back; ``refused`` the
    ``Refusal`` value of a call the environment did not run."""

    call: str
    output: str
    refused: str | None = None


@dataclass(frozen=True)
class TranscriptStep:
    """One model answer: its text (native: the message content), the tool calls as a native model wrote them
    (``name(arguments)``), the calls it decoded to with their results, the decoding error of an answer that
    tried to call and could not be read, and whether it ended the turn."""

    index: int
    answer: str
    tool_calls: tuple[str, ...] = ()
    calls: tuple[TranscriptCall, ...] = ()
    decode_error: str | None = None
    ends_turn: bool = False
    latency_s: float | None = None


@dataclass(frozen=True)
class TranscriptTurn:
    """One user turn: the messages that opened it (turn 0: the whole first prompt), the model's steps and the
    stored verdict of the turn (``TurnVerdict.to_dict()``; ``None`` when the episode has none). ``reached`` is
    false for a turn the episode never got to (force-quit earlier): it has the verdict only."""

    index: int
    messages: tuple[Mapping[str, Any], ...]
    steps: tuple[TranscriptStep, ...]
    verdict: Mapping[str, Any] | None = None
    reached: bool = True


@dataclass(frozen=True)
class EpisodeTranscript:
    """An episode and its rebuilt turns; ``note`` says why the transcript is incomplete (``""``: it is whole)."""

    episode: Result
    turns: tuple[TranscriptTurn, ...] = ()
    note: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The variant's label as the run recorded it (its id when none)."""
        return self.labels.get(self.episode.variant_id, self.episode.variant_id)


def choose_episodes(episodes: Sequence[Result], wanted: Sequence[str] | None = None, *,
                    limit: int = MAX_TRANSCRIPTS, order: Sequence[str] = ()) -> list[Result]:
    """The episodes whose transcripts a report shows, at most ``limit``.

    By default, per (model, variant): its first failed episode, then its first valid one (unfinished episodes
    are not chosen); the (model, variant)s are taken in turn across the models (every model's first variant,
    then every model's second, ...), variants in ``order`` (variant ids; others after, by id), so a few
    transcripts show every model. ``wanted``: conversation ids, each optionally with ``#REPEAT``
    (``multi_turn_base_3#1``): every episode of that conversation (and repeat), every model and variant, in that
    order. Raises ``ReportError`` for an id no episode has (naming the closest) or a ``limit`` below 0.
    """
    if limit < 0:
        raise ReportError(f"the number of transcripts must be 0 or more, not {limit}.")
    rank = {vid: i for i, vid in enumerate(order)}
    episodes = sorted(episodes, key=lambda e: (e.model, rank.get(e.variant_id, len(rank)), e.variant_id,
                                               e.conversation_id, e.repeat))
    if wanted:
        conversations = {e.conversation_id for e in episodes}
        chosen: list[Result] = []
        for spec in dict.fromkeys(wanted):
            conversation, repeat = _parse_wanted(spec, conversations)
            found = [e for e in episodes if e.conversation_id == conversation and repeat in (None, e.repeat)]
            if not found:
                what = f"conversation {conversation!r}" + ("" if repeat is None else f" with repeat {repeat}")
                raise ReportError(f"no episode of {what} in this run.{closest(conversation, sorted(conversations))} "
                                  "Give a conversation id the run has, optionally with #REPEAT (e.g. "
                                  "multi_turn_base_0#1).")
            chosen += [e for e in found if e not in chosen]
        return chosen[:limit]
    firsts: dict[str, dict[str, dict[bool, Result]]] = {}  # model -> variant -> valid -> first episode
    for e in episodes:
        if e.valid is not None:
            firsts.setdefault(e.model, {}).setdefault(e.variant_id, {}).setdefault(bool(e.valid), e)
    groups = [list(variants.values()) for variants in firsts.values()]
    picked: list[Result] = []
    for round_ in itertools.zip_longest(*groups):
        for pair in round_:
            if pair is not None:
                picked += [pair[v] for v in (False, True) if v in pair]
    return picked[:limit]


def _parse_wanted(spec: str, conversations: set[str]) -> tuple[str, int | None]:
    """``ID`` or ``ID#REPEAT`` (an id the run has is taken whole, even with a ``#`` in it)."""
    if spec in conversations or "#" not in spec:
        return spec, None
    conversation, _, repeat = spec.rpartition("#")
    if not repeat.isdigit():
        raise ReportError(f"episode {spec!r}: the repeat after '#' must be a whole number (e.g. {conversation}#0).")
    return conversation, int(repeat)


def episode_transcripts(
    run_dir: str | os.PathLike[str],
    episodes: Sequence[Result],
    *,
    model_params: Mapping[str, Mapping[str, Any]] | None = None,
    conversations: Sequence[Conversation] | None = None,
    variants: Sequence[Variant] | None = None,
    bfcl_data: str | os.PathLike[str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> list[EpisodeTranscript]:
    """The transcripts of ``episodes`` (of the run in ``run_dir``), rebuilt from its store (module docstring).

    ``model_params``: per model, the generation parameters the run was given (``{}`` when absent: a run with
    parameters has its steps under other keys, and its transcripts then stop at the first step with a note).
    ``conversations`` / ``variants``: the run's, when the store does not name its dataset or grid, or they
    cannot be read where it says. ``labels``: variant id -> label (default: the store's). Never raises for what
    one episode lacks: its transcript's ``note`` says it. Raises ``RunError`` / ``StoreError`` when ``run_dir``
    holds no readable conversation store.
    """
    if not episodes:
        return []
    from promptgrid.matrix.running.session import run_sync

    async def rebuilt() -> list[EpisodeTranscript]:
        # The store is opened where the episodes are played: on a worker thread's event loop when the caller's
        # is running (a notebook), and a connection serves the thread that made it.
        with conversation_store(run_dir) as store:
            shown = store.labels() if labels is None else dict(labels)
            replay = StoredReplay(store, model_params or {}, bfcl_data)
            problem = replay.load({e.conversation_id for e in episodes}, conversations, variants)
            if problem:
                return [EpisodeTranscript(episode, note=problem, labels=shown) for episode in episodes]
            return [await replay.episode(episode, shown) for episode in episodes]  # each on its own environment

    transcripts: list[EpisodeTranscript] = run_sync(rebuilt(), "promptgrid-transcripts")
    return transcripts


class StoredReplay:
    """What playing a run's episodes again from its store needs (every transcript of it, and re-scoring it:
    ``running.conversation_reader.rescore_conversations``): the store, its conversations, variants and renderer,
    and the keys and parameters its steps were stored under."""

    def __init__(self, store: RunStore, params: Mapping[str, Mapping[str, Any]],
                 bfcl_data: str | os.PathLike[str] | None) -> None:
        from promptgrid.matrix.episodes._conversation_play import STEP_KEYS

        self.store, self.params, self.bfcl_data = store, params, bfcl_data
        self.legacy = store.meta("step_keys") != STEP_KEYS
        self.strict = store.meta("argument_rule") == "strict"
        self.dims: dict[str, dict[str, str]] = store.variant_dimensions()
        self.conversations: dict[str, Conversation] = {}
        self.variants: dict[str, Variant] = {}
        self.renderer: Any = None
        self.found: dict[str, Mapping[str, Any]] = {}  # model -> the parameters that found its answers

    def load(self, wanted: set[str], conversations: Sequence[Conversation] | None,
             variants: Sequence[Variant] | None) -> str:
        """Read the conversations and variants; ``""``, or why no transcript can be rebuilt."""
        from promptgrid.matrix.running.session import make_renderer

        template_dir = self._load_variants(variants)
        if conversations is None:
            stored = self._stored_conversations(wanted)
            if isinstance(stored, str):
                return stored
            conversations = stored
        self.conversations = {c.id: c for c in conversations}
        try:
            self.renderer = make_renderer(list(self.variants.values()), template_dir=template_dir,
                                          bfcl_data=self.bfcl_data)
        except (PromptgridError, OSError) as exc:
            return f"the prompts cannot be rendered now ({exc}), so no transcript can be rebuilt."
        return ""

    def _load_variants(self, variants: Sequence[Variant] | None) -> Path | None:
        """Set ``self.variants``: those given, else the run's grid's (as it is now), then any other stored variant
        made from its dimensions; the grid's template folder (``None`` when no grid was read)."""
        template_dir = None
        if variants is None:
            template_dir = self._grid_variants()
        else:
            self.variants = {v.id: v for v in variants}
        for vid, dims in self.dims.items():
            if vid not in self.variants:
                made = _variant_of(vid, dims)
                if made is not None:
                    self.variants[vid] = made
        return template_dir

    def _grid_variants(self) -> Path | None:
        """Set ``self.variants`` to those of the grid the store names, when it can be read now; its template
        folder (``None`` when it cannot)."""
        grid_name = self.store.meta("grid")
        if not grid_name:
            return None
        try:
            from promptgrid.variants import load_grid

            grid = load_grid(grid_name)
        except (PromptgridError, OSError):
            return None  # moved or changed since the run: the variants are made from their dimensions
        self.variants = {v.id: v for v in grid.variants}
        return grid.template_dir

    def _stored_conversations(self, wanted: set[str]) -> Sequence[Conversation] | str:
        """The conversations ``wanted`` of the dataset the store names, or why they cannot be read."""
        dataset = self.store.meta("dataset")
        if not dataset:
            return ("the store does not name its dataset (a run started from the Python API without it): "
                    "pass conversations= to rebuild transcripts.")
        try:
            from promptgrid.matrix.datasets._conversations import select_conversations

            return select_conversations(str(dataset), cases=sorted(wanted), bfcl_data=self.bfcl_data)
        except (PromptgridError, OSError) as exc:
            return f"the run's dataset {dataset!r} cannot be read now ({exc}), so no transcript can be rebuilt."

    async def episode(self, episode: Result, labels: Mapping[str, str]) -> EpisodeTranscript:
        variant = self.variants.get(episode.variant_id)
        conversation = self.conversations.get(episode.conversation_id)
        if variant is None:
            return EpisodeTranscript(episode, note=f"variant {episode.variant_id!r} cannot be made again (not in the "
                                     "run's grid as it is now, nor from its stored dimensions).", labels=labels)
        if conversation is None:
            return EpisodeTranscript(episode, note=f"conversation {episode.conversation_id!r} is not in the dataset "
                                     "as it is now.", labels=labels)
        turns, note = await self._turns(episode, variant, conversation)
        return EpisodeTranscript(episode, tuple(turns), note, labels)

    async def _turns(self, episode: Result, variant: Variant, conversation: Conversation
                     ) -> tuple[list[TranscriptTurn], str]:
        """The episode played again (``ConversationEpisode.play``, the run's own loop) with a ``send`` that reads
        each step's stored answer instead of sending it, its calls run on a fresh environment; and a note where
        the rebuild stops short (``""``: it is whole)."""
        from promptgrid.matrix.datasets._mini_mt import ascii_results_for
        from promptgrid.matrix.episodes._conversation_play import ConversationEpisode
        from promptgrid.matrix.episodes._environment import Environment

        verdict = episode.details.get("verdict") if isinstance(episode.details.get("verdict"), Mapping) else None
        judged = {int(t["turn"]): t for t in (verdict or {}).get("turns") or () if isinstance(t, Mapping)
                  and isinstance(t.get("turn"), int)}

        def bound(turn: int) -> int:  # the steps the run took in the turn, as its stored verdict counts them
            expected = judged.get(turn, {}).get("details", {}).get("steps")
            return max(expected if isinstance(expected, int) else MAXIMUM_STEP_LIMIT + 1, 1)

        send = self._stored_send(episode, bound)

        def between_turns(walk: Any) -> str | None:
            return _turn_note(walk.played[-1], variant, judged) or None

        # The step limit is the stored verdict's (``send``'s bound), not the episode's: the run's is not stored.
        replay = ConversationEpisode(self.renderer, step_limit=_NO_LIMIT, inline=True)
        walk = replay.trajectory(episode.model, variant, conversation, episode.repeat)
        walk.played = []
        env: Any = None
        note = ""
        try:
            env = Environment(list(conversation.involved_classes), conversation.initial_config,
                              long_context=conversation.long_context, bfcl_data=self.bfcl_data,
                              ascii_results=ascii_results_for(variant, conversation), strict_arguments=self.strict)
            await replay.play(conversation, variant, send, env, repeat=episode.repeat, walk=walk,
                              between_turns=between_turns)
            note = walk.error or ""
            if note == _AT_BOUND:
                note = _turn_note(walk.played[-1], variant, judged)
        except PromptgridError as exc:  # the environment, a template or a catalog that cannot be had now
            note = f"the transcript cannot be rebuilt past this point: {exc}"
        finally:
            if env is not None:
                env.close()
        turns = [TranscriptTurn(t.index, t.messages, tuple(_step(variant, s) for s in t.steps), judged.get(t.index))
                 for t in walk.played]
        for turn, judged_turn in sorted(judged.items()):
            if turn >= len(turns):
                turns.append(TranscriptTurn(turn, (), (), judged_turn, reached=False))
        return turns, note

    async def trajectory(self, episode: Result, step_limit: int) -> Any:
        """The episode played again to its end with each step's stored answer (nothing sent), its calls run on a
        fresh environment, as the run played it (``ConversationEpisode.run``, the run's step limit): the
        ``Trajectory`` a ``StateScorer`` judges, or a line saying why it cannot be had (a step the store does not
        have: the grid, templates, dataset or decoding changed since the run; a variant or conversation that
        cannot be made now; an environment failure)."""
        from functools import partial

        from promptgrid.matrix.episodes._conversation_play import ConversationEpisode
        from promptgrid.matrix.episodes._environment import Environment

        variant = self.variants.get(episode.variant_id)
        conversation = self.conversations.get(episode.conversation_id)
        if variant is None or conversation is None:
            return (f"variant {episode.variant_id!r} cannot be made again" if variant is None
                    else f"conversation {episode.conversation_id!r} is not in the dataset as it is now")
        replay = ConversationEpisode(self.renderer, step_limit=step_limit, strict_arguments=self.strict,
                                     make_env=partial(Environment, bfcl_data=self.bfcl_data))
        try:
            walk = await replay.run(episode.model, variant, conversation, episode.repeat, self._stored_send(episode))
        except PromptgridError as exc:  # a template or a catalog that cannot be had now
            return f"it cannot be played again now: {exc}"
        if walk.failure is not None:
            return f"its environment failed on replay: {walk.failure[0]}"
        return walk.error or walk

    def _stored_send(self, episode: Result, bound: Callable[[int], int] | None = None,
                     ) -> Callable[[StepRequest], Awaitable[tuple[Step, bool]]]:
        """A ``send`` that answers each step of ``episode`` with its stored answer (``NotAnswered`` where the store
        has none, or from step ``bound(turn)`` of a turn on: where the run went no further)."""
        from promptgrid.matrix.episodes._conversation_play import StepKeys
        from promptgrid.matrix.running.plan import repeat_params

        deduplicated = StepKeys(None)  # the key of a run with --dedupe-requests (the episode's own: the step's digest)
        params: list[Mapping[str, Any]] = [repeat_params(c, episode.repeat) for c in self._candidates(episode.model)]

        async def send(asked: StepRequest) -> tuple[Step, bool]:
            turn, index = asked.context.turn, asked.context.step
            if bound is not None and index >= bound(turn):
                raise NotAnswered(_AT_BOUND)
            digests = [asked.digest, deduplicated.digest(asked.messages, asked.request, turn, index)]
            stored = self._answer(digests, asked, episode, params)
            if stored is None:
                raise NotAnswered(_missing(episode, turn, index))
            return stored, False

        return send

    def _candidates(self, model: str) -> list[Mapping[str, Any]]:
        """The generation parameters the run may have given ``model``: those given here; else the one that found
        an answer before, or those the run recorded (``model_params`` in the store's meta), then each of
        ``promptgrid run``'s defaults (temperature 0, or 0.7 with repeats, and its
        max_tokens) and none (``run_conversations`` without parameters)."""
        if model in self.params:
            return [self.params[model]]
        if model in self.found:
            return [self.found[model]]
        from promptgrid.matrix.running.config import model_params

        recorded = (self.store.meta("model_params", {}) or {}).get(model)  # what the run recorded it was given
        candidates: list[Mapping[str, Any]] = [dict(recorded)] if isinstance(recorded, Mapping) else []
        return candidates + [model_params(None, 1), model_params(None, 2), {}]

    def _answer(self, digests: list[str], asked: StepRequest, episode: Result,
                params: list[Mapping[str, Any]]) -> Step | None:
        """The stored answer of this step, under the key the run used (``digests``: per episode, deduplicated;
        and the legacy one in a store written before them) with the parameters it used (the first candidate that
        finds one is kept: ``params`` is narrowed to it)."""
        from promptgrid.matrix.episodes._conversation_play import legacy_digest
        from promptgrid.matrix.running.plan import job_key

        if self.legacy:
            digests = [*digests, legacy_digest(asked.messages, asked.request)]
        for candidate in list(params):
            for digest in digests:
                found = self.store.step(job_key(episode.model, candidate, digest, episode.repeat))
                if found is not None:
                    params[:] = [candidate]
                    if episode.model not in self.params:
                        self.found[episode.model] = _unrepeated(candidate, episode.repeat)
                    return found
        return None


def _bound_note(turn: int, steps: Sequence[TranscriptStep], judged: Mapping[int, Mapping[str, Any]]) -> str:
    """A note when the rebuilt turn stopped at its bound (its last step has calls): force-quit by the step limit,
    or it goes on past the steps its stored verdict counts; ``""`` when it ended."""
    if not steps or steps[-1].ends_turn:
        return ""
    if turn not in judged or judged[turn].get("failure_mode") == "step_limit":
        return (f"turn {turn} was force-quit after {len(steps)} steps with calls (the step limit): "
                "the conversation ended there.")
    return (f"the rebuilt turn {turn} goes on after the {len(steps)} steps its stored verdict "
            "counts: the grid, templates or dataset changed since the run, so what follows is "
            "not shown.")


def _unrepeated(params: Mapping[str, Any], repeat: int) -> dict[str, Any]:
    """``params`` of repeat ``repeat`` as given to the run (``repeat_params`` offsets the seed by the repeat)."""
    out = dict(params)
    if out.get("seed") is not None:
        out["seed"] = int(out["seed"]) - repeat
    return out


def _variant_of(variant_id: str, dims: Mapping[str, str]) -> Variant | None:
    """The variant with these stored dimension values, when it has ``variant_id`` (else ``None``)."""
    values: dict[str, Any] = {k: v for k, v in dims.items() if k in Variant.__dataclass_fields__}
    if "tool_call_tag" in values:
        values["tool_call_tag"] = str(values["tool_call_tag"]) == "True"
    try:
        made = Variant(**values)
    except (TypeError, ValueError):
        return None
    return made if made.id == variant_id else None


def _missing(episode: Result, turn: int, step: int) -> str:
    if episode.error and episode.status != "done":
        return f"the episode ended at turn {turn}, step {step} without an answer: {episode.error}"
    return (f"no stored answer for turn {turn}, step {step} under the keys this report computes: the run was "
            "given generation parameters (pass model_params= with them), or its grid, templates or dataset "
            "changed since.")


def _differs(turn: int, steps: Sequence[TranscriptStep], judged: Mapping[str, Any] | None) -> str:
    """A note when the rebuilt turn has other step or call counts than its stored verdict."""
    details = (judged or {}).get("details") or {}
    want_steps, want_calls = details.get("steps"), details.get("calls")
    calls = sum(len(s.calls) for s in steps)
    if (isinstance(want_steps, int) and want_steps != len(steps)) or (isinstance(want_calls, int)
                                                                       and want_calls != calls):
        return (f"the rebuilt turn {turn} has {len(steps)} steps and {calls} calls, the stored verdict "
                f"{want_steps} and {want_calls}: the grid, templates or dataset changed since the run, so what "
                "follows is not shown.")
    return ""


def _turn_note(turn: PlayedTurn, variant: Variant, judged: Mapping[int, Mapping[str, Any]]) -> str:
    """A note when a rebuilt turn cannot be shown as the run played it: other step or call counts than its stored
    verdict (``_differs``), or stopped at its bound (``_bound_note``); ``""`` when it can."""
    steps = [_step(variant, played) for played in turn.steps]
    return _differs(turn.index, steps, judged.get(turn.index)) or _bound_note(turn.index, steps, judged)


def _step(variant: Variant, played: PlayedStep) -> TranscriptStep:
    """A played step as the transcript shows it."""
    index, stored, decoded, outcomes, ends = (played.index, played.answer, played.decoded, played.outcomes,
                                              played.ends_turn)
    answer = stored.response or ""  # a stored step always has its answer
    tool_calls: tuple[str, ...] = ()
    if variant.call_mode is CallMode.NATIVE:
        from promptgrid.matrix.clients import read_envelope

        env = read_envelope(answer)
        if env is not None:
            answer = env[0] or ""
            tool_calls = tuple(f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
                               if isinstance(c, Mapping) else str(c) for c in env[1])
    calls = tuple(TranscriptCall(_shown(o.call), o.output, o.refused) for o in outcomes)
    error = (decoded.error or "the answer could not be decoded") if isinstance(decoded, DecodeFailure) else None
    return TranscriptStep(index, answer, tool_calls, calls, error, ends, stored.latency_s or 0.0)


def _shown(call: Any) -> str:
    """A call as the transcript shows it: ``name(positional..., key=value)``, values as Python literals."""
    parts = [repr(v) for v in getattr(call, "positional", ())]
    parts += [f"{k}={v!r}" for k, v in call.arguments.items()]
    return f"{call.name}({', '.join(parts)})"
