"""The episode protocols on their own: a conversation played through a ``send`` that is not the runner's, and its
scorer's shared ground truth (``episodes._conversation_play``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from promptgrid.matrix.clients._scripted import ScriptedClient
from promptgrid.matrix.datasets._conversations import Conversation, load_conversations
from promptgrid.matrix.episodes import _conversation_play as play_module
from promptgrid.matrix.episodes._conversation_play import ConversationEpisode, StateScorer, episode_result
from promptgrid.matrix.episodes._environment import Environment, EnvironmentFailure
from promptgrid.matrix.episodes._protocols import NotAnswered, StepRequest
from promptgrid.matrix.episodes._steps import stored_answer
from promptgrid.matrix.running.session import make_renderer
from promptgrid.records import Step
from promptgrid.variants import Variant

pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system")

GT = "fake/ground-truth"


@pytest.fixture(scope="module")
def conversation() -> Conversation:
    return load_conversations("bfcl:multi_turn_base", limit=1)[0]


def scripted_send(asked: list[StepRequest], *, stop_at: tuple[int, int] | None = None) -> Any:
    """A ``Send`` that answers as ``fake/ground-truth`` (no store, no runner), recording each step it is asked;
    at ``stop_at`` (turn, step) it says the run stopped."""
    client = ScriptedClient(GT)

    async def send(step: StepRequest) -> tuple[Step, bool]:
        asked.append(step)
        context = step.context
        if stop_at == (context.turn, context.step):
            raise NotAnswered(f"turn {context.turn}, step {context.step}: not sent", stopped="max_cost")
        completion = await client.complete(list(step.messages), {}, request=step.request, episode=context)
        return Step(response=stored_answer(completion, context.variant), input_tokens=3, cost_usd=0.5), True

    return send


def played(conversation: Conversation, variant: Variant, send: Any) -> Any:
    episode = ConversationEpisode(make_renderer([variant]), step_limit=20)
    return asyncio.run(episode.run(GT, variant, conversation, 0, send))


@pytest.mark.parametrize("variant", [Variant(), Variant(call_mode="native")], ids=["prompt", "native"])
def test_a_conversation_plays_through_any_send_and_its_scorer_judges_it(conversation: Conversation,
                                                                      variant: Variant) -> None:
    """The seam: ``play`` asks ``send`` for every step and knows nothing of a store or a runner; the ground
    truth's answers pass the state check."""
    asked: list[StepRequest] = []
    walk = played(conversation, variant, scripted_send(asked))
    assert walk.error is None and walk.failure is None
    assert len(walk.turns) == len(conversation.turns)
    assert walk.steps == walk.sent == len(asked) and walk.cost == 0.5 * len(asked)
    assert [(s.context.turn, s.context.step) for s in asked][0] == (0, 0)
    assert len({s.digest for s in asked}) == len(asked)  # every step has its own identity
    result = episode_result(walk, StateScorer(step_limit=20).score(walk, conversation))
    assert result.valid is True and result.steps == len(asked)
    assert [t.valid for t in result.turns] == [True] * len(conversation.turns)


def test_a_step_not_answered_ends_the_episode_unfinished(conversation: Conversation) -> None:
    asked: list[StepRequest] = []
    walk = played(conversation, Variant(), scripted_send(asked, stop_at=(1, 0)))
    assert walk.error == "turn 1, step 0: not sent" and walk.stopped == "max_cost"
    assert len(walk.turns) == 2 and walk.turns[1] == []  # turn 1 opened, no step of it answered
    assert walk.steps == len(asked) - 1
    result = episode_result(walk, None)
    assert result.valid is None and result.details["stopped"] == "max_cost"


def test_the_ground_truth_is_run_once_for_every_episode_of_a_conversation(
        conversation: Conversation, monkeypatch: pytest.MonkeyPatch) -> None:
    """Episodes are scored on worker threads at once: the conversation's ground truth runs once, and each of
    them gets its verdict."""
    runs: list[str] = []
    real = play_module.run_ground_truth
    gate = threading.Event()

    def counted(case: Conversation, **options: Any) -> Any:
        runs.append(case.id)
        gate.wait(5)  # every scorer thread is waiting on this one
        return real(case, **options)

    monkeypatch.setattr(play_module, "run_ground_truth", counted)
    walk = played(conversation, Variant(), scripted_send([]))
    scorer = StateScorer(step_limit=20)
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(scorer.score, walk, conversation) for _ in range(4)]
        gate.set()
        verdicts = [f.result() for f in futures]
    assert runs == [conversation.id]
    assert [v.valid for v in verdicts] == [True] * 4


def test_a_ground_truth_whose_environment_fails_fails_each_episode_once_run(
        conversation: Conversation, monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[str] = []

    def failing(case: Conversation, **options: Any) -> Any:
        runs.append(case.id)
        raise EnvironmentFailure("the worker died", "worker_failed")

    monkeypatch.setattr(play_module, "run_ground_truth", failing)
    walk = played(conversation, Variant(), scripted_send([]))
    scorer = StateScorer(step_limit=20)
    for _ in range(3):
        with pytest.raises(EnvironmentFailure, match="the worker died"):
            scorer.score(walk, conversation)
    assert runs == [conversation.id]


def test_an_environment_that_cannot_be_made_ends_the_episode_not_the_caller(conversation: Conversation) -> None:
    def broken(classes: Any, config: Mapping[str, Any], **options: Any) -> Environment:
        raise EnvironmentFailure("no worker", "worker_failed")

    episode = ConversationEpisode(make_renderer([Variant()]), step_limit=20, make_env=broken)
    asked: list[StepRequest] = []
    walk = asyncio.run(episode.run(GT, Variant(), conversation, 0, scripted_send(asked)))
    assert asked == [] and walk.failure is not None and walk.failure[1:] == (0, 0)
    result = episode_result(walk, None, walk.failure)
    assert result.valid is False and result.failure_mode == "environment_failure"
