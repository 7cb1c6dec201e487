"""``Environment.run_script``: a trajectory's steps in one exchange give what the steps give one by one, and a
script that a bound would have cut falls back to the step-by-step path, with the environment as it was."""

from __future__ import annotations

import functools

import pytest

from promptgrid.matrix.conversations import Environment, ToolCall, load_conversations
from promptgrid.matrix.scoring.state_check import check_conversation

pytest.importorskip("mpmath")  # MathAPI

FILES = {"GorillaFileSystem": {"root": {"alex": {"type": "directory", "contents": {
    "notes.txt": {"type": "file", "content": "one two"}}}}}}


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(name, dict(arguments))


def _without_seconds(outcomes: list) -> list:
    return [(o.call, o.ok, o.output, o.refused, o.argument_problem) for o in outcomes]


def test_a_script_gives_the_outcomes_and_states_of_the_steps_one_by_one() -> None:
    steps = [[_call("cd", folder="alex"), _call("cat", file_name="notes.txt")],
             [_call("touch", file_name="new.txt"), _call("nope"), _call("_load_scenario", scenario={})],
             [_call("ls")]]
    with Environment(["GorillaFileSystem"], FILES) as one_by_one:
        expected = []
        for calls in steps:
            outcomes = one_by_one.run(calls)
            expected.append((_without_seconds(outcomes), one_by_one.state()))
    with Environment(["GorillaFileSystem"], FILES) as scripted:
        results = scripted.run_script(steps, [True, True, True])
        assert results is not None
        assert [(_without_seconds(outcomes), scripted.state_of(reply)) for outcomes, reply in results] == expected
        assert scripted.usage().calls_run == 4  # cd, cat, touch, ls: nope and _load_scenario were refused unrun
        # The log of calls that ran is kept: a restart replays them.
        scripted._kill()
        assert scripted.state() == expected[-1][1]


def test_a_script_a_bound_would_cut_falls_back_with_the_environment_as_it_was() -> None:
    slow = [[_call("add", a=1, b=2)], [_call("power", base=10, exponent=10 ** 8)]]
    with Environment(["MathAPI"], {}, time_limit_s=0.3) as env:
        env.run([_call("add", a=2, b=2)])
        assert env.run_script(slow, [False, False]) is None
        assert env.usage().calls_run == 1  # only the call before the script counts as run
        outcomes = env.run(slow[1][0:1])
        assert outcomes[0].refused is not None and "did not finish within 0.3 s" in outcomes[0].output


def test_scoring_uses_one_exchange_and_falls_back_to_the_same_verdict() -> None:
    conversation = load_conversations("bfcl:multi_turn_base", limit=1)[0]
    trajectory = [[list(turn)] for turn in conversation.ground_truth]
    scripted = check_conversation(conversation, trajectory)
    calls: list[str] = []

    class StepByStep(Environment):
        def run_script(self, steps, states):  # type: ignore[no-untyped-def, override]
            calls.append("script")
            return None  # as when a bound would have cut it: the steps go one by one

    stepwise = check_conversation(conversation, trajectory, make_env=functools.partial(StepByStep))
    assert calls and scripted.to_dict() == stepwise.to_dict() and scripted.valid
